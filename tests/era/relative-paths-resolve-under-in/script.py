print(open("data.txt").read().strip())
open("/out/copy.txt", "w").write(open("data.txt").read())
