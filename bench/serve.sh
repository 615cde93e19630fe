#!/usr/bin/env bash
# warden serve latency and throughput through the official MCP Python SDK, beside
# `warden run -- echo hi` in the same run. Needs root and ./setup.sh (the SDK's venv).
set -euo pipefail
cd "$(dirname "$0")/.."
sdk=${WARDEN_REAL_SERVERS:-/opt/warden-real-servers}/sdk/bin/python
[ -x "$sdk" ] || ./setup.sh
cargo build --release -q
"$sdk" bench/serve.py target/release/warden
