import asyncio
async def main():
    q = asyncio.Queue()
    async def worker(n):
        await asyncio.sleep(0.001 * n)
        await q.put(n)
    await asyncio.gather(*(worker(n) for n in range(3)))
    return [q.get_nowait() for _ in range(3)]
print(asyncio.run(main()))
