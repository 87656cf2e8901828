import tempfile, os
with tempfile.NamedTemporaryFile("w+", delete=False) as f:
    f.write("scratch")
print(os.path.dirname(f.name), open(f.name).read())
with open("/out/result.txt", "w") as out:
    out.write("written\n")
