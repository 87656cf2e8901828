"""asyncio's default event loop for a WASI guest, installed by the runner.

The runner mounts this file read-only in the guest's site-packages, with
`_runner_asyncio.pth`, which `site` runs at start-up (also under `-I`; not under `-S`,
which skips `site`). That one line only puts a small finder first on `sys.meta_path`:
when `asyncio.selector_events` is imported, the finder removes itself, imports this
module and returns `find_spec(...)`, which patches that module after it has run. A run
that never imports asyncio compiles the one line and nothing of this file.

The patch: asyncio's selector loop makes a "self-pipe" with `socket.socketpair()`,
which WASI lacks (`OSError: [Errno 58] Not supported`, and there is no `os.pipe`
either), so `asyncio.run()` failed before running anything. The self-pipe only wakes a
loop blocked in `select` from another thread (`call_soon_threadsafe`) or from a signal
handler; a WASI guest has no threads and no signals, so the loop goes without it:
`_make_self_pipe`, `_close_self_pipe` and `_write_to_self` do nothing. Everything else
of asyncio is CPython's own.
"""

import sys


def _make_self_pipe(self):
    self._ssock = self._csock = None


def _close_self_pipe(self):
    self._ssock = self._csock = None


def _write_to_self(self):
    pass


def _patch(module):
    loop = module.BaseSelectorEventLoop
    loop._make_self_pipe = _make_self_pipe
    loop._close_self_pipe = _close_self_pipe
    loop._write_to_self = _write_to_self


class _PatchingLoader:
    """The module's own loader, patching the module once it has run."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _patch(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


def find_spec(name, path=None, target=None):
    """The spec of `name` from the other finders, its loader patching the module."""
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        spec = find(name, path, target) if find is not None else None
        if spec is not None:
            spec.loader = _PatchingLoader(spec.loader)
            return spec
    return None
