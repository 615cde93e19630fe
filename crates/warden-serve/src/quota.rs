//! The disk quota of a session's own workspace: a size-limited tmpfs mounted on it, so a
//! command (or a file tool) that fills it gets `ENOSPC` instead of filling the host's disk,
//! and the call reports `limit_hit: "disk"`. Workspaces the operator keeps (`workspace_root`,
//! `shared_workspace`) are plain folders of the host: no quota is enforced there.
//!
//! Guarantees: the tmpfs is `nosuid,nodev` and private to the server's `0700` state folder;
//! it is unmounted (lazily) before its folder is removed, at the end of the session or on a
//! termination signal. Where mounting is not allowed (no `CAP_SYS_ADMIN`), the workspace is a
//! plain folder and a warning says the quota does not apply.

use std::path::Path;

use nix::mount::{MntFlags, MsFlags};

/// Mount a tmpfs of `bytes` on `dir` (an empty folder); false when it could not be.
pub(crate) fn limit(dir: &Path, bytes: u64) -> bool {
    let data = format!("size={bytes},mode=0755");
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    match nix::mount::mount(
        Some("tmpfs"),
        dir,
        Some("tmpfs"),
        flags,
        Some(data.as_str()),
    ) {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(
                "no disk quota for the session's workspace ({}): it is a plain folder",
                e.desc()
            );
            false
        }
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
