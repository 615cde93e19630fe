#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance, which needs Node 22)
# against `warden serve --http` on loopback, with the expected failures listed (and explained)
# in expected-failures.yml. Node 22 and the suite come from install.sh (into conformance/.npm). Usage: conformance/run.sh [path/to/warden]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
warden="${1:-$here/../target/debug/warden}"
npm_dir="$here/.npm"
"$here/install.sh"
export PATH="$npm_dir/node_modules/node/bin:$PATH"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$warden" serve --http "127.0.0.1:$port" 2>"$npm_dir/server.log" &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
done
cd "$npm_dir"
node node_modules/.bin/conformance server --url "http://127.0.0.1:$port/mcp" \
    --expected-failures "$here/expected-failures.yml" -o "$npm_dir/results"
