#!/usr/bin/env bash
# Start-up cost of the sandbox, side by side in one run (hyperfine, interleaved rounds):
# warden run, bubblewrap, unshare (the namespace floor) and bare /bin/true. Prints medians and
# ratios, then the jail helper (the small warden-jail beside the whole warden re-executed):
# spawn to first byte and the capture round trip (cargo bench). With perf installed, also where
# the CPU goes, by role (bench/cpu_roles.py).
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
# Where the CPU goes, when perf is installed: by role (the program started, the sandbox's init,
# the command, the kernel's own threads), then the started program alone beside its bare start.
if command -v perf >/dev/null; then
    echo
    BWRAP="bwrap --unshare-all --die-with-parent --ro-bind / / --dev /dev --proc /proc /bin/true"
    python3 bench/cpu_roles.py 50 "warden -- $W run -- /bin/true ; bwrap -- $BWRAP" ||
        echo "(no CPU profile by role: perf sched record failed here)"
    echo
    echo "CPU ms of the started program alone (perf stat --no-inherit, 60 runs):"
    for c in "$W run -- /bin/true" "$W --version" "$BWRAP" "bwrap --version"; do
        ms=$(perf stat --no-inherit -x, -e task-clock -r 60 $c 2>&1 >/dev/null |
            awk -F, '/task-clock/ {print $1}' || true)
        printf '  %8s  %s\n' "${ms:-failed}" "${c:0:60}"
    done
fi
echo
cargo bench -q -p warden --bench interactive 2>/dev/null
