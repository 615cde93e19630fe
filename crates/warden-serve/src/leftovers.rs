//! What a server leaves on disk while it runs (its private state folder, with the default
//! audit log and workspaces; sessions' own workspaces and snapshot stores under an operator's
//! `workspace_root`), registered so a termination signal removes it as the end of the session
//! would.
//!
//! Guarantees: only registered paths are removed, each once; a path is unregistered when its
//! owner removes it the ordinary way. Shared workspaces under an operator's `workspace_root`
//! are never registered (they outlive the server by design).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The prefix of a session's id (`s<pid>-<n>`), which names its workspace, snapshot store
/// and disk image under an operator's `workspace_root`.
pub(crate) const SESSION: &str = "s";

static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn live() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    LIVE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A live server's hold on a folder it owns (its state folder, a session's `.quota/ID`): an
/// exclusive `flock`, which a sweeping server in any pid namespace sees, so a live session is
/// never taken for an abandoned one however old its folder looks.
#[derive(Debug)]
pub(crate) struct Held {
    _lock: nix::fcntl::Flock<std::fs::File>,
}

/// Hold `dir` for as long as the returned value lives (`None` if it cannot be opened or
/// locked: the folder is then only protected by its age).
pub(crate) fn hold(dir: &Path) -> Option<Held> {
    let f = std::fs::File::open(dir).ok()?;
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock)
        .ok()
        .map(|lock| Held { _lock: lock })
}

/// Whether a live server holds `dir`.
fn held(dir: &Path) -> bool {
    let Ok(f) = std::fs::File::open(dir) else {
        return false;
    };
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockSharedNonblock).is_err()
}

/// Remove `path` (a folder) if the server is ended by a signal.
pub(crate) fn register(path: &Path) {
    live().push(path.to_owned());
}

/// `path` is gone the ordinary way (or must stay): forget it.
pub(crate) fn unregister(path: &Path) {
    live().retain(|p| p != path);
}

/// What a server killed with SIGKILL left in `dir`: folders named `PREFIX<pid>-…` (state
/// folders in the temporary folder, sessions' workspaces, snapshot stores and disk images
/// under an operator's `workspace_root`) after an owner whose pid is gone, untouched for a
/// minute, and not held (a live server holds `held_at/NAME`: its state folder, or a session's
/// `.quota/ID` — the workspace itself is a mount point, whose lock would be on the mounted
/// file system). The pid and age alone could not tell a live server of another pid namespace
/// from a dead one; its lock can. Workspaces mounted in them are unmounted first.
pub(crate) fn sweep_dead(dir: &Path, prefix: &str, held_at: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    for e in entries.flatten() {
        // Under an operator's folder, only names of exactly the shape a session's id has.
        let ours = e.file_name().to_str().is_some_and(|n| {
            prefix != SESSION
                || n.strip_prefix(SESSION)
                    .and_then(|rest| rest.split_once('-'))
                    .is_some_and(|(pid, n)| {
                        [pid, n]
                            .iter()
                            .all(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                    })
        });
        if !ours
            || !warden_jail::abandoned::by_owner(&e, prefix, std::time::Duration::from_secs(60))
            || held(&held_at.join(e.file_name()))
        {
            continue;
        }
        let dir = e.path();
        let mut mounted: Vec<&str> = mountinfo
            .lines()
            .filter_map(|l| l.split(' ').nth(4))
            .filter(|m| Path::new(m).starts_with(&dir))
            .collect();
        mounted.sort_by_key(|m| std::cmp::Reverse(m.len()));
        for m in mounted {
            crate::quota::release(Path::new(m));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Remove everything registered (newest first). For the signal handler, just before exiting;
/// the lock is held throughout, so nothing is registered in between.
pub fn remove_all() {
    let mut paths = live();
    while let Some(p) = paths.pop() {
        crate::quota::release(&p);
        let _ = std::fs::remove_dir_all(&p);
    }
}
