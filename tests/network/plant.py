# The guest side of runner/tests/network.rs's symlink attacks (tests/network/symlink-attacks/):
# plays the steps of /in/plan.json against the broker's exchange directory /net by hand
# (no urllib), printing one JSON line per step, so the test can see what each layer did:
#   {"symlink": LINK, "to": TARGET}  plant LINK as a symlink to TARGET
#   {"request": N, "url": URL}       send request N as the protocol says (N.req.tmp, renamed)
#   {"await": N}                     wait (at most plan["wait_sec"]) for N.resp; print its head
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
        tmp = "/net/%d.req.tmp" % n
        with open(tmp, "wb") as f:
            f.write(json.dumps({"method": "GET", "url": step["url"]}).encode() + b"\n")
        os.rename(tmp, "/net/%d.req" % n)
        line["sent"] = True
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
