#!/bin/sh
# Guest side of the host matrix (tests/hosts/run.sh): runs as root from a systemd service in the
# booted guest, with this folder as the payload. The cell comes from the kernel command line.
# /run is mounted noexec: the payload runs from the root file system (a snapshot: discarded).
mkdir -p /opt/warden-check
cp -a . /opt/warden-check/
cd /opt/warden-check
here=$(pwd)
cell=$(sed -n 's/.*warden\.cell=\([^ ]*\).*/\1/p' /proc/cmdline)
echo "NOTE $cell kernel $(uname -r), cgroup $(cat /proc/self/cgroup), $(nproc) CPUs"
# A debugging session's own script, when run.sh was given one (WARDEN_HOSTS_DEBUG=FILE).
if [ -f debug.sh ]; then
    sh ./debug.sh 2>&1 | sed 's/^/NOTE /'
    echo "CELL $cell checks=0 pass=0 degraded=0 refused=0 loss=0 fail=0"
    exit 0
fi
case $cell in
6.1 | 6.12)
    exec python3 "$here/check.py" "$cell" "$here"
    ;;
docker | gvisor)
    runtime=runc
    extra=""
    if [ "$cell" = gvisor ]; then
        runtime=runsc
        # No network at all: runsc refuses to run in the host's network namespace otherwise.
        printf '{"runtimes":{"runsc":{"path":"/usr/bin/runsc","runtimeArgs":["--network=none"]}}}' \
            >/run/docker-daemon.json
        extra="--config-file /run/docker-daemon.json"
    fi
    # shellcheck disable=SC2086
    dockerd --iptables=false --ip-masq=false --bridge=none $extra >/run/dockerd.log 2>&1 &
    for _ in $(seq 1 120); do docker info >/dev/null 2>&1 && break; sleep 1; done
    docker info >/dev/null 2>&1 || { echo "NOTE $cell dockerd did not start: $(tail -3 /run/dockerd.log)"; echo "CELL $cell checks=1 pass=0 degraded=0 refused=0 loss=0 fail=1"; exit 0; }
    # The container's image is the guest's own root (no registry).
    tar -C / --one-file-system -c --exclude=./var/lib/docker --exclude=./usr/lib/modules \
        --exclude=./boot --exclude=./var/cache . | docker import - warden-host >/dev/null
    echo "NOTE $cell apparmor: $(cat /sys/module/apparmor/parameters/enabled 2>/dev/null || echo absent), docker security: $(docker info --format '{{.SecurityOptions}}')"
    # deploy/kubernetes/job.yaml's security context, played by Docker: its capabilities, the
    # runtime's default seccomp profile, AppArmor unconfined (the manifest's own choices).
    # deploy/kubernetes/job.yaml's capabilities (run.sh read them from the manifest).
    caps=""
    for c in $(cat "$here/capabilities"); do caps="$caps --cap-add $c"; done
    echo "NOTE $cell capabilities:$caps"
    # shellcheck disable=SC2086
    docker run --rm --runtime "$runtime" --network none --cgroupns private \
        --cap-drop ALL $caps \
        --tmpfs /tmp:exec --tmpfs /var/tmp:exec \
        --security-opt apparmor=unconfined \
        -v "$here:/w:ro" warden-host python3 /w/check.py "$cell" /w
    ;;
*)
    echo "CELL unknown checks=1 pass=0 degraded=0 refused=0 loss=0 fail=1"
    ;;
esac
