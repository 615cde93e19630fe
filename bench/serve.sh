#!/usr/bin/env bash
# warden serve latency and throughput through the official MCP Python SDK, beside
# `warden run -- echo hi` in the same run. Needs root and `pip install mcp`.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -c 'import mcp' 2>/dev/null || python3 -m pip install --quiet 'mcp==2.3.0'
cargo build --release -q
python3 bench/serve.py target/release/warden
