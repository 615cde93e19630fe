#!/usr/bin/env bash
# Warden's detonation chamber against nyuwaymcpsandbox 1.0.2 (PyPI, `--mcp-transport subprocess`,
# the mode that runs without Docker), side by side on the same real servers (mcp-server-time,
# mcp-server-git on a throwaway repository): wall time, peak memory (largest process, from
# GNU time) and what each reports. Warden runs twice: the full session (benign calls plus every
# adversarial payload) and `--no-payloads` (one benign call per tool, nyuway's workload). Both run under `unshare --net`. Needs root, python3-venv, npm.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
fixtures/real/install.sh >/dev/null
bench=${WARDEN_BENCH_DIR:-/opt/warden-bench}
mkdir -p "$bench"
[ -x "$bench/nyu/bin/python" ] || /usr/bin/python3 -m venv "$bench/nyu"
"$bench/nyu/bin/pip" install --quiet --disable-pip-version-check nyuwaymcpsandbox==1.0.2
command -v /usr/bin/time >/dev/null || { apt-get update -qq && apt-get install -y -qq time >/dev/null; }
cargo build --release -q
W=$PWD/target/release/warden
servers=/opt/warden-real-servers
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
repo=$out/repo
git init -q "$repo" && echo hello >"$repo/a.txt" && git -C "$repo" add a.txt &&
    git -C "$repo" -c user.name=b -c user.email=b@example.invalid commit -qm init

run() { # name tool round command...
    local name=$1 tool=$2 round=$3
    shift 3
    /usr/bin/time -f '%e %M' -o "$out/$name-$tool-$round.time" unshare --net "$@" \
        >"$out/$name-$tool-$round.json" 2>/dev/null || true
}
for round in $(seq 1 "$ROUNDS"); do
    run time warden "$round" "$W" detonate --output json --mcp-command "$servers/py/bin/mcp-server-time"
    (cd "$out" && run time nyuway "$round" "$bench/nyu/bin/nyuwaymcpsandbox" detonate \
        --mcp-transport subprocess --output json --mcp-command "$servers/py/bin/mcp-server-time" .)
    run git warden "$round" "$W" detonate --output json --workspace "$repo" \
        --mcp-command "$servers/py/bin/mcp-server-git --repository /workspace"
    run git warden-benign "$round" "$W" detonate --output json --workspace "$repo" --no-payloads \
        --mcp-command "$servers/py/bin/mcp-server-git --repository /workspace"
    run time warden-benign "$round" "$W" detonate --output json --no-payloads \
        --mcp-command "$servers/py/bin/mcp-server-time"
    (cd "$out" && run git nyuway "$round" "$bench/nyu/bin/nyuwaymcpsandbox" detonate \
        --mcp-transport subprocess --output json --mcp-command "$servers/py/bin/mcp-server-git --repository $repo" .)
done

python3 - "$out" "$ROUNDS" <<'PY'
import json, pathlib, statistics, sys
out, rounds = pathlib.Path(sys.argv[1]), int(sys.argv[2])
print(f"{'server':6} {'tool':13} {'wall s':>7} {'peak MB':>8} {'findings':>9} {'events':>7} {'calls':>6}  verdict")
for name in ["time", "git"]:
    walls = {}
    for tool in ["warden", "warden-benign", "nyuway"]:
        w, m = [], []
        for r in range(1, rounds + 1):
            t = (out / f"{name}-{tool}-{r}.time").read_text().split()
            w.append(float(t[-2])); m.append(int(t[-1]) / 1024)
        rep = json.loads((out / f"{name}-{tool}-1.json").read_text() or "{}")
        if tool.startswith("warden"):
            f, ev, calls, verdict = len(rep.get("findings", [])), len(rep.get("events", [])), rep.get("harness", {}).get("calls"), rep.get("verdict")
        else:
            f = len(rep.get("findings", [])); ev = rep.get("timeline", {}).get("event_count")
            calls = sum(1 for e in rep.get("timeline", {}).get("events", []) if e.get("type") == "mcp.tool_invocation")
            verdict = rep.get("verdict", {}).get("tier")
        walls[tool] = statistics.median(w)
        print(f"{name:6} {tool:13} {statistics.median(w):7.2f} {max(m):8.1f} {f:9} {ev!s:>7} {calls!s:>6}  {verdict}")
    print(f"{name:6} warden/nyuway wall time = {walls['warden'] / walls['nyuway']:.2f}x "
          f"(benign calls only: {walls['warden-benign'] / walls['nyuway']:.2f}x)")
PY
