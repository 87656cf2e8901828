print(open("data.txt").read())
