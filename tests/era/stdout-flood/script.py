import sys
line = "x" * 1023 + "\n"
for _ in range(4096):
    sys.stdout.write(line)
