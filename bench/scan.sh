#!/usr/bin/env bash
# Inventory speed and agreement, side by side in one run: `warden scan` against pip-audit
# (`--dry-run`: collection only, no vulnerability lookup) on the venv of the real Python
# servers, and against `npm ls --all` on the node_modules of the real Node servers (both
# installed by ./setup.sh). Prints the median wall time of each, the ratio, and the component
# counts with any difference in name@version. Offline: the scans use the fixture OSV folder.
# Installs hyperfine (apt) and pip-audit (a venv under target/) when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
SERVERS=${WARDEN_REAL_SERVERS:-/opt/warden-real-servers}
PY=$SERVERS/py
NODE=$SERVERS/node
RUNS=${RUNS:-20}
if ! command -v hyperfine >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq hyperfine >/dev/null
fi
AUDIT=$PWD/target/bench-pip-audit
if [ ! -x "$AUDIT/bin/pip-audit" ]; then
    /usr/bin/python3 -m venv "$AUDIT"
    "$AUDIT/bin/pip" install -q --disable-pip-version-check pip-audit
fi
cargo build --release -q
W=$PWD/target/release/warden
DB=$PWD/fixtures/osv
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
SITE=$(ls -d "$PY"/lib/python3*/site-packages | head -1)

hyperfine -N -w 3 -r "$RUNS" --export-json "$out/py.json" \
    -n "warden scan (venv)" "$W scan $PY --osv-db $DB --output json --allow-unknown" \
    -n "pip-audit --dry-run" "$AUDIT/bin/pip-audit --dry-run --path $SITE --progress-spinner off" >/dev/null
hyperfine -N -w 3 -r "$RUNS" --export-json "$out/node.json" \
    -n "warden scan (node_modules)" "$W scan $NODE --osv-db $DB --output json --allow-unknown" \
    -n "npm ls --all --json" "npm ls --all --json --prefix $NODE" >/dev/null

"$W" scan "$PY" --osv-db "$DB" --output json --allow-unknown >"$out/py-scan.json" || true
"$W" scan "$NODE" --osv-db "$DB" --output json --allow-unknown >"$out/node-scan.json" || true
"$AUDIT/bin/pip-audit" --path "$SITE" --dry-run --progress-spinner off -f json -o "$out/py-audit.json" 2>"$out/py-audit.txt" || true
# --dry-run writes no report; the collected list comes from pip's own view of that folder.
"$AUDIT/bin/python" -m pip list --path "$SITE" --format json >"$out/py-pip.json" 2>/dev/null
npm ls --all --json --prefix "$NODE" >"$out/npm-ls.json" 2>/dev/null || true

/usr/bin/python3 - "$out" <<'PY'
import json, re, sys, statistics
out = sys.argv[1]
def med(f):
    r = json.load(open(f"{out}/{f}"))["results"]
    return [(x["command"], statistics.median(x["times"]) * 1000) for x in r]
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
def scan_set(f, eco):
    r = json.load(open(f"{out}/{f}"))
    return {f"{norm(c['name']) if eco == 'PyPI' else c['name']}@{c['version']}"
            for c in r["components"] if c["ecosystem"] == eco and "version" in c}
py_ref = {f"{norm(p['name'])}@{p['version']}" for p in json.load(open(f"{out}/py-pip.json"))}
def walk(deps, acc):
    for name, d in (deps or {}).items():
        if "version" in d:
            acc.add(f"{name}@{d['version']}")
        walk(d.get("dependencies"), acc)
    return acc
npm_ref = walk(json.load(open(f"{out}/npm-ls.json")).get("dependencies"), set())
audit = open(f"{out}/py-audit.txt").read()
m = re.search(r"would have audited (\d+) packages", audit)
rows = [("Python venv", med("py.json"), scan_set("py-scan.json", "PyPI"), py_ref,
         f"pip-audit collected {m.group(1) if m else '?'}"),
        ("node_modules", med("node.json"), scan_set("node-scan.json", "npm"), npm_ref, "")]
for label, ((a, ta), (b, tb)), ours, ref, extra in rows:
    print(f"{label}:")
    print(f"  {a:<28} {ta:8.1f} ms   {len(ours)} components")
    print(f"  {b:<28} {tb:8.1f} ms   {len(ref)} components {extra}")
    print(f"  ratio warden/{b.split()[0]}: {ta / tb:.2f}   only warden: {sorted(ours - ref)[:8]}   only {b.split()[0]}: {sorted(ref - ours)[:8]}")
PY
