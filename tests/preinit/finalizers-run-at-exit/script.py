# Objects still alive when the script ends are finalised by CPython's exit: a __del__
# of a global, of a reference cycle, of an object reachable only through a start-up
# object (sys.path) or a start-up class, a suspended generator's `finally`, a weakref
# callback. Each writes its own file, so the set of files is what is compared. (The
# order in which several such finalisers run is not part of the comparison: see the
# README, pre-initialisation, known differences.)
import os
import sys
import weakref


def mark(name, open=open):
    # `open` bound here: by the time a finaliser runs, the module's globals (and its
    # view of the builtins) may be gone.
    with open(f"/out/{name}.txt", "w") as f:
        f.write(name + "\n")


class Loud:
    def __init__(self, name):
        self.name = name
        self.mark = mark

    def __del__(self):
        self.mark("del-" + self.name)


a = Loud("global")
b = Loud("cycle")
b.me = b
c = Loud("through-sys-path")
c.path = sys.path
sys.path.append(c)
d = Loud("class-attribute-of-a-start-up-class")
os._wrap_close.keep = d


def gen(mark=mark):
    try:
        yield 1
    finally:
        mark("generator-finally")


g = gen()
next(g)
e = Loud("weakref-target")
w = weakref.ref(e, lambda r, mark=mark: mark("weakref-callback"))
print("end of script")
