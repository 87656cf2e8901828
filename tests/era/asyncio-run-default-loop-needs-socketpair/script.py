# What is not done: asyncio.run's default loop makes a self-pipe with socket.socketpair,
# which the WASI build emulates with a TCP listener: `OSError: [Errno 58] Not supported`
# (WASI has no os.pipe either). When this fixture fails, asyncio works: update the README.
import asyncio


async def main():
    await asyncio.sleep(0)
    return "ran"


try:
    print(asyncio.run(main()))
except OSError as e:
    print("default loop refused:", e.errno, e.strerror)
