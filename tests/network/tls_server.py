# A TLS server on 127.0.0.1 for runner/tests/it/network.rs: python3 tls_server.py CERT KEY.
# Prints its port on the first line, answers GET /hello with a fixed body, and exits
# when its stdin closes (the test dropped it) or after two minutes, whichever is first.
import http.server
import ssl
import sys
import threading


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello over tls"
        self.send_response(200 if self.path == "/hello" else 404)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(sys.argv[1], sys.argv[2])
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
threading.Thread(target=server.serve_forever, daemon=True).start()
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
stop.wait(120)
