#!/usr/bin/env bash
# warden serve --http under validate_json attacks (exploding and pattern-heavy schemas) while a
# client calls run_command echo in a loop: that client's p50/p99 without and with the attack,
# side by side in one run, and how soon the server's CPU is idle again. Needs root and
# ./setup.sh (the SDK's venv).
set -euo pipefail
cd "$(dirname "$0")/.."
sdk=${WARDEN_REAL_SERVERS:-/opt/warden-real-servers}/sdk/bin/python
[ -x "$sdk" ] || ./setup.sh
cargo build --release -q
"$sdk" bench/serve_attack.py target/release/warden
