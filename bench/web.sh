#!/usr/bin/env bash
# The web tools' cost, side by side in one run, in the web lab (fixtures/web/lab.sh: a site in a
# network namespace of this script's own, nothing routed anywhere else):
#   fetch:  `curl` of a local page   vs  `web_fetch` of it through `warden serve` (the official
#           MCP Python SDK; each call a sandbox of its own with the egress network and the
#           worker), with the warm pool off and on (on: a sandbox prepared before the call;
#           calls 50 ms apart, as an agent's are, so the replacement is ready in time)
#   browse: a bare headless Chromium loading the page and printing its DOM (`--dump-dom`)  vs
#           `web_browse` of it (Chromium in the sandbox, driven over the DevTools pipe)
# Prints p50s and ratios; targets: fetch <= 1.5x curl + 5 ms, browse <= 1.3x bare Chromium.
# Needs ./setup.sh (the SDK venv, chromium-headless-shell) and hyperfine (installed if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-30}
command -v hyperfine >/dev/null || { apt-get update -qq && apt-get install -y -qq hyperfine >/dev/null; }
cargo build --release -q
export W=$PWD/target/release/warden RUNS
export PY=${WARDEN_REAL_SERVERS:-/opt/warden-real-servers}/sdk/bin/python
export CHROMIUM=${CHROMIUM:-/usr/lib/chromium/chromium-headless-shell}
unshare --net --mount fixtures/web/lab.sh bash -c '
set -euo pipefail
out=$(mktemp -d)
trap "rm -rf $out" EXIT
url=http://svc.test:8080/page.html
hyperfine -N -w 3 -r "$RUNS" --export-json "$out/h.json" \
    -n curl "curl -s -o /dev/null $url" \
    -n chromium "$CHROMIUM --headless --no-sandbox --no-zygote --disable-gpu --no-first-run --user-data-dir=$out/profile --dump-dom $url" >/dev/null
printf "[web]\nallow = [\"svc.test:8080\"]\n" > "$out/web.toml"
printf "[web]\nallow = [\"svc.test:8080\"]\n[pool]\nsize = 0\n" > "$out/cold.toml"
cat > "$out/client.py" <<PY
import asyncio, json, statistics, sys, time
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
w, cfg, url, runs, tools = sys.argv[1:6]
async def main():
    p = StdioServerParameters(command=w, args=["serve", "--profile", "web", "--config", cfg])
    out = {}
    async with stdio_client(p) as (r, wr):
        async with ClientSession(r, wr) as s:
            await s.initialize()
            calls = {"fetch": ("web_fetch", {"url": url}), "browse": ("web_browse", {"url": url, "wait_ms": 0})}
            for tool, args in [calls[t] for t in tools.split(",")]:
                times = []
                for i in range(int(runs) + 3):
                    if tool == "web_fetch":
                        await asyncio.sleep(0.05)
                    t = time.perf_counter()
                    res = await s.call_tool(tool, args)
                    dt = time.perf_counter() - t
                    assert not res.is_error, res.content
                    if i >= 3:
                        times.append(dt)
                out[tool] = statistics.median(times)
    print(json.dumps(out))
asyncio.run(main())
PY
"$PY" "$out/client.py" "$W" "$out/cold.toml" "$url" "$RUNS" fetch > "$out/cold.json"
"$PY" "$out/client.py" "$W" "$out/web.toml" "$url" "$RUNS" fetch,browse > "$out/mcp.json"
/usr/bin/python3 - "$out" <<PY
import json, statistics, sys
out = sys.argv[1]
h = {r["command"]: statistics.median(r["times"]) * 1000 for r in json.load(open(f"{out}/h.json"))["results"]}
m = {k: v * 1000 for k, v in json.load(open(f"{out}/mcp.json")).items()}
cold = json.load(open(f"{out}/cold.json"))["web_fetch"] * 1000
print(f"p50 of $RUNS, a local page (http://svc.test:8080/page.html)")
print(f"curl                 {h['"'"'curl'"'"']:8.1f} ms")
print(f"web_fetch, pool off  {cold:8.1f} ms  x{cold / h['"'"'curl'"'"']:.2f}")
print(f"web_fetch, pool on   {m['"'"'web_fetch'"'"']:8.1f} ms  x{m['"'"'web_fetch'"'"'] / h['"'"'curl'"'"']:.2f}  (target <= 1.5x curl + 5 ms = {1.5 * h['"'"'curl'"'"'] + 5:.1f} ms)")
print(f"bare Chromium        {h['"'"'chromium'"'"']:8.1f} ms")
print(f"web_browse (MCP)     {m['"'"'web_browse'"'"']:8.1f} ms  x{m['"'"'web_browse'"'"'] / h['"'"'chromium'"'"']:.2f}  (target <= 1.3x)")
PY
'
