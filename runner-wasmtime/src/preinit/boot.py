# _runner_boot: what CPython 3.12's main does for `python -c CMD ...` and
# `python FILE ...`, run inside a pre-initialised guest (runner-wasmtime/src/preinit.rs).
# Defined at snapshot time; its `main` is called once by the new `_start`, which removes
# the module from sys.modules first. It ends in one of two ways (see `_end`): by raising
# SystemExit, so CPython's own PyErr_Print -> Py_Exit finalises the interpreter and sets
# the exit code; or, when nothing of that finalisation could be seen, by flushing stdout
# and stderr and leaving through _exit with the same code.
import sys


def _strip(tb):
    while tb is not None and tb.tb_frame.f_code.co_filename == '<runner-boot>':
        tb = tb.tb_next
    return tb


def _print_uncaught(e):
    # What PyErr_Print does for an exception that is not SystemExit, without this
    # module's frames in the traceback.
    tb = _strip(e.__traceback__)
    e.__traceback__ = tb
    sys.last_exc = e
    sys.last_type = type(e)
    sys.last_value = e
    sys.last_traceback = tb
    sys.excepthook(type(e), e, tb)


def _run(code, d):
    try:
        exec(code, d)
    except SystemExit:
        raise
    except BaseException as e:
        _print_uncaught(e)
        return 1
    return 0


def main(hexargs):
    try:
        status = _main(hexargs)
    except SystemExit as e:
        # CPython's handle_system_exit: None is 0, an int is the code; anything else is
        # printed, which Py_Exit then does as before.
        code = _exit_code(e)
        if code is None:
            _unfreeze()
            raise
        status = code
    _end(status)
    raise SystemExit(status)


def _main(hexargs):
    argv = [a.decode('utf-8', 'surrogateescape')
            for a in bytes.fromhex(hexargs).split(b'\0')[:-1]]
    sys.orig_argv[:] = argv
    main_mod = sys.modules['__main__']
    d = main_mod.__dict__
    # `-u` changes nothing here: the guest's environment has PYTHONUNBUFFERED=1.
    first = 1
    while argv[first] == '-u':
        first += 1
    if argv[first] == '-c':
        sys.argv[:] = ['-c'] + argv[first + 2:]
        sys.path.insert(0, '')
        try:
            code = compile(argv[first + 1], '<string>', 'exec')
        except BaseException as e:
            _print_uncaught(e)
            raise SystemExit(1) from None
        return _run(code, d)
    filename = argv[first]
    sys.argv[:] = argv[first:]
    # CPython makes the script's path absolute against the working directory
    # (config_run_filename_abspath: cwd + '/' + path, so '//s.py' under WASI's '/'),
    # asks the import system for an importer of it (caching None for a plain file),
    # and puts the directory part of argv[0] as given first on sys.path
    # (_PyPathConfig_ComputeSysPath0; this build does not resolve it further).
    if not filename.startswith('/'):
        import posix
        path = posix.getcwd() + '/' + filename
        del posix
    else:
        path = filename
    sys.modules['_frozen_importlib_external'].PathFinder._path_importer_cache(path)
    sep = filename.rfind('/')
    sys.path.insert(0, filename[:sep if sep > 0 else (1 if sep == 0 else 0)])
    try:
        f = open(path, 'rb')
    except OSError as e:
        sys.stderr.write("%s: can't open file %r: [Errno %d] %s\n"
                         % (argv[0], path, e.errno, e.strerror))
        raise SystemExit(2) from None
    with f:
        source = f.read()
    d['__file__'] = path
    d['__cached__'] = None
    bootstrap = sys.modules['_frozen_importlib_external']
    d['__loader__'] = bootstrap.SourceFileLoader('__main__', path)
    try:
        code = compile(source, path, 'exec')
    except BaseException as e:
        _print_uncaught(e)
        status = 1
    else:
        status = _run(code, d)
    d.pop('__file__', None)
    d.pop('__cached__', None)
    return status



# ---------------------------------------------------------------------------------
# The end of a run. The snapshot freezes what the start-up made (gc.freeze(), made for
# a copy-on-write image: collections skip the ~5,800 start-up objects and do not write
# to their pages). Py_FinalizeEx's three full collections walked them: about 4 ms of a
# hello world. But frozen objects are never collected, and at exit the start-up's
# module dicts (__main__'s among them) are freed only by the collector: an object of
# the run held there, whose finalisation can be seen (a __del__, a generator's
# `finally`, an unflushed file, a weakref callback), would never be finalised. So at
# the end, `_end` looks at what the run made (gc.get_objects() lists only unfrozen
# objects): if any of it could be seen being finalised, or anything else would run
# Python code at exit, it unfreezes everything and the exit is CPython's own, as in the
# plain guest. Otherwise nothing of Py_FinalizeEx could be seen but the flushing of
# stdout and stderr, so `_end` flushes them and leaves through _exit (skipping the
# finalisation's ~2 ms of tearing down modules).
# ---------------------------------------------------------------------------------

# What the end uses, bound now: the run may have replaced these in builtins or sys.
type, id, range, vars, BaseException, SystemExit = (
    type, id, range, vars, BaseException, SystemExit)
_gettrace, _getprofile, _get_tool = sys.gettrace, sys.getprofile, sys.monitoring.get_tool
_HEAPTYPE = 1 << 9
_IMMUTABLETYPE = 1 << 8
# type's own descriptors: reading them runs no metaclass code.
_mro = type.__dict__['__mro__'].__get__
_tdict = type.__dict__['__dict__'].__get__
_flags = type.__dict__['__flags__'].__get__
_tmodule = type.__dict__['__module__'].__get__
# Modules whose C types free nothing anyone outside the interpreter could see.
_SAFE = frozenset((
    'builtins', 'types', 'collections', '_collections', 'functools', '_functools',
    'itertools', 'operator', '_operator', 're', '_sre', 'array', '_abc', 'abc',
    '_json', 'json', '_struct', 'struct', 'datetime', '_datetime', 'decimal',
    '_decimal', 'random', '_random', 'contextvars', '_contextvars', '_string',
    '_heapq', 'math', 'cmath', '_bisect', 'zlib', 'binascii', '_md5', '_sha1',
    '_sha2', '_sha3', '_blake2', 'hashlib', 'unicodedata', '_csv', 'csv', '_pickle',
    'pickle', '_ast', 'ast', '_tokenize', '_typing', 'typing', '_thread', 'os',
    'posix', 'time', 'sys', '_statistics', '_queue', 'queue', '_codecs', 'codecs',
    '_multibytecodec', '_locale', 'errno', '_stat', 'stat', 'marshal', '_opcode',
    'zoneinfo', '_zoneinfo', 'pyexpat', '_symtable', 'select',
))
# Not listed, so seen as finalisable: weakref (a proxy's callback is not readable), _io
# (looked at below), _asyncio, _socket, sqlite3, _bz2, xml.etree.ElementTree, and any
# module not named here.


def _exit_code(e):
    # The exit code CPython gives SystemExit `e` without printing anything, or None.
    if type(e) is not SystemExit:
        return None
    code = e.code
    if code is None:
        return 0
    if type(code) is int and -2**31 <= code < 2**31:
        return code
    return None


def _snapshot_state():
    before = set(sys.modules)
    import gc
    import atexit
    import _io as io
    import _weakref as weakref
    # Imported here only: what the plain start-up did not import leaves no trace.
    for name in set(sys.modules) - before:
        del sys.modules[name]
    global _gc, _atexit, _exit, _STDOUT, _STDERR, _GENERATOR, _REF, _CALLBACK
    global _FILES, _BUFFERED, _INERT_FILES, _STARTUP_TYPES, _FROZEN
    _gc, _atexit = gc, atexit
    _exit = sys.modules['posix']._exit
    _STDOUT, _STDERR = sys.stdout, sys.stderr
    _GENERATOR = type((lambda: (yield))())
    _REF = weakref.ReferenceType
    _CALLBACK = _REF.__dict__['__callback__'].__get__
    _FILES = (io.TextIOWrapper, io.BufferedReader, io.BufferedWriter,
              io.BufferedRandom, io.FileIO)
    _BUFFERED = (io.BufferedReader, io.BufferedWriter, io.BufferedRandom)
    _INERT_FILES = (io.BytesIO, io.StringIO)
    # Start-up classes (instances frozen): a __del__ given to one later is seen.
    types = {}
    for o in gc.get_objects():
        t = type(o)
        if _flags(t) & _HEAPTYPE and not _flags(t) & _IMMUTABLETYPE:
            types[id(t)] = t
    _STARTUP_TYPES = tuple((t, _has_del(t)) for t in types.values())
    gc.freeze()
    _FROZEN = gc.get_freeze_count()


def _has_del(t):
    for k in _mro(t):
        if '__del__' in _tdict(k):
            return True
    return False


_FINAL, _INERT, _GEN, _FILE, _WEAK = range(5)


def _verdict(t):
    if t is _GENERATOR:
        return _GEN
    if t in _FILES:
        return _FILE
    if t in _INERT_FILES:
        return _INERT
    for k in _mro(t):
        if k is _REF:
            return _WEAK
        if '__del__' in _tdict(k):
            return _FINAL
        flags = _flags(k)
        if (not flags & _HEAPTYPE or flags & _IMMUTABLETYPE) and _tmodule(k) not in _SAFE:
            return _FINAL
    return _INERT


def _closed_file(o):
    t = type(o)
    if t is _FILES[0]:
        o = o.buffer
        t = type(o)
    if t in _BUFFERED:
        o = o.raw
        t = type(o)
    return t is _FILES[4] and o.closed


def _finalisation_seen():
    # Whether anything the run made could be seen being finalised at exit.
    if _gc.callbacks or _gc.get_debug():
        return True
    for t, had in _STARTUP_TYPES:
        if _has_del(t) != had:
            return True
    verdicts = {}
    for o in _gc.get_objects():
        t = type(o)
        v = verdicts.get(id(t))
        if v is None:
            v = verdicts[id(t)] = _verdict(t)
        if v == _INERT:
            continue
        if v == _FINAL:
            return True
        if v == _GEN:
            if o.gi_suspended:
                return True
        elif v == _FILE:
            if not _closed_file(o):
                return True
        elif _CALLBACK(o) is not None:
            return True
    return False


def _code_at_exit():
    # Whether Py_FinalizeEx would run Python code before it finalises objects.
    if _gettrace() is not None or _getprofile() is not None:
        return True
    for tool in range(6):
        if _get_tool(tool) is not None:
            return True
    if _atexit._ncallbacks():
        return True
    threading = sys.modules.get('threading')
    if threading is not None and vars(threading).get('_threading_atexits', True):
        return True
    return False


def _end(status):
    try:
        quiet = not _code_at_exit() and not _finalisation_seen()
        if quiet:
            out, err = sys.stdout, sys.stderr
            quiet = out is _STDOUT and err is _STDERR and not out.closed and not err.closed
        if quiet:
            # flush_std_files: stdout, then stderr.
            _STDOUT.flush()
            _STDERR.flush()
    except BaseException:
        quiet = False
    if quiet:
        _exit(status)
    _unfreeze()


def _unfreeze():
    # Back to the plain guest's collector state for CPython's own exit, unless the run
    # froze objects itself (gc.freeze() then froze the start-up's objects too in the
    # plain guest, and they stay frozen there).
    if _gc.get_freeze_count() <= _FROZEN:
        _gc.unfreeze()


_snapshot_state()
del _snapshot_state
