# asyncio with a loop of the program's own, passed as loop_factory: a selector loop
# without the self-pipe (only cross-thread and signal wake-ups use it; the guest has
# neither) runs coroutines, tasks, gather and queues on its poll selector. The runner's
# site directory gives the default loop the same (asyncio-run-default-loop-without-
# socketpair); this is the way for a run that skips `site` (`python -S`).
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
