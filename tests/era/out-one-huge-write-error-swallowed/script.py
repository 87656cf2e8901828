# One write of 200 MiB, far past the /out byte cap (1 MiB in the test policy) and
# larger than wasmtime's default per-call host buffer (128 MiB): the error the guest
# sees is caught and the guest exits 0. The run must still say output_limit, and the
# artifact must not hold more than the cap.
data = b"\0" * (200 << 20)
try:
    with open("/out/huge.bin", "wb") as f:
        f.write(data)
    print("wrote it all")
except OSError as e:
    print("swallowed errno", e.errno)
print("exited normally")
