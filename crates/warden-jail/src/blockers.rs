//! Why a sandbox cannot be built on this machine, and the exact setting that fixes it.
//!
//! Containers and hardened distributions block the jail's building blocks in a few known ways:
//! a seccomp profile that refuses user namespaces (Docker's, containerd's and Podman's
//! defaults), AppArmor's restriction of unprivileged user namespaces (Ubuntu 23.10 and later),
//! `kernel.unprivileged_userns_clone=0` (older Debian and Ubuntu kernels),
//! `user.max_user_namespaces=0`, subordinate ids that the container does not map, and a
//! read-only cgroup file system. [`hint`] turns a set-up failure and what [`Host::probe`]
//! read from `/proc` into one sentence that names the setting. (A masked `/proc` is not a
//! blocker: see [`crate::procfs`].)
//!
//! Guarantees: only reads; never changes a setting; a failure it does not recognise gets no
//! hint rather than a wrong one.

use crate::error::{SetupFailure, Stage};

/// What the machine says about the settings that block sandboxes (read from `/proc`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Host {
    /// `user.max_user_namespaces`.
    pub max_user_namespaces: Option<u64>,
    /// `kernel.unprivileged_userns_clone` (Debian and Ubuntu kernels only).
    pub unprivileged_userns_clone: Option<u64>,
    /// `kernel.apparmor_restrict_unprivileged_userns` (Ubuntu 23.10 and later).
    pub apparmor_restrict_userns: Option<u64>,
    /// Whether a seccomp filter is already on this process (a container runtime's).
    pub seccomp_filtered: bool,
}

fn number(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

impl Host {
    /// Read this machine's settings.
    pub fn probe() -> Host {
        let status = crate::sys::read_proc("/proc/self/status").unwrap_or_default();
        let seccomp = status
            .lines()
            .find_map(|l| l.strip_prefix("Seccomp:"))
            .map(str::trim);
        Host {
            max_user_namespaces: number("/proc/sys/user/max_user_namespaces"),
            unprivileged_userns_clone: number("/proc/sys/kernel/unprivileged_userns_clone"),
            apparmor_restrict_userns: number(
                "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
            ),
            seccomp_filtered: seccomp == Some("2"),
        }
    }
}

/// `CAP_KILL`'s bit.
pub const CAP_KILL: u32 = 5;

/// Whether this process has capability `bit` in its effective set (from `/proc/self/status`;
/// `true` when that cannot be read, so a missing `/proc` never blocks on its own).
pub fn has_capability(bit: u32) -> bool {
    let Ok(status) = crate::sys::read_proc("/proc/self/status") else {
        return true;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_none_or(|caps| caps & (1u64 << bit) != 0)
}

/// The setting that would let the jail be built, for `failure` on `host`; `None` when the
/// failure is not one of the known blockers.
pub fn hint(failure: &SetupFailure, host: &Host) -> Option<String> {
    let errno = failure.errno?;
    match failure.stage {
        Stage::Supervisor if failure.detail == "cap_kill" => Some(
            "the sandbox's processes run under subordinate ids and only CAP_KILL lets Warden \
             end them: give it that capability (docker run --cap-add KILL; Kubernetes \
             securityContext.capabilities.add: [KILL])"
                .into(),
        ),
        Stage::Supervisor if failure.detail == "clone" => user_namespaces(errno, host),
        // Switching to the subordinate root before the clone, or writing the maps after it.
        Stage::Supervisor if matches!(failure.detail.as_str(), "setegid" | "seteuid") => {
            Some(subids())
        }
        Stage::IdMap => Some(subids()),
        Stage::Mounts if failure.detail.contains("/proc") => Some(
            "Warden needs CAP_SYS_ADMIN in the container to make the sandbox its own procfs \
             (docker run --cap-add SYS_ADMIN; it widens what the container's root may do), or \
             an unmasked /proc (--security-opt systempaths=unconfined, Kubernetes \
             securityContext.procMount: Unmasked; the container's root can then write \
             /proc/sys, so only in a disposable VM or runner), or --allow-host-proc to accept \
             the weaker view"
                .into(),
        ),
        _ => None,
    }
}

/// Why a user namespace could not be created (`clone` failed with `errno`).
fn user_namespaces(errno: i32, host: &Host) -> Option<String> {
    if host.max_user_namespaces == Some(0) || errno == libc::ENOSPC || errno == libc::EUSERS {
        return Some(
            "user namespaces are disabled or used up (user.max_user_namespaces is \
             {max}): sysctl -w user.max_user_namespaces=15000 (on the host, for a container)"
                .replace(
                    "{max}",
                    &host
                        .max_user_namespaces
                        .map_or("unknown".into(), |m| m.to_string()),
                ),
        );
    }
    if errno != libc::EPERM && errno != libc::EACCES {
        return None;
    }
    if host.apparmor_restrict_userns == Some(1) {
        return Some(
            "AppArmor restricts unprivileged user namespaces \
             (kernel.apparmor_restrict_unprivileged_userns=1): load an AppArmor profile for \
             warden that allows `userns,`, or sysctl -w \
             kernel.apparmor_restrict_unprivileged_userns=0; in Docker: --security-opt \
             apparmor=unconfined"
                .into(),
        );
    }
    if host.unprivileged_userns_clone == Some(0) {
        return Some(
            "unprivileged user namespaces are off (kernel.unprivileged_userns_clone=0; Warden \
             creates its namespace as a subordinate, unprivileged user): sysctl -w \
             kernel.unprivileged_userns_clone=1"
                .into(),
        );
    }
    if host.seccomp_filtered {
        return Some(
            "a seccomp filter refuses user namespaces (the default profiles of Docker, \
             containerd and Podman do): give the container a profile that is the default plus \
             clone and unshare with CLONE_NEWUSER (docker run --security-opt \
             seccomp=PROFILE.json; Kubernetes: securityContext.seccompProfile.type: Localhost), \
             or, in a disposable runner only, --security-opt seccomp=unconfined (Kubernetes: \
             seccompProfile.type: Unconfined)"
                .into(),
        );
    }
    Some(
        "user namespaces are refused here (no known setting explains it: check the container \
         runtime's seccomp and AppArmor or SELinux policy)"
            .into(),
    )
}

/// The subordinate ids could not be mapped.
fn subids() -> String {
    "the jail's subordinate ids (from /etc/subuid and /etc/subgid, else 100000:65536) are not \
     mapped here: in a container with its own user namespace, add `root:START:65536` lines to \
     /etc/subuid and /etc/subgid with a range that /proc/self/uid_map covers"
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clone_failed(errno: i32) -> SetupFailure {
        SetupFailure::errno(
            Stage::Supervisor,
            "clone",
            nix::errno::Errno::from_raw(errno),
        )
    }

    #[test]
    fn each_blocker_names_its_setting() {
        let docker = Host {
            seccomp_filtered: true,
            max_user_namespaces: Some(15000),
            ..Host::default()
        };
        let h = hint(&clone_failed(libc::EPERM), &docker).unwrap();
        assert!(h.contains("--security-opt seccomp=unconfined"), "{h}");
        assert!(h.contains("seccompProfile.type: Unconfined"), "{h}");
        let ubuntu = Host {
            apparmor_restrict_userns: Some(1),
            ..Host::default()
        };
        let h = hint(&clone_failed(libc::EACCES), &ubuntu).unwrap();
        assert!(
            h.contains("kernel.apparmor_restrict_unprivileged_userns=0"),
            "{h}"
        );
        let debian = Host {
            unprivileged_userns_clone: Some(0),
            ..Host::default()
        };
        let h = hint(&clone_failed(libc::EPERM), &debian).unwrap();
        assert!(h.contains("kernel.unprivileged_userns_clone=1"), "{h}");
        let off = Host {
            max_user_namespaces: Some(0),
            ..Host::default()
        };
        let h = hint(&clone_failed(libc::ENOSPC), &off).unwrap();
        assert!(h.contains("user.max_user_namespaces=15000"), "{h}");
        assert!(h.contains("is 0"), "{h}");
        let maps = SetupFailure::plain(Stage::IdMap, "writing id maps");
        assert_eq!(hint(&maps, &Host::default()), None, "no errno, no guess");
        let maps = SetupFailure::errno(Stage::IdMap, "writing id maps", nix::errno::Errno::EPERM);
        assert!(
            hint(&maps, &Host::default())
                .unwrap()
                .contains("/etc/subuid")
        );
        let other = SetupFailure::errno(Stage::Landlock, "x", nix::errno::Errno::EPERM);
        assert_eq!(hint(&other, &Host::default()), None);
    }
}
