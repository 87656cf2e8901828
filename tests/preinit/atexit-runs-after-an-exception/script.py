import atexit
atexit.register(lambda: print("atexit ran"))
raise RuntimeError("boom")
