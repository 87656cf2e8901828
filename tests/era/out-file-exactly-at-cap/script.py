# Exactly the test policy's out_max_bytes (1 MiB) in one file, through the buffered
# writer: the cap is reachable, so this completes and the artifact is whole.
CAP = 1 << 20
with open("/out/full.bin", "wb") as f:
    f.write(b"\0" * CAP)
print("wrote the cap")
