//! Where a file path really leads inside the jail. A program can plant a symbolic link where it
//! may write (`ln -s ~/.ssh/id_rsa /tmp/k; cat /tmp/k`), and a `..` after a link climbs from the
//! link's target, not from the link's folder; recorded as written, such an open would be judged
//! by the link's harmless name. So the tracer follows the links, as the kernel will, through
//! the stopped task's own root (`/proc/PID/root`, absolute targets taken from the jail's root),
//! and records the file reached as `path`, the name used as `link_path`.
//!
//! Guarantees: at most [`MAX_LINKS`] links and [`MAX_PATH`] bytes, never through the jail's
//! `/proc` (whose `self` would be the tracer's); only paths that can meet a link the program
//! made are walked (under the folders it may write, or climbing with `..`), so the system's
//! own files cost nothing more. What it cannot promise: the walk happens while the task is
//! stopped, before the kernel's own; a program that swaps a link between the two (a race it
//! would have to win) can still be recorded under the name it used.

use std::os::fd::{AsFd, BorrowedFd};

use serde_json::{Value, json};
use warden_events::EventKind;

use super::notify::PathArg;

/// Links followed per path, at most (the kernel's own limit).
pub const MAX_LINKS: usize = 40;
/// Longest path walked.
pub const MAX_PATH: usize = 4096;
/// Where a program in the jail can make links (or be handed one): everything else is the
/// read-only system view.
const WRITABLE: &[&str] = &[
    "/tmp",
    "/workspace",
    "/home",
    "/dev/shm",
    "/var/tmp",
    "/run",
];

/// Whether `raw` (an absolute path as the program gave it) can lead through a link of the
/// program's own.
fn may_meet_a_link(raw: &str) -> bool {
    raw.contains("/..")
        || WRITABLE
            .iter()
            .any(|w| raw == *w || raw.strip_prefix(w).is_some_and(|r| r.starts_with('/')))
}

/// Task `pid`'s root, held (`O_PATH`) for resolving the paths it names.
pub fn open_root(pid: i32) -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
        .open(format!("/proc/{pid}/root"))
        .ok()
}

/// `raw` resolved inside `root` (a task's root): links followed (the last component only with
/// `follow_last`), `.` and `..` taken where the kernel takes them. `raw` is the bytes the
/// program gave (names need not be UTF-8), and so is the result. `None` when it leads through
/// `/proc`, past the limits, or cannot be read.
pub fn resolve(root: &std::fs::File, raw: &[u8], follow_last: bool) -> Option<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    if raw.len() > MAX_PATH || !raw.starts_with(b"/") {
        return None;
    }
    if let Some(plain) = without_links(root.as_fd(), raw, follow_last) {
        return Some(plain);
    }
    let components = |p: &[u8]| -> std::collections::VecDeque<Vec<u8>> {
        p.split(|b| *b == b'/')
            .filter(|c| !c.is_empty())
            .map(<[u8]>::to_vec)
            .collect()
    };
    let mut todo = components(raw);
    let mut done: Vec<Vec<u8>> = Vec::new();
    let mut links = 0;
    while let Some(c) = todo.pop_front() {
        match c.as_slice() {
            b"." => continue,
            b".." => {
                done.pop();
                continue;
            }
            _ => {}
        }
        if done.is_empty() && c == b"proc" {
            return None;
        }
        if todo.is_empty() && !follow_last {
            done.push(c);
            break;
        }
        let here = done
            .iter()
            .chain([&c])
            .cloned()
            .collect::<Vec<_>>()
            .join(&b'/');
        match nix::fcntl::readlinkat(root.as_fd(), std::ffi::OsStr::from_bytes(&here)) {
            Ok(target) => {
                links += 1;
                let target = target.as_bytes();
                if links > MAX_LINKS || target.len() > MAX_PATH {
                    return None;
                }
                if target.starts_with(b"/") {
                    done.clear();
                }
                let mut next = components(target);
                next.extend(todo);
                todo = next;
            }
            Err(_) => done.push(c),
        }
    }
    let mut out = b"/".to_vec();
    out.extend_from_slice(&done.join(&b'/'));
    Some(out)
}

/// The common cases in one lookup, the kernel's own walk confined to the task's root and
/// refusing every link: when `raw` leads to an existing file through no link at all, it is
/// `raw` with `.` and `..` taken lexically, which is then where the kernel takes them. The same
/// holds when the walk stops at a missing component (`ENOENT`) of a path without `..`: the walk
/// is in order, so no link came before it, and the task's own walk stops there too (or, at the
/// last component, creates that very name). Programs probe for files that are not there all
/// the time (git, Python's imports), and this spares each probe a lookup per component.
///
/// With a `..` the shortcut is not taken: what we read may name a folder the task's walk does
/// find — a name that is not UTF-8 (read lossily), a working directory that was removed
/// (`/tmp/d (deleted)`) — and the `..` then climbs back to a link of the program's. `None`: a
/// link on the way, such a path, or another error (walk it component by component).
fn without_links(root: BorrowedFd<'_>, raw: &[u8], follow_last: bool) -> Option<Vec<u8>> {
    let flags = libc::O_PATH | if follow_last { 0 } else { libc::O_NOFOLLOW };
    let resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    let start = raw.iter().position(|b| *b != b'/').unwrap_or(raw.len());
    let rel = if start == raw.len() {
        b"."
    } else {
        &raw[start..]
    };
    let lexical = || normalize(raw);
    match crate::sys::openat2(Some(root), rel, flags, 0, resolve) {
        Ok(_) => Some(lexical()),
        Err(nix::errno::Errno::ENOENT) if !raw.split(|b| *b == b'/').any(|c| c == b"..") => {
            Some(lexical())
        }
        Err(_) => None,
    }
}

/// `path` with `.`, `..` and repeated slashes taken lexically, as bytes.
pub fn normalize(path: &[u8]) -> Vec<u8> {
    let mut parts: Vec<&[u8]> = Vec::new();
    for c in path.split(|b| *b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    let mut out = b"/".to_vec();
    out.extend_from_slice(&parts.join(&b'/'));
    out
}

/// The exact names (bytes) of a file event's paths once links are followed, by key (`path`,
/// `from`, `to`): what the event records, lossily, and what the tracer reads back later (the
/// canary scan of written files).
pub type Exact = Vec<(&'static str, Vec<u8>)>;

/// Follow the links of a file event's paths (see the module's doc): `path` becomes the file
/// reached and `link_path` the name used, when they differ. `written` holds the syscall's path
/// arguments as the program gave them (see [`PathArg`]), matched to the event's keys in order.
/// Returns each path's exact name; `root` is `None` when the task's root could not be opened
/// (no link is followed then).
pub fn apply(
    root: Option<&std::fs::File>,
    kind: EventKind,
    data: &mut Value,
    written: &[PathArg],
) -> Exact {
    let keys: &[(&'static str, bool)] = match kind {
        // An open follows its last link unless told not to; so does chmod. mkdir, unlink and
        // rename act on the name itself.
        EventKind::FileOpen | EventKind::FileWrite => {
            let follows = data["nofollow"] != true && data["op"] != "mkdir";
            if follows {
                &[("path", true)]
            } else {
                &[("path", false)]
            }
        }
        EventKind::FileDelete => &[("path", false)],
        EventKind::FileRename => &[("from", false), ("to", false)],
        _ => return Vec::new(),
    };
    let mut exact = Vec::new();
    let mut used = vec![false; written.len()];
    for &(key, follow_last) in keys {
        let Some(recorded) = data[key].as_str() else {
            continue;
        };
        // The form the program wrote (before `..` was taken lexically, its very bytes): the
        // first argument not yet taken that is recorded as this key's value.
        let arg = written
            .iter()
            .enumerate()
            .find(|(i, a)| !used[*i] && a.recorded == recorded);
        let raw: Vec<u8> = match arg {
            Some((i, a)) => {
                used[i] = true;
                a.raw().to_vec()
            }
            None => recorded.as_bytes().to_vec(),
        };
        let real = root
            .filter(|_| may_meet_a_link(&String::from_utf8_lossy(&raw)))
            .and_then(|root| resolve(root, &raw, follow_last))
            .unwrap_or_else(|| normalize(&raw));
        let shown = String::from_utf8_lossy(&real).into_owned();
        if recorded != shown {
            let named = data[key].take();
            data[key] = json!(shown);
            let link_key = if key == "path" {
                "link_path".to_owned()
            } else {
                format!("link_{key}")
            };
            data[link_key] = named;
        }
        exact.push((key, real));
    }
    exact
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn only_paths_that_can_meet_a_planted_link_are_walked() {
        for yes in [
            "/tmp/k",
            "/tmp",
            "/workspace/a/b",
            "/home/sandbox/x",
            "/usr/../tmp/k",
        ] {
            assert!(may_meet_a_link(yes), "{yes}");
        }
        for no in [
            "/usr/lib/libz.so",
            "/etc/passwd",
            "/tmpfoo",
            "/proc/self/status",
        ] {
            assert!(!may_meet_a_link(no), "{no}");
        }
    }

    /// This process's own root stands in for a jail's: links made in a temporary folder are
    /// followed as the kernel would.
    #[test]
    fn links_and_dot_dots_are_followed_as_the_kernel_does() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("real/sub")).unwrap();
        std::fs::write(d.join("real/secret"), "s").unwrap();
        std::os::unix::fs::symlink(d.join("real/secret"), d.join("k")).unwrap();
        std::os::unix::fs::symlink(d.join("real/sub"), d.join("L")).unwrap();
        std::os::unix::fs::symlink("loop", d.join("loop")).unwrap();
        let root = open_root(i32::try_from(std::process::id()).unwrap()).unwrap();
        let at = |p: &str| format!("{}/{p}", d.display());
        let walk = |p: &str, follow: bool| {
            resolve(&root, p.as_bytes(), follow).map(|r| String::from_utf8_lossy(&r).into_owned())
        };
        // An absolute link, a relative `..` after a link (the link's target's parent).
        assert_eq!(walk(&at("k"), true), Some(at("real/secret")));
        assert_eq!(walk(&at("L/../secret"), true), Some(at("real/secret")));
        // Not following the last component: the link itself; a path with no link at all.
        assert_eq!(walk(&at("k"), false), Some(at("k")));
        assert_eq!(
            walk(&at("real/./sub/../secret"), true),
            Some(at("real/secret"))
        );
        // A missing file: beneath plain folders it is its name (one lookup); beneath a link,
        // the link is still followed.
        assert_eq!(walk(&at("real/gone"), true), Some(at("real/gone")));
        assert_eq!(walk(&at("L/gone"), true), Some(at("real/sub/gone")));
        // A folder we cannot name as the task does (read lossily, or its removed working
        // directory: `/tmp/d (deleted)`), then `..` to a planted link: the task's walk reaches
        // the link's target, and so does ours.
        let odd = std::ffi::OsStr::from_bytes(b"\xff");
        std::fs::create_dir(d.join(odd)).unwrap();
        let lossy = format!("{}/\u{FFFD}/../k", d.display());
        assert_eq!(walk(&lossy, true), Some(at("real/secret")));
        // A link inside such a folder, named by the bytes the program gave.
        std::os::unix::fs::symlink(d.join("real/secret"), d.join(odd).join("k")).unwrap();
        let mut named = d.as_os_str().as_bytes().to_vec();
        named.extend_from_slice(b"/\xff/k");
        assert_eq!(
            resolve(&root, &named, true),
            Some(at("real/secret").into_bytes())
        );
        assert_eq!(resolve(&root, &named, false), Some(named.clone()));
        assert_eq!(
            walk(&at("gone (deleted)/../k"), true),
            Some(at("real/secret"))
        );
        // A loop ends the walk; /proc is never walked.
        assert_eq!(walk(&at("loop"), true), None);
        assert_eq!(walk("/proc/self/root/etc/passwd", true), None);
        let mut data = json!({ "path": at("k"), "access": "read", "op": "open" });
        // (The walk only starts in the jail's writable folders; a temporary folder is one.)
        if may_meet_a_link(&at("k")) {
            apply(Some(&root), EventKind::FileOpen, &mut data, &[]);
            assert_eq!(data["path"], json!(at("real/secret")));
            assert_eq!(data["link_path"], json!(at("k")));
        }
    }
}
