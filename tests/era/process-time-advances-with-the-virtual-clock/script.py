"""time.process_time() and time.thread_time() advance like the virtual clock: by a few
microseconds per read, never backwards (cpython-3.12 jumped 60 s at every read)."""
import time

for name in ("process_time", "thread_time"):
    clock = getattr(time, name)
    reads = [clock() for _ in range(50)]
    steps = [b - a for a, b in zip(reads, reads[1:])]
    print(name, "monotonic:", all(s >= 0 for s in steps))
    print(name, "advances:", reads[-1] > reads[0])
    print(name, "sensible:", max(steps) < 0.001, f"{reads[-1] - reads[0]:.6f}")
    ns = getattr(time, name + "_ns")
    print(name + "_ns", "agrees:", abs(ns() / 1e9 - clock()) < 0.001)
start = time.process_time()
total = sum(i * i for i in range(100_000))
print("work measured under 1 s:", 0 <= time.process_time() - start < 1.0)
