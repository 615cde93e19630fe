#!/usr/bin/env bash
# Installs everything Warden's tests need on a fresh Debian or Ubuntu machine, as root, and
# only what is missing (safe to run again): the system packages (a C compiler, Python with
# venv, Node and npm, git, util-linux's unshare, e2fsprogs, iproute2, nmap, ffuf and dirb's
# word lists, Chromium's headless shell, QEMU and debootstrap for the host matrix, tshark), arjun in a venv of its own for the recon profile,
# the official MCP Python SDK in a virtual environment of its own (the system interpreter is
# left alone), the public MCP servers the detonation tests run against, the small local model
# of full mode's end-to-end test, and the MCP conformance suite and Inspector CLI.
# The README's test command runs it: ./setup.sh && cargo test --workspace
set -euo pipefail
cd "$(dirname "$0")"
export DEBIAN_FRONTEND=noninteractive

need=()
command -v cc >/dev/null || need+=(gcc libc6-dev)
[ -x /usr/bin/python3 ] || need+=(python3)
/usr/bin/python3 -c 'import ensurepip' 2>/dev/null || need+=(python3-venv)
[ -x /usr/bin/node ] || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
command -v git >/dev/null || need+=(git)
command -v unshare >/dev/null && command -v setpriv >/dev/null || need+=(util-linux)  # setpriv: the pod simulation
[ -x /usr/sbin/mkfs.ext4 ] || [ -x /sbin/mkfs.ext4 ] || need+=(e2fsprogs)  # serve's disk quota
command -v ip >/dev/null || need+=(iproute2)
command -v nmap >/dev/null || need+=(nmap)    # the recon profile's port scanner
command -v ffuf >/dev/null || need+=(ffuf)    # … and its content discovery
[ -f /usr/share/dirb/wordlists/common.txt ] || need+=(dirb)  # word lists for ffuf_discover
# web_browse's browser, and the one browser-driving MCP servers are detonated with.
[ -x /usr/lib/chromium/chromium-headless-shell ] || need+=(chromium-headless-shell)
# The host matrix (tests/hosts/run.sh): Debian guests booted in QEMU, built with debootstrap.
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v debootstrap >/dev/null || need+=(debootstrap)
# tshark reads the pcapng files of `--pcap` in the capture tests.
command -v tshark >/dev/null || need+=(tshark)
if [ ${#need[@]} -gt 0 ]; then
    apt-get update -qq
    apt-get install -y -qq "${need[@]}" >/dev/null
fi

# The official MCP Python SDK drives `warden serve` in the end-to-end tests and the bench.
dest=${WARDEN_REAL_SERVERS:-/opt/warden-real-servers}
mkdir -p "$dest"
[ -x "$dest/sdk/bin/python" ] || /usr/bin/python3 -m venv "$dest/sdk"
"$dest/sdk/bin/python" -c 'import importlib.metadata as m; assert m.version("mcp") == "2.3.0"' \
    2>/dev/null || "$dest/sdk/bin/pip" install --quiet --disable-pip-version-check 'mcp==2.3.0'
# The official CycloneDX schemas (shipped in cyclonedx-python-lib) check `warden scan`'s SBOM.
"$dest/sdk/bin/python" -c 'import importlib.metadata as m; assert m.version("cyclonedx-python-lib") == "11.6.0"' \
    2>/dev/null || "$dest/sdk/bin/pip" install --quiet --disable-pip-version-check \
    'cyclonedx-python-lib==11.6.0' jsonschema referencing
# The Kubernetes schemas (kubernetes-validate) check deploy/kubernetes/ for two versions.
"$dest/sdk/bin/python" -c 'import importlib.metadata as m; assert m.version("kubernetes-validate") == "1.37.0"' \
    2>/dev/null || "$dest/sdk/bin/pip" install --quiet --disable-pip-version-check 'kubernetes-validate==1.37.0'

# arjun for the recon profile: 2.2.7 from PyPI in a venv of Warden's own (Debian's 2.2.1
# reports every target as misbehaving).
recon=/opt/warden/recon
[ -x "$recon/bin/python" ] || /usr/bin/python3 -m venv "$recon"
"$recon/bin/python" -c 'import importlib.metadata as m; assert m.version("arjun") == "2.2.7"' \
    2>/dev/null || "$recon/bin/pip" install --quiet --disable-pip-version-check 'arjun==2.2.7'

fixtures/real/install.sh
fixtures/llm/install.sh
conformance/install.sh
