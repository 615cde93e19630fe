#!/usr/bin/env bash
# Sweep throughput on this machine, side by side in one run: the same lists swept with
# --jobs 1 and --jobs 2. Two lists: the 31 local targets of the sweep test (fixture servers and
# the installed real servers: detonation only) and 6 real servers fetched from PyPI and npm
# (fetch, install in the sandbox, detonation: what a registry sweep costs). Prints servers per
# hour, the speed-up, the median and largest sandbox memory peak, and the nodes (like this one)
# a sweep of 10,000 registry servers a day would need. Needs ./setup.sh's real servers.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
W=$PWD/target/release/warden
SERVERS=${WARDEN_REAL_SERVERS:-/opt/warden-real-servers}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

{
    ls fixtures/mcp/servers/*.py fixtures/mcp/servers/*.js | grep -v '/mini\.'
    echo fixtures/scan/projects/vulnerable-server/server.py
    for c in "$SERVERS/py/bin/mcp-server-time" "$SERVERS/py/bin/mcp-server-fetch" \
             "$SERVERS/node/node_modules/.bin/mcp-server-everything" \
             "$SERVERS/node/node_modules/.bin/mcp-server-filesystem /workspace" \
             "$SERVERS/node/node_modules/.bin/mcp-server-memory"; do
        printf '{"command": "%s"}\n' "$c"
    done
} >"$out/local.txt"
cat >"$out/registry.txt" <<'LIST'
pypi:mcp-server-time
pypi:mcp-server-git
pypi:mcp-server-fetch
npm:@modelcontextprotocol/server-everything
npm:@modelcontextprotocol/server-memory
npm:@modelcontextprotocol/server-filesystem
LIST

OPTS=(--no-payloads --timeout 120s --call-timeout 5s --osv-db "$PWD/fixtures/osv")
for list in local registry; do
    for jobs in 1 2; do
        # The registry servers need the network to be fetched; the local ones never do.
        net=(unshare --net); [ "$list" = registry ] && net=()
        "${net[@]}" "$W" sweep "$out/$list.txt" --out "$out/$list-$jobs" --jobs "$jobs" -- "${OPTS[@]}" \
            >/dev/null 2>"$out/$list-$jobs.log"
    done
done

/usr/bin/python3 - "$out" <<'PY'
import json, math, sys
out = sys.argv[1]
def summary(name):
    return json.load(open(f"{out}/{name}/summary.json"))
rows = {}
for lst in ("local", "registry"):
    for jobs in (1, 2):
        s = summary(f"{lst}-{jobs}")
        t = s["timing"]
        rows[(lst, jobs)] = s
        print(f"{lst:<9} --jobs {jobs}: {s['targets']:>3} servers in {t['wall_ms']/1000:7.1f} s"
              f" = {t['servers_per_hour']:>7.0f} servers/hour   verdicts {s['verdicts']}"
              f"   sandbox peak median {(t['peak_memory_bytes_median'] or 0)/2**20:.0f} MiB,"
              f" max {(t['peak_memory_bytes_max'] or 0)/2**20:.0f} MiB")
    a, b = (rows[(lst, j)]["timing"]["servers_per_hour"] for j in (1, 2))
    print(f"{lst:<9} speed-up --jobs 2 / --jobs 1: {b / a:.2f}")
per_day = rows[("registry", 2)]["timing"]["servers_per_hour"] * 24
print(f"projection: 10,000 registry servers a day need {math.ceil(10000 / per_day)} node(s) like this one"
      f" (2 cores, --jobs 2: {per_day:.0f} servers a day each)")
PY
