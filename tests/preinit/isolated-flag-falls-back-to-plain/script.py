import sys
print(sys.flags.isolated, sys.path[0])
