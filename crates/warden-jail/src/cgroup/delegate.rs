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
use std::os::fd::AsFd;
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

/// Find, without moving anything, where run groups go (a jail helper: its caller arranged,
/// and `caller_why` is the caller's own account, kept when nothing is found).
pub(crate) fn detect_only(caller_why: Option<String>) -> &'static Delegation {
    DELEGATION.get_or_init(|| {
        let found = arrange(false);
        match caller_why {
            Some(why) if !found.usable() => Delegation::none(why),
            _ => found,
        }
    })
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
        .any(|c| c.limits() && bound.split_whitespace().any(|b| b == c.v2_name()))
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
    // Only at the root of our cgroup namespace (a container's own group): elsewhere a read-only
    // cgroup file system is the operator's choice (systemd's ProtectControlGroups=).
    let at_ns_root = own_path(|id, _| id == "0").is_some_and(|p| p == Path::new("/"));
    let (mnt, dir) = if super::hierarchies().v2_read_only && at_ns_root {
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
    let h = super::hierarchies();
    let mnt = h.v2?;
    let own = own_path(|id, _| id == "0")?;
    let dir = super::join_rel(&mnt, &h.v2_root, &own);
    Some((mnt, dir))
}

/// A place usable without moving: our leaf's parent, or our own group when it may have
/// children with controllers (the root group).
fn already(dir: &Path) -> Option<Delegation> {
    if dir.file_name().is_some_and(|n| n == LEAF) {
        let parent = dir.parent()?;
        if !owned_by_us(parent) || !owned_by_us(dir) {
            return None;
        }
        let enabled = fs::read_to_string(parent.join("cgroup.subtree_control")).ok()?;
        let have = Controller::wanted()
            .into_iter()
            .filter(|c| enabled.split_whitespace().any(|e| e == c.v2_name()))
            .collect::<Vec<_>>();
        return have
            .iter()
            .any(|c| c.limits())
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
    if !have.iter().any(|c| c.limits()) {
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
    // Only groups of our own: a user who owns a delegated subtree must not hold the groups a
    // root Warden limits its runs with (they could move a run's processes out of its group).
    if !owned_by_us(dir) || !owned_by_us(&leaf) {
        return Err(format!("{} is not owned by Warden's user", leaf.display()));
    }
    let me = std::process::id().to_string();
    fs::write(leaf.join("cgroup.procs"), &me)
        .map_err(|e| format!("cannot move into {}: {e}", leaf.display()))?;
    let mut enabled = enable(dir);
    // At the root of our cgroup namespace (a container's own group), every process in it is
    // the container's: they join the leaf too, as container entrypoints that nest cgroups do.
    let mut moved = Vec::new();
    if enabled
        .as_ref()
        .is_err_and(|e| e.raw_os_error() == Some(libc::EBUSY))
        && ns_root
    {
        for pid in fs::read_to_string(dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
        {
            // One that exited meanwhile is no matter.
            if fs::write(leaf.join("cgroup.procs"), pid).is_ok() {
                moved.push(pid.to_owned());
            }
        }
        enabled = enable(dir);
    }
    match enabled {
        Ok(have) => Ok(Delegation::at(dir.to_owned(), have, how)),
        Err(e) => {
            for pid in moved.iter().chain(std::iter::once(&me)) {
                let _ = fs::write(dir.join("cgroup.procs"), pid);
            }
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
    // The scope stays in the slice we came from (its limits keep applying to us).
    let slice = own_path(|id, _| id == "0").and_then(|own| {
        own.ancestors()
            .filter_map(|a| a.file_name()?.to_str().map(str::to_owned))
            .find(|n| n.ends_with(".slice"))
    });
    let wait = systemd::CALL_TIMEOUT + Duration::from_secs(1);
    if crate::sys::thread_count() == Some(1) {
        in_child(wait, || systemd::start_scope(&unit, pid, slice.as_deref()))?;
    } else {
        // On a thread of its own, so a manager that never answers costs us `wait`, not a hang.
        let (tx, rx) = std::sync::mpsc::channel();
        let (u, s) = (unit.clone(), slice.clone());
        std::thread::Builder::new()
            .name("warden-systemd-scope".into())
            .spawn(move || {
                let _ = tx.send(systemd::start_scope(&u, pid, s.as_deref()));
            })
            .map_err(|e| format!("no thread for the systemd request: {e}"))?;
        rx.recv_timeout(wait)
            .map_err(|_| format!("systemd did not answer within {}s", wait.as_secs()))??;
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

/// Whether systemd marked `dir` as delegated. Only the `trusted.` attribute counts: whoever
/// owns a delegated user subtree can set `user.delegate` on it.
fn delegated(dir: &Path) -> bool {
    crate::sys::has_xattr(dir, c"trusted.delegate")
}

/// Whether `dir` belongs to our effective user.
fn owned_by_us(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    fs::symlink_metadata(dir)
        .is_ok_and(|m| m.is_dir() && m.uid() == nix::unistd::geteuid().as_raw())
}

/// Run `f` in a short-lived child (this single-threaded process must stay so: the D-Bus client
/// starts threads), returning its result; a child still running after `wait` is killed.
fn in_child(wait: Duration, f: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    use std::io::{Read, Write};
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| e.to_string())?;
    match crate::sys::fork_single_threaded().map_err(|e| format!("fork: {e}"))? {
        crate::sys::CloneResult::Child => {
            drop(r);
            // A panic must not unwind through the parent's frames copied into this child.
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
                .unwrap_or_else(|_| Err("the systemd request panicked".into()));
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
            let ms = i32::try_from(wait.as_millis().min(60_000)).unwrap_or(60_000);
            let timeout =
                nix::poll::PollTimeout::try_from(ms).unwrap_or(nix::poll::PollTimeout::NONE);
            let mut fds = [nix::poll::PollFd::new(
                r.as_fd(),
                nix::poll::PollFlags::POLLIN,
            )];
            if matches!(nix::poll::poll(&mut fds, timeout), Ok(0) | Err(_)) {
                let _ = nix::sys::signal::kill(child, nix::sys::signal::Signal::SIGKILL);
            }
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

    /// The group a child test process takes a leaf of (see below).
    const LEAF_GROUP: &str = "WARDEN_TEST_LEAF_GROUP";

    /// Taking a leaf moves the calling process, so the test runs in a child process of this
    /// test binary, in a group of a cgroup2 mount of its own (see `V2Mount`).
    #[test]
    fn taking_a_leaf_moves_us_and_enables_controllers_or_undoes_the_move() {
        let m = crate::cgroup::tests::V2Mount::new("leaf");
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "cgroup::delegate::tests::leaf_in_a_child",
                "--ignored",
                "--nocapture",
            ])
            .env(LEAF_GROUP, &m.group)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{text}");
        assert!(
            text.contains("leaf checked: "),
            "the child test did not run: {text}"
        );
    }

    #[test]
    #[ignore = "run in a child process by taking_a_leaf_moves_us_and_enables_controllers_or_undoes_the_move"]
    fn leaf_in_a_child() {
        let dir = PathBuf::from(std::env::var_os(LEAF_GROUP).expect("run by its parent test"));
        let me = std::process::id().to_string();
        let own = || fs::read_to_string("/proc/self/cgroup").unwrap();
        let in_group = |suffix: &str| {
            own()
                .lines()
                .any(|l| l.starts_with("0::") && l.ends_with(suffix))
        };
        let name = dir.file_name().unwrap().to_str().unwrap().to_owned();
        fs::write(dir.join("cgroup.procs"), &me).unwrap();
        assert!(in_group(&format!("/{name}")), "{}", own());
        let offered = fs::read_to_string(dir.join("cgroup.controllers")).unwrap();
        let limits = ["memory", "pids", "cpu"]
            .iter()
            .any(|c| offered.split_whitespace().any(|o| o == *c));

        // Another process in the group: the controllers cannot be enabled (EBUSY on a v2
        // host; none offered on a v1 one). The move is undone and the leaf removed.
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        fs::write(dir.join("cgroup.procs"), other.id().to_string()).unwrap();
        let refused = leaf(&dir, "leaf of our group").unwrap_err();
        let _ = other.kill();
        let _ = other.wait();
        assert!(in_group(&format!("/{name}")), "not moved back: {}", own());
        assert!(!dir.join(LEAF).exists(), "the leaf was left behind");
        if limits {
            assert!(
                refused.contains("holds processes that are not Warden's"),
                "{refused}"
            );
            // Alone in the group: we move into the leaf and the run groups get controllers.
            let got = leaf(&dir, "leaf of our group").unwrap();
            assert_eq!(got.base.as_deref(), Some(dir.as_path()));
            assert!(got.controllers.contains(&Controller::Memory), "{got:?}");
            assert!(in_group(&format!("/{name}/{LEAF}")), "{}", own());
            let enabled = fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap();
            assert!(
                enabled.split_whitespace().any(|c| c == "memory"),
                "{enabled}"
            );
            // Leave so the parent test can remove the groups.
            let root = dir.parent().unwrap();
            fs::write(root.join("cgroup.procs"), &me).unwrap();
        } else {
            assert!(refused.contains("cannot enable controllers"), "{refused}");
        }
        println!("leaf checked: controllers offered: {limits}");
    }

    #[test]
    fn a_leaf_whose_parent_enables_nothing_is_not_used() {
        let t = tempfile::tempdir().unwrap();
        let leaf = t.path().join(LEAF);
        fs::create_dir(&leaf).unwrap();
        fs::write(t.path().join("cgroup.subtree_control"), "").unwrap();
        assert_eq!(already(&leaf), None);
        // Counting alone limits nothing.
        fs::write(t.path().join("cgroup.subtree_control"), "io\n").unwrap();
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
            vec![
                Controller::Memory,
                Controller::Pids,
                Controller::Cpu,
                Controller::Io
            ]
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
            vec![
                Controller::Memory,
                Controller::Pids,
                Controller::Cpu,
                Controller::Io
            ]
        );
        assert_eq!(
            fs::read_to_string(t.path().join("cgroup.subtree_control")).unwrap(),
            "+memory +pids +cpu +io"
        );
    }
}
