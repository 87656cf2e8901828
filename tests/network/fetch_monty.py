# The monty side of runner/tests/it/network.rs: fetch each URL of the `urls` input with
# the runner's `fetch`, print one JSON line per URL (status, length, sha256, final URL,
# or the refusal's reason), as tests/network/fetch.py does for the ERA guest.
import hashlib
import json

for item in urls:
    url = item["url"]
    line = {"url": url}
    try:
        r = fetch(url, method=item.get("method", "GET"), body=item.get("body"))
        body = r["body"]
        line["status"] = r["status"]
        line["bytes"] = len(body)
        line["sha256"] = hashlib.sha256(body).hexdigest()
        line["final_url"] = r["url"]
        line["content_type"] = r["headers"].get("content-type", "")
    except OSError as e:
        line["refused"] = str(e)
    print(json.dumps(line))
