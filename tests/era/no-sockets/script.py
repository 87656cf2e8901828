try:
    import socket
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.connect(("127.0.0.1", 22))
    print("CONNECTED")
except Exception as e:
    print("no network", type(e).__name__)
