# A guest stopped at its deadline while its scratch /tmp holds files: the scratch is
# still no output.
import tempfile

with open(tempfile.gettempdir() + "/left.txt", "w") as f:
    f.write("z" * 1000)
print("wrote", flush=True)
while True:
    pass
