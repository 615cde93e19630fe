#!/usr/bin/env bash
# The same nmap connect scan of 1,000 ports on the recon lab's target (fixtures/recon/lab.sh:
# a network namespace of this script's own, nothing routed anywhere else), side by side in one
# run: direct, through `warden run --target` (the sandbox and its relaying network), and as an
# `nmap_scan` call through `warden serve --profile recon` (the official MCP Python SDK; calls
# 50 ms apart, so the pool has the next call's sandbox ready). Prints
# medians and the ratios to direct (target: <= 1.2x). Then the same with the target's answers
# slowed (LAB_SLOW=1: a 1 Mbit/s token bucket on its side), where connects are still in
# progress when they return and the jail parks them. Needs ./setup.sh (nmap, the SDK venv).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-20}
PORTS=${PORTS:-1-1000}
command -v hyperfine >/dev/null || { apt-get update -qq && apt-get install -y -qq hyperfine >/dev/null; }
cargo build --release -q
export W=$PWD/target/release/warden RUNS PORTS
export PY=${WARDEN_REAL_SERVERS:-/opt/warden-real-servers}/sdk/bin/python
for slow in 0 1; do
LAB_SLOW=$slow unshare --net --mount fixtures/recon/lab.sh bash -c '
set -euo pipefail
out=$(mktemp -d)
trap "rm -rf $out" EXIT
scan="nmap -Pn -n -sT -p $PORTS -oX /dev/null $LAB_V4"
hyperfine -N -w 3 -r "$RUNS" --export-json "$out/h.json" \
    -n direct "$scan" \
    -n "warden run" "$W run --trace /dev/null --target $LAB_V4 -- $scan" >/dev/null
printf "[recon]\ntargets = [\"%s\"]\n" "$LAB_V4" > "$out/recon.toml"
"$PY" - "$W" "$out/recon.toml" "$LAB_V4" "$PORTS" "$RUNS" > "$out/mcp.json" <<PY
import asyncio, json, statistics, sys, time
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
w, cfg, target, ports, runs = sys.argv[1:6]
async def main():
    p = StdioServerParameters(command=w, args=["serve", "--profile", "recon", "--config", cfg])
    async with stdio_client(p) as (r, wr):
        async with ClientSession(r, wr) as s:
            await s.initialize()
            times, opened = [], None
            for i in range(int(runs) + 3):
                await asyncio.sleep(0.05)  # calls apart, as an agent makes them (not timed)
                t = time.perf_counter()
                res = await s.call_tool("nmap_scan", {"target": target, "ports": ports})
                dt = time.perf_counter() - t
                sc = res.structured_content
                assert sc["status"] == "completed", sc
                opened = [f["port"] for f in sc["findings"] if f["state"] == "open"]
                if i >= 3:
                    times.append(dt)
    print(json.dumps({"median": statistics.median(times), "open": opened}))
asyncio.run(main())
PY
/usr/bin/python3 - "$out" <<PY
import json, statistics, sys
out = sys.argv[1]
res = {r["command"]: statistics.median(r["times"]) * 1000 for r in json.load(open(f"{out}/h.json"))["results"]}
mcp = json.load(open(f"{out}/mcp.json"))
res["nmap_scan (MCP)"] = mcp["median"] * 1000
base = res["direct"]
slow = " (answers slowed)" if "$LAB_SLOW" == "1" else ""
print(f"nmap -sT -p $PORTS on the lab target{slow}, median of $RUNS (open ports seen over MCP: {mcp['"'"'open'"'"']})")
for name, ms in res.items():
    print(f"{name:<16} {ms:8.1f} ms  x{ms / base:.2f}")
PY
'
done
