//! Where the jail's `/proc` comes from, including inside containers.
//!
//! The jail normally mounts a fresh procfs for its own pid namespace from inside its user
//! namespace. The kernel refuses that ("mount too revealing", `EPERM`) when no procfs of the
//! jail's mount namespace is fully visible — which is what container runtimes cause when they
//! mask `/proc/sys`, `/proc/kcore`, `/proc/keys`… with mounts of their own (Docker, Podman,
//! Kubernetes, most CI containers). The supervisor sees those masks in its mount table and
//! then, in order:
//!
//! 1. [`ProcSource::Handed`]: makes the fresh procfs itself, with the caller's privileges, from
//!    a short-lived process that has joined the jail's pid namespace (`setns`, then `fork`, then
//!    `fsopen("proc")`/`fsmount`), and hands the detached mount to the init, which attaches it
//!    as it would its own. Same guarantees as on a bare host: only the jail's processes, and
//!    the same read-only binds over `/proc/sys` and friends. Needs `CAP_SYS_ADMIN` in the
//!    container's mount namespace (root on the host, `--cap-add SYS_ADMIN`, a privileged pod).
//! 2. [`ProcSource::HostBind`]: where that is refused too, and only when the policy allows it
//!    (`allow_host_proc`), the container's own `/proc` is bound read-only, masks included.
//!    Weaker, and said so on stderr: the jail then lists the container's processes with their
//!    command lines and reads the container's network tables (`/proc/<pid>/net`); it still
//!    cannot read their memory, environment or descriptors, which belong to other users.
//!    Without that permission the run fails, naming the settings that would fix it.
//!
//! Without masks the jail mounts its own, as always ([`ProcSource::Fresh`]).

use std::os::fd::{AsRawFd, OwnedFd};

use nix::errno::Errno;
use nix::sched::CloneFlags;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use crate::error::{SetupFailure, Stage};
use crate::protocol::{recv_record, send_record};
use crate::sys::{self, CloneResult};

/// Where the jail's `/proc` comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcSource {
    /// The init mounts a fresh procfs itself.
    #[default]
    Fresh,
    /// The supervisor made a fresh procfs for the jail's pid namespace; it travels with the
    /// host mounts, targeted at `/proc`.
    Handed,
    /// The host's (container's) `/proc`, bound read-only with its masks.
    HostBind,
}

/// Whether `mountinfo` (the text of `/proc/self/mountinfo`) has mounts on top of `/proc`: the
/// masks of a container runtime, which stop a user namespace from mounting a procfs. (Mounts
/// on the directories the kernel keeps empty for them — `binfmt_misc`, `nfsd`, `openprom` —
/// do not count: the kernel does not count them either.)
pub fn masked(mountinfo: &str) -> bool {
    const EMPTY_MOUNT_POINTS: &[&str] = &[
        "/proc/sys/fs/binfmt_misc",
        "/proc/fs/nfsd",
        "/proc/openprom",
    ];
    mountinfo.lines().any(|l| {
        l.split(' ').nth(4).is_some_and(|point| {
            point.starts_with("/proc/") && !EMPTY_MOUNT_POINTS.contains(&point)
        })
    })
}

/// Decide where the jail's `/proc` comes from for a jail whose init is `init`; for
/// [`ProcSource::Handed`] the procfs is returned too. `warn`: say so on stderr when the
/// answer is the weaker [`ProcSource::HostBind`].
pub(crate) fn plan(
    init: Pid,
    allow_host: bool,
    warn: bool,
) -> Result<(ProcSource, Option<OwnedFd>), SetupFailure> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    if !masked(&mountinfo) {
        return Ok((ProcSource::Fresh, None));
    }
    match for_pid_namespace(init) {
        Ok(fd) => {
            tracing::debug!("/proc is masked here; the jail gets a procfs made by the supervisor");
            Ok((ProcSource::Handed, Some(fd)))
        }
        Err(e) if allow_host => {
            tracing::debug!("no fresh procfs here ({e}): binding this /proc read-only");
            if warn {
                say_weaker();
            }
            Ok((ProcSource::HostBind, None))
        }
        Err(e) => Err(SetupFailure::errno(
            Stage::Mounts,
            "/proc is masked here (a container) and no fresh procfs can be made for the \
             sandbox; the container's own /proc would show it the container's processes, their \
             command lines and network tables: allow that with --allow-host-proc (policy \
             allow_host_proc)",
            e,
        )),
    }
}

/// Say (once per process: see the callers) that the jail's `/proc` is the container's.
pub(crate) fn say_weaker() {
    tracing::warn!(
        "weaker sandbox: /proc is masked here (a container) and no fresh procfs can be mounted, \
         so the sandbox sees this /proc read-only, which lists the container's processes; to \
         keep the pid view private give Warden CAP_SYS_ADMIN (docker run --cap-add SYS_ADMIN) \
         or unmask /proc (docker run --security-opt systempaths=unconfined; Kubernetes: \
         securityContext.procMount: Unmasked)"
    );
}

/// A fresh procfs for the pid namespace of `init`, made from a child that joins that
/// namespace. Only call from a single-threaded process (it forks).
pub(crate) fn for_pid_namespace(init: Pid) -> Result<OwnedFd, Errno> {
    let pidfd = sys::pidfd_open(init)?;
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?;
    match sys::fork_single_threaded()? {
        CloneResult::Child => {
            drop(ours);
            // `setns(CLONE_NEWPID)` moves only our children into the namespace: the mount is
            // made by a grandchild, whose active pid namespace is the jail's.
            // A pidfd names the namespace on Linux 5.8 and later; before, its /proc file does.
            let joined = nix::sched::setns(&pidfd, CloneFlags::CLONE_NEWPID).or_else(|_| {
                let ns = std::fs::File::open(format!("/proc/{init}/ns/pid"))
                    .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
                nix::sched::setns(ns, CloneFlags::CLONE_NEWPID)
            });
            let made = joined.and_then(|()| match sys::fork_single_threaded()? {
                CloneResult::Child => {
                    let sent = match sys::new_procfs() {
                        Ok(fd) => send_record(&theirs, b"ok", &[fd.as_raw_fd()]),
                        Err(e) => send_record(&theirs, &(e as i32).to_le_bytes(), &[]),
                    };
                    sys::exit_now(i32::from(sent.is_err()))
                }
                CloneResult::Parent(pid) => match waitpid(pid, None)? {
                    WaitStatus::Exited(_, 0) => Ok(()),
                    _ => Err(Errno::ECHILD),
                },
            });
            if let Err(e) = made {
                let _ = send_record(&theirs, &(e as i32).to_le_bytes(), &[]);
            }
            sys::exit_now(0)
        }
        CloneResult::Parent(child) => {
            drop(theirs);
            // Bounded: a helper that hangs must not hang the run (its children are killed).
            let mut fds = [nix::poll::PollFd::new(
                std::os::fd::AsFd::as_fd(&ours),
                nix::poll::PollFlags::POLLIN,
            )];
            let ready = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(5000u16));
            let got = match ready {
                Ok(n) if n > 0 => recv_record(&ours, 16),
                _ => Err(Errno::ETIMEDOUT),
            };
            if got.is_err() {
                let _ = nix::sys::signal::kill(child, nix::sys::signal::Signal::SIGKILL);
            }
            let _ = waitpid(child, None);
            let (body, mut fds) = got?;
            match fds.pop() {
                Some(fd) => Ok(fd),
                None => {
                    let raw = body.get(..4).and_then(|b| <[u8; 4]>::try_from(b).ok());
                    Err(raw.map_or(Errno::EIO, |b| Errno::from_raw(i32::from_le_bytes(b))))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_over_proc_are_seen() {
        let bare = "22 1 0:21 / /proc rw,nosuid - proc proc rw\n\
                    23 1 0:22 / /sys rw - sysfs sysfs rw\n";
        assert!(!masked(bare));
        let docker = "22 1 0:21 / /proc rw,nosuid - proc proc rw\n\
                      40 22 0:30 /bus /proc/bus ro - proc proc rw\n\
                      41 22 0:5 /null /proc/kcore rw - devtmpfs udev rw\n";
        assert!(masked(docker));
        // A path that merely starts like /proc is not a mask, nor is binfmt_misc.
        assert!(!masked("30 1 0:40 / /procs rw - tmpfs t rw\n"));
        assert!(!masked(
            "31 22 0:41 / /proc/sys/fs/binfmt_misc rw - binfmt_misc b rw\n"
        ));
        // Review finding: an NFS server's nfsd mount made a bare host look like a container.
        assert!(!masked("32 22 0:42 / /proc/fs/nfsd rw - nfsd nfsd rw\n"));
    }
}
