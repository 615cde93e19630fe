#!/usr/bin/env bash
# Precision on popular public MCP servers: detonates each (fetched from npm or PyPI, pinned),
# with placeholder API keys where a server refuses to start without one, and prints its
# verdict and every finding above `low`, one line per server, then the count of servers that
# ended HIGH or CRITICAL. A regression set, not a test: run it before changing rules.
# Needs root and the registries. Usage: bench/precision.sh [path/to/warden]
set -uo pipefail
cd "$(dirname "$0")/.."
warden=${1:-target/release/warden}
[ -x "$warden" ] || cargo build --release -q
servers=(
    "npm:@modelcontextprotocol/server-everything@2026.8.31"
    "npm:@modelcontextprotocol/server-filesystem@2026.8.31|--mcp-command mcp-server-filesystem /workspace"
    "npm:@modelcontextprotocol/server-memory@2026.8.31"
    "npm:@modelcontextprotocol/server-sequential-thinking@2026.8.31"
    "npm:firecrawl-mcp@3.26.0|--env FIRECRAWL_API_KEY=fc-placeholder"
    "npm:@upstash/context7-mcp@4.1.1"
    "npm:tavily-mcp@0.2.22|--env TAVILY_API_KEY=tvly-placeholder"
    "npm:exa-mcp-server@3.4.1|--env EXA_API_KEY=placeholder"
    "npm:@notionhq/notion-mcp-server@2.5.2|--env NOTION_TOKEN=placeholder"
    "npm:@brave/brave-search-mcp-server@2.1.4|--env BRAVE_API_KEY=placeholder"
    "npm:mcp-server-kubernetes@4.1.7"
    "pypi:mcp-server-time@2026.10.19"
    "pypi:mcp-server-git@2026.10.19"
    "pypi:mcp-server-fetch@2026.10.24"
    "pypi:arxiv-mcp-server@0.8.2"
    "pypi:duckduckgo-mcp-server@0.7.0"
    "pypi:mcp-server-qdrant@0.8.1|--env QDRANT_URL=http://qdrant.invalid:6333 --env COLLECTION_NAME=x"
    "pypi:mcp-obsidian@0.2.3|--env OBSIDIAN_API_KEY=placeholder"
)
high=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
printf '%-58s %-13s %s\n' "server" "verdict" "findings above low"
for entry in "${servers[@]}"; do
    target=${entry%%|*}
    extra=()
    if [[ $entry == *"|"* ]]; then
        read -r -a extra <<<"${entry#*|}"
        # --mcp-command takes the rest of the line as one argument.
        if [[ ${extra[0]} == --mcp-command ]]; then extra=(--mcp-command "${entry#*|--mcp-command }"); fi
    fi
    "$warden" detonate --allow-inconclusive --output json "${extra[@]}" "$target" \
        >"$out" 2>/dev/null
    python3 - "$target" "$out" <<'PY'
import json, sys
target, path = sys.argv[1], sys.argv[2]
try:
    r = json.load(open(path))
except Exception:
    print(f"{target:58} {'(no report)':13}")
    sys.exit(2)
above = [f"{f['severity']}:{f['rule']}" + (f"[{f.get('tool')}]" if f.get('tool') else "")
         for f in r["findings"] if f["severity"] in ("medium", "high", "critical")]
why = f" ({r['why']['stage']}: {r['why']['reason'][:60]})" if r.get("why") else ""
print(f"{target:58} {r['verdict']:13} {', '.join(above) or '-'}{why}")
sys.exit(1 if r["verdict"] in ("HIGH", "CRITICAL") else 0)
PY
    [ $? -eq 1 ] && high=$((high + 1))
done
echo "servers ending HIGH or CRITICAL: $high of ${#servers[@]}"
