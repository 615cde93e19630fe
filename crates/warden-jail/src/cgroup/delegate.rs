//! Where this process may make cgroup v2 run groups, arranged once per process.
//!
//! cgroup v2 lets a group hand controllers to its children only while it holds no process
//! itself (the "no internal processes" rule: `cgroup.subtree_control` answers `EBUSY`), and a
//! systemd host owns every group it did not delegate. So, the way container runtimes do it:
//! - a process already in Warden's leaf (`…/warden-supervisor`, a helper started by a Warden
//!   that arranged this) uses the leaf's parent, as is;
//! - on a systemd host, unless our group was delegated to us, Warden asks systemd for a
//!   transient scope with `Delegate=yes` holding this process (see [`super::systemd`]);
//! - then (in that scope, in a delegated unit, in a container's own cgroup namespace, on a
//!   host without systemd) Warden moves itself into a leaf `warden-supervisor` of its group and
//!   enables the controllers in the group, so run groups are made beside the leaf.
//!
//! Guarantees: arranged at most once per process, before the caller starts any jail (its
//! helpers then start in the leaf); a move that cannot complete is undone (the process goes
//! back to the group it came from); when no path works, the reason is kept for the outcome and
//! the once-per-process warning, never silently dropped. A process that is not root, or is a
//! jail helper, never moves itself or talks to systemd.

use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::{Controller, own_path, systemd};

/// The leaf that holds Warden's own processes.
pub(super) const LEAF: &str = "warden-supervisor";

/// How long to wait for systemd to move us into the new scope.
const SCOPE_WAIT: Duration = Duration::from_secs(3);

/// Where run groups go, and how that place was obtained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delegation {
    /// The group under which run groups are made (its `cgroup.subtree_control` enables
    /// `controllers`); `None` when cgroup v2 cannot be used.
    pub(super) base: Option<PathBuf>,
    /// The v2 controllers enabled for run groups.
    pub(super) controllers: Vec<Controller>,
    /// How: `own group`, `inherited leaf`, `leaf of our group`, `systemd scope NAME`, or why
    /// none (one line).
    pub how: String,
}

impl Delegation {
    fn none(why: impl Into<String>) -> Delegation {
        Delegation {
            base: None,
            controllers: Vec::new(),
            how: why.into(),
        }
    }
    fn at(base: PathBuf, controllers: Vec<Controller>, how: impl Into<String>) -> Delegation {
        Delegation {
            base: Some(base),
            controllers,
            how: how.into(),
        }
    }
    /// Whether run groups can be made in cgroup v2.
    pub fn usable(&self) -> bool {
        self.base.is_some()
    }
}

static DELEGATION: OnceLock<Delegation> = OnceLock::new();

/// Arrange, once per process, where this process's jails get their cgroup v2 run groups; may
/// move this process into a leaf of its group or into a systemd scope. Call before starting
/// jails (and, for a process that must stay single-threaded, before it starts threads: the
/// systemd request is then made from a short-lived child process).
pub fn establish() -> &'static Delegation {
    DELEGATION.get_or_init(|| arrange(true))
}

/// Find, without moving anything, where run groups go (a jail helper: its caller arranged).
pub(crate) fn detect_only() -> &'static Delegation {
    DELEGATION.get_or_init(|| arrange(false))
}

fn arrange(may_move: bool) -> Delegation {
    let Some((mnt, dir)) = own_v2_dir() else {
        return Delegation::none("no cgroup v2 hierarchy");
    };
    if let Some(found) = already(&dir) {
        return found;
    }
    if !may_move {
        return Delegation::none(format!(
            "cgroup {} cannot have run groups and this process does not move itself",
            dir.display()
        ));
    }
    let bound = fs::read_to_string(mnt.join("cgroup.controllers")).unwrap_or_default();
    if !Controller::wanted()
        .iter()
        .any(|c| bound.split_whitespace().any(|b| b == c.v2_name()))
    {
        return Delegation::none(
            "cgroup v2 holds no memory, pids or cpu controller here (they are on cgroup v1)",
        );
    }
    if !nix::unistd::geteuid().is_root() {
        return Delegation::none("not root: cgroup v2 delegation is not attempted");
    }
    // A read-only cgroup file system (a container's): a read-write one of our own shows the
    // same groups (rooted at our cgroup namespace), without touching the container's mount.
    let (mnt, dir) = if super::hierarchies().v2_read_only {
        match mount_own(&mnt) {
            Ok(()) => match own_v2_dir() {
                Some(found) => found,
                None => return Delegation::none("the cgroup2 file system Warden mounted is gone"),
            },
            Err(e) => {
                return Delegation::none(format!(
                    "{} is read-only and Warden cannot mount its own cgroup2 at {OWN_MOUNT}: {e}",
                    mnt.display()
                ));
            }
        }
    } else {
        (mnt, dir)
    };
    if let Some(found) = already(&dir) {
        return found;
    }
    let mut why = Vec::new();
    if systemd::booted() && !delegated(&dir) {
        match scope(&mnt) {
            Ok(d) => return d,
            Err(e) => why.push(e),
        }
    }
    let (_, dir) = own_v2_dir().unwrap_or((mnt, dir));
    match leaf(&dir, "leaf of our group") {
        Ok(d) => d,
        Err(e) => {
            why.push(e);
            Delegation::none(why.join("; "))
        }
    }
}

/// Where Warden mounts a cgroup2 file system of its own when the one it was given is
/// read-only (a container runtime mounts the container's `/sys/fs/cgroup` so).
const OWN_MOUNT: &str = "/run/warden/cgroup2";

/// The unified hierarchy's mount point and our group's directory in it.
fn own_v2_dir() -> Option<(PathBuf, PathBuf)> {
    let mnt = super::hierarchies().v2?;
    let own = own_path(|id, _| id == "0")?;
    let dir = super::join_rel(&mnt, Path::new("/"), &own);
    Some((mnt, dir))
}

/// A place usable without moving: our leaf's parent, or our own group when it may have
/// children with controllers (the root group).
fn already(dir: &Path) -> Option<Delegation> {
    if dir.file_name().is_some_and(|n| n == LEAF) {
        let parent = dir.parent()?;
        let enabled = fs::read_to_string(parent.join("cgroup.subtree_control")).ok()?;
        let have = Controller::wanted()
            .into_iter()
            .filter(|c| enabled.split_whitespace().any(|e| e == c.v2_name()))
            .collect::<Vec<_>>();
        return (!have.is_empty())
            .then(|| Delegation::at(parent.to_owned(), have, "inherited leaf"));
    }
    enable(dir)
        .ok()
        .map(|have| Delegation::at(dir.to_owned(), have, "own group"))
}

/// Enable the wanted controllers that `dir` is offered for its children.
fn enable(dir: &Path) -> io::Result<Vec<Controller>> {
    let offered = fs::read_to_string(dir.join("cgroup.controllers"))?;
    let have: Vec<Controller> = Controller::wanted()
        .into_iter()
        .filter(|c| offered.split_whitespace().any(|o| o == c.v2_name()))
        .collect();
    if have.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "no memory, pids or cpu controller is offered",
        ));
    }
    let line: Vec<String> = have.iter().map(|c| format!("+{}", c.v2_name())).collect();
    fs::write(dir.join("cgroup.subtree_control"), line.join(" "))?;
    Ok(have)
}

/// Move this process into `dir/warden-supervisor` and enable the controllers in `dir`; undone
/// when the group still holds other processes.
fn leaf(dir: &Path, how: &str) -> Result<Delegation, String> {
    let leaf = dir.join(LEAF);
    // Whether our group is the root of our cgroup namespace (a container's own group).
    let ns_root = own_path(|id, _| id == "0").is_some_and(|p| p == Path::new("/"));
    match fs::create_dir(&leaf) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot make {}: {e}", leaf.display())),
    }
    let me = std::process::id().to_string();
    fs::write(leaf.join("cgroup.procs"), &me)
        .map_err(|e| format!("cannot move into {}: {e}", leaf.display()))?;
    let mut enabled = enable(dir);
    // At the root of our cgroup namespace (a container's own group), every process in it is
    // the container's: they join the leaf too, as container entrypoints that nest cgroups do.
    if enabled
        .as_ref()
        .is_err_and(|e| e.raw_os_error() == Some(libc::EBUSY))
        && ns_root
    {
        for pid in fs::read_to_string(dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .take(4096)
        {
            // One that exited meanwhile is no matter.
            let _ = fs::write(leaf.join("cgroup.procs"), pid);
        }
        enabled = enable(dir);
    }
    match enabled {
        Ok(have) => Ok(Delegation::at(dir.to_owned(), have, how)),
        Err(e) => {
            let _ = fs::write(dir.join("cgroup.procs"), &me);
            let _ = fs::remove_dir(&leaf);
            let busy = e.raw_os_error() == Some(libc::EBUSY);
            Err(if busy {
                format!(
                    "cgroup {} holds processes that are not Warden's (run Warden in a \
                     delegated unit: systemd-run --scope -p Delegate=yes, or a service with \
                     Delegate=yes)",
                    dir.display()
                )
            } else {
                format!("cannot enable controllers in {}: {e}", dir.display())
            })
        }
    }
}

/// Ask systemd for a delegated scope holding this process, wait until we are in it, then
/// take a leaf of it.
fn scope(mnt: &Path) -> Result<Delegation, String> {
    let pid = std::process::id();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let unit = format!("warden-{pid}-{nanos}.scope");
    if single_threaded() {
        in_child(|| systemd::start_scope(&unit, pid))?;
    } else {
        systemd::start_scope(&unit, pid)?;
    }
    let deadline = Instant::now() + SCOPE_WAIT;
    loop {
        if let Some(own) = own_path(|id, _| id == "0")
            && own
                .file_name()
                .is_some_and(|n| n.to_str() == Some(unit.as_str()))
        {
            let dir = super::join_rel(mnt, Path::new("/"), &own);
            return leaf(&dir, &format!("systemd scope {unit}"));
        }
        if Instant::now() > deadline {
            return Err(format!("systemd did not move Warden into {unit}"));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Mount a cgroup2 file system at [`OWN_MOUNT`] (unless one is there already), read-write,
/// rooted at our cgroup namespace like `given`.
fn mount_own(given: &Path) -> Result<(), String> {
    let at = Path::new(OWN_MOUNT);
    if super::hierarchies().v2.as_deref() == Some(at) {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(at)
        .map_err(|e| e.to_string())?;
    let flags = nix::mount::MsFlags::MS_NOSUID
        | nix::mount::MsFlags::MS_NODEV
        | nix::mount::MsFlags::MS_NOEXEC;
    nix::mount::mount(Some("cgroup2"), at, Some("cgroup2"), flags, None::<&str>)
        .map_err(|e| e.to_string())?;
    tracing::debug!(given = %given.display(), "mounted a cgroup2 file system of our own");
    Ok(())
}

/// Whether systemd marked `dir` as delegated (it sets these attributes on delegated groups).
fn delegated(dir: &Path) -> bool {
    crate::sys::has_xattr(dir, c"trusted.delegate") || crate::sys::has_xattr(dir, c"user.delegate")
}

fn single_threaded() -> bool {
    fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.strip_prefix("Threads:").is_some_and(|n| n.trim() == "1"))
    })
}

/// Run `f` in a short-lived child (this single-threaded process must stay so: the D-Bus client
/// starts threads), returning its result.
fn in_child(f: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    use std::io::{Read, Write};
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| e.to_string())?;
    match crate::sys::fork_single_threaded().map_err(|e| format!("fork: {e}"))? {
        crate::sys::CloneResult::Child => {
            drop(r);
            let result = f();
            let mut w = fs::File::from(w);
            let code = match result {
                Ok(()) => 0,
                Err(why) => {
                    let _ = w.write_all(why.as_bytes());
                    1
                }
            };
            crate::sys::exit_now(code);
        }
        crate::sys::CloneResult::Parent(child) => {
            drop(w);
            let mut why = String::new();
            let _ = fs::File::from(r).take(4096).read_to_string(&mut why);
            let status = nix::sys::wait::waitpid(child, None);
            match status {
                Ok(nix::sys::wait::WaitStatus::Exited(_, 0)) => Ok(()),
                _ if !why.is_empty() => Err(why),
                other => Err(format!("the systemd request ended as {other:?}")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leaf_whose_parent_enables_nothing_is_not_used() {
        let t = tempfile::tempdir().unwrap();
        let leaf = t.path().join(LEAF);
        fs::create_dir(&leaf).unwrap();
        fs::write(t.path().join("cgroup.subtree_control"), "").unwrap();
        assert_eq!(already(&leaf), None);
        fs::write(
            t.path().join("cgroup.subtree_control"),
            "cpu memory io pids\n",
        )
        .unwrap();
        let found = already(&leaf).unwrap();
        assert_eq!(found.base.as_deref(), Some(t.path()));
        assert_eq!(
            found.controllers,
            vec![Controller::Memory, Controller::Pids, Controller::Cpu]
        );
    }

    #[test]
    fn a_group_offering_no_wanted_controller_is_refused_with_a_reason() {
        let t = tempfile::tempdir().unwrap();
        fs::write(t.path().join("cgroup.controllers"), "io rdma\n").unwrap();
        let e = enable(t.path()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Unsupported);
        fs::write(
            t.path().join("cgroup.controllers"),
            "cpuset cpu io memory pids\n",
        )
        .unwrap();
        assert_eq!(
            enable(t.path()).unwrap(),
            vec![Controller::Memory, Controller::Pids, Controller::Cpu]
        );
        assert_eq!(
            fs::read_to_string(t.path().join("cgroup.subtree_control")).unwrap(),
            "+memory +pids +cpu"
        );
    }
}
