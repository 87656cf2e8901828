# asyncio.run(main()), unmodified user code: tasks, a producer/consumer queue with timed
# sleeps between items, and cancellation, on the default loop.
import asyncio


async def producer(q, items):
    for item in items:
        await asyncio.sleep(0.005)
        await q.put(item)
    await q.put(None)


async def consumer(q, out):
    while (item := await q.get()) is not None:
        out.append(item * 10)
        q.task_done()


async def forever():
    await asyncio.sleep(3600)


async def main():
    q = asyncio.Queue(maxsize=2)
    out = []
    tasks = [asyncio.create_task(producer(q, [1, 2, 3, 4])), asyncio.create_task(consumer(q, out))]
    await asyncio.gather(*tasks)
    stuck = asyncio.create_task(forever())
    await asyncio.sleep(0)
    stuck.cancel()
    try:
        await stuck
    except asyncio.CancelledError:
        cancelled = True
    return out, cancelled


print("result", asyncio.run(main()))
