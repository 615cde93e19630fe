#!/usr/bin/env bash
# The host matrix: boot real Debian systems in QEMU and run Warden's checks inside each.
#
#   tests/hosts/run.sh [CELL...]      cells: 6.1 6.12 docker gvisor (default: all)
#
# Each cell boots the cached guest (tests/hosts/image.sh: Debian 12, systemd as init, cgroup v2
# only, no network device) with one of Debian's kernels, and runs tests/hosts/check.py there:
#   6.1, 6.12  Warden on the guest itself, started by a systemd service (a cgroup that holds
#              other processes, as a login session or a service does);
#   docker     Warden in a Docker container (Debian's docker.io, the image imported from the
#              guest's own root: no registry) with deploy/kubernetes/job.yaml's security context,
#              on the 6.12 guest;
#   gvisor     the same container under runsc (gVisor), on the 6.12 guest.
# Files go in on a second disk image; results come back on the serial console. A cell passes
# when no check is a silent loss (a limit claimed but not held, a PASS where a finding is due)
# and none failed to run. The last line is `hosts cells=N passed=P silent_loss=S`.
#
# Acceleration: KVM when /dev/kvm can boot a stock kernel, else TCG (software): a PVM host's
# /dev/kvm (kvm_pvm) runs only PVM-enabled guest kernels, which Debian's are not.
set -euo pipefail
cd "$(dirname "$0")/../.."
cells=("$@")
[ ${#cells[@]} -gt 0 ] || cells=(6.1 6.12 docker gvisor)
for c in "${cells[@]}"; do
    case $c in 6.1 | 6.12 | docker | gvisor) ;; *)
        echo "unknown cell $c (cells: 6.1 6.12 docker gvisor)" >&2
        exit 2
        ;;
    esac
done
for tool in qemu-system-x86_64 debootstrap mkfs.ext4 cc; do
    command -v "$tool" >/dev/null || {
        echo "hosts: $tool is missing (apt-get install qemu-system-x86 debootstrap e2fsprogs gcc)" >&2
        exit 2
    }
done
image=$(tests/hosts/image.sh | tail -1)
if [ -z "${WARDEN_HOSTS_BIN:-}" ]; then
    cargo build --release --locked -q --bin warden
fi
bin=${WARDEN_HOSTS_BIN:-target/release/warden}
# warden-jail's unit tests, run on the guests too (their cgroup tests mount cgroup2 themselves).
unit=$(cargo test --locked -q -p warden-jail --lib --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "warden_jail":
        print(m["executable"])' | tail -1)
[ -x "$unit" ] || { echo "hosts: warden-jail's unit test binary was not built" >&2; exit 2; }

accel=${WARDEN_HOSTS_ACCEL:-auto}
if [ "$accel" = auto ]; then
    if [ -w /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ]; then accel=kvm; else accel=tcg; fi
fi
case $accel in
    kvm) qemu_accel=(-enable-kvm -cpu host) ;;
    # One host thread for both vCPUs: under multi-threaded TCG the guest kernel's live code
    # patching (static keys, text_poke_bp) raced once ("Oops: int3" in __alloc_pages, 6.12).
    tcg) qemu_accel=(-accel tcg,thread=single -cpu max) ;;
    *) echo "WARDEN_HOSTS_ACCEL: kvm, tcg or auto" >&2; exit 2 ;;
esac

work=$(mktemp -d /var/tmp/warden-hosts.XXXXXX)
trap 'rm -rf "$work"' EXIT
payload="$work/payload"
mkdir -p "$payload/attacks" "$payload/fixtures/mcp"
cp "$bin" "$payload/warden"
cp "$unit" "$payload/jail-unit"
cp tests/hosts/check.py tests/hosts/check.sh "$payload/"
# The Docker cells play the kubelet: the capabilities are the Job manifest's own.
sed -n '/capabilities:/,/seccompProfile:/p' deploy/kubernetes/job.yaml |
    sed -n -E 's/^ *- ([A-Z_]+)$/\1/p' >"$payload/capabilities"
[ -s "$payload/capabilities" ] || { echo "no capabilities found in deploy/kubernetes/job.yaml" >&2; exit 2; }
if [ -n "${WARDEN_HOSTS_DEBUG:-}" ]; then cp "$WARDEN_HOSTS_DEBUG" "$payload/debug.sh"; fi
cp -r fixtures/mcp/servers "$payload/fixtures/mcp/"
for a in ptrace mounts namespaces kernel; do
    cc -O1 -static -o "$payload/attacks/$a" "fixtures/attacks/$a.c"
done
truncate -s 512M "$work/payload.img"
mkfs.ext4 -q -F -d "$payload" "$work/payload.img"

cells_run=0
passed=0
loss=0
for cell in "${cells[@]}"; do
    kernel=6.12
    case $cell in 6.1) kernel=6.1 ;; esac
    log="$work/console-$cell.log"
    started=$(date +%s)
    echo "== cell $cell (kernel $kernel, $accel)"
    # A guest kernel that panics (under TCG the emulator has broken the guest kernel twice, in
    # code Warden never ran: once in live code patching, once in obj_cgroup_charge while dockerd
    # started) reboots at once (panic=-1), which ends QEMU (-no-reboot) instead of idling to the
    # time limit. Such a cell is booted once more; a second panic counts as the cell's result.
    for attempt in 1 2; do
        timeout "${WARDEN_HOSTS_CELL_TIMEOUT:-1500}" qemu-system-x86_64 "${qemu_accel[@]}" \
            -m 3072 -smp 2 -no-reboot -nic none -snapshot -display none -monitor none \
            -kernel "$image/vmlinuz-$kernel" -initrd "$image/initrd-$kernel" \
            -append "root=/dev/vda rw console=ttyS0 quiet panic=-1 warden.cell=$cell" \
            -drive "file=$image/root.img,format=raw,if=virtio" \
            -drive "file=$work/payload.img,format=raw,if=virtio,readonly=on" \
            -serial "file:$log" >"$work/qemu-$cell.log" 2>&1 || true
        summary=$(tr -d '\r' <"$log" | grep -a -E '^CELL ' | tail -1 || true)
        panic=$(tr -d '\r' <"$log" | grep -a -m1 -E 'Kernel panic - not syncing' || true)
        if [ -z "$summary" ] && [ -n "$panic" ] && [ "$attempt" -eq 1 ]; then
            echo "cell $cell: the guest kernel panicked (${panic#*] }); console tail, then one more boot:"
            tr -d '\r' <"$log" | grep -a -E '^\[ *[0-9.]+\] (RIP|Call Trace|Oops|BUG|general protection)' | head -5
            continue
        fi
        break
    done
    tr -d '\r' <"$log" | grep -a -E '^(CHECK|CELL|NOTE) ' || true
    cells_run=$((cells_run + 1))
    seconds=$(($(date +%s) - started))
    if [ -z "$summary" ]; then
        if [ -n "$panic" ]; then
            echo "cell $cell: the guest kernel panicked on both boots; console tail:"
        else
            echo "cell $cell: no result within the time limit (${seconds}s); console tail:"
        fi
        tr -d '\r' <"$log" | tail -20
        loss=$((loss + 1))
        continue
    fi
    l=$(sed -E 's/.* loss=([0-9]+).*/\1/' <<<"$summary")
    f=$(sed -E 's/.* fail=([0-9]+).*/\1/' <<<"$summary")
    loss=$((loss + l))
    [ "$l" -eq 0 ] && [ "$f" -eq 0 ] && passed=$((passed + 1))
    echo "cell $cell: ${seconds}s, loss=$l fail=$f"
done
echo "hosts cells=$cells_run passed=$passed silent_loss=$loss"
[ "$passed" -eq "$cells_run" ]
