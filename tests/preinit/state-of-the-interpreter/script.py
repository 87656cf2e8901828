import sys, __main__, os
print(sys.argv, sys.orig_argv, sys.path, sys.executable, sys.prefix, sys.flags)
print(sorted(sys.modules))
print(sorted(vars(__main__)), __name__, __file__, __cached__, type(__loader__).__name__, __spec__)
print(sys.meta_path, [getattr(h, "__qualname__", h) for h in sys.path_hooks], sorted(sys.path_importer_cache))
print(sorted(os.environ.items()), os.getcwd(), sys.stdout.line_buffering, sys.stdout.encoding, sys.stdin)
