#!/usr/bin/env python3
"""Writes the wheel fixtures of runner/tests/it/package_env.rs, each named after what it
tries. Deterministic (fixed timestamps), so re-running it leaves the committed files
unchanged. Run from this directory: `python3 make_fixtures.py`."""
import base64
import hashlib
import stat
import zipfile

DATE = (2026, 11, 25, 0, 0, 0)


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def wheel(dist, version, members, tag="py3-none-any", purelib="true", links=()):
    # Wheel file names and dist-info directories spell the name with `_` for `-`.
    file_name = f"{dist.replace('-', '_')}-{version}-{tag}.whl"
    dist_info = f"{dist.replace('-', '_')}-{version}.dist-info"
    members = dict(members)
    members[f"{dist_info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n"
    ).encode()
    members[f"{dist_info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: make_fixtures.py\nRoot-Is-Purelib: {purelib}\nTag: {tag}\n"
    ).encode()
    lines = [record_line(n, d) for n, d in members.items()]
    lines.append(f"{dist_info}/RECORD,,")
    members[f"{dist_info}/RECORD"] = ("\n".join(lines) + "\n").encode()
    with zipfile.ZipFile(file_name, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(zipfile.ZipInfo(name, DATE), data)
        for name, target in links:
            info = zipfile.ZipInfo(name, DATE)
            info.create_system = 3
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            z.writestr(info, target)


# A well-formed pure-Python wheel: what the environment tests install and import.
wheel("greet", "1.0", {
    "greet/__init__.py": b'def hello(name):\n    return f"hello {name} from greet"\n',
})
# Imports fine, but tries to write into its own directory at import (a package that
# caches or patches itself): the environment is read-only, so the write must fail.
wheel("writes-into-own-directory-at-import", "1.0", {
    "selfwrite/__init__.py": (
        b"import os\n"
        b"try:\n"
        b"    with open(os.path.join(os.path.dirname(__file__), 'planted.py'), 'w') as f:\n"
        b"        f.write('PLANTED = True\\n')\n"
        b"    WROTE = 'wrote into its own directory'\n"
        b"except OSError as e:\n"
        b"    WROTE = 'refused: ' + type(e).__name__\n"
    ),
})
# A platform wheel: a compiled extension, tagged for CPython 3.12 on x86-64 Linux.
wheel("native-extension", "1.0", {
    "fastmath/__init__.py": b"from ._speedups import add\n",
    "fastmath/_speedups.cpython-312-x86_64-linux-gnu.so": b"\x7fELF" + b"\0" * 60,
}, tag="cp312-cp312-linux_x86_64", purelib="false")
# Claims to be pure (file name and WHEEL say none-any) but carries a shared object.
wheel("native-extension-disguised-as-pure", "1.0", {
    "fastmath/__init__.py": b"from ._speedups import add\n",
    "fastmath/_speedups.so": b"\x7fELF" + b"\0" * 60,
})
# Zip slip: a member whose path climbs out of the install directory.
wheel("path-traversal-in-member-name", "1.0", {
    "traversal/__init__.py": b"",
    "../../../../tmp/runner-env-zip-slip.py": b"print('escaped')\n",
})
# A member that is a symbolic link to a host file.
wheel("symlink-member-to-host-file", "1.0", {
    "linky/__init__.py": b"",
}, links=[("linky/passwd.py", "/etc/passwd")])
# A top-level sitecustomize.py: Python's `site` imports it at every start, before the
# program runs (and, were it first on the path, instead of the runner's network door).
wheel("wheel-ships-sitecustomize", "1.0", {
    "sitecustomize.py": b"print('the wheel sitecustomize ran')\n",
    "harmless/__init__.py": b"",
})
# A top-level `json` package: ahead of the stdlib on the path, `import json` (the
# runner's own network door uses it) would be the wheel's.
wheel("wheel-shadows-stdlib-json", "1.0", {
    "json/__init__.py": b"def dumps(*args, **kwargs):\n    return 'shadowed'\n",
})
