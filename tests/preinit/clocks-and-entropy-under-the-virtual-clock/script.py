import time, random, os, uuid
print(time.time(), time.monotonic_ns(), time.perf_counter_ns(), time.process_time_ns())
print(time.localtime(), random.random(), os.urandom(8).hex(), uuid.uuid4())
time.sleep(0.01)
print(time.monotonic_ns())
