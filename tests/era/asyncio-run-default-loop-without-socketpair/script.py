# asyncio.run with its default loop, unmodified: WASI still has no socket.socketpair
# (the WASI build emulates it with a TCP listener: `OSError: [Errno 58] Not supported`)
# and no os.pipe, which the default loop's self-pipe needed. The runner's site directory
# (`_runner_asyncio`, read-only in site-packages) gives the loop no self-pipe, which only
# cross-thread and signal wake-ups use; the guest has neither. See README "Real code".
import asyncio
import socket

try:
    socket.socketpair()
    print("socketpair works")
except OSError as e:
    print("socketpair refused:", e.errno, e.strerror)


async def main():
    await asyncio.sleep(0)
    return "ran"


print(asyncio.run(main()))
loop = asyncio.new_event_loop()
print("self-pipe:", loop._ssock, loop._csock)
loop.close()
print("closed:", loop.is_closed())
