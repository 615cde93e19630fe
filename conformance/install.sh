#!/usr/bin/env bash
# Installs Node 22, the official MCP conformance suite and the MCP Inspector CLI from the npm
# registry into conformance/.npm (only what is missing). run.sh and inspector.sh use them.
set -euo pipefail
npm_dir="$(cd "$(dirname "$0")" && pwd)/.npm"
mkdir -p "$npm_dir"
[ -f "$npm_dir/package.json" ] || echo '{"name": "warden-conformance", "private": true}' > "$npm_dir/package.json"
if [ ! -x "$npm_dir/node_modules/node/bin/node" ] || [ ! -e "$npm_dir/node_modules/.bin/conformance" ] ||
    [ ! -e "$npm_dir/node_modules/.bin/inspector" ]; then
    (cd "$npm_dir" && npm install --silent --no-audit --no-fund node@22 \
        @modelcontextprotocol/conformance@0.1.16 @modelcontextprotocol/inspector@2.12.0)
fi
