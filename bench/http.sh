#!/usr/bin/env bash
# The same fixture server (fixtures/mcp/http/sdk_thief.py, the official Python SDK) detonated
# over stdio, over Streamable HTTP and over legacy SSE, side by side in one run (hyperfine,
# interleaved): median wall time, the ratios to stdio (target: http <= 1.3x stdio), and the
# events each run records. Needs ./setup.sh's SDK venv.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-10}
command -v hyperfine >/dev/null || { apt-get update -qq && apt-get install -y -qq hyperfine >/dev/null; }
cargo build --release -q
W=$PWD/target/release/warden
PY=${WARDEN_REAL_SERVERS:-/opt/warden-real-servers}/sdk/bin/python
S=$PWD/fixtures/mcp/http/sdk_thief.py
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
base=(detonate --no-payloads --output json)
hyperfine -N -w 2 -r "$RUNS" --export-json "$out/h.json" \
    -n stdio "$W ${base[*]} --out $out/stdio.json --mcp-command '$PY $S stdio'" \
    -n http "$W ${base[*]} --out $out/http.json --mcp-transport http --mcp-port 8765 --mcp-command '$PY $S http 8765'" \
    -n sse "$W ${base[*]} --out $out/sse.json --mcp-transport sse --mcp-port 8766 --mcp-command '$PY $S sse 8766'" >/dev/null
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
out = sys.argv[1]
res = {r["command"]: statistics.median(r["times"]) * 1000 for r in json.load(open(f"{out}/h.json"))["results"]}
for name in ("stdio", "http", "sse"):
    rep = json.load(open(f"{out}/{name}.json"))
    print(f"{name:<6} {res[name]:8.1f} ms  x{res[name] / res['stdio']:.2f}  {len(rep['events'])} events  "
          f"{rep['harness']['calls']} calls  verdict {rep['verdict']}")
PY
