b = bytearray(512 * 1024 * 1024)
print("allocated", len(b))
