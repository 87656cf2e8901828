# asyncio in the 3.12 guest: the default loop's self-pipe needs socket.socketpair, which
# WASI lacks (see asyncio-run-default-loop-needs-socketpair). A selector loop without
# the self-pipe (only cross-thread and signal wake-ups use it; the guest has neither)
# runs coroutines, tasks, gather and queues on its poll selector. Timed sleeps are left
# out: under the run's virtual clock each poll sleeps in real time while the clock only
# moves per read (README "Real code").
import asyncio


class Loop(asyncio.SelectorEventLoop):
    def _make_self_pipe(self):
        self._ssock = self._csock = None

    def _close_self_pipe(self):
        pass

    def _write_to_self(self):
        pass


async def work(name, turns, log):
    for _ in range(turns):
        await asyncio.sleep(0)
    log.append(name)
    return name * 2


async def main():
    log = []
    results = await asyncio.gather(work("a", 3, log), work("b", 1, log), work("c", 2, log))
    q = asyncio.Queue()
    producer = asyncio.create_task(q.put(41))
    got = await q.get() + 1
    await producer
    return results, log, got


print(asyncio.run(main(), loop_factory=Loop))
