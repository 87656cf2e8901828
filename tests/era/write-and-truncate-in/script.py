import os
attempts = [
    ("write", lambda: open("/in/script.py", "w").write("pwned")),
    ("append", lambda: open("/in/data.txt", "a").write("pwned")),
    ("truncate-open", lambda: os.close(os.open("/in/data.txt", os.O_RDONLY | os.O_TRUNC))),
    ("truncate-rw", lambda: os.close(os.open("/in/data.txt", os.O_RDWR | os.O_TRUNC))),
    ("create", lambda: open("/in/new.txt", "w").write("x")),
    ("remove", lambda: os.remove("/in/data.txt")),
    ("rename", lambda: os.rename("/in/data.txt", "/in/moved.txt")),
    ("mkdir", lambda: os.mkdir("/in/d")),
]
for name, f in attempts:
    try:
        f()
        print("ESCAPED", name)
    except Exception as e:
        print("blocked", name, type(e).__name__)
print(open("/in/data.txt").read().strip())
