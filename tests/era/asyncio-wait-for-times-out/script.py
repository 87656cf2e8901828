# asyncio.wait_for on a sleep longer than its timeout: TimeoutError after the timeout on
# the guest's clock (0.05 s, not the sleep's 10 s), and a result when it is in time.
import asyncio
import time


async def main():
    t0 = time.monotonic()
    try:
        await asyncio.wait_for(asyncio.sleep(10), timeout=0.05)
        print("no timeout")
    except TimeoutError:
        waited = time.monotonic() - t0
        print("timed out", 0.05 <= waited < 0.5)
    print("in time", await asyncio.wait_for(asyncio.sleep(0.01, result="done"), timeout=1))


asyncio.run(main())
