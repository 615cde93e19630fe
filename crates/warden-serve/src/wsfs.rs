//! Opening files of a workspace from the server, which runs as root while sandboxed code can put
//! anything in the workspace at any time (FIFOs, sockets, symlinks) and race the server.
//!
//! Every open is confined by `cap-std` (nothing outside the workspace), uses `O_NONBLOCK` so a
//! FIFO can never block a server thread, and refuses anything that is not a regular file once
//! open. Temporary files get unique names and `O_EXCL`, so nothing planted under a predictable
//! name is written through.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use cap_std::fs::{Dir, File, OpenOptions, OpenOptionsExt};

fn not_regular(path: &Path) -> io::Error {
    io::Error::other(format!("{} is not a regular file", path.display()))
}

fn checked(f: File, path: &Path) -> io::Result<File> {
    if f.metadata()?.is_file() {
        Ok(f)
    } else {
        Err(not_regular(path))
    }
}

/// Open a regular file for reading.
pub fn open_read(dir: &Dir, path: &Path) -> io::Result<File> {
    let f = dir.open_with(
        path,
        OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK),
    )?;
    checked(f, path)
}

/// Open (creating) a regular file for appending.
pub fn open_append(dir: &Dir, path: &Path) -> io::Result<File> {
    let mut opts = OpenOptions::new();
    opts.append(true)
        .create(true)
        .custom_flags(libc::O_NONBLOCK);
    let f = dir.open_with(path, &opts)?;
    checked(f, path)
}

/// Create a new, uniquely named temporary file next to `near`; returns it and its path.
pub fn create_temp(dir: &Dir, near: &Path) -> io::Result<(File, PathBuf)> {
    static N: AtomicU64 = AtomicU64::new(0);
    let name = near.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    for _ in 0..16 {
        let nonce = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let tmp = near.with_file_name(format!(
            ".{name}.warden-{}-{nonce:x}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        match dir.open_with(&tmp, OpenOptions::new().write(true).create_new(true)) {
            Ok(f) => return Ok((f, tmp)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("could not create a temporary file"))
}
