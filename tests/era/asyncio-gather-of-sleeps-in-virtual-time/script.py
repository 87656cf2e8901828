# gather of timed sleeps: on the guest's own clock they overlap, so the whole takes about
# the longest sleep (0.03 s), not their sum (0.06 s), and within a small multiple of the
# sum. Each poll sleeps on real time and then advances the run's virtual clock by what it
# asked; before, the clock moved only per read and this gather took 22.5 s of wall time.
import asyncio
import time


async def nap(seconds, name):
    await asyncio.sleep(seconds)
    return name


async def main():
    t0, w0 = time.monotonic(), time.time()
    names = await asyncio.gather(nap(0.03, "a"), nap(0.01, "b"), nap(0.02, "c"))
    return names, time.monotonic() - t0, time.time() - w0


names, mono, wall = asyncio.run(main())
total = 0.03 + 0.01 + 0.02
print("names", names)
print("overlapped", 0.03 <= mono < 2 * total and 0.03 <= wall < 2 * total)
print("shorter than the sum", mono < total)
print(f"monotonic {mono:.4f} wall {wall:.4f}")
