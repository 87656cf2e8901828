"""The runner's network door for CPython guests, shipped read-only.

The guest has no socket. When the runner grants `network: allowlist`, /net is a private
exchange directory served by the runner's broker, outside the sandbox; this module
installs a urllib opener whose http and https handler writes each request there
(`N.req`: one JSON line, then the body) and waits for the broker's `N.resp`. A refusal
raises urllib.error.URLError naming its reason code (`network.origin_not_allowed`, ...).
Redirects are followed by urllib itself, so each hop is checked and recorded.
Without /net this module does nothing.
"""

import os as _os


def _install():
    if not _os.path.isdir("/net"):
        return
    import email.message
    import io
    import json
    import time
    import urllib.error
    import urllib.request
    import urllib.response

    wait_sec = float(_os.environ.get("RUNNER_NET_WAIT_SEC", "60"))
    counter = [0]

    def exchange(req):
        counter[0] += 1
        n = counter[0]
        data = req.data or b""
        if not isinstance(data, (bytes, bytearray)):
            data = b"".join(data)
        head = {"method": req.get_method(), "url": req.full_url, "headers": req.header_items()}
        tmp = "/net/%d.req.tmp" % n
        with open(tmp, "wb") as f:
            f.write(json.dumps(head).encode() + b"\n" + bytes(data))
        _os.rename(tmp, "/net/%d.req" % n)
        answer = "/net/%d.resp" % n
        deadline = time.monotonic() + wait_sec
        delay = 0.0005
        while not _os.path.exists(answer):
            if time.monotonic() > deadline:
                raise urllib.error.URLError("network.timeout: no answer from the runner's broker")
            time.sleep(delay)
            delay = min(delay * 2, 0.02)
        with open(answer, "rb") as f:
            raw = f.read()
        _os.remove(answer)
        line, _, body = raw.partition(b"\n")
        return json.loads(line), body

    class RunnerNetHandler(urllib.request.HTTPHandler):
        handler_order = 100

        def http_open(self, req):
            meta, body = exchange(req)
            if "error" in meta:
                raise urllib.error.URLError("%s: %s" % (meta["error"], meta.get("detail", "")))
            headers = email.message.Message()
            for k, v in meta.get("headers", []):
                headers[k] = v
            resp = urllib.response.addinfourl(io.BytesIO(body), headers, req.full_url, meta["status"])
            resp.msg = meta.get("reason", "")
            return resp

        https_open = http_open

    urllib.request.install_opener(urllib.request.build_opener(RunnerNetHandler))


_install()
del _install
