"""warden serve, measured by a real MCP client (the official Python SDK) over stdio, side by side
with `warden run -- echo hi` in the same run: round-trip latency of run_command(echo hi) p50/p95,
throughput with 8 concurrent calls. Usage: bench/serve.py path/to/warden"""

import asyncio
import statistics
import subprocess
import sys
import tempfile
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round((len(xs) - 1) * p / 100))]


async def main(warden):
    n_seq, n_conc, conc = 200, 400, 8
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as cfg:
        cfg.write(f"max_concurrent_calls = {conc}\n")
    params = StdioServerParameters(command=warden, args=["serve", "--config", cfg.name])
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            args = {"argv": ["echo", "hi"]}
            for _ in range(20):
                await s.call_tool("run_command", args)
            lat = []
            for _ in range(n_seq):
                t = time.perf_counter()
                res = await s.call_tool("run_command", args)
                lat.append((time.perf_counter() - t) * 1000)
                assert res.structured_content["stdout"] == "hi\n"
            sem = asyncio.Semaphore(conc)

            async def one():
                async with sem:
                    await s.call_tool("run_command", args)

            t = time.perf_counter()
            await asyncio.gather(*(one() for _ in range(n_conc)))
            conc_s = time.perf_counter() - t
    run = []
    for _ in range(20):
        subprocess.run([warden, "run", "--", "echo", "hi"], capture_output=True, check=True)
    for _ in range(n_seq):
        t = time.perf_counter()
        subprocess.run([warden, "run", "--", "echo", "hi"], capture_output=True, check=True)
        run.append((time.perf_counter() - t) * 1000)
    print(f"{'':38} {'p50 ms':>8} {'p95 ms':>8}")
    print(f"{'warden run -- echo hi (process)':38} {pct(run, 50):8.2f} {pct(run, 95):8.2f}")
    print(f"{'run_command echo hi over stdio (MCP)':38} {pct(lat, 50):8.2f} {pct(lat, 95):8.2f}")
    print(f"MCP overhead over warden run (p50): {pct(lat, 50) - pct(run, 50):+.2f} ms "
          f"({pct(lat, 50) / pct(run, 50):.2f}x)")
    print(f"throughput, {conc} concurrent calls: {n_conc / conc_s:.0f} calls/s "
          f"({n_conc} calls in {conc_s:.2f} s; sequential: {1000 / statistics.mean(lat):.0f} calls/s)")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
