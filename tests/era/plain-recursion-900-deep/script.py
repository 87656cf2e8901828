"""Plain recursion 900 deep returns, as natively (the recursion limit is 1,000), and
runaway recursion raises RecursionError, which the program can catch and go on."""


def depth(n):
    return 0 if n == 0 else depth(n - 1) + 1


print("plain", depth(900))
try:
    depth(10**6)
except RecursionError as e:
    print("RecursionError:", e)
print("after", depth(900))
