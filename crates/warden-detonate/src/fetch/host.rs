//! Running fetch clients on the host and the folders they fill: each client runs in its own
//! process group with no terminal, no git and a time limit, and is killed as a group; each
//! package gets a fresh folder under `/var/tmp` on its own size-limited tmpfs. Both are
//! registered, so [`remove_workspaces`] can clean up when the process is interrupted.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use super::Fetched;

/// The host environment for fetch clients: no git (a git dependency would be cloned and its
/// `prepare` script run even under `--ignore-scripts`), no prompts.
fn quiet(cmd: &mut Command) -> &mut Command {
    cmd.env("npm_config_git", "/bin/false")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .env("PIP_NO_INPUT", "1")
}

/// Kill the process group a fetch step leads.
fn kill_group(child: &std::process::Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        let group = nix::unistd::Pid::from_raw(pid);
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
    }
}

/// How long one fetch step may take.
const FETCH_LIMIT: std::time::Duration = std::time::Duration::from_secs(300);

pub(super) fn run(cmd: &mut Command, what: &str) -> Result<()> {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    // Started and registered under the lock, so a signal's clean-up (which takes it) either
    // sees the group or runs before the client exists.
    let mut groups = GROUPS.lock().ok();
    let mut child = quiet(cmd)
        .process_group(0)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .with_context(|| format!("{what}: cannot start"))?;
    let group = i32::try_from(child.id()).unwrap_or(0);
    if let Some(g) = groups.as_mut() {
        g.push(group);
    }
    drop(groups);
    let mut stderr = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(e) = stderr.as_mut() {
            let _ = e.take(1 << 20).read_to_string(&mut text);
        }
        text
    });
    let deadline = std::time::Instant::now() + FETCH_LIMIT;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if std::time::Instant::now() >= deadline {
            kill_group(&child);
            let _ = child.wait();
            bail!(
                "{what}: no result after {} s (is the registry reachable?)",
                FETCH_LIMIT.as_secs()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    // Whatever it left behind in its group goes too (a descendant holding stderr open would
    // otherwise keep the reader waiting).
    kill_group(&child);
    if let Ok(mut g) = GROUPS.lock() {
        g.retain(|p| *p != group);
    }
    let err = reader.join().unwrap_or_default();
    if !status.success() {
        bail!(
            "{what} failed: {}",
            err.lines().rev().take(5).collect::<Vec<_>>().join(" | ")
        );
    }
    Ok(())
}

/// Size of a fetched package's workspace (the package, its dependencies and what installing
/// them writes), so a hostile install cannot fill the host's disk.
pub const WORKSPACE_BYTES: u64 = 2 << 30;

impl Drop for Fetched {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(self.workspace.path(), nix::mount::MntFlags::MNT_DETACH);
        if let Ok(mut live) = LIVE.lock() {
            live.retain(|p| p != self.workspace.path());
        }
        release(self.workspace.path());
    }
}

/// The locks this process holds on its package workspaces (see [`lock_path`]).
static HOLDS: std::sync::Mutex<Vec<(PathBuf, nix::fcntl::Flock<std::fs::File>)>> =
    std::sync::Mutex::new(Vec::new());

/// The lock file beside a package workspace: a live owner holds an exclusive `flock` on it,
/// which a sweeping Warden in any pid or mount namespace sees (the owner's pid alone does not
/// tell a live run of another pid namespace — a container's — from a dead one, and a sweep
/// that took it for dead deleted the workspace under a running install).
fn lock_path(dir: &Path) -> PathBuf {
    let mut p = dir.as_os_str().to_owned();
    p.push(".lock");
    PathBuf::from(p)
}

/// Hold `dir`'s lock for as long as the workspace lives.
fn hold(dir: &Path) {
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(lock_path(dir))
        .ok()
        .and_then(|f| nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).ok());
    if let (Some(lock), Ok(mut holds)) = (lock, HOLDS.lock()) {
        holds.push((dir.to_path_buf(), lock));
    }
}

/// Let go of `dir`'s lock and remove its file.
fn release(dir: &Path) {
    if let Ok(mut holds) = HOLDS.lock() {
        holds.retain(|(d, _)| d != dir);
    }
    let _ = std::fs::remove_file(lock_path(dir));
}

/// Whether a live run (in any namespace) holds `dir`.
fn held(dir: &Path) -> bool {
    std::fs::File::open(lock_path(dir)).is_ok_and(|f| {
        nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).is_err()
    })
}

/// Package workspaces that exist right now, for [`remove_workspaces`].
static LIVE: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
/// Process groups of fetch clients running right now.
static GROUPS: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

/// Kill every fetch client still running and remove every package workspace that still
/// exists (unmounted, then deleted). For a process that is about to exit on a signal, when
/// destructors will not run; the jails themselves go with their lifelines.
pub fn remove_workspaces() {
    let groups = GROUPS
        .lock()
        .map(|mut g| std::mem::take(&mut *g))
        .unwrap_or_default();
    for g in groups.into_iter().filter(|g| *g > 1) {
        let pgid = nix::unistd::Pid::from_raw(g);
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
    }
    let live = LIVE
        .lock()
        .map(|mut l| std::mem::take(&mut *l))
        .unwrap_or_default();
    for dir in live {
        let _ = nix::mount::umount2(&dir, nix::mount::MntFlags::MNT_DETACH);
        let _ = std::fs::remove_dir_all(&dir);
        release(&dir);
    }
}

/// Where package folders go (not under /tmp: the jail owns that path).
fn base() -> &'static Path {
    let base = Path::new("/var/tmp");
    if base.is_dir() { base } else { Path::new(".") }
}

/// The folder name's prefix; the owner's pid follows, so [`sweep`] can tell stale ones.
const PREFIX: &str = "warden-detonate-";

/// Remove package folders whose owner is gone (a run killed with SIGKILL, or one that
/// panicked, cannot clean up after itself): its pid is not running here and nothing holds
/// the folder's lock (a run in another pid namespace does).
fn sweep() {
    for e in std::fs::read_dir(base()).into_iter().flatten().flatten() {
        let path = e.path();
        if path.extension().is_some_and(|x| x == "lock") {
            continue;
        }
        // A link planted under this name is never followed (unmounted or removed through).
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        if is_dir
            && warden_jail::abandoned::by_owner(&e, PREFIX, std::time::Duration::ZERO)
            && !held(&path)
        {
            let _ = nix::mount::umount2(
                &path,
                nix::mount::MntFlags::MNT_DETACH | nix::mount::MntFlags::UMOUNT_NOFOLLOW,
            );
            let _ = std::fs::remove_dir_all(&path);
            let _ = std::fs::remove_file(lock_path(&path));
        }
    }
}

pub(super) fn workspace() -> Result<tempfile::TempDir> {
    sweep();
    // Registered before anything is mounted on it, under the lock a signal's clean-up takes.
    let mut live = LIVE.lock().ok();
    let dir = tempfile::Builder::new()
        .prefix(&format!("{PREFIX}{}-", std::process::id()))
        .tempdir_in(base())
        .context("creating the package folder")?;
    if let Some(l) = live.as_mut() {
        l.push(dir.path().to_path_buf());
    }
    drop(live);
    hold(dir.path());
    let flags = nix::mount::MsFlags::MS_NOSUID | nix::mount::MsFlags::MS_NODEV;
    let opts = format!("size={WORKSPACE_BYTES},mode=0755");
    let mounted = nix::mount::mount(
        Some("tmpfs"),
        dir.path(),
        Some("tmpfs"),
        flags,
        Some(opts.as_str()),
    );
    match mounted {
        Ok(()) => {
            let private = nix::mount::MsFlags::MS_PRIVATE;
            let none = None::<&str>;
            let _ = nix::mount::mount(none, dir.path(), none, private, none);
            // Before Linux 6.3 a tmpfs cannot be id-mapped: the jail's user owns it instead.
            let jail = warden_jail::Policy::default();
            warden_jail::give_tmpfs_to_jail_user(dir.path(), jail.uid, jail.gid)
                .context("handing the package folder to the jail's user")?;
        }
        Err(e) => tracing::warn!(error = %e, "the package workspace is not size-limited"),
    }
    eprintln!("warden detonate: fetching into {}", dir.path().display());
    // The jail's user (id-mapped from the owner) installs into it.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A package folder whose owner's pid is not visible here (a run in a container's pid
    /// namespace) but whose lock is held is live: the sweep leaves it; once the lock is let go,
    /// the sweep removes the folder and its lock file.
    #[test]
    fn a_held_workspace_is_never_swept() {
        let dir = base().join(format!("{PREFIX}4194305999-locktest{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("f"), "x").unwrap();
        let lock = std::fs::File::create(lock_path(&dir)).unwrap();
        let held_lock =
            nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusiveNonblock).unwrap();
        sweep();
        assert!(dir.join("f").exists(), "a held workspace was swept");
        drop(held_lock);
        sweep();
        assert!(!dir.exists(), "an abandoned workspace stays");
        assert!(!lock_path(&dir).exists());
    }
}
