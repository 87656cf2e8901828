"""A functools.lru_cache-memoised recursion 800 deep, as dynamic programming does.

Native CPython returns 800. The cpython-3.12 guest cannot: it was built at -O0 with a
512 KiB C stack in linear memory, and every memoised level is a C call (the cache's
wrapper) holding a few KiB of it, so the stack overflows between depth 100 and 200,
before CPython's C recursion limit (1,500 levels) is reached. The run must then end as
"stack exhausted", not as a bare memory fault.
"""
import functools
import sys


@functools.lru_cache(maxsize=None)
def depth(n):
    return 0 if n == 0 else depth(n - 1) + 1


print("started", sys.version_info[:2], flush=True)
try:
    print("memoised", depth(800))
except RecursionError as e:
    print("RecursionError", e)
