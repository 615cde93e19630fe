#!/usr/bin/env bash
# Build (once) and cache the host matrix's guest: one Debian 12 root file system with systemd as
# init (cgroup v2 only), Debian's docker.io and runsc, and two kernels from Debian's own packages
# (6.1 from bookworm, 6.12 from bookworm-security). The cache is keyed by this file's contents:
# changing the recipe rebuilds it. Prints the cache directory on its last line.
#
# Needs root, debootstrap, e2fsprogs and a reachable Debian mirror (the machine's apt mirror).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${WARDEN_HOSTS_CACHE:-/var/cache/warden-hosts}
mirror=${WARDEN_HOSTS_MIRROR:-http://deb.debian.org/debian}
key=$(sha256sum "$here/image.sh" | cut -c1-16)
out="$cache/$key"
if [ -f "$out/ready" ]; then
    echo "$out"
    exit 0
fi
mkdir -p "$cache"
# Earlier recipes' images are removed: one guest is kept.
find "$cache" -mindepth 1 -maxdepth 1 -type d ! -name "$key" -exec rm -rf {} +
work="$out.building"
rm -rf "$work" "$out"
mkdir -p "$work"
root="$work/root"
echo "hosts: debootstrap into $root (a few minutes, once)" >&2
debootstrap --variant=minbase \
    --include=systemd,systemd-sysv,dbus,udev,kmod,initramfs-tools,procps,iproute2,util-linux,e2fsprogs,python3,ca-certificates \
    bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
    tail -20 "$work/debootstrap.log" >&2
    exit 1
}
security=${mirror%/debian}/debian-security
cat >"$root/etc/apt/sources.list" <<SRC
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb $security bookworm-security main
SRC
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
for fs in proc sys dev; do mount --bind "/$fs" "$root/$fs"; done
trap 'for fs in dev sys proc; do umount -l "$root/$fs" 2>/dev/null || true; done' EXIT
chroot "$root" sh -euc '
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends \
        linux-image-cloud-amd64 linux-image-6.12-cloud-amd64 docker.io runsc containerd runc \
        iptables
    apt-get clean
' >"$work/apt.log" 2>&1 || {
    tail -20 "$work/apt.log" >&2
    exit 1
}
for fs in dev sys proc; do umount -l "$root/$fs"; done
trap - EXIT
# The guest: no network device, no login on the console; one unit runs the cell's checks from
# the payload disk and powers the machine off.
echo warden-host >"$root/etc/hostname"
printf '/dev/vda / ext4 rw,errors=remount-ro 0 1\n' >"$root/etc/fstab"
: >"$root/etc/resolv.conf"
ln -sf /dev/null "$root/etc/systemd/system/serial-getty@ttyS0.service"
ln -sf /dev/null "$root/etc/systemd/system/getty@tty1.service"
ln -sf /dev/null "$root/etc/systemd/system/docker.service"
ln -sf /dev/null "$root/etc/systemd/system/docker.socket"
ln -sf /dev/null "$root/etc/systemd/system/containerd.service"
cat >"$root/etc/systemd/system/warden-check.service" <<'UNIT'
[Unit]
Description=Warden host-matrix checks
After=basic.target dbus.service
Wants=dbus.service

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/warden-check
StandardOutput=tty
StandardError=tty
TTYPath=/dev/ttyS0
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
UNIT
cat >"$root/usr/local/sbin/warden-check" <<'CHECK'
#!/bin/sh
# Mount the payload disk, run its check script, power off whatever happens.
mkdir -p /payload
if mount -o ro /dev/vdb /payload; then
    mkdir -p /run/warden-check
    cp -a /payload/. /run/warden-check/
    umount /payload
    cd /run/warden-check && sh ./check.sh
    echo "WARDEN-HOSTS-END rc=$?"
else
    echo "WARDEN-HOSTS-END rc=99 (no payload disk)"
fi
systemctl poweroff --no-block
CHECK
chmod +x "$root/usr/local/sbin/warden-check"
ln -sf /etc/systemd/system/warden-check.service \
    "$root/etc/systemd/system/multi-user.target.wants/warden-check.service"
for v in 6.1 6.12; do
    kernel=$(ls "$root"/boot/vmlinuz-"$v".* | sort -V | tail -1)
    initrd="$root/boot/initrd.img-${kernel#"$root"/boot/vmlinuz-}"
    cp "$kernel" "$work/vmlinuz-$v"
    cp "$initrd" "$work/initrd-$v"
done
rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/*
truncate -s 6G "$work/root.img"
mkfs.ext4 -q -F -L warden-root -d "$root" "$work/root.img"
rm -rf "$root"
touch "$work/ready"
mv "$work" "$out"
echo "$out"
