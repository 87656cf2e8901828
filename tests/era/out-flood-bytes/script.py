with open("/out/big.bin", "wb") as f:
    for _ in range(64):
        f.write(b"\0" * 65536)
print("wrote all")
