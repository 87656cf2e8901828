# An asyncio sleep past the wall-clock limit: the poll waits on real time, so the limit
# stops the run (the virtual clock advancing by what a sleep asks does not shorten it).
import asyncio


async def main():
    print("sleeping", flush=True)
    await asyncio.sleep(30)
    print("woke up")


asyncio.run(main())
