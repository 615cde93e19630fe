"""warden serve under a validation attack, measured side by side in one run: a client calls
run_command(echo hi) in a loop over Streamable HTTP while other sessions fire validate_json
with schemas whose evaluation explodes (anyOf of two $refs, 40 deep) and ~150 KB inline
schemas of allOf patterns. Prints the echo client's p50/p99 without and with the attack and
their ratio (target: p99 within 2x), and how long after a call's deadline the server's CPU is
back to idle (target: under 1 s). Usage: bench/serve_attack.py path/to/warden"""

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

MAX_TIMEOUT_S = 3


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round((len(xs) - 1) * p / 100))]


def exploding(depth=40):
    defs = {f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}] * 2} for i in range(depth)}
    defs[f"d{depth}"] = {"type": "string"}
    return {"$defs": defs, "$ref": "#/$defs/d0"}


def many_patterns(n=900):
    return {"allOf": [{"pattern": f"^(a|aa)+(?=x{i})b{'c' * 120}$"} for i in range(n)]}


def cpu_ticks(pid):
    """CPU time (clock ticks) of `pid` and all its descendants."""
    total = 0
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            stat = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
            ppid, utime, stime = int(stat[1]), int(stat[11]), int(stat[12])
        except OSError:
            continue
        if int(p) == pid or ppid == pid or cmd_has(p, "__warden-validate-json"):
            total += utime + stime
    return total


def cmd_has(pid, needle):
    try:
        return needle.encode() in open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        return False


async def echo_loop(url, seconds):
    lat = []
    async with streamable_http_client(url) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            for _ in range(10):
                await s.call_tool("run_command", {"argv": ["echo", "hi"]})
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                t = time.perf_counter()
                await s.call_tool("run_command", {"argv": ["echo", "hi"]})
                lat.append((time.perf_counter() - t) * 1000)
    return lat


async def attacker(url, schema, data, rounds):
    async with streamable_http_client(url) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            for _ in range(rounds):
                await s.call_tool("validate_json", {"data": data, "schema": schema})


async def main(warden):
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    port = port.getsockname()[1]
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as cfg:
        cfg.write(f"max_concurrent_calls = 8\n[profiles.code]\ndefault_timeout_s = 1\n"
                  f"max_timeout_s = {MAX_TIMEOUT_S}\n")
    server = subprocess.Popen([warden, "serve", "--config", cfg.name, "--http",
                               f"127.0.0.1:{port}"], stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        quiet = await echo_loop(url, 8)
        attacks = [attacker(url, exploding(), 1, 2) for _ in range(4)]
        attacks += [attacker(url, many_patterns(), ["a" * 30] * 2500, 2) for _ in range(2)]
        results = await asyncio.gather(echo_loop(url, 8), *attacks)
        loud = results[0]
        # After the last attack call returned (its deadline passed), is the CPU idle?
        t0 = time.perf_counter()
        before = cpu_ticks(server.pid)
        idle_after = None
        while time.perf_counter() - t0 < 5:
            time.sleep(0.1)
            now = cpu_ticks(server.pid)
            if now - before <= 1:  # one tick (10 ms) in 100 ms: idle
                idle_after = time.perf_counter() - t0
                break
            before = now
    finally:
        server.terminate()
        server.wait()
    print(f"{'':40} {'calls':>6} {'p50 ms':>8} {'p99 ms':>8}")
    print(f"{'run_command echo, no attack':40} {len(quiet):6} {pct(quiet, 50):8.2f} {pct(quiet, 99):8.2f}")
    print(f"{'run_command echo, under attack':40} {len(loud):6} {pct(loud, 50):8.2f} {pct(loud, 99):8.2f}")
    print(f"p99 under attack / p99 without: {pct(loud, 99) / pct(quiet, 99):.2f}x (target <= 2x)")
    shown = f"{idle_after:.2f} s" if idle_after is not None else "not within 5 s"
    print(f"server CPU idle after the attack calls returned: {shown} (target < 1 s)")


asyncio.run(main(sys.argv[1]))
