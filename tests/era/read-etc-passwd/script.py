try:
    print("ESCAPED", open("/etc/passwd").read()[:20])
except Exception as e:
    print("blocked", type(e).__name__)
