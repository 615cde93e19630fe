//! User and group id mapping of the jail's user namespace.
//!
//! When Warden runs as root, the jail's ids come from a subordinate range (`/etc/subuid` and
//! `/etc/subgid` for the invoking user, or 100000:65536 when the files have no entry): inside
//! root (used only during set-up) maps to the range's first id and the command's uid `U` to
//! `first + U`, so the command is an unprivileged host user distinct from the caller, and
//! per-uid limits, keyrings and inotify instances are not shared with the host.
//! The workspace is then mounted idmapped, so files keep the workspace owner's ids on disk.
//!
//! Unprivileged callers can only map their own ids: the command's uid maps to the caller's.

use std::fs;
use std::os::fd::OwnedFd;

use nix::errno::Errno;
use nix::unistd::{Gid, Pid, Uid};

use crate::sys::{self, CloneResult};

/// Fallback subordinate range when `/etc/subuid` has none for the caller.
const DEFAULT_SUB_START: u32 = 100_000;
const DEFAULT_SUB_COUNT: u32 = 65_536;

/// The id layout of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdPlan {
    /// Whether we may map arbitrary ids (root in the initial user namespace).
    pub privileged: bool,
    /// Command uid inside.
    pub uid: u32,
    /// Command gid inside.
    pub gid: u32,
    /// Host uid of the command.
    pub host_uid: u32,
    /// Host gid of the command.
    pub host_gid: u32,
    /// Host uid/gid of inside root (privileged only).
    pub host_root: Option<(u32, u32)>,
}

fn sub_range(file: &str, name: Option<&str>, id: u32) -> Option<(u32, u32)> {
    let text = fs::read_to_string(file).ok()?;
    text.lines().find_map(|l| {
        let mut f = l.trim().split(':');
        let (who, start, count) = (f.next()?, f.next()?, f.next()?);
        let matches = Some(who) == name || who == id.to_string();
        if !matches {
            return None;
        }
        Some((start.parse().ok()?, count.parse().ok()?))
    })
}

/// Work out the id layout for a command that runs as `uid`:`gid` inside.
pub fn plan(uid: u32, gid: u32) -> IdPlan {
    let euid = Uid::effective();
    let egid = Gid::effective();
    if !euid.is_root() {
        return IdPlan {
            privileged: false,
            uid,
            gid,
            host_uid: euid.as_raw(),
            host_gid: egid.as_raw(),
            host_root: None,
        };
    }
    let name = nix::unistd::User::from_uid(euid)
        .ok()
        .flatten()
        .map(|u| u.name);
    let pick = |file: &str, want: u32| {
        let (start, count) = sub_range(file, name.as_deref(), euid.as_raw())
            .unwrap_or((DEFAULT_SUB_START, DEFAULT_SUB_COUNT));
        // An id outside the range falls back to its last id.
        (
            start,
            start.saturating_add(want.min(count.saturating_sub(1))),
        )
    };
    let (uroot, host_uid) = pick("/etc/subuid", uid);
    let (groot, host_gid) = pick("/etc/subgid", gid);
    IdPlan {
        privileged: true,
        uid,
        gid,
        host_uid,
        host_gid,
        host_root: Some((uroot, groot)),
    }
}

impl IdPlan {
    fn uid_map(&self) -> String {
        match self.host_root {
            Some((r, _)) if self.uid != 0 => format!("0 {r} 1\n{} {} 1\n", self.uid, self.host_uid),
            _ => format!("{} {} 1\n", self.uid, self.host_uid),
        }
    }
    fn gid_map(&self) -> String {
        match self.host_root {
            Some((_, r)) if self.gid != 0 => format!("0 {r} 1\n{} {} 1\n", self.gid, self.host_gid),
            _ => format!("{} {} 1\n", self.gid, self.host_gid),
        }
    }

    /// Write the maps of the user namespace of `pid` (which must have just created it).
    pub fn write_maps(&self, pid: Pid) -> std::io::Result<()> {
        let dir = format!("/proc/{}", pid.as_raw());
        if !self.privileged {
            fs::write(format!("{dir}/setgroups"), "deny")?;
        }
        fs::write(format!("{dir}/uid_map"), self.uid_map())?;
        fs::write(format!("{dir}/gid_map"), self.gid_map())
    }
}

/// A user namespace whose maps make files owned by `owner` (uid, gid) appear as owned by the
/// command's host ids, for an idmapped mount. Privileged callers only.
///
/// The namespace needs a process to exist: a child is cloned straight into it and killed as soon
/// as its namespace is open, so it never has to be scheduled.
pub fn idmap_userns(plan: &IdPlan, owner: (u32, u32)) -> Result<OwnedFd, Errno> {
    let parent = nix::unistd::getpid();
    let child = match sys::clone_into_namespaces(libc::CLONE_NEWUSER)? {
        CloneResult::Child => {
            // Normally killed before it is ever scheduled; if the supervisor dies first, go too.
            let _ = nix::sys::prctl::set_pdeathsig(Some(nix::sys::signal::Signal::SIGKILL));
            if nix::unistd::getppid() != parent {
                sys::exit_now(0);
            }
            loop {
                nix::unistd::pause();
            }
        }
        CloneResult::Parent(pid) => pid,
    };
    let result = (|| {
        let dir = format!("/proc/{}", child.as_raw());
        let io = |e: std::io::Error| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO));
        fs::write(
            format!("{dir}/uid_map"),
            format!("{} {} 1\n", owner.0, plan.host_uid),
        )
        .map_err(io)?;
        fs::write(
            format!("{dir}/gid_map"),
            format!("{} {} 1\n", owner.1, plan.host_gid),
        )
        .map_err(io)?;
        let fd = fs::File::open(format!("{dir}/ns/user")).map_err(io)?;
        Ok(OwnedFd::from(fd))
    })();
    let _ = nix::sys::signal::kill(child, nix::sys::signal::Signal::SIGKILL);
    let _ = nix::sys::wait::waitpid(child, None);
    result
}

/// Whether this kernel can id-map a tmpfs (Linux 6.3 and later). Before, a writable bind of a
/// tmpfs cannot be id-mapped, and the jail's user must own it outright.
pub fn tmpfs_can_idmap() -> bool {
    static CAN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *CAN.get_or_init(|| crate::sys::kernel_at_least(6, 3))
}

/// Hand `dir` (a tmpfs Warden made for its jails) and everything in it to the jail's user
/// (`uid`:`gid` inside) by ownership, where the kernel cannot id-map a tmpfs and we are root;
/// nothing otherwise. A writable bind of a folder its jail user already owns needs no id map.
pub fn give_tmpfs_to_jail_user(dir: &std::path::Path, uid: u32, gid: u32) -> std::io::Result<()> {
    if tmpfs_can_idmap() {
        return Ok(());
    }
    let p = plan(uid, gid);
    if !p.privileged {
        return Ok(());
    }
    // Only a tmpfs, and nothing off it: a link swapped in for a folder leads to another file
    // system (the host's), whose device differs, and is refused there.
    let tmpfs = nix::sys::statfs::statfs(dir)
        .is_ok_and(|f| f.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC);
    if !tmpfs {
        return Err(std::io::Error::other(format!(
            "{} is not a tmpfs",
            dir.display()
        )));
    }
    let dev = std::os::unix::fs::MetadataExt::dev(&fs::symlink_metadata(dir)?);
    chown_tree(dir, dev, (p.host_uid, p.host_gid), 0)
}

fn chown_tree(
    path: &std::path::Path,
    dev: u64,
    (uid, gid): (u32, u32),
    depth: u32,
) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    // Warden's own small trees (a decoy home, a fresh workspace): links are never followed.
    let meta = fs::symlink_metadata(path)?;
    if meta.dev() != dev {
        return Err(std::io::Error::other(format!(
            "{} left the tmpfs",
            path.display()
        )));
    }
    std::os::unix::fs::lchown(path, Some(uid), Some(gid))?;
    if meta.is_dir() && depth < 64 {
        for entry in fs::read_dir(path)? {
            let entry = entry?;
            if entry.metadata()?.dev() != dev {
                return Err(std::io::Error::other("an entry left the tmpfs"));
            }
            chown_tree(&entry.path(), dev, (uid, gid), depth + 1)?;
        }
    }
    Ok(())
}
