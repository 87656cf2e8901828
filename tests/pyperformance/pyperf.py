"""A stand-in for pyperf, so pyperformance's benchmarks run unmodified where pyperf
cannot (a WASI guest has no subprocesses): each benchmark function runs once, and what it
computed is printed so a run in the guest can be compared with a native one.

Printed, one line each: the benchmark's name and the repr of what its function returned
(bench_func), and a digest of the benchmark module's state afterwards: every global of
`__main__` that is data (numbers, strings, containers, instances' attributes, walked
without following cycles, sets and dict keys in sorted order), so a benchmark that keeps
its results in globals (nbody's bodies, richards' task records) is compared too. Timings
are printed on stderr, never compared.
"""

import argparse
import hashlib
import sys
import time
import types

perf_counter = time.perf_counter

_SCALARS = (type(None), bool, int, float, complex, str, bytes)


def _walk(value, out, seen, depth):
    if isinstance(value, _SCALARS):
        out.append(repr(value))
        return
    if depth > 12 or id(value) in seen:
        out.append("<...>")
        return
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                          types.ModuleType, type)):
        out.append(getattr(value, "__qualname__", getattr(value, "__name__", "?")))
        return
    seen.add(id(value))
    if isinstance(value, (list, tuple)):
        out.append("[" if isinstance(value, list) else "(")
        for v in value:
            _walk(v, out, seen, depth + 1)
        out.append("]")
    elif isinstance(value, (set, frozenset)):
        out.append("{" + ",".join(sorted(repr(v) for v in value)) + "}")
    elif isinstance(value, dict):
        out.append("{")
        for k in sorted(value, key=repr):
            out.append(repr(k) + ":")
            _walk(value[k], out, seen, depth + 1)
        out.append("}")
    elif hasattr(value, "__dict__"):
        out.append(type(value).__qualname__ + "(")
        _walk(vars(value), out, seen, depth + 1)
        out.append(")")
    else:
        out.append(type(value).__qualname__)


def _state_digest():
    main = sys.modules["__main__"]
    out = []
    for name in sorted(vars(main)):
        if name.startswith("__") or name in ("pyperf", "runner"):
            continue
        out.append(name + "=")
        _walk(vars(main)[name], out, set(), 0)
    return hashlib.sha256("\n".join(out).encode()).hexdigest()


class Runner:
    def __init__(self, *args, add_cmdline_args=None, **kwargs):
        self.metadata = {}
        self.argparser = argparse.ArgumentParser()

    def parse_args(self, args=None):
        return self.argparser.parse_args(args)

    def _report(self, name, started, result=None, show_result=False):
        print(f"pyperf-shim: {name}: ran in {time.perf_counter() - started:.3f} s", file=sys.stderr)
        if show_result:
            print(f"{name} returned {result!r}")
        print(f"{name} state sha256 {_state_digest()}")

    def bench_func(self, name, func, *args, inner_loops=None):
        started = time.perf_counter()
        result = func(*args)
        self._report(name, started, result, show_result=True)

    def bench_time_func(self, name, func, *args, inner_loops=None):
        started = time.perf_counter()
        func(1, *args)
        self._report(name, started)
