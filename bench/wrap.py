"""Per-call latency of a trivial tool, the same server unwrapped and under `warden wrap`, side
by side in one run, through the official MCP Python SDK.

Usage: wrap.py WARDEN CALLS -- SERVER_COMMAND...

Prints p50 and p90 per call for each, the difference (what wrap adds) and the ratio.
"""

import asyncio
import statistics
import sys
import tempfile
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def timed(command, args, calls):
    params = StdioServerParameters(command=command, args=args)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for _ in range(5):  # warm up
                await session.call_tool("echo", {"text": "warm"})
            out = []
            for i in range(calls):
                t = time.perf_counter()
                await session.call_tool("echo", {"text": "x%d" % i})
                out.append((time.perf_counter() - t) * 1000)
            return out


def quantiles(xs):
    q = statistics.quantiles(xs, n=10)
    return statistics.median(xs), q[8]


async def main():
    warden, calls = sys.argv[1], int(sys.argv[2])
    server = sys.argv[sys.argv.index("--") + 1:]
    with tempfile.TemporaryDirectory() as d:
        log = d + "/wrap.jsonl"
        plain = await timed(server[0], server[1:], calls)
        wrapped = await timed(warden, ["wrap", "--log", log, "--on", "high=alert", "--"] + server, calls)
    p50, p90 = quantiles(plain)
    w50, w90 = quantiles(wrapped)
    print("calls each: %d" % calls)
    print("unwrapped   p50 %.2f ms  p90 %.2f ms" % (p50, p90))
    print("wrapped     p50 %.2f ms  p90 %.2f ms" % (w50, w90))
    print("added by wrap: p50 %.2f ms (target <= 2 ms), p90 %.2f ms; ratio p50 %.2fx" % (w50 - p50, w90 - p90, w50 / p50))


asyncio.run(main())
