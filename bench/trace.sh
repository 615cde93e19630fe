#!/usr/bin/env bash
# Cost of tracing, side by side in one run (hyperfine, interleaved rounds): each workload plain,
# under `warden run`, under `warden run --trace` (events to /dev/null) and under
# `strace -f -o /dev/null`. Prints medians and the ratios; the target is trace/run <= 1.10.
# Needs root, python3, git and node; installs hyperfine and strace from apt when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
# The same programs inside and outside the jail (not a version manager's shims).
export PATH="/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin:${CARGO_HOME:-$HOME/.cargo}/bin"

if ! command -v hyperfine >/dev/null || ! command -v strace >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq hyperfine strace >/dev/null
fi
cargo build --release -q
W=$PWD/target/release/warden
RUNS=${RUNS:-40}
ROUNDS=${ROUNDS:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# A small repository for `git status`: 200 files in 10 directories, one commit, one change.
repo=$out/repo
mkdir -p "$repo"
git -C "$repo" init -q
for d in $(seq 1 10); do
    mkdir -p "$repo/d$d"
    for f in $(seq 1 20); do echo "line $d $f" >"$repo/d$d/f$f.txt"; done
done
cat >"$repo/walk.js" <<'JS'
const fs = require("fs"), path = require("path");
let n = 0;
for (const f of fs.readdirSync("/usr/lib")) n += path.join("/usr/lib", f).length;
console.log(n);
JS
git -C "$repo" add -A
git -C "$repo" -c user.name=bench -c user.email=bench@example.invalid commit -qm init
echo changed >>"$repo/d1/f1.txt"

declare -A workload=(
    [python]="python3 -c 'import json'"
    [git]="git -c safe.directory=* status --short"
    [node]="node walk.js"
)
for round in $(seq 1 "$ROUNDS"); do
    for name in python git node; do
        cmd=${workload[$name]}
        # git runs in the repository: plain and strace from its directory, the jail with it as
        # the workspace (the jail's working directory).
        hyperfine -N --warmup 3 --runs "$RUNS" --export-json "$out/$name-$round.json" \
            -n plain "bash -c \"cd $repo && exec $cmd\"" \
            -n run "$W run --workspace $repo -- $cmd" \
            -n trace "$W run --workspace $repo --trace /dev/null -- $cmd" \
            -n strace "bash -c \"cd $repo && exec strace -f -o /dev/null $cmd\"" >/dev/null
    done
done

python3 - "$out" <<'PY'
import json, pathlib, statistics, sys
rows = {}
for f in sorted(pathlib.Path(sys.argv[1]).glob("*-*.json")):
    name = f.stem.rsplit("-", 1)[0]
    for r in json.loads(f.read_text())["results"]:
        rows.setdefault(name, {}).setdefault(r["command"], []).extend(r["times"])
print(f"{'workload':9} {'plain':>8} {'run':>8} {'trace':>8} {'strace':>8}   trace/run  strace/plain  (median ms)")
for name in ["python", "git", "node"]:
    m = {k: statistics.median(v) * 1000 for k, v in rows[name].items()}
    print(f"{name:9} {m['plain']:8.2f} {m['run']:8.2f} {m['trace']:8.2f} {m['strace']:8.2f}"
          f"   {m['trace'] / m['run']:9.3f}  {m['strace'] / m['plain']:12.2f}")
PY
