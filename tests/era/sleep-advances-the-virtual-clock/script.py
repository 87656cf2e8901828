# time.sleep really waits and the run's virtual clock moves by the time asked: both
# time.monotonic() and time.time() advance by the slept amount (plus a few 3 us steps of
# the reads), not by the ~0 s of a clock that only moves per read.
import time

for seconds in (0.25, 0.01):
    m0, w0 = time.monotonic(), time.time()
    time.sleep(seconds)
    dm, dw = time.monotonic() - m0, time.time() - w0
    print(seconds, "monotonic", seconds <= dm < seconds + 0.001, "wall", seconds <= dw < seconds + 0.001)
