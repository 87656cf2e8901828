"""Drives `runner mcp` with the official MCP Python SDK (`mcp` from PyPI, pinned by hash
in tests/mcp/requirements.txt, installed by `just mcp-client`): over stdio when TARGET is
the runner binary (the client starts `runner mcp`), over Streamable HTTP when TARGET is
the URL of a running `runner mcp --http` (DRAFTS INBOX RESULTS are then unused).

    client.py TARGET DRAFTS INBOX RESULTS draft        # policy, validate, submit, hostile cases
    client.py TARGET DRAFTS INBOX RESULTS read ID REJECTED_ID  # status, read_result
    client.py URL - - - http-guard                     # Host/Origin/path refusals, raw HTTP
    client.py TARGET DRAFTS INBOX RESULTS hostile      # bad input and many calls, any transport
    client.py TARGET DRAFTS INBOX RESULTS walk-submit  # the signed walk's drafts (monty, ERA)
    client.py TARGET DRAFTS INBOX RESULTS status STATE ID...   # every ID is in STATE
    client.py TARGET DRAFTS INBOX RESULTS walk-read ID...      # done, accepted results

Every check is an assert: a failure exits non-zero with the traceback. The last line on
stdout is one JSON object the Rust test (runner/tests/it/mcp.rs) checks too.
"""

import base64
import json
import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

TOOLS = {"policy", "validate_draft", "submit_draft", "draft_status", "read_result"}
DATA = b"alpha\nbeta\ngamma\n"


def era_draft(request_id, command, inputs):
    """An ERA (CPython guest) draft: its command and input files, hashes sealed by submit."""
    front = "inputs:\n" + "".join(f'  - path: "/in/{n}"\n' for n in inputs)
    files = "".join(f"- `/in/{n}`\n" for n in inputs)
    return (
        "---\nrequest_type: tool_request\nschema_version: 1\n"
        f'request_id: "{request_id}"\ncreated_utc: "2026-11-27T06:00:00Z"\n'
        'requested_by: "core-agent"\npurpose: "Count the words of a file."\n'
        "backend: ERA\nlanguage: python\nnetwork: none\ncpu_limit: \"20\"\n"
        f"memory_limit_mb: 256\ntime_limit_sec: 60\n{front}---\n"
        f"## Command\n`{command}`\n\n## Input Files\n{files}\n"
        "## Output Expectations\n- stdout: the word count\n\n"
        "## Risk Assessment\n- Risk level: low\n- Justification: counts words.\n"
        "- Data sensitivity: public\n- Network rationale: none needed\n"
    )


def draft(request_id, code, inputs=(), requested_by="core-agent"):
    """A monty draft without approval fields; `inputs` are file names under /in/ (a
    monty request declares them in the front matter only, without hashes here)."""
    front = ""
    if inputs:
        front = "inputs:\n" + "".join(f'  - path: "/in/{n}"\n' for n in inputs)
    return (
        "---\nrequest_type: tool_request\nschema_version: 1\n"
        f'request_id: "{request_id}"\ncreated_utc: "2026-11-27T06:00:00Z"\n'
        f'requested_by: "{requested_by}"\npurpose: "Count the lines of a file."\n'
        "backend: monty\nlanguage: python\nnetwork: none\ncpu_limit: \"10\"\n"
        f"memory_limit_mb: 64\ntime_limit_sec: 30\n{front}---\n"
        f"## Code\n```python\n{code}\n```\n\n"
        "## Inputs (JSON)\n```json\n{}\n```\n\n"
        "## Output Expectations\n- stdout: the line count\n\n"
        "## Risk Assessment\n- Risk level: low\n- Justification: counts lines.\n"
        "- Data sensitivity: public\n- Network rationale: none needed\n"
    )


COUNT = "with open('/in/words.txt') as f:\n    lines = f.read().splitlines()\nprint('lines:', len(lines))"


async def call(session, name, args):
    """(is_error, structured or text): a tool error is data; a protocol error is too."""
    try:
        r = await session.call_tool(name, args)
    except MCPError as e:
        return True, f"protocol error: {e}"
    if r.is_error:
        text = " ".join(c.text for c in r.content if getattr(c, "text", None))
        return True, text
    assert r.structured_content is not None, f"{name}: no structured content"
    return False, r.structured_content


async def expect_error(session, name, args, *needles):
    err, what = await call(session, name, args)
    assert err, f"{name} {str(args)[:200]}: expected an error, got {str(what)[:300]}"
    for n in needles:
        assert n in what, f"{name}: error {what[:300]!r} does not say {n!r}"
    return what


async def phase_draft(session, argv):
    report = {}
    tools = (await session.list_tools()).tools
    names = {t.name for t in tools}
    assert names == TOOLS, names
    for t in tools:
        assert t.input_schema.get("type") == "object", t.name
        assert t.output_schema and t.output_schema.get("type") == "object", t.name
    assert not any("approv" in n or "sign" in n or "exec" in n or "run" == n for n in names)

    err, policy = await call(session, "policy", {})
    assert not err, policy
    assert "monty" in policy["backends"] and "python" in policy["languages"], policy
    assert policy["limits"]["max_memory_limit_mb"] > 0
    report["policy_sha256"] = policy["sha256"]

    # A draft with a mistake: every reason CORE can fix, none about the approval.
    bad = draft("TR-20261128-060000Z-mcp-bad", COUNT, ["words.txt"]).replace(
        "memory_limit_mb: 64", "memory_limit_mb: 999999"
    )
    err, v = await call(session, "validate_draft", {"markdown": bad})
    assert not err and v["verdict"] == "REJECT", v
    codes = [r["code"] for r in v["reasons"]]
    assert "limits.over_maximum" in codes, codes
    assert not any(c.startswith("approval.approved") for c in codes), codes
    fields = {f["field"]: f["note"] for f in v["added_by_operator"]}
    assert fields.get("approved_by") == "added by the operator", fields
    report["bad_codes"] = codes

    # A draft that presets its approval is told to leave it out.
    preset = draft("TR-20261128-060000Z-mcp-preset", "print(1)").replace(
        'requested_by: "core-agent"\n',
        'requested_by: "core-agent"\napproved_by: "operator-ada"\napproved_utc: "2026-11-28T06:00:00Z"\n',
    )
    err, v = await call(session, "validate_draft", {"markdown": preset})
    assert not err and "draft.approval_preset" in [r["code"] for r in v["reasons"]], v
    err, what = await call(session, "submit_draft", {"markdown": preset})
    assert err and "approval_preset" in what, what

    good_id = "TR-20261128-060000Z-mcp-count"
    good = draft(good_id, COUNT, ["words.txt"])
    err, v = await call(session, "validate_draft", {"markdown": good})
    assert not err and v["verdict"] == "ACCEPT", v
    assert v["sealed_by_submit"] == ["/in/words.txt"], v
    b64 = base64.b64encode(DATA).decode()
    err, s = await call(session, "submit_draft", {"markdown": good, "inputs": {"words.txt": b64}})
    assert not err, s
    assert s["id"] == good_id and s["state"] == "drafted", s
    import hashlib

    sha = hashlib.sha256(DATA).hexdigest()
    assert s["inputs"] == [{"path": "/in/words.txt", "sha256": sha}], s
    assert sha in s["markdown"], "the hash is sealed into the draft"
    report["submitted"] = good_id
    report["sha256"] = sha

    # The same id twice is refused, the first draft untouched.
    await expect_error(session, "submit_draft", {"markdown": good, "inputs": {"words.txt": b64}}, "already exists")
    err, st = await call(session, "draft_status", {"id": good_id})
    assert not err and st["state"] == "drafted", st

    # A second draft, for the operator to reject.
    rej_id = "TR-20261128-060000Z-mcp-reject-me"
    err, s = await call(session, "submit_draft", {"markdown": draft(rej_id, "print('no')")})
    assert not err, s
    report["to_reject"] = rej_id

    await phase_hostile(session, [], good_id=good_id)

    # Many calls at once: every one answered, the server still there afterwards.
    answers = []

    async def one(i):
        if i % 3 == 0:
            answers.append(await call(session, "validate_draft", {"markdown": good}))
        elif i % 3 == 1:
            answers.append(await call(session, "submit_draft", {"markdown": draft(f"TR-20261128-060000Z-mcp-many-{i}", "print(1)")}))
        else:
            answers.append(await call(session, "draft_status", {"id": good_id}))

    async with anyio.create_task_group() as tg:
        for i in range(60):
            tg.start_soon(one, i)
    assert len(answers) == 60 and all(not e for e, _ in answers), [a for a in answers if a[0]][:3]
    err, policy2 = await call(session, "policy", {})
    assert not err and policy2["sha256"] == policy["sha256"]
    report["concurrent"] = len(answers)
    return report


async def phase_hostile(session, argv, good_id=None):
    """Bad input: each a clear error, nothing written; then many bad calls at once, and
    the server still answers."""
    report = {}
    b64 = base64.b64encode(DATA).decode()
    good = draft("TR-20261128-060000Z-mcp-hostile-good", COUNT, ["words.txt"])
    # Hostile input: clear errors, nothing written.
    other = draft("TR-20261128-060000Z-mcp-hostile", COUNT, ["words.txt"])
    for name in ["../x", "/etc/passwd", "a\u0000b", ".", "..", "sub/x", ".hidden", ""]:
        await expect_error(session, "submit_draft", {"markdown": other, "inputs": {name: b64}}, "input name")
    await expect_error(session, "submit_draft", {"markdown": other, "inputs": {"words.txt": "!!not base64!!"}}, "base64")
    big = base64.b64encode(b"x" * (5 * 1024 * 1024)).decode()
    await expect_error(session, "submit_draft", {"markdown": other, "inputs": {"words.txt": big}}, "larger than")
    await expect_error(session, "submit_draft", {"markdown": other, "inputs": {"undeclared.txt": b64, "words.txt": b64}}, "does not declare")
    await expect_error(session, "submit_draft", {"markdown": other, "inputs": {"words.txt": 7}}, "base64 string")
    await expect_error(session, "submit_draft", {"markdown": other, "inputs": ["words.txt"]}, "object")
    huge = other + ("\n<!-- pad -->" * 120000)
    await expect_error(session, "submit_draft", {"markdown": huge}, "bytes")
    await expect_error(session, "validate_draft", {"markdown": huge}, "bytes")
    await expect_error(session, "validate_draft", {}, "required")
    await expect_error(session, "validate_draft", {"markdown": good, "approve": True}, "unknown argument")
    for bad_id in ["../../etc", "TR-../../x", "/etc/passwd", "", "TR-a\u0000b", "..", "x" * 300]:
        await expect_error(session, "draft_status", {"id": bad_id})
        await expect_error(session, "read_result", {"id": bad_id})
    await expect_error(session, "draft_status", {"id": "TR-no-such-draft"}, "no draft")
    if good_id:
        await expect_error(session, "read_result", {"id": good_id}, "no result")
        await expect_error(session, "approve", {"id": good_id})
    await expect_error(session, "read_result", {"id": "TR-no-such-draft"}, "no result")
    # A request id that is a path trick is refused before anything is written.
    await expect_error(session, "submit_draft", {"markdown": draft("../../escape", "print(1)")}, "request_id")
    # Inputs over the draft's caps: more than 32, more than 8 MiB together.
    many = {f"f{i}.txt": b64 for i in range(33)}
    await expect_error(session, "submit_draft", {"markdown": other, "inputs": many}, "at most 32")
    # 3 x 2.7 MiB: over 8 MiB together, yet a body under the HTTP transport's cap (which
    # refuses anything larger with 413 before a tool sees it), so both transports judge it.
    part = base64.b64encode(b"y" * (27 * 1024 * 1024 // 10)).decode()
    three = draft("TR-20261128-060000Z-mcp-hostile-3", COUNT, ["a.txt", "b.txt", "c.txt"])
    await expect_error(session, "submit_draft", {"markdown": three, "inputs": {"a.txt": part, "b.txt": part, "c.txt": part}}, "together")
    await expect_error(session, "no_such_tool", {}, "no tool")

    # Many bad calls at once: every one a clear error, none written.
    errors = []

    async def bad(i):
        name = ["../x", "/etc/passwd", "a/b", ".."][i % 4]
        errors.append(await call(session, "submit_draft", {"markdown": other, "inputs": {name: b64}}))

    async with anyio.create_task_group() as tg:
        for i in range(40):
            tg.start_soon(bad, i)
    assert len(errors) == 40 and all(e and "input name" in w for e, w in errors), errors[:3]
    err, st = await call(session, "policy", {})
    assert not err and st["sha256"], st
    report["hostile"] = "refused"
    report["bad_at_once"] = len(errors)
    return report


async def phase_read(session, argv):
    good_id, rej_id = argv[0], argv[1]
    report = {}
    err, st = await call(session, "draft_status", {"id": good_id})
    assert not err, st
    assert st["state"] == "done" and st["outcome"] == "completed", st
    assert st["approval"]["approved_by"] == "operator-ada", st
    err, r = await call(session, "read_result", {"id": good_id})
    assert not err, r
    assert r["gate"] == "ACCEPT" and r["request_id"] == good_id, r
    assert r["stdout"]["untrusted"] is True and "lines: 3" in r["stdout"]["text"], r["stdout"]
    assert r["stderr"]["untrusted"] is True
    assert "untrusted" in r["untrusted_notice"]
    assert r["fields"]["result_type"] == "tool_result" and r["fields"]["exit_code"] == 0, r["fields"]
    assert r["result_id"] == st["result_id"], (r["result_id"], st)
    report["result_id"] = r["result_id"]
    err, st = await call(session, "draft_status", {"id": rej_id})
    assert not err and st["state"] == "rejected", st
    assert st["rejection"]["reason"] == "needs a clearer purpose", st
    report["rejected"] = rej_id
    return report


WALK_MONTY = "TR-20261128-080000Z-mcp-walk-monty"
WALK_ERA = "TR-20261128-080000Z-mcp-walk-era"
WALK_TAMPERED = "TR-20261128-080000Z-mcp-walk-tampered"
WORDS = b"one two three\nfour five\n"
COUNT_WORDS = b"import sys\nwith open('/in/words.txt') as f:\n    print('words:', len(f.read().split()))\n"


async def phase_walk_submit(session, argv):
    """The signed walk's drafts: a monty one and an ERA one, each with inputs, and one
    whose input the test alters on disk before approving."""
    err, policy = await call(session, "policy", {})
    assert not err and policy["require_signed_approval"] is True, policy
    words = base64.b64encode(WORDS).decode()
    drafts = {
        WALK_MONTY: (draft(WALK_MONTY, COUNT, ["words.txt"]), {"words.txt": base64.b64encode(DATA).decode()}),
        WALK_ERA: (era_draft(WALK_ERA, "python -u count.py", ["count.py", "words.txt"]),
                   {"count.py": base64.b64encode(COUNT_WORDS).decode(), "words.txt": words}),
        WALK_TAMPERED: (draft(WALK_TAMPERED, COUNT, ["words.txt"]), {"words.txt": words}),
    }
    report = {}
    for rid, (md, inputs) in drafts.items():
        err, v = await call(session, "validate_draft", {"markdown": md})
        assert not err and v["verdict"] == "ACCEPT", (rid, v)
        fields = [f["field"] for f in v["added_by_operator"]]
        assert any(f.startswith("signature") for f in fields), fields
        err, s = await call(session, "submit_draft", {"markdown": md, "inputs": inputs})
        assert not err and s["id"] == rid, (rid, s)
        err, st = await call(session, "draft_status", {"id": rid})
        assert not err and st["state"] == "drafted", st
        report[rid] = [i["sha256"] for i in s["inputs"]]
    return report


async def phase_status(session, argv):
    state, *ids = argv
    report = {}
    for rid in ids:
        err, st = await call(session, "draft_status", {"id": rid})
        assert not err and st["state"] == state, (rid, state, st)
        if state != "drafted":
            assert st["approval"]["key_id"].startswith("sha256:"), st
        report[rid] = st["state"]
    return report


async def phase_walk_read(session, argv):
    report = {}
    for rid in argv:
        err, st = await call(session, "draft_status", {"id": rid})
        assert not err and st["state"] == "done" and st["outcome"] == "completed", st
        assert st["approval"]["approved_by"] == "operator-ada", st
        err, r = await call(session, "read_result", {"id": rid})
        assert not err and r["gate"] == "ACCEPT" and r["request_id"] == rid, r
        assert r["result_id"] == st["result_id"], (r, st)
        assert r["stdout"]["untrusted"] is True, r
        report[rid] = r["stdout"]["text"]
    return report


async def http_guard(url):
    """DNS-rebinding protection, checked with raw HTTP requests: a foreign Host or Origin
    is refused with 403 before any tool runs, the server's own Origin is served, and
    another path is not the endpoint."""
    import httpx2
    from urllib.parse import urlsplit

    own = urlsplit(url)
    port = own.port
    init = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "guard", "version": "0"}},
    }
    base = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    report = {}
    async with httpx2.AsyncClient(timeout=30) as c:
        async def post(headers, path="/mcp", body=None):
            return await c.post(f"http://127.0.0.1:{port}{path}", headers={**base, **headers},
                                content=json.dumps(init if body is None else body))
        r = await post({"Origin": "http://evil.example"})
        assert r.status_code == 403 and "Origin" in r.text, (r.status_code, r.text)
        r = await post({"Origin": f"http://evil.example:{port}"})
        assert r.status_code == 403, (r.status_code, r.text)
        r = await post({"Origin": "null"})
        assert r.status_code == 403, (r.status_code, r.text)
        r = await post({"Host": f"evil.example:{port}"})
        assert r.status_code == 403 and "Host" in r.text, (r.status_code, r.text)
        r = await post({"Host": f"127.0.0.1:{port + 1 if port < 65535 else port - 1}"})
        assert r.status_code == 403, (r.status_code, r.text)
        r = await post({"Origin": f"http://127.0.0.1:{port}"})
        assert r.status_code == 200 and "runner-mcp" in r.text, (r.status_code, r.text)
        r = await post({"Origin": f"http://localhost:{port}", "Host": f"localhost:{port}"})
        assert r.status_code == 200, (r.status_code, r.text)
        r = await post({}, path="/other")
        assert r.status_code == 404, (r.status_code, r.text)
        r = await post({}, body="not json-rpc")
        assert 400 <= r.status_code < 500, (r.status_code, r.text)
        r = await c.post(f"http://127.0.0.1:{port}/mcp", headers=base, content=b"{" * 1000)
        assert 400 <= r.status_code < 500, (r.status_code, r.text)
        big = b"x" * (24 * 1024 * 1024)
        try:
            r = await c.post(f"http://127.0.0.1:{port}/mcp", headers=base, content=big)
            assert r.status_code == 413, (r.status_code, r.text[:200])
            report["oversized_body"] = r.status_code
        except httpx2.TransportError as e:
            # The server may close the connection on the oversized body instead.
            report["oversized_body"] = f"closed: {type(e).__name__}"
        # Still serving after all that.
        r = await post({})
        assert r.status_code == 200 and "runner-mcp" in r.text, (r.status_code, r.text)
    report["guard"] = "ok"
    return report


PHASES = {
    "draft": phase_draft,
    "read": phase_read,
    "hostile": phase_hostile,
    "walk-submit": phase_walk_submit,
    "status": phase_status,
    "walk-read": phase_walk_read,
}


async def main():
    target, drafts, inbox, results, mode, *rest = sys.argv[1:]
    if mode == "http-guard":
        print(json.dumps(await http_guard(target)))
        return
    if target.startswith("http://"):
        transport = streamable_http_client(target)
    else:
        transport = stdio_client(
            StdioServerParameters(
                command=target,
                args=["mcp", "--drafts", drafts, "--inbox", inbox, "--results", results],
            )
        )
    async with transport as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            report = {"server": init.server_info.name, "protocol": init.protocol_version}
            report.update(await PHASES[mode](session, rest))
    print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main)
