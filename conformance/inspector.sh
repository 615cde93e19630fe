#!/usr/bin/env bash
# Drives `warden serve` over stdio with the official MCP Inspector's CLI (a TypeScript client,
# which validates results against the tools' output schemas): list the tools, run a command,
# and get a tool error back as an error result. The Inspector comes from install.sh.
# Usage: conformance/inspector.sh [path/to/warden]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
warden="$(cd "$(dirname "${1:-$here/../target/debug/warden}")" && pwd)/$(basename "${1:-warden}")"
npm_dir="$here/.npm"
"$here/install.sh"
export PATH="$npm_dir/node_modules/node/bin:$PATH"
export MCP_CATALOG_PATH="$npm_dir/inspector-catalog.json"
inspect() { node "$npm_dir/node_modules/.bin/inspector" --cli "$warden" serve "$@"; }
fail=0
expect() { # NAME PATTERN OUTPUT
    if grep -q -- "$2" <<<"$3"; then echo "ok inspector $1"; else echo "FAIL inspector $1: $3"; fail=1; fi
}
out=$(inspect --method tools/list 2>&1 || true)
expect "lists run_command" '"name": "run_command"' "$out"
out=$(inspect --method tools/call --tool-name run_command --tool-arg 'command=echo hi from the inspector' 2>&1 || true)
expect "runs a command" 'hi from the inspector' "$out"
out=$(inspect --method tools/call --tool-name file_read --tool-arg path=../etc/passwd 2>&1 || true)
expect "gets a tool error as an error result" '"isError": true' "$out"
expect "with the error kind" 'invalid_path' "$out"
out=$(inspect --method resources/read --uri warden://policy 2>&1 || true)
expect "reads warden://policy" 'network' "$out"
exit $fail
