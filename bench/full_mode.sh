#!/usr/bin/env bash
# Full mode with a real small model: SmolLM2-135M on the CPU (fixtures/llm/install.sh puts it
# in /opt/warden-real-servers/llm) behind fixtures/llm/smollm_server.mjs, driving two fixture
# servers. Prints, per server, the model's calls (and invalid ones), tokens, the phase's wall
# time, the whole detonation's time and the findings only the model's calls triggered.
# Everything runs in a network namespace of its own (loopback only). A benchmark, not a test.
# Usage: bench/full_mode.sh [path/to/warden] [calls per server, default 12]
set -euo pipefail
cd "$(dirname "$0")/.."
warden=$(realpath "${1:-target/release/warden}")
budget=${2:-12}
[ -x "$warden" ] || cargo build --release -q
llm=/opt/warden-real-servers/llm
[ -s "$llm/SmolLM2-135M-Instruct.Q4_1.gguf" ] || { echo "run fixtures/llm/install.sh first" >&2; exit 2; }
exec unshare --net bash -s "$warden" "$budget" "$llm" <<'INNER'
set -euo pipefail
warden=$1 budget=$2 llm=$3
ip link set lo up
tmp=$(mktemp -d)
node fixtures/llm/smollm_server.mjs "$llm" "$tmp/port" 2>"$tmp/model.log" &
model=$!
trap 'kill $model 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 600); do [ -f "$tmp/port" ] && break; sleep 0.05; done
printf '%-20s %7s %8s %8s %9s %9s  %s\n' server calls invalid tokens llm_ms total_ms "llm-only findings"
for server in notes.py injecting.py; do
    "$warden" detonate --mode full --llm openai:smollm2-135m \
        --llm-url "http://127.0.0.1:$(cat "$tmp/port")" --llm-budget "$budget" \
        --output json --mcp-command "/usr/bin/python3 fixtures/mcp/servers/$server" \
        >"$tmp/report.json" 2>/dev/null || true
    /usr/bin/python3 - "$server" "$tmp/report.json" <<'PY'
import json, sys
server, path = sys.argv[1:3]
r = json.load(open(path))
l = r.get("llm") or {}
only = sorted({"%s[%s]" % (f["rule"], f.get("tool", "")) for f in r["findings"] if f.get("llm_only")})
print("%-20s %7s %8s %8s %9s %9s  %s" % (server, l.get("calls"), l.get("invalid_calls"),
      (l.get("prompt_tokens") or 0) + (l.get("completion_tokens") or 0), l.get("wall_ms"),
      r.get("duration_ms"), ", ".join(only) or "-"))
PY
done
INNER
