# /tmp is no way around /out's entry cap: 200 temporary files, under a cap of 64 entries,
# stop at the cap; none of them is collected.
import os
import tempfile

d = tempfile.gettempdir()
for i in range(200):
    with open(os.path.join(d, f"t{i}.txt"), "w") as f:
        f.write("x")
print("made all")
