"""warden serve, measured by a real MCP client (the official Python SDK) over stdio, with the warm
pool on ([pool] size = 2, the default) and off (size = 0) side by side in one run, rounds
interleaved: run_command(argv=[echo, hi]) p50/p99 and calls/s for one client calling back to
back, one client pausing 20 ms between calls (an agent thinking), and 8 clients at once (8 stdio
sessions, each with its own server, calling back to back); `warden run -- echo hi` and the
MCP floor (env_get, no sandbox) for scale. Usage: bench/serve.py path/to/warden"""

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROUNDS = int(os.environ.get("ROUNDS", "2"))
N_SEQ, N_PACED, N_EACH, CLIENTS, PAUSE = 200, 100, 50, 8, 0.020
ECHO = {"argv": ["echo", "hi"]}


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round((len(xs) - 1) * p / 100))]


def config(size):
    f = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
    f.write(f"max_concurrent_calls = 8\n[pool]\nsize = {size}\nmax_waiting = 16\n")
    f.close()
    return f.name


async def session(warden, cfg, work):
    params = StdioServerParameters(command=warden, args=["serve", "--config", cfg])
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            for _ in range(10):  # warm-up: the server's first calls, the pool's first fill
                await s.call_tool("run_command", ECHO)
            await asyncio.sleep(0.3)
            return await work(s)


async def timed(s, n, pause=0.0, tool="run_command", args=ECHO):
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        res = await s.call_tool(tool, args)
        lat.append((time.perf_counter() - t) * 1000)
        assert not res.is_error, res
        if tool == "run_command":
            assert res.structured_content["stdout"] == "hi\n", res
        if pause:
            await asyncio.sleep(pause)
    return lat


async def measure(warden, cfg, rows, name):
    async def one(s):
        t = time.perf_counter()
        lat = await timed(s, N_SEQ)
        return lat, N_SEQ / (time.perf_counter() - t)

    lat, rate = await session(warden, cfg, one)
    rows.setdefault((name, "1 client"), ([], []))[0].extend(lat)
    rows[(name, "1 client")][1].append(rate)

    lat = await session(warden, cfg, lambda s: timed(s, N_PACED, PAUSE))
    rows.setdefault((name, "1 client, 20 ms pauses"), ([], []))[0].extend(lat)

    async def spans(s):
        t = time.perf_counter()
        return await timed(s, N_EACH), t, time.perf_counter()

    done = await asyncio.gather(*(session(warden, cfg, spans) for _ in range(CLIENTS)))
    # Calls per second while all clients were calling (their servers started and warmed up).
    rate = CLIENTS * N_EACH / (max(d[2] for d in done) - min(d[1] for d in done))
    entry = rows.setdefault((name, f"{CLIENTS} clients at once"), ([], []))
    entry[0].extend(x for d in done for x in d[0])
    entry[1].append(rate)


async def main(warden):
    off, on = config(0), config(2)
    rows = {}
    for _ in range(ROUNDS):
        await measure(warden, off, rows, "pool off")
        await measure(warden, on, rows, "pool on")
    floor = await session(warden, on, lambda s: timed(s, N_SEQ, tool="env_get", args={"names": ["PATH"]}))
    run = []
    for i in range(20 + N_SEQ):
        t = time.perf_counter()
        subprocess.run([warden, "run", "--", "echo", "hi"], capture_output=True, check=True)
        if i >= 20:
            run.append((time.perf_counter() - t) * 1000)

    print(f"{'run_command echo hi over stdio':32} {'pool':5} {'p50 ms':>7} {'p99 ms':>7} {'calls/s':>8}")
    for (name, load), (lat, rates) in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        rate = f"{statistics.mean(rates):8.0f}" if rates else f"{'-':>8}"
        print(f"{load:32} {name[5:]:5} {pct(lat, 50):7.2f} {pct(lat, 99):7.2f} {rate}")
    print(f"{'env_get (MCP floor, no sandbox)':32} {'':5} {pct(floor, 50):7.2f} {pct(floor, 99):7.2f}")
    print(f"{'warden run -- echo hi (process)':32} {'':5} {pct(run, 50):7.2f} {pct(run, 99):7.2f}")
    print()
    for load in sorted({load for _, load in rows}):
        a, b = rows[("pool off", load)][0], rows[("pool on", load)][0]
        print(f"pool on / off, {load}: p50 {pct(b, 50) / pct(a, 50):.2f}x, p99 {pct(b, 99) / pct(a, 99):.2f}x")
    os.unlink(off)
    os.unlink(on)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
