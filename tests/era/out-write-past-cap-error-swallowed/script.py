# Reach past the /out byte cap (1 MiB in the test policy) without leaving a byte
# past it: a write far beyond the cap and a truncate to 1 GiB, each refused by the
# kernel (EFBIG), the error swallowed, exit 0. Hitting the cap is the runner's to
# report, whatever the guest does about the error.
import os

fd = os.open("/out/sparse.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
os.lseek(fd, 2 << 20, os.SEEK_SET)
for label, attempt in [
    ("write", lambda: os.write(fd, b"x")),
    ("truncate", lambda: os.ftruncate(fd, 1 << 30)),
]:
    try:
        attempt()
        print(label, "went through")
    except OSError as e:
        print(label, "refused, errno", e.errno)
os.close(fd)
print("exited normally")
