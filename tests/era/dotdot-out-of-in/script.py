for p in ["/in/../etc/passwd", "../../etc/passwd", "/in/../../../../etc/hostname", "/out/../in/script.py.bak"]:
    try:
        open(p).read()
        print("ESCAPED", p)
    except Exception as e:
        print("blocked", p, type(e).__name__)
