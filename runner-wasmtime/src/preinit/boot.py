# _runner_boot: what CPython 3.12's main does for `python -c CMD ...` and
# `python FILE ...`, run inside a pre-initialised guest (runner-wasmtime/src/preinit.rs).
# Defined at snapshot time; its `main` is called once by the new `_start`, which removes
# the module from sys.modules first. It always ends by raising SystemExit, so CPython's
# own PyErr_Print -> Py_Exit finalises the interpreter and sets the exit code.
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
        status = _run(code, d)
        raise SystemExit(status)
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
    raise SystemExit(status)
