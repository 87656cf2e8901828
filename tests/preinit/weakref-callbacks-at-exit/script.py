# Weak references with callbacks, alive when the script ends: a proxy (whose callback
# cannot be read from Python, so the boot takes CPython's own exit) and a ref to a
# cycle. What CPython's exit does with them (here the plain guest runs neither
# callback) must be what the pre-initialised guest does.
import weakref


class Target:
    pass


def note(name, open=open):
    def callback(ref):
        with open(f"/out/{name}.txt", "w") as f:
            f.write(name + "\n")
    return callback


t = Target()
u = Target()
u.me = u
p = weakref.proxy(t, note("proxy-callback"))
r = weakref.ref(u, note("ref-callback"))
keep = [p, r]
print("end")
