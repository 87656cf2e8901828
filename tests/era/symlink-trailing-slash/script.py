import os
for target, name in [("/", "root"), ("../../../../", "up"), ("/etc", "etc")]:
    try:
        os.symlink(target, "/out/" + name)
    except Exception as e:
        print("symlink refused", name, type(e).__name__)
for p in ["/out/root/", "/out/root/etc/", "/out/up/", "/out/etc/", "/out/etc/passwd", "/out/up/etc/passwd"]:
    try:
        if os.path.isdir(p):
            print("LISTED", p, os.listdir(p)[:3])
        else:
            print("READ", p, open(p).read()[:10])
    except Exception as e:
        print("blocked", p, type(e).__name__)
