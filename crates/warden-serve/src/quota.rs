//! The disk quota of a session's own workspace, so a command (or a file tool) that fills it
//! gets `ENOSPC` instead of filling the host's disk, and the call reports `limit_hit: "disk"`:
//!
//! - in the server's private folder (the default), a size-limited tmpfs mounted on it;
//! - under an operator's `workspace_root` (on disk, not in memory), a sparse ext4 image of the
//!   same size, loop-mounted on it, kept in `WORKSPACE_ROOT/.quota/SESSION/` (created new,
//!   never a link: the root must be the server user's own folder) and removed with the
//!   workspace. Where no loop device can be had (a container without `/dev/loop-control`),
//!   a tmpfs instead.
//!
//! The shared workspace (`shared_workspace`) is the operator's own lasting folder, read after
//! the server has gone: it stays a plain folder and its size is the operator's file system's
//! business (put `workspace_root` on its own file system or under a project quota).
//!
//! Guarantees: every mount is `nosuid,nodev` and inside the server's `0700` folders; it is
//! unmounted (lazily, which frees the loop device) before its folder is removed, at the end of
//! the session or on a termination signal. Where mounting is not allowed at all (no
//! `CAP_SYS_ADMIN`), the workspace is a plain folder and a warning says the quota does not
//! apply.

use std::path::Path;
use std::process::{Command, Stdio};

use nix::mount::{MntFlags, MsFlags};

/// What bounds a workspace's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backing {
    /// A tmpfs (memory) of the quota's size.
    Tmpfs,
    /// A loop-mounted ext4 image (disk) of the quota's size.
    Image,
    /// Nothing: a plain folder.
    Unbounded,
}

/// Bound `dir` (an empty folder) to `bytes`: with a disk image in `image_dir` when one is
/// given (falling back to a tmpfs), else with a tmpfs.
pub(crate) fn limit(dir: &Path, bytes: u64, image_dir: Option<&Path>) -> Backing {
    if let Some(images) = image_dir {
        match image(dir, bytes, images) {
            Ok(()) => return Backing::Image,
            Err(why) => tracing::warn!(
                "no disk image for the session's workspace ({why}): a tmpfs bounds it instead"
            ),
        }
    }
    match tmpfs(dir, bytes) {
        Ok(()) => {
            // Before Linux 6.3 a tmpfs cannot be id-mapped: the jail's user owns it instead.
            let jail = warden_jail::Policy::default();
            if let Err(e) = warden_jail::give_tmpfs_to_jail_user(dir, jail.uid, jail.gid) {
                tracing::warn!("the session's workspace is not the jail user's: {e}");
            }
            Backing::Tmpfs
        }
        Err(e) => {
            tracing::warn!(
                "no disk quota for the session's workspace ({}): it is a plain folder",
                e.desc()
            );
            Backing::Unbounded
        }
    }
}

fn tmpfs(dir: &Path, bytes: u64) -> nix::Result<()> {
    let data = format!("size={bytes},mode=0755");
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    nix::mount::mount(
        Some("tmpfs"),
        dir,
        Some("tmpfs"),
        flags,
        Some(data.as_str()),
    )
}

/// A sparse ext4 image of `bytes` in `images`, loop-mounted on `dir`. The image takes disk
/// only as it fills; no blocks are reserved for root (the sandbox's commands run as root in
/// their namespace, and the quota is the whole image).
fn image(dir: &Path, bytes: u64, images: &Path) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    let img = images.join("workspace.ext4");
    // A new file, never a link or anything there before.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&img)
        .map_err(|e| format!("creating the image: {e}"))?;
    f.set_len(bytes)
        .map_err(|e| format!("sizing the image: {e}"))?;
    drop(f);
    run(Command::new("mkfs.ext4")
        .args(["-q", "-F", "-m", "0", "-O", "^has_journal"])
        .args(["-E", "nodiscard,root_owner=0:0", "--"])
        .arg(&img))?;
    run(Command::new("mount")
        .args(["-t", "ext4", "-o", "loop,nosuid,nodev", "--"])
        .arg(&img)
        .arg(dir))?;
    // The workspace starts empty, as a tmpfs one does.
    let _ = std::fs::remove_dir(dir.join("lost+found"));
    Ok(())
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let name = cmd.get_program().to_string_lossy().into_owned();
    // The system's tools, wherever the operator's PATH points.
    cmd.env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    let out = cmd.output().map_err(|e| format!("{name}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(format!("{name}: {}", err.trim()))
    }
}

/// Unmount whatever is mounted on `dir` (nothing happens when nothing is).
pub(crate) fn release(dir: &Path) {
    let _ = nix::mount::umount2(dir, MntFlags::MNT_DETACH);
}

/// Whether the file system holding `dir` is full (the call that filled it hit its quota).
pub(crate) fn full(dir: &Path) -> bool {
    nix::sys::statvfs::statvfs(dir).is_ok_and(|s| s.blocks_available() == 0)
}
