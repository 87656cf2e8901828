# The guest side of runner/tests/it/network.rs's symlink attacks (tests/network/symlink-attacks/):
# plays the steps of /in/plan.json against the broker's exchange directory /net by hand
# (no urllib), printing one JSON line per step, so the test can see what each layer did:
#   {"symlink": LINK, "to": TARGET}  plant LINK as a symlink to TARGET
#   {"request": N, "url": URL}       send request N as the protocol says (N.req.tmp, renamed)
#   {"await": N}                     wait (at most plan["wait_sec"]) for N.resp; print its head
#   {"mkdir": PATH}                  make a directory (an entry the broker cannot remove)
#   {"until_taken": N}               wait (at most plan["wait_sec"]) until N.req is gone
#   {"sleep": SECONDS}               sleep
# A request may carry "path_bytes" (the URL's path padded to that many characters) and
# "headers" ([[name, value], ...]) or "pad_headers" ([count, value bytes]).
import json
import os
import time

plan = json.load(open("/in/plan.json"))
wait_sec = float(plan["wait_sec"])

for step in plan["steps"]:
    line = dict(step)
    if "symlink" in step:
        try:
            os.symlink(step["to"], step["symlink"])
            line["created"] = True
        except OSError as e:
            line.update(created=False, errno=e.errno, error=str(e))
    elif "request" in step:
        n = step["request"]
        url = step["url"]
        if "path_bytes" in step:
            url += "/" + "p" * (step["path_bytes"] - 1)
        headers = step.get("headers", [])
        if "pad_headers" in step:
            count, size = step["pad_headers"]
            headers = [["X-Pad-%d" % i, "h" * size] for i in range(count)]
        tmp = "/net/%d.req.tmp" % n
        with open(tmp, "wb") as f:
            head = {"method": "GET", "url": url, "headers": headers}
            f.write(json.dumps(head).encode() + b"\n")
        os.rename(tmp, "/net/%d.req" % n)
        line["sent"] = True
    elif "mkdir" in step:
        os.mkdir(step["mkdir"])
        line["created"] = True
    elif "until_taken" in step:
        entry = "/net/%d.req" % step["until_taken"]
        deadline = time.monotonic() + wait_sec
        while os.path.lexists(entry) and time.monotonic() < deadline:
            time.sleep(0.005)
        line["taken"] = not os.path.lexists(entry)
    elif "sleep" in step:
        time.sleep(step["sleep"])
    elif "await" in step:
        answer = "/net/%d.resp" % step["await"]
        deadline = time.monotonic() + wait_sec
        while not os.path.lexists(answer) and time.monotonic() < deadline:
            time.sleep(0.005)
        if not os.path.lexists(answer):
            line["answer"] = None
        elif os.path.islink(answer):
            line["answer"] = "a symlink"
        else:
            with open(answer, "rb") as f:
                head = f.read().partition(b"\n")[0]
            line["answer"] = json.loads(head)
            os.remove(answer)
    print(json.dumps(line), flush=True)
