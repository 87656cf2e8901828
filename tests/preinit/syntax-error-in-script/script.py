print("before")
x = (
