#!/usr/bin/env bash
# What the network boundary costs a detonation (issue #32): mcp-server-time (PyPI) and
# @modelcontextprotocol/server-everything (npm), each detonated with the boundary (packet tap,
# TLS opened) and with `--no-boundary` (the sink's first bytes only), in interleaved rounds;
# prints the median wall time of each, the ratio (target: at most 1.15x), and the events,
# flows and findings of one run of each, so a faster run that saw less shows as such.
# Needs root and ./setup.sh's real servers (fixtures/real/install.sh). Both run under
# `unshare --net`.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
fixtures/real/install.sh >/dev/null
cargo build --release -q
W=$PWD/target/release/warden
servers=${WARDEN_REAL_SERVERS:-/opt/warden-real-servers}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
declare -A cmd=(
    [time]="$servers/py/bin/mcp-server-time"
    [everything]="$servers/node/node_modules/.bin/mcp-server-everything"
)
for round in $(seq 1 "$ROUNDS"); do
    for name in time everything; do
        for mode in boundary sink; do
            flag=()
            [ "$mode" = sink ] && flag=(--no-boundary)
            start=$(date +%s.%N)
            unshare --net "$W" detonate --output json "${flag[@]}" --mcp-command "${cmd[$name]}" \
                >"$out/$name-$mode-$round.json" 2>/dev/null || true
            end=$(date +%s.%N)
            echo "$start $end" >"$out/$name-$mode-$round.time"
        done
    done
done
python3 - "$out" "$ROUNDS" <<'PY'
import json, pathlib, statistics, sys
out, rounds = pathlib.Path(sys.argv[1]), int(sys.argv[2])
print(f"{'server':11} {'mode':9} {'wall s':>7} {'events':>7} {'flows':>6} {'findings':>9}  verdict")
for name in ["time", "everything"]:
    med = {}
    for mode in ["boundary", "sink"]:
        walls = []
        for r in range(1, rounds + 1):
            start, end = map(float, (out / f"{name}-{mode}-{r}.time").read_text().split())
            walls.append(end - start)
        med[mode] = statistics.median(walls)
        rep = json.loads((out / f"{name}-{mode}-1.json").read_text() or "{}")
        events = rep.get("events", [])
        flows = sum(1 for e in events if e.get("kind") == "net.flow")
        print(f"{name:11} {mode:9} {med[mode]:7.2f} {len(events):7} {flows:6} "
              f"{len(rep.get('findings', [])):9}  {rep.get('verdict')}")
    print(f"{name:11} boundary/sink wall time = {med['boundary'] / med['sink']:.3f}x (target <= 1.15x)")
PY
