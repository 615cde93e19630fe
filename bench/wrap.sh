#!/usr/bin/env bash
# What `warden wrap` adds to each call of a trivial tool (the fixture echo server), measured
# side by side in one run against the same server unwrapped, through the official SDK client
# (bench/wrap.py). Needs ./setup.sh's SDK. CALLS (default 300) calls each.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
SERVERS=${WARDEN_REAL_SERVERS:-/opt/warden-real-servers}
"$SERVERS/sdk/bin/python" bench/wrap.py "$PWD/target/release/warden" "${CALLS:-300}" -- \
    python3 "$PWD/fixtures/mcp/servers/benign_echo.py"
