#!/usr/bin/env bash
# What the dwell (issue #35) costs and finds: detonation wall time of mcp-server-time,
# @modelcontextprotocol/server-everything and the waiting fixtures, side by side in one run,
# rounds interleaved: an older warden (OLD, before the virtual clock and the dwell; optional),
# this one with `--dwell 0`, and this one on its defaults (ten virtual minutes). Prints each
# server's median wall seconds and verdict per column and the ratios new/old and dwell/no-dwell.
# Needs root, the real servers (fixtures/real/install.sh) and `unshare`.
#
# Usage: bench/dwell.sh [--rounds N] [--old OLD_WARDEN] [path/to/warden]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3
old=
while [ $# -gt 0 ]; do
    case $1 in
        --rounds) rounds=$2; shift 2 ;;
        --old) old=$2; shift 2 ;;
        *) break ;;
    esac
done
warden=${1:-target/release/warden}
[ -x "$warden" ] || cargo build --release -q
fixtures/real/install.sh >/dev/null
servers=${WARDEN_REAL_SERVERS:-/opt/warden-real-servers}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
targets=(
    "time|--mcp-command $servers/py/bin/mcp-server-time"
    "everything|--mcp-command $servers/node/node_modules/.bin/mcp-server-everything"
    "sleeper.py|fixtures/mcp/servers/sleeper.py"
    "sleeper.js|fixtures/mcp/servers/sleeper.js"
    "lingerer.py|fixtures/mcp/servers/lingerer.py"
    "thief.py|fixtures/mcp/servers/thief.py"
    "benign_echo.py|fixtures/mcp/servers/benign_echo.py"
)
columns=(new-dwell new-nodwell)
[ -n "$old" ] && columns=(old "${columns[@]}")
one() { # column name round args...
    local column=$1 name=$2 round=$3 bin=$warden t0 t1
    shift 3
    local extra=()
    case $column in
        old) bin=$old ;;
        new-nodwell) extra=(--dwell 0) ;;
    esac
    t0=$(date +%s.%N)
    unshare --net "$bin" detonate --allow-inconclusive --output json "${extra[@]}" "$@" \
        >"$out/$column-$name-$round.json" 2>/dev/null || true
    t1=$(date +%s.%N)
    python3 -c "print(round($t1 - $t0, 3))" >"$out/$column-$name-$round.secs"
}
for round in $(seq 1 "$rounds"); do
    for entry in "${targets[@]}"; do
        name=${entry%%|*}
        read -r -a args <<<"${entry#*|}"
        # The order of the columns turns each round, so none always runs first.
        n=${#columns[@]}
        for i in $(seq 0 $((n - 1))); do
            c=${columns[$(((i + round) % n))]}
            one "$c" "$name" "$round" "${args[@]}"
        done
    done
done
python3 - "$out" "$rounds" "${columns[@]}" <<'PY'
import json, pathlib, statistics, sys
out, rounds, columns = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
names = sorted({p.name.split("-", 2)[2].rsplit("-", 1)[0] for p in out.glob("new-dwell-*.secs")})
head = f"{'server':16}" + "".join(f"{c:>24}" for c in columns)
print(head + f"{'dwell/nodwell':>15}" + (f"{'dwell/old':>11}" if "old" in columns else ""))
totals = {c: 0.0 for c in columns}
for name in names:
    row, med = f"{name:16}", {}
    for c in columns:
        secs = [float((out / f"{c}-{name}-{r}.secs").read_text()) for r in range(1, rounds + 1)]
        med[c] = statistics.median(secs)
        totals[c] += med[c]
        try:
            verdict = json.loads((out / f"{c}-{name}-1.json").read_text()).get("verdict", "?")
        except ValueError:
            verdict = "(no report)"
        row += f"{med[c]:>10.2f} s {verdict:>11}"
    row += f"{med['new-dwell'] / med['new-nodwell']:>15.2f}"
    if "old" in columns:
        row += f"{med['new-dwell'] / med['old']:>11.2f}"
    print(row)
line = f"{'total':16}" + "".join(f"{totals[c]:>10.2f} s {'':>11}" for c in columns)
line += f"{totals['new-dwell'] / totals['new-nodwell']:>15.2f}"
if "old" in columns:
    line += f"{totals['new-dwell'] / totals['old']:>11.2f}"
print(line)
PY
