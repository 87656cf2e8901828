import sys
print(__file__, sys.argv, sys.path[0])
raise ValueError("in a subdirectory")
