# The guest side of runner/tests/it/network.rs: fetch each URL of /in/urls.json with the
# standard library, print one JSON line per URL (status, length, sha256, or the
# refusal's reason), and print the body of any URL marked "print" (the injection test).
import hashlib
import json
import urllib.error
import urllib.request

for item in json.load(open("/in/urls.json")):
    url = item["url"]
    line = {"url": url}
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            body = r.read()
            line.update(status=r.status, bytes=len(body), sha256=hashlib.sha256(body).hexdigest())
            if item.get("print"):
                print(body.decode())
    except urllib.error.HTTPError as e:
        line.update(status=e.code)
    except urllib.error.URLError as e:
        line.update(refused=str(e.reason))
    print(json.dumps(line))
