# /tmp is no way around /out's byte cap: 4 MiB written to a temporary file, under a
# 1 MiB cap, stops at the cap; nothing of it is collected.
import tempfile

with open("/out/kept.txt", "w") as out:
    out.write("kept")
with tempfile.NamedTemporaryFile("wb", delete=False) as f:
    for _ in range(64):
        f.write(b"\0" * 65536)
        f.flush()
print("wrote all")
