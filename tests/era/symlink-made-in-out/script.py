import os
try:
    os.symlink("../../../../etc/passwd", "/out/escape")
    print("made symlink")
except Exception as e:
    print("symlink refused", type(e).__name__)
open("/out/ok.txt", "w").write("fine\n")
