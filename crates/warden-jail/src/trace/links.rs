//! Where a file path really leads inside the jail. A program can plant a symbolic link where it
//! may write (`ln -s ~/.ssh/id_rsa /tmp/k; cat /tmp/k`), and a `..` after a link climbs from the
//! link's target, not from the link's folder; recorded as written, such an open would be judged
//! by the link's harmless name. So the tracer follows the links, as the kernel will, through
//! the stopped task's own root (`/proc/PID/root`, absolute targets taken from the jail's root),
//! and records the file reached as `path`, the name used as `link_path`.
//!
//! Guarantees: paths are walked as the bytes the program gave (a name need not be UTF-8; events
//! show it lossily); the start of a relative path is the kernel's own name of its folder, never
//! looked up again (nothing beneath a removed one is looked up); each lookup opens its folder
//! inside the root refusing every link; at most [`MAX_LINKS`] links, [`MAX_STEPS`] components
//! and [`MAX_LOOKUPS`] lookups, and a walk that gives up takes what the kernel reaches from
//! the root or says so in the event (`path_unresolved`); `/proc`'s links are taken as the
//! stopped task's (a process's root is the jail's, `self` the process and `thread-self` the
//! thread, their working folders and descriptors named by the kernel; nothing in the tracer's
//! own `/proc` is looked up); every path outside the host's read-only system tree is walked
//! (links can be planted where the program writes, or shipped in a server's own folder), so
//! only the system's own files cost nothing more. What it cannot promise: the walk happens
//! while the task is stopped, before the kernel's own; a program that swaps a link between the
//! two (a race it would have to win) can still be recorded under the name it used. A relative
//! path whose folder the tracer cannot name (deeper than the kernel will print) is named by
//! the kernel only when no link leads to it, and is otherwise marked unresolved.

use std::os::fd::{AsFd, BorrowedFd};

use serde_json::{Value, json};
use warden_events::EventKind;

use super::notify::PathArg;

/// Links followed per path, at most (the kernel's own limit).
pub const MAX_LINKS: usize = 40;
/// Longest path the kernel takes (a link's target, a path argument, a folder's name).
pub const MAX_PATH: usize = 4096;
/// The host's system tree, bound read-only into every jail: its links are the host's own, never
/// the program's, so paths in it are not walked. Everything else may hold a link the program
/// made or brought (a writable folder, the server's own folder shipped with links in it, an
/// operator's bind, `/proc` and `/dev/fd`).
const SYSTEM: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    super::prepare::TOOLS_MOUNT,
];

/// Whether `raw` (an absolute path as the program gave it) can lead through a link of the
/// program's own, or through `/proc`. Judged on its names (`//tmp/k` and `/./tmp/k` are
/// `/tmp/k`).
fn may_meet_a_link(raw: &[u8]) -> bool {
    if climbs(raw) {
        return true;
    }
    let clean = normalize(raw);
    !SYSTEM.iter().any(|w| {
        clean
            .strip_prefix(w.as_bytes())
            .is_some_and(|r| r.is_empty() || r[0] == b'/')
    })
}

/// Whether `raw` has a `..` among its names.
fn climbs(raw: &[u8]) -> bool {
    raw.split(|b| *b == b'/').any(|c| c == b"..")
}

/// `raw` (absolute) as a path beneath a root descriptor: without its leading slashes, `.` for
/// the root itself.
pub fn beneath_root(raw: &[u8]) -> &[u8] {
    let start = raw.iter().position(|b| *b != b'/').unwrap_or(raw.len());
    if start == raw.len() {
        b"."
    } else {
        &raw[start..]
    }
}

/// A folder named by a `/proc` path, held (`O_PATH`).
fn open_folder(path: &str) -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
        .open(path)
        .ok()
}

/// Prepend the names of `path` to what is left to walk (a link's target, a folder's name).
fn requeue(todo: &mut std::collections::VecDeque<Vec<u8>>, path: &[u8]) {
    let rest = std::mem::take(todo);
    todo.extend(components(path).map(<[u8]>::to_vec));
    todo.extend(rest);
}

/// What a path under `/proc` names, from its components after `proc` (consumed when it is
/// one of the links that lead elsewhere).
enum Proc {
    /// A process's root: the jail's, which every process in it shares (`chroot` is denied).
    Root,
    /// A working folder or descriptor of the stopped task: the kernel's own name of it, and
    /// whether it is a removed folder.
    Named(Vec<u8>, bool),
    /// Another process's working folder or descriptor: not followed here.
    Elsewhere,
    /// A file of `/proc` itself.
    Plain,
}

fn is_pid(c: &[u8]) -> bool {
    !c.is_empty() && c.iter().all(u8::is_ascii_digit)
}

/// The stopped task, for `/proc`'s links: its pid in our namespace and in the jail's, and
/// its process's (thread group's) in each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Who {
    /// The thread, in our pid namespace.
    pub task: i32,
    /// Its process, in our pid namespace.
    pub process: i32,
    /// The thread, in the jail's.
    pub inner_task: Option<i32>,
    /// Its process, in the jail's.
    pub inner_process: Option<i32>,
}

impl Who {
    /// Our pid of the jail's `/proc/<name>` (`self`, `thread-self` or a number), when it is
    /// the stopped task or its process.
    fn ours(&self, name: &[u8]) -> Option<i32> {
        let n: Option<i32> = std::str::from_utf8(name).ok().and_then(|n| n.parse().ok());
        match name {
            b"self" => Some(self.process),
            b"thread-self" => Some(self.task),
            _ if n.is_some() && n == self.inner_task => Some(self.task),
            _ if n.is_some() && n == self.inner_process => Some(self.process),
            _ => None,
        }
    }
}

/// Read `/proc/<who>/…` off the front of `todo` (no `.` in it) for the stopped task `who`.
fn proc_link(todo: &mut std::collections::VecDeque<Vec<u8>>, who: Option<Who>) -> Proc {
    use std::os::unix::ffi::OsStringExt;
    use std::os::unix::fs::MetadataExt;
    let at = |i: usize| todo.get(i).map(Vec::as_slice);
    let pid_like =
        |c: Option<&[u8]>| c.is_some_and(|c| matches!(c, b"self" | b"thread-self") || is_pid(c));
    // A `..` beneath `/proc`, short of one of the links below, is taken where the kernel is,
    // which the text alone does not say (`/proc/self/task/../root`, `/proc/net/../cwd`): not
    // followed. (Past the link, the walk takes it.)
    let climbing = todo.iter().any(|c| c == b"..");
    if !pid_like(at(0)) {
        return if climbing {
            Proc::Elsewhere
        } else {
            Proc::Plain
        };
    }
    // `/proc/<pid>/task/<tid>/…`: that thread's.
    let (name, skip) = if at(1) == Some(b"task") && at(2).is_some_and(is_pid) {
        (at(2), 3)
    } else {
        (at(0), 1)
    };
    // The link and how many names it takes.
    let (link, names) = match (at(skip), at(skip + 1)) {
        (Some(b"root"), _) => {
            todo.drain(..=skip);
            return Proc::Root;
        }
        (Some(b"cwd"), _) => ("cwd".to_owned(), 1),
        (Some(b"fd"), Some(n)) if is_pid(n) => (format!("fd/{}", String::from_utf8_lossy(n)), 2),
        _ if climbing => return Proc::Elsewhere,
        _ => return Proc::Plain,
    };
    let Some(pid) = who.zip(name).and_then(|(w, n)| w.ours(n)) else {
        return Proc::Elsewhere;
    };
    let place = format!("/proc/{pid}/{link}");
    let Ok(name) = std::fs::read_link(&place) else {
        return Proc::Elsewhere;
    };
    let name = name.into_os_string().into_vec();
    if !name.starts_with(b"/") {
        // A socket, a pipe: not a file of the tree.
        return if climbing {
            Proc::Elsewhere
        } else {
            Proc::Plain
        };
    }
    let removed = std::fs::metadata(&place).is_ok_and(|m| m.nlink() == 0);
    todo.drain(..skip + names);
    Proc::Named(name, removed)
}

/// Task `pid`'s root, held (`O_PATH`) for resolving the paths it names.
pub fn open_root(pid: i32) -> Option<std::fs::File> {
    open_folder(&format!("/proc/{pid}/root"))
}

/// The kernel's name of the existing file `rel` beneath the task's working folder or
/// descriptor `folder` (a `/proc` path), reached through no link; `None` otherwise. `..`
/// stays inside the jail: its root is the top of its own mount tree.
pub fn named_from(folder: &str, rel: &[u8]) -> Option<Vec<u8>> {
    let dir = open_folder(folder)?;
    let resolve = libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    let file = crate::sys::openat2(Some(dir.as_fd()), rel, libc::O_PATH, 0, resolve).ok()?;
    name_of(&file)
}

/// Components looked at in one walk, at most (those the links add included); past it, or past
/// twice [`MAX_PATH`] walked, the walk gives up. A path of 40 links, each a long run of
/// missing folders, is bounded work for the tracer, which every traced task waits on.
pub const MAX_STEPS: usize = 4 * MAX_PATH;
/// Names looked up in one walk, at most (each lookup walks its folder from the root again):
/// far more than any path a program means to open has.
pub const MAX_LOOKUPS: usize = 256;

/// The folders walked so far, joined relative to the root (`tmp/a/b`), with where each began.
#[derive(Default)]
struct Walked {
    path: Vec<u8>,
    starts: Vec<usize>,
}

impl Walked {
    fn push(&mut self, c: &[u8]) {
        self.starts.push(self.path.len());
        if !self.path.is_empty() {
            self.path.push(b'/');
        }
        self.path.extend_from_slice(c);
    }
    fn pop(&mut self) {
        if let Some(s) = self.starts.pop() {
            self.path.truncate(s);
        }
    }
    fn clear(&mut self) {
        self.path.clear();
        self.starts.clear();
    }
}

/// The names of a path, without the empty ones and `.` (which the kernel passes over).
fn components(p: &[u8]) -> impl Iterator<Item = &[u8]> {
    p.split(|b| *b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
}

/// The kernel's name of an open file (`/proc/self/fd/N`): for a file of the jail's, its path
/// from the jail's root, the top of its own mount tree; `None` for one that is not in the tree
/// (a name not starting with `/`).
fn name_of(file: &impl AsFd) -> Option<Vec<u8>> {
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStringExt;
    let fd = file.as_fd().as_raw_fd();
    std::fs::read_link(format!("/proc/self/fd/{fd}"))
        .ok()
        .map(|p| p.into_os_string().into_vec())
        .filter(|n| n.starts_with(b"/"))
}

/// The target of `path` (relative to `root`) when it is a link. Its folder is opened inside
/// the root refusing every link, so the lookup never follows one (a planted link on the way
/// would otherwise be taken from the tracer's own root).
fn link_at(root: BorrowedFd<'_>, path: &[u8]) -> Option<std::ffi::OsString> {
    use std::os::unix::ffi::OsStrExt;
    let (folder, last): (&[u8], &[u8]) = match path.iter().rposition(|b| *b == b'/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => (b".", path),
    };
    let resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    let dir = crate::sys::openat2(
        Some(root),
        folder,
        libc::O_PATH | libc::O_DIRECTORY,
        0,
        resolve,
    )
    .ok()?;
    nix::fcntl::readlinkat(dir.as_fd(), std::ffi::OsStr::from_bytes(last)).ok()
}

/// `raw` as the kernel itself resolves it inside `root`, links followed (the last one only
/// with `follow_last`), named back from the descriptor: for a walk that gave up. `None` when
/// it does not exist.
fn resolved_by_kernel(root: BorrowedFd<'_>, raw: &[u8], follow_last: bool) -> Option<Vec<u8>> {
    let flags = libc::O_PATH | if follow_last { 0 } else { libc::O_NOFOLLOW };
    let resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
    let file = crate::sys::openat2(Some(root), beneath_root(raw), flags, 0, resolve).ok()?;
    name_of(&file)
}

/// Where a relative path starts: the kernel's own name of its folder (the task's working
/// folder or `dirfd`), the first `len` bytes of the path, and whether that folder was removed
/// (its name then ends in ` (deleted)`). Absolute paths start at `len` 0. `who`: the stopped
/// task, whose `/proc/self` links are followed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Start {
    /// Bytes of the path that name the folder.
    pub len: usize,
    /// The folder was removed (no link to it is left).
    pub removed: bool,
    /// The task that named the path.
    pub who: Option<Who>,
}

/// `raw` resolved inside `root` (a task's root): links followed (the last component only with
/// `follow_last`), `.` and `..` taken where the kernel takes them. `raw` is the bytes the
/// program gave (names need not be UTF-8), and so is the result. Its `start` (see [`Start`])
/// is real folders, taken as they are and never looked up again: after `rmdir` of the working
/// folder its name ends in ` (deleted)`, and a link the program plants under that name must
/// not redirect a `..` out of it. `None` when it leads through another process's working
/// folder or descriptor, past the limits, or cannot be read.
pub fn resolve(
    root: &std::fs::File,
    raw: &[u8],
    start: Start,
    follow_last: bool,
) -> Option<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    // A folder of `/proc` (a working folder there, a descriptor of it) is no place to start
    // from as named: its links are the task's, taken from the root below.
    let in_proc = raw
        .strip_prefix(b"/proc")
        .is_some_and(|r| r.is_empty() || r[0] == b'/');
    let trusted = if in_proc { 0 } else { start.len };
    // A folder's name and a relative path, each up to the kernel's longest.
    if raw.len() > 2 * MAX_PATH + 1 || !raw.starts_with(b"/") || trusted > raw.len() {
        return None;
    }
    // The one-lookup case holds for the trusted part too: it refuses every link, so a planted
    // one sends the path to the walk below.
    if let Some(plain) = without_links(root.as_fd(), raw, follow_last) {
        return Some(plain);
    }
    let mut walked = Walked::default();
    for c in components(&raw[..trusted]) {
        walked.push(c);
    }
    // Nothing is looked up beneath a removed folder (it is empty; the name it had may be a
    // link of the program's by now) or beneath `/proc` (the tracer's own is not the task's),
    // until a `..` leaves it: the depth of that folder.
    let mut opaque = (start.removed && !in_proc).then_some(walked.starts.len());
    let mut todo: std::collections::VecDeque<Vec<u8>> =
        components(&raw[trusted..]).map(<[u8]>::to_vec).collect();
    let (mut links, mut steps, mut lookups) = (0, 0, 0);
    while let Some(c) = todo.pop_front() {
        steps += 1;
        if steps > MAX_STEPS || walked.path.len() > 2 * MAX_PATH {
            return None;
        }
        if c == b".." {
            walked.pop();
            opaque = opaque.filter(|depth| walked.starts.len() >= *depth);
            continue;
        }
        if walked.starts.is_empty() && c == b"proc" {
            match proc_link(&mut todo, start.who) {
                Proc::Root => continue,
                // A removed folder is taken as named (nothing beneath it is looked up); any
                // other name is walked again from the root, like a link's target (it may be
                // `/proc` itself).
                Proc::Named(name, true) => {
                    for c in components(&name) {
                        walked.push(c);
                    }
                    opaque = Some(walked.starts.len());
                    continue;
                }
                Proc::Named(name, false) => {
                    requeue(&mut todo, &name);
                    continue;
                }
                Proc::Elsewhere => return None,
                // A file of `/proc` itself: recorded as named.
                Proc::Plain => opaque = Some(1),
            }
        }
        walked.push(&c);
        if (todo.is_empty() && !follow_last) || opaque.is_some() {
            continue;
        }
        lookups += 1;
        if lookups > MAX_LOOKUPS {
            return None;
        }
        if let Some(target) = link_at(root.as_fd(), &walked.path) {
            walked.pop();
            links += 1;
            let target = target.as_bytes();
            if links > MAX_LINKS || target.len() > MAX_PATH {
                return None;
            }
            if target.starts_with(b"/") {
                walked.clear();
                opaque = None;
            }
            requeue(&mut todo, target);
        }
    }
    let mut out = b"/".to_vec();
    out.extend_from_slice(&walked.path);
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
    match crate::sys::openat2(Some(root), beneath_root(raw), flags, 0, resolve) {
        Ok(_) => Some(normalize(raw)),
        Err(nix::errno::Errno::ENOENT) if !climbs(raw) => Some(normalize(raw)),
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
        let Some(recorded) = data[key].as_str().map(str::to_owned) else {
            continue;
        };
        // The form the program wrote (before `..` was taken lexically, its very bytes): the
        // first argument not yet taken that is recorded as this key's value.
        let arg = written
            .iter()
            .enumerate()
            .find(|(i, a)| !used[*i] && a.recorded == *recorded);
        let (raw, start): (Vec<u8>, Start) = match arg {
            Some((i, a)) => {
                used[i] = true;
                (a.raw().to_vec(), a.start)
            }
            None => (recorded.as_bytes().to_vec(), Start::default()),
        };
        // A relative name: the tracer could not tell where it starts (a working folder too
        // deep for the kernel to name, the file not reached without a link), so it is left as
        // it is, says so, and nothing is read back by it.
        if !raw.starts_with(b"/") {
            data[format!("{key}_unresolved")] = json!(true);
            continue;
        }
        let walk = root.filter(|_| may_meet_a_link(&raw));
        let real = match walk.map(|root| (root, resolve(root, &raw, start, follow_last))) {
            Some((_, Some(real))) => real,
            // A walk that gave up (past its bounds, a loop): what the kernel itself reaches,
            // for a path named from the root; else the event says links were not followed.
            Some((root, None)) => {
                let by_kernel = (start.len == 0)
                    .then(|| resolved_by_kernel(root.as_fd(), &raw, follow_last))
                    .flatten();
                match by_kernel {
                    Some(real) => real,
                    None => {
                        data[format!("{key}_unresolved")] = json!(true);
                        normalize(&raw)
                    }
                }
            }
            None => normalize(&raw),
        };
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
            "/proc/self/root/home/sandbox/.npmrc",
            "/dev/fd/3/x",
            "//tmp/k",
            "/./tmp/k",
            "/srv/target/cfg",
            "/usrx/k",
        ] {
            assert!(may_meet_a_link(yes.as_bytes()), "{yes}");
        }
        for no in [
            "/usr/lib/libz.so",
            "/etc/passwd",
            "//usr/lib/x",
            "/./etc/hosts",
            "/usr",
        ] {
            assert!(!may_meet_a_link(no.as_bytes()), "{no}");
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
            resolve(&root, p.as_bytes(), Start::default(), follow)
                .map(|r| String::from_utf8_lossy(&r).into_owned())
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
            resolve(&root, &named, Start::default(), true),
            Some(at("real/secret").into_bytes())
        );
        assert_eq!(
            resolve(&root, &named, Start::default(), false),
            Some(named.clone())
        );
        assert_eq!(
            walk(&at("gone (deleted)/../k"), true),
            Some(at("real/secret"))
        );
        // The kernel's name of a removed working folder ends in ` (deleted)`: a link the
        // program plants under that name does not redirect the `..` out of it.
        std::os::unix::fs::symlink(d.join("real/sub"), d.join("cwd (deleted)")).unwrap();
        let base = at("cwd (deleted)");
        let from_cwd = format!("{base}/../k");
        let trusting = |len, removed| {
            let start = Start {
                len,
                removed,
                who: None,
            };
            resolve(&root, from_cwd.as_bytes(), start, true)
        };
        assert_eq!(
            trusting(base.len(), true),
            Some(at("real/secret").into_bytes())
        );
        assert_eq!(trusting(0, false), Some(at("real/k").into_bytes()));
        // Nothing is looked up beneath a removed folder: whatever now has its name (a folder
        // with a link in it here) is not the folder the task is in.
        std::fs::create_dir(d.join("gone2 (deleted)")).unwrap();
        std::os::unix::fs::symlink(d.join("real/secret"), d.join("gone2 (deleted)/x")).unwrap();
        let inside = format!("{}/x", at("gone2 (deleted)"));
        let base = at("gone2 (deleted)").len();
        let removed = Start {
            len: base,
            removed: true,
            who: None,
        };
        let got = resolve(&root, inside.as_bytes(), removed, true);
        assert_eq!(got, Some(inside.clone().into_bytes()));
        // A folder only named like that, not removed, is walked beneath.
        let named = Start {
            len: base,
            removed: false,
            who: None,
        };
        let got = resolve(&root, inside.as_bytes(), named, true);
        assert_eq!(got, Some(at("real/secret").into_bytes()));
        assert_eq!(walk(&inside, true), Some(at("real/secret")));
        // A relative path as long as the kernel takes, joined to its folder's name, is walked.
        let long = format!("{}/{}k", d.display(), "./".repeat(2046));
        assert!(long.len() > MAX_PATH);
        let from_d = Start {
            len: d.as_os_str().len(),
            removed: false,
            who: None,
        };
        let got = resolve(&root, long.as_bytes(), from_d, true);
        assert_eq!(got, Some(at("real/secret").into_bytes()));
        // Bounded work: links that each add thousands of `..` give up, as does a walk that
        // grows past twice the longest path.
        let down = d.display().to_string();
        for i in 0..14 {
            let next = format!("{}{}/c{}", "../".repeat(1300), &down[1..], i + 1);
            std::os::unix::fs::symlink(next, d.join(format!("c{i}"))).unwrap();
        }
        std::os::unix::fs::symlink(d.join("real/secret"), d.join("c14")).unwrap();
        assert_eq!(walk(&at("c0"), true), None);
        // The event then names what the kernel reaches.
        let mut far = json!({ "path": at("c0"), "access": "read", "op": "open" });
        apply(Some(&root), EventKind::FileOpen, &mut far, &[]);
        assert_eq!(far["path"], json!(at("real/secret")), "{far}");
        assert_eq!(far.get("path_unresolved"), None);
        for i in 0..MAX_LINKS {
            let next = format!("{}/{}", at(&format!("g{}", i + 1)), "x/".repeat(2000));
            std::os::unix::fs::symlink(next, d.join(format!("g{i}"))).unwrap();
        }
        assert_eq!(walk(&at("g0"), true), None);
        // A relative name (its folder unknown) is left as it is, and says so.
        let mut rel = json!({ "path": "k", "access": "read", "op": "open" });
        assert!(apply(Some(&root), EventKind::FileOpen, &mut rel, &[]).is_empty());
        assert_eq!(
            rel,
            json!({ "path": "k", "access": "read", "op": "open", "path_unresolved": true })
        );
        // Through `/proc`'s links: a process's root is the jail's (here, ours), the stopped
        // task's working folder and descriptors are what the kernel names them; a file of
        // `/proc` itself is its own name; another process's working folder is not followed.
        let me = Start {
            who: Some(Who {
                task: i32::try_from(std::process::id()).unwrap(),
                process: i32::try_from(std::process::id()).unwrap(),
                ..Who::default()
            }),
            ..Start::default()
        };
        let via = |p: String| {
            resolve(&root, p.as_bytes(), me, true).map(|r| String::from_utf8_lossy(&r).into_owned())
        };
        assert_eq!(
            via(format!("/proc/self/root{}", at("k"))),
            Some(at("real/secret"))
        );
        assert_eq!(
            via(format!("/proc/thread-self/root/{}", at("k"))),
            Some(at("real/secret"))
        );
        let dir = std::fs::File::open(d.join("real")).unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&dir);
        assert_eq!(
            via(format!("/proc/self/fd/{fd}/secret")),
            Some(at("real/secret"))
        );
        assert_eq!(
            via("/proc/self/status".into()),
            Some("/proc/self/status".into())
        );
        assert_eq!(via("/proc/1/cwd/x".into()), None);
        // `.` is passed over; a `..` beneath /proc short of its links is not taken by its text.
        let secret = Some(at("real/secret"));
        assert_eq!(via(format!("/proc/./self/./root{}", at("k"))), secret);
        assert_eq!(via(format!("/proc/self/task/../root{}", at("k"))), None);
        assert_eq!(via(format!("/proc/net/../cwd{}", at("k"))), None);
        assert_eq!(via(format!("/proc/self/root/tmp/..{}", at("k"))), secret);
        // A working folder in /proc: its links are still the task's.
        let in_proc = format!("/proc/self/root{}", at("k"));
        let from_proc = Start {
            len: "/proc".len(),
            ..me
        };
        let got = resolve(&root, in_proc.as_bytes(), from_proc, true);
        assert_eq!(got, Some(at("real/secret").into_bytes()));
        // `self` is the process, `thread-self` the stopped thread (here made another one).
        let me_pid = i32::try_from(std::process::id()).unwrap();
        let thread = Start {
            who: Some(Who {
                task: 1,
                process: me_pid,
                ..Who::default()
            }),
            ..Start::default()
        };
        let through = |p: String| resolve(&root, p.as_bytes(), thread, true);
        let bytes = Some(at("real/secret").into_bytes());
        assert_eq!(through(format!("/proc/self/fd/{fd}/secret")), bytes);
        assert_ne!(through(format!("/proc/thread-self/fd/{fd}/secret")), bytes);
        // A loop ends the walk; without a task, its `/proc/self` links are not followed.
        assert_eq!(walk(&at("loop"), true), None);
        assert_eq!(walk("/proc/self/cwd/etc/passwd", true), None);
        let mut data = json!({ "path": at("k"), "access": "read", "op": "open" });
        // (The walk only starts in the jail's writable folders; a temporary folder is one.)
        if may_meet_a_link(at("k").as_bytes()) {
            apply(Some(&root), EventKind::FileOpen, &mut data, &[]);
            assert_eq!(data["path"], json!(at("real/secret")));
            assert_eq!(data["link_path"], json!(at("k")));
        }
    }
}
