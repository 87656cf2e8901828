# Real code needs a writable temporary directory: tempfile finds /tmp through TMPDIR,
# writes there, and nothing of it is collected as an output.
import os
import tempfile

print("gettempdir", tempfile.gettempdir(), "TMPDIR", os.environ.get("TMPDIR"))
with tempfile.NamedTemporaryFile("w", delete=False) as f:
    f.write("x" * 1000)
with open(f.name) as back:
    read_back = back.read()
print("named", os.path.dirname(f.name), os.path.getsize(f.name), read_back == "x" * 1000)
with tempfile.TemporaryDirectory() as d:
    with open(os.path.join(d, "a.txt"), "w") as g:
        g.write("y")
    print("tempdir", sorted(os.listdir(d)))
with open("/out/kept.txt", "w") as out:
    out.write("kept")
print("ok")
