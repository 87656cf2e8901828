# argv[0] `python3`: CPython's program name. What could show it, printed.
import os
import sys

print(sys.argv, sys.orig_argv, repr(sys.executable), repr(sys._base_executable))
print(sys.prefix, sys.exec_prefix, sys.path, sys.flags)
print(sorted(sys.modules))
print(os.environ.get("PATH"), __file__, __name__)
raise SystemExit(3)
