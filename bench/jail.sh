#!/usr/bin/env bash
# Start-up cost of the sandbox, side by side in one run (hyperfine, interleaved rounds):
# warden run, bubblewrap, unshare (the namespace floor) and bare /bin/true. Prints medians and
# ratios, then the jail helper (the small warden-jail beside the whole warden re-executed):
# spawn to first byte and the capture round trip (cargo bench).
# Needs root and a Linux kernel with user namespaces; installs hyperfine and bubblewrap from apt.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v hyperfine >/dev/null || ! command -v bwrap >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq hyperfine bubblewrap >/dev/null
fi
cargo build --release -q
W=target/release/warden
RUNS=${RUNS:-300}
ROUNDS=${ROUNDS:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Several interleaved rounds, so a burst of machine noise does not land on one row only.
for round in $(seq 1 "$ROUNDS"); do
    hyperfine -N --warmup 20 --runs "$RUNS" --export-json "$out/round$round.json" \
        -n warden "$W run -- /bin/true" \
        -n bwrap "bwrap --unshare-all --die-with-parent --ro-bind / / --dev /dev --proc /proc /bin/true" \
        -n unshare "unshare -Urnpf --mount-proc /bin/true" \
        -n bare "/bin/true" >/dev/null
done

python3 - "$out" <<'PY'
import json, pathlib, statistics, sys
times = {}
for f in sorted(pathlib.Path(sys.argv[1]).glob("round*.json")):
    for r in json.loads(f.read_text())["results"]:
        times.setdefault(r["command"], []).extend(r["times"])
med = {k: statistics.median(v) * 1000 for k, v in times.items()}
p90 = {k: sorted(v)[int(len(v) * 0.9)] * 1000 for k, v in times.items()}
print(f"{'command':10} {'median ms':>10} {'p90 ms':>8}   runs")
for k in ["bare", "unshare", "bwrap", "warden"]:
    print(f"{k:10} {med[k]:10.2f} {p90[k]:8.2f}   {len(times[k])}")
print()
print(f"warden / bwrap    = {med['warden'] / med['bwrap']:.2f}x")
print(f"warden / unshare  = {med['warden'] / med['unshare']:.2f}x  (unshare = namespace set-up only)")
print(f"bwrap  / unshare  = {med['bwrap'] / med['unshare']:.2f}x")
PY
echo
cargo bench -q -p warden --bench interactive 2>/dev/null
