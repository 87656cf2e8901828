# One raw write (no retry, no buffering) of one byte more than the test policy's
# out_max_bytes (1 MiB). Whatever the kernel lets land, no artifact may hold more
# than the cap, and the run must say output_limit.
import os

CAP = 1 << 20
fd = os.open("/out/edge.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
try:
    n = os.write(fd, b"\0" * (CAP + 1))
    print("write returned", n)
except OSError as e:
    print("write refused", e.errno)
os.close(fd)
print("exited normally")
