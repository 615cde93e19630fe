//! The tracer: turns the jail's seccomp user notifications into [`Event`]s.
//!
//! Each notification stops one syscall of one task. The tracer reads the syscall's arguments
//! from the task (`/proc/<pid>/mem`), checks that the notification is still valid — so what was
//! read belongs to that task and not to whatever reused its pid — records the event, and lets
//! the syscall continue unchanged. These reads are evidence, never enforcement: a task could
//! change its memory between our read and the kernel's, and enforcement stays with the jail's
//! own layers (the deny rules come before the notification in the filter).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};
use warden_events::EventKind;
use warden_trace::interposer::ENV_READ_OPTION;

use super::Hub;
use super::net::Net;
use crate::sys;

/// Bytes read for one path or argument, at most.
const MAX_STRING: usize = 4096;
/// Arguments of an exec recorded, at most.
const MAX_ARGV: usize = 64;

/// Tasks whose `/proc` handles are kept open, at most.
const MAX_CACHED: usize = 512;
/// Bytes of a sent datagram or message recorded, at most.
const MAX_PAYLOAD: usize = 512;
/// Written files remembered per process for the canary scan at its exit, at most.
const MAX_WRITTEN: usize = 64;
/// Bytes of a written file scanned for canaries, at most.
const MAX_SCAN: u64 = 1 << 20;

/// Decodes and answers notifications.
pub struct Tracer {
    listener: OwnedFd,
    /// A duplicate of the listener for the replies the connector gives (held connects).
    responder: Option<Arc<OwnedFd>>,
    hub: Arc<Hub>,
    net: Option<Arc<Net>>,
    /// Per task (supervisor pid): its memory, opened once, its pid inside the jail and its
    /// process. The notification-id check after every read proves that a live task with this
    /// pid made the syscall; entries go at an exec, `exit_group` or `exit` of their task or
    /// process and when that check fails. A process killed by a signal leaves its threads'
    /// entries to whichever tasks are next given their pids: their memory handles then read
    /// nothing (and are opened afresh) and their pins fail, but the pids inside the jail
    /// they name are the old ones (a known limit: such a task's first events may carry
    /// another pid). Pins are always taken from the task's process as it is now.
    tasks: HashMap<i32, Task>,
    /// Syscalls observed (let through); any other notification is a denial.
    observed: Vec<i64>,
    /// Files each process (supervisor tgid) opened for writing (or may have renamed them to),
    /// by their exact names (bytes: a name need not be UTF-8): scanned for canaries when it
    /// exits, and again once the tree is gone.
    written: HashMap<i32, Vec<Vec<u8>>>,
    /// Addresses sockets were bound to, per (tgid, fd), for `listen`.
    bound: HashMap<(i32, i32), Value>,
    /// Paths in `written`, over all processes.
    written_total: usize,
    /// Bytes of written files scanned so far.
    scanned: u64,
    /// What each written file held when it was last scanned (a hash): a file scanned at its
    /// writer's exit and unchanged at the end is not reported twice.
    seen: HashMap<Vec<u8>, u64>,
    hasher: std::hash::RandomState,
    /// The jail's root, opened before the command ran: written files of processes that never
    /// called `exit_group` are scanned through it once the tree is gone.
    root: Option<std::fs::File>,
    /// The jail's writable mounts (`/tmp`, `/workspace`…), opened with the root: once the
    /// jail's mount namespace is gone they are no longer beneath the root, but held open they
    /// still hold what was written there (a server killed at the end of its session staged
    /// its loot in `/tmp`).
    mounts: HeldMounts,
}

#[derive(Debug)]
struct Task {
    /// Its memory, shared with [`CURRENT`] while one of its notifications is decoded (a
    /// reference, not a descriptor copy: a stop costs no `dup`/`close`).
    mem: Option<Arc<std::fs::File>>,
    /// Its root (`O_PATH`), where the paths it names are resolved (see [`super::links`]).
    root: Option<Arc<std::fs::File>>,
    /// Its process, pinned (a pidfd) at its first connect, before that notification was
    /// checked to be pending: the program's socket of each later connect is copied through it.
    pidfd: Option<Arc<OwnedFd>>,
    /// The thread's pid inside the jail.
    inner: Option<i32>,
    /// Its process's (thread group's) pid inside the jail: what events carry, so the work of a
    /// runtime's worker threads is attributed to the process that exec'd.
    process: Option<i32>,
    tgid: i32,
    /// The loader's opens of `/etc/ld.so.preload` and the interposer left out of the evidence
    /// since this task's last exec (two: the loader's; any later one is the program's).
    loader_opens: u8,
}

thread_local! {
    /// The memory of the task being decoded (set for the duration of one notification).
    static CURRENT: std::cell::RefCell<Option<Arc<std::fs::File>>> = const { std::cell::RefCell::new(None) };
}

fn read_mem(pid: i32, addr: u64, len: usize) -> Option<Vec<u8>> {
    CURRENT.with(|c| {
        let mut c = c.borrow_mut();
        let mut buf = vec![0u8; len];
        let n = match c.as_ref().map(|f| f.read_at(&mut buf, addr)) {
            Some(Ok(n)) if n > 0 => n,
            // A handle on a replaced address space reads nothing: open the task's memory
            // afresh once.
            _ => {
                let fresh = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
                let n = fresh.read_at(&mut buf, addr).ok()?;
                *c = Some(Arc::new(fresh));
                n
            }
        };
        buf.truncate(n);
        Some(buf)
    })
}

fn read_cstr(pid: i32, addr: u64) -> Option<String> {
    read_cstr_bytes(pid, addr).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// The C string at `addr`, as its bytes (at most [`MAX_STRING`]).
fn read_cstr_bytes(pid: i32, addr: u64) -> Option<Vec<u8>> {
    if addr == 0 {
        return None;
    }
    // Up to the end of the page first: most strings end there, and a read that stays within
    // one page of the task's memory is the cheap case.
    let to_page_end = usize::try_from(4096 - (addr % 4096)).unwrap_or(MAX_STRING);
    let mut bytes = read_mem(pid, addr, to_page_end.min(MAX_STRING))?;
    if !bytes.contains(&0) && bytes.len() < MAX_STRING {
        bytes = read_mem(pid, addr, MAX_STRING)?;
    }
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    bytes.truncate(end);
    Some(bytes)
}

/// Bytes of argv kept per exec event, at most (the rest is cut and the event says so).
const MAX_ARGV_BYTES: usize = 16 << 10;

fn read_argv(pid: i32, addr: u64) -> Value {
    let Some(ptrs) = read_mem(pid, addr, MAX_ARGV * 8) else {
        return json!([]);
    };
    let mut total = 0;
    let mut out = Vec::new();
    let mut truncated = false;
    for p in ptrs
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .take_while(|p| *p != 0)
    {
        let Some(mut arg) = read_cstr(pid, p) else {
            continue;
        };
        if total + arg.len() > MAX_ARGV_BYTES {
            let room = MAX_ARGV_BYTES.saturating_sub(total);
            let cut = (0..=room)
                .rev()
                .find(|i| arg.is_char_boundary(*i))
                .unwrap_or(0);
            arg.truncate(cut);
            truncated = true;
        }
        total += arg.len();
        out.push(arg);
        if truncated {
            break;
        }
    }
    if truncated {
        out.push("…(truncated)".to_owned());
    }
    json!(out)
}

/// Names of the syscalls the jail denies, for events.
fn syscall_name(nr: i64) -> String {
    let known: &[(i64, &str)] = &[
        (libc::SYS_ptrace, "ptrace"),
        (libc::SYS_process_vm_readv, "process_vm_readv"),
        (libc::SYS_process_vm_writev, "process_vm_writev"),
        (libc::SYS_pidfd_getfd, "pidfd_getfd"),
        (libc::SYS_mount, "mount"),
        (libc::SYS_umount2, "umount2"),
        (libc::SYS_pivot_root, "pivot_root"),
        (libc::SYS_chroot, "chroot"),
        (libc::SYS_unshare, "unshare"),
        (libc::SYS_setns, "setns"),
        (libc::SYS_clone, "clone"),
        (libc::SYS_clone3, "clone3"),
        (libc::SYS_bpf, "bpf"),
        (libc::SYS_perf_event_open, "perf_event_open"),
        (libc::SYS_keyctl, "keyctl"),
        (libc::SYS_add_key, "add_key"),
        (libc::SYS_request_key, "request_key"),
        (libc::SYS_userfaultfd, "userfaultfd"),
        (libc::SYS_io_uring_setup, "io_uring_setup"),
        (libc::SYS_io_uring_enter, "io_uring_enter"),
        (libc::SYS_io_uring_register, "io_uring_register"),
        (libc::SYS_open_tree, "open_tree"),
        (libc::SYS_move_mount, "move_mount"),
        (libc::SYS_fsopen, "fsopen"),
        (libc::SYS_fsconfig, "fsconfig"),
        (libc::SYS_fsmount, "fsmount"),
        (libc::SYS_fspick, "fspick"),
        (libc::SYS_mount_setattr, "mount_setattr"),
        (libc::SYS_openat2, "openat2"),
        (libc::SYS_kexec_load, "kexec_load"),
        (libc::SYS_kexec_file_load, "kexec_file_load"),
        (libc::SYS_init_module, "init_module"),
        (libc::SYS_finit_module, "finit_module"),
        (libc::SYS_delete_module, "delete_module"),
        (libc::SYS_reboot, "reboot"),
        (libc::SYS_personality, "personality"),
        (libc::SYS_socket, "socket"),
        (libc::SYS_socketpair, "socketpair"),
        (libc::SYS_ioctl, "ioctl"),
        (libc::SYS_fchmod, "fchmod"),
        (libc::SYS_fchmodat, "fchmodat"),
        (libc::SYS_mknodat, "mknodat"),
        (libc::SYS_open_by_handle_at, "open_by_handle_at"),
        (libc::SYS_syslog, "syslog"),
        (libc::SYS_acct, "acct"),
    ];
    known
        .iter()
        .find(|(n, _)| *n == nr)
        .map_or_else(|| format!("syscall_{nr}"), |(_, name)| (*name).to_owned())
}

/// A socket family's name, for denials.
fn family_name(family: i32) -> String {
    match family {
        libc::AF_NETLINK => "netlink".into(),
        libc::AF_PACKET => "packet".into(),
        libc::AF_VSOCK => "vsock".into(),
        libc::AF_BLUETOOTH => "bluetooth".into(),
        libc::AF_ALG => "alg".into(),
        libc::AF_KEY => "key".into(),
        libc::AF_XDP => "xdp".into(),
        n => format!("family_{n}"),
    }
}

/// The task's pid inside the jail (the last `NSpid` entry) and its process (`Tgid`, in our pid
/// namespace).
fn task_ids(pid: i32) -> (Option<i32>, i32) {
    let status = proc_status(pid).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().last())
            .and_then(|v| v.parse().ok())
    };
    (field("NSpid:"), field("Tgid:").unwrap_or(pid))
}

/// A pidfd of the stopped task `pid`, through which its descriptors are copied: the thread
/// itself where the kernel can (Linux 6.9+: a thread cloned without `CLONE_FILES` has a
/// descriptor table of its own, and its connect names one of those), else its process as it
/// is now, read afresh (never the task cache's: an entry may be older than the task, see
/// `Tracer::tasks`, and the process it names anyone's by now). The caller checks the
/// notification is still pending afterwards, so `pid` was still the task that stopped.
fn pin(pid: i32) -> Option<OwnedFd> {
    let tid = nix::unistd::Pid::from_raw(pid);
    match sys::pidfd_open_thread(tid) {
        Err(nix::errno::Errno::EINVAL) => {
            sys::pidfd_open(nix::unistd::Pid::from_raw(task_ids(pid).1)).ok()
        }
        other => other.ok(),
    }
}

/// `/proc/PID/status` (see [`sys::read_proc`]).
fn proc_status(pid: i32) -> Option<String> {
    sys::read_proc(&format!("/proc/{pid}/status")).ok()
}

/// The parent of process `tgid` (a pid in our namespace), as a pid inside the jail; `None` when
/// it is outside the jail (the jail's init's parent) or gone.
fn parent_in_jail(tgid: i32) -> Option<i32> {
    let status = proc_status(tgid)?;
    let ppid: i32 = status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))?
        .trim()
        .parse()
        .ok()?;
    if ppid <= 0 {
        return None;
    }
    // Inside the jail's pid namespace a task has two pids or more; one alone is ours (outside).
    let parent = proc_status(ppid)?;
    let ns: Vec<i32> = parent
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))?
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    (ns.len() > 1).then(|| ns.last().copied()).flatten()
}

/// A path argument, resolved against the task's working directory or `dirfd` when relative.
fn path_arg(pid: i32, dirfd: Option<u64>, addr: u64) -> Option<String> {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let p = read_cstr_bytes(pid, addr)?;
    if p.starts_with(b"/") {
        return Some(keep(p, from_root()));
    }
    // `int` arguments: the kernel reads the low 32 bits, and so do we.
    let folder = match dirfd.map(low_i32) {
        None | Some(libc::AT_FDCWD) => format!("/proc/{pid}/cwd"),
        Some(fd) => format!("/proc/{pid}/fd/{fd}"),
    };
    Some(match std::fs::read_link(&folder) {
        Ok(b) => {
            use std::os::unix::fs::MetadataExt;
            // Removed, by its link count (a folder may also be named `… (deleted)`).
            let removed = std::fs::metadata(&folder).is_ok_and(|m| m.nlink() == 0);
            let start = super::links::Start {
                len: b.as_os_str().len(),
                removed,
                who: WHO.get(),
            };
            let abs = b.join(std::ffi::OsStr::from_bytes(&p));
            keep(abs.into_os_string().into_vec(), start)
        }
        // A folder the kernel will not name (deeper than a page): the file's own name, where
        // it exists and no link leads to it.
        Err(_) => match super::links::named_from(&folder, &p) {
            Some(abs) => keep(abs, from_root()),
            None => String::from_utf8_lossy(&p).into_owned(),
        },
    })
}

/// Where an absolute path named by the task being decoded starts.
fn from_root() -> super::links::Start {
    super::links::Start {
        who: WHO.get(),
        ..Default::default()
    }
}

/// One path argument of the syscall being decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathArg {
    /// As recorded: `.` and `..` taken lexically.
    pub recorded: String,
    /// As the program wrote it, made absolute (the event's `raw_path` when it differs).
    pub written: String,
    /// The bytes it wrote, when they are not UTF-8 (both strings above are then lossy): links
    /// are followed through the folders it really named.
    pub bytes: Option<Vec<u8>>,
    /// Where a relative path starts (see [`super::links::Start`]).
    pub start: super::links::Start,
}

impl PathArg {
    /// The path to walk: the bytes the program gave.
    pub fn raw(&self) -> &[u8] {
        self.bytes.as_deref().unwrap_or(self.written.as_bytes())
    }
}

thread_local! {
    /// The task being decoded (for `/proc`'s links in its paths).
    static WHO: std::cell::Cell<Option<super::links::Who>> = const { std::cell::Cell::new(None) };
    /// The path arguments of the syscall being decoded, in the order they were read.
    static PATHS: std::cell::RefCell<Vec<PathArg>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Keep `abs` (an absolute path the program gave, starting at `start`) aside and return it as
/// recorded: `.` and `..` resolved lexically, so `/tmp/../home/x` is recorded (and judged by
/// the rules) as `/home/x`.
fn keep(abs: Vec<u8>, start: super::links::Start) -> String {
    let written = String::from_utf8_lossy(&abs).into_owned();
    let recorded = normalize(&written);
    let bytes = std::str::from_utf8(&abs).is_err().then_some(abs);
    PATHS.with(|p| {
        p.borrow_mut().push(PathArg {
            recorded: recorded.clone(),
            written,
            bytes,
            start,
        });
    });
    recorded
}

/// The socket address as a Rust value, for the capture network.
fn socket_addr(v: &Value) -> Option<SocketAddr> {
    let ip: std::net::IpAddr = v.get("address")?.as_str()?.parse().ok()?;
    let port = u16::try_from(v.get("port")?.as_u64()?).ok()?;
    Some(SocketAddr::new(ip, port))
}

/// Up to [`MAX_PAYLOAD`] bytes at `addr`.
fn payload(pid: i32, addr: u64, len: u64) -> Vec<u8> {
    let len = usize::try_from(len).unwrap_or(usize::MAX).min(MAX_PAYLOAD);
    if addr == 0 || len == 0 {
        return Vec::new();
    }
    read_mem(pid, addr, len).unwrap_or_default()
}

fn sockaddr(pid: i32, addr: u64, len: u64) -> Value {
    let len = usize::try_from(len.min(128)).unwrap_or(0);
    let Some(b) = read_mem(pid, addr, len).filter(|b| b.len() >= 2) else {
        return json!({});
    };
    let family = i32::from(u16::from_le_bytes([b[0], b[1]]));
    let port = |b: &[u8]| b.get(2..4).map(|p| u16::from_be_bytes([p[0], p[1]]));
    match family {
        libc::AF_INET if b.len() >= 8 => json!({
            "family": "inet",
            "address": std::net::Ipv4Addr::new(b[4], b[5], b[6], b[7]).to_string(),
            "port": port(&b),
        }),
        libc::AF_INET6 if b.len() >= 24 => {
            let mut a = [0u8; 16];
            a.copy_from_slice(&b[8..24]);
            json!({ "family": "inet6", "address": std::net::Ipv6Addr::from(a).to_string(), "port": port(&b) })
        }
        libc::AF_UNIX => {
            let raw = &b[2..];
            let (abs, name) = if raw.first() == Some(&0) {
                (true, &raw[1..])
            } else {
                (false, raw)
            };
            let end = if abs {
                name.len()
            } else {
                name.iter().position(|c| *c == 0).unwrap_or(name.len())
            };
            json!({ "family": "unix", "path": String::from_utf8_lossy(&name[..end]), "abstract": abs })
        }
        other => json!({ "family": other }),
    }
}

/// The low 32 bits of a syscall argument, as the `int` the kernel reads.
#[allow(clippy::cast_possible_truncation)]
fn low_i32(v: u64) -> i32 {
    (v as u32).cast_signed()
}

fn open_event(flags: u64) -> (EventKind, Value) {
    let flags = low_i32(flags);
    let acc = flags & libc::O_ACCMODE;
    let create = flags & libc::O_CREAT != 0;
    // `O_TRUNC` empties the file whatever the access mode says (even read-only).
    let truncate = flags & libc::O_TRUNC != 0;
    let access = match acc {
        libc::O_WRONLY => "write",
        libc::O_RDWR => "read_write",
        _ => "read",
    };
    let kind = if acc == libc::O_RDONLY && !create && !truncate {
        EventKind::FileOpen
    } else {
        EventKind::FileWrite
    };
    let mut d = json!({ "access": access, "create": create, "op": "open" });
    if truncate {
        d["truncate"] = json!(true);
    }
    if flags & libc::O_NOFOLLOW != 0 {
        d["nofollow"] = json!(true);
    }
    (kind, d)
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer")
            .field("tasks", &self.tasks.len())
            .finish_non_exhaustive()
    }
}

/// Receive the seccomp listener from the init on `sock`, then answer notifications on a thread
/// of its own until every traced task is gone (the listener hangs up) or `stop` is set. Spawned
/// by the supervisor once it no longer forks, so a second thread is safe there.
pub fn spawn(
    sock: OwnedFd,
    init: nix::unistd::Pid,
    hub: Arc<Hub>,
    net: Option<Arc<Net>>,
    stop: Arc<AtomicBool>,
    taken: std::sync::mpsc::Sender<()>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("warden-trace".into())
        .spawn(move || match take_listener(&sock, init) {
            Ok((listener, root, mounts)) => {
                // The init has its answer: the sync socket is free for what comes next.
                drop(sock);
                let _ = taken.send(());
                let mut tracer = Tracer::new(listener, hub, net, root);
                tracer.mounts = mounts;
                tracer.run(&stop);
            }
            Err(e) => tracing::debug!(error = %e, "no seccomp listener from the init"),
        })
}

/// How a stopped syscall is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reply {
    /// Let it run.
    Continue,
    /// Fail it with this errno.
    Fail(i32),
    /// A connect parked for a direct target: `EINPROGRESS` now, the event when it is answered.
    Parked,
    /// A blocking connect to a direct target: the connector replies, and records the event.
    Held,
}

/// A duplicate of the socket of `n`, a stopped connect of process `tgid`: the process is
/// pinned (pidfd) before the notification is checked to be still pending, so the pid cannot
/// have been reused by then. `pinned` is the pidfd cached for the task, taken before this
/// notification was checked (no second check, no pidfd per connect): as good as the task
/// cache's entry, which is the same task's as long as its pid was not reused (see
/// `Tracer::tasks`); a pin that no longer works (its process is gone) is passed over for a
/// fresh pin and check.
fn program_socket(
    listener: &OwnedFd,
    n: &sys::Notification,
    pinned: Option<&OwnedFd>,
) -> Option<OwnedFd> {
    let fd = low_i32(n.args[0]);
    if let Some(sock) = pinned.and_then(|p| sys::pidfd_getfd(p.as_fd(), fd).ok()) {
        return Some(sock);
    }
    let pidfd = pin(n.pid)?;
    if !sys::notif_id_valid(listener.as_fd(), n.id) {
        return None;
    }
    sys::pidfd_getfd(pidfd.as_fd(), fd).ok()
}

/// Writable mounts of the jail, by their path inside, held open.
type HeldMounts = Vec<(String, std::fs::File)>;

/// The jail's own writable mounts, held for the scan of written files after the tree is gone.
fn writable_mounts() -> [&'static str; 4] {
    ["/tmp", "/workspace", crate::persona::home(), "/dev/shm"]
}

/// The init announces its listener's descriptor number; copy the descriptor out of it and
/// tell it so.
fn take_listener(
    sock: &OwnedFd,
    init: nix::unistd::Pid,
) -> Result<(OwnedFd, Option<std::fs::File>, HeldMounts), nix::errno::Errno> {
    let mut number = [0u8; 4];
    let n = nix::unistd::read(sock, &mut number)?;
    if n != 4 {
        return Err(nix::errno::Errno::EPIPE);
    }
    let pidfd = sys::pidfd_open(init)?;
    let listener = sys::pidfd_getfd(pidfd.as_fd(), i32::from_le_bytes(number))?;
    // The init is still waiting for us, so this is its finished root; held open, it stays
    // readable after the jail's mount namespace is gone.
    let root = std::fs::File::open(format!("/proc/{init}/root")).ok();
    let mounts = writable_mounts()
        .iter()
        .filter_map(|m| {
            let f = std::fs::File::open(format!("/proc/{init}/root{m}")).ok()?;
            Some(((*m).to_owned(), f))
        })
        .collect();
    nix::unistd::write(sock, b"k")?;
    Ok((listener, root, mounts))
}

impl Tracer {
    fn new(
        listener: OwnedFd,
        hub: Arc<Hub>,
        net: Option<Arc<Net>>,
        root: Option<std::fs::File>,
    ) -> Tracer {
        if let Err(e) = sys::notif_sync_wakeup(listener.as_fd()) {
            tracing::debug!(error = %e, "no synchronous wake-up for seccomp notifications");
        }
        let responder = listener.try_clone().ok().map(Arc::new);
        Tracer {
            listener,
            responder,
            hub,
            net,
            tasks: HashMap::new(),
            // The traced calls, and the environment-read announcement (a `prctl`).
            observed: {
                let mut v = crate::seccomp::traced_syscalls();
                v.push(libc::SYS_prctl);
                v
            },
            written: HashMap::new(),
            bound: HashMap::new(),
            written_total: 0,
            scanned: 0,
            seen: HashMap::new(),
            hasher: std::hash::RandomState::new(),
            root,
            mounts: Vec::new(),
        }
    }

    fn run(mut self, stop: &AtomicBool) {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        loop {
            let mut fds = [PollFd::new(self.listener.as_fd(), PollFlags::POLLIN)];
            let ready = poll(&mut fds, PollTimeout::from(50u16));
            let ev = fds[0].revents().unwrap_or(PollFlags::empty());
            if ev.contains(PollFlags::POLLIN) {
                self.handle_one();
                continue;
            }
            let idle = matches!(ready, Ok(0));
            if ev.intersects(PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL)
                || (idle && stop.load(Ordering::Acquire))
                || ready.is_err_and(|e| e != nix::errno::Errno::EINTR)
            {
                self.scan_leftovers();
                return;
            }
        }
    }

    /// A denial the filter handed to us: answer it exactly as the deny list would, then record
    /// the attempt. It never runs.
    fn deny(&mut self, n: &sys::Notification) {
        let errno = crate::seccomp::denial_errno(n.nr).unwrap_or(libc::EPERM);
        let (inner, _) = task_ids(n.pid);
        let _ = sys::notif_fail(self.listener.as_fd(), n.id, errno);
        let mut data = json!({
            "syscall": syscall_name(n.nr),
            "nr": n.nr,
            "args": &n.args[..3],
            "errno": errno,
            "by": "seccomp",
        });
        if n.nr == libc::SYS_socket || n.nr == libc::SYS_socketpair {
            data["family"] = json!(family_name(low_i32(n.args[0])));
        }
        self.hub.record(EventKind::SandboxDenied, inner, data);
    }

    /// Handle one pending notification (call when the listener polled readable).
    fn handle_one(&mut self) {
        let Ok(n) = sys::notif_recv(self.listener.as_fd()) else {
            return;
        };
        if !self.observed.contains(&n.nr) {
            self.deny(&n);
            return;
        }
        let pid = n.pid;
        if self.tasks.len() > MAX_CACHED {
            self.tasks.clear();
        }
        let task = self.tasks.entry(pid).or_insert_with(|| {
            let (inner, tgid) = task_ids(pid);
            let process = if tgid == pid { inner } else { task_ids(tgid).0 };
            Task {
                mem: std::fs::File::open(format!("/proc/{pid}/mem"))
                    .ok()
                    .map(Arc::new),
                root: super::links::open_root(pid).map(Arc::new),
                pidfd: None,
                inner,
                process,
                tgid,
                loader_opens: 0,
            }
        });
        let (inner, process, tgid) = (task.inner, task.process, task.tgid);
        let mem = task.mem.clone();
        let root = task.root.clone();
        CURRENT.with(|c| *c.borrow_mut() = mem);
        // An exec replaces the process's address space, and an exec from another thread takes
        // over the leader's pid: forget every thread of this process.
        if n.nr == libc::SYS_execve || n.nr == libc::SYS_execveat || n.nr == libc::SYS_exit_group {
            self.tasks.retain(|_, t| t.tgid != tgid);
        }
        // A thread ending on its own: its pid may be the next task's.
        if n.nr == libc::SYS_exit {
            self.tasks.remove(&pid);
        }
        PATHS.with(|p| p.borrow_mut().clear());
        WHO.set(Some(super::links::Who {
            task: pid,
            process: tgid,
            inner_task: inner,
            inner_process: process,
        }));
        let mut decoded = decode(n.nr, pid, &n.args);
        let paths = PATHS.with(|p| std::mem::take(&mut *p.borrow_mut()));
        if let (Some(raw), Some((_, d))) = (
            paths.iter().rev().find(|p| p.written != p.recorded),
            decoded.as_mut(),
        ) {
            d["raw_path"] = json!(raw.written);
        }
        // A file reached through links is recorded as itself (the name used as `link_path`).
        let exact = match decoded.as_mut() {
            Some((kind, d)) => super::links::apply(root.as_deref(), *kind, d, &paths),
            None => Vec::new(),
        };
        // A decoy reached by another name (a hard link, a renamed folder) is the decoy.
        if let Some((kind, d)) = decoded.as_mut() {
            super::identity::label(self.hub.decoy_ids(), root.as_deref(), *kind, d);
        }
        // Who started the program: the process tree, as pids inside the jail.
        if let Some((EventKind::ProcessSpawn, d)) = decoded.as_mut()
            && let Some(parent) = parent_in_jail(tgid)
        {
            d["ppid"] = json!(parent);
        }
        CURRENT.with(|c| *c.borrow_mut() = None);
        // A connect whose socket may be copied (one to a direct target): its process is pinned
        // now, before the check below, which then covers the pin too. Only then: a pidfd held
        // per task is a descriptor of ours.
        if n.nr == libc::SYS_connect
            && let (Some(net), Some((_, d))) = (&self.net, decoded.as_ref())
            && socket_addr(d).is_some_and(|a| net.concerns_targets(&a))
            && let Some(task) = self.tasks.get_mut(&pid)
            && task.pidfd.is_none()
        {
            task.pidfd = pin(pid).map(Arc::new);
        }
        // Only what still belongs to this notification is evidence. Pid 1 is the jail's own
        // init (Warden, not the subject).
        let pending = sys::notif_id_valid(self.listener.as_fd(), n.id);
        if !pending {
            // The task is gone: what was cached for its pid must not serve the next task
            // given that pid.
            self.tasks.remove(&pid);
        }
        let valid = pending && inner != Some(1);
        // Warden's own observers (the interposer being loaded, Python's attempt to cache the
        // hook's bytecode) are not the subject's doing.
        let decoded = decoded.filter(|(kind, d)| {
            if !ours(*kind, d) {
                return true;
            }
            if !loader_file(d) {
                return false;
            }
            // The loader reads the preload list and maps the interposer once per exec: a
            // program that reads them afterwards (looking for a sandbox) is evidence.
            match self.tasks.get_mut(&pid) {
                Some(t) if t.loader_opens < 2 => {
                    t.loader_opens += 1;
                    false
                }
                Some(_) => true,
                None => false,
            }
        });
        let Some((kind, data)) = decoded.filter(|_| valid) else {
            let _ = sys::notif_continue(self.listener.as_fd(), n.id);
            return;
        };
        let mut data = data;
        let reply = self.before_continue(kind, &mut data, pid, tgid, process, &n);
        // A parked or held connect's event is recorded when the target answers.
        if !matches!(reply, Reply::Parked | Reply::Held) {
            // Recorded while the task is still stopped: whatever it does next (and whatever the
            // caller does once it sees that) comes after this event, in its window.
            self.record(kind, data, process, tgid, &n, &exact);
        }
        let _ = match reply {
            Reply::Continue => sys::notif_continue(self.listener.as_fd(), n.id),
            Reply::Fail(errno) => sys::notif_fail(self.listener.as_fd(), n.id, errno),
            Reply::Parked => sys::notif_fail(self.listener.as_fd(), n.id, libc::EINPROGRESS),
            // The connector replies when the target answers.
            Reply::Held => Ok(()),
        };
    }

    /// Work that must happen while the task is still stopped: the answer to a connect to a
    /// direct target (the errno to fail it with, if any; its port state goes in `data`), a
    /// capture listener for the destination of any other connect, the canary scan of a
    /// process's written files at its exit.
    fn before_continue(
        &mut self,
        kind: EventKind,
        data: &mut Value,
        pid: i32,
        tgid: i32,
        process: Option<i32>,
        n: &sys::Notification,
    ) -> Reply {
        use super::net::TargetAnswer;
        use super::targets::Decision;
        let mut reply = Reply::Continue;
        if kind == EventKind::NetConnect
            && data["op"] == "connect"
            && let (Some(net), Some(addr)) = (&self.net, socket_addr(data))
        {
            // The program's socket itself, when its address is one the targets may concern.
            let pinned = self.tasks.get(&pid).and_then(|t| t.pidfd.clone());
            let sock = net
                .concerns_targets(&addr)
                .then(|| program_socket(&self.listener, n, pinned.as_deref()))
                .flatten();
            let notif = self.responder.as_ref().map(|r| (r, n.id));
            match net.decide_target(addr, sock, notif, process, data) {
                Some(TargetAnswer::Deferred) => reply = Reply::Parked,
                Some(TargetAnswer::Held) => reply = Reply::Held,
                Some(TargetAnswer::NotStream) => {}
                Some(TargetAnswer::Now(d)) => {
                    data["target"] = json!(d.state());
                    if let Decision::Fail(errno) = d {
                        data["errno"] = json!(errno);
                        reply = Reply::Fail(errno);
                    }
                }
                None => net.ensure_listener(addr),
            }
        }
        // A TCP Fast Open send connects as it sends (`sendto`/`sendmsg` with MSG_FASTOPEN, no
        // connect of its own): its destination needs a capture listener too, or the kernel's
        // answer is a refusal and the data never leaves the program.
        let fastopen = libc::MSG_FASTOPEN as u64;
        let flags = match n.nr {
            nr if nr == libc::SYS_sendto => n.args[3],
            nr if nr == libc::SYS_sendmsg => n.args[2],
            _ => 0,
        };
        if kind == EventKind::NetSend
            && flags & fastopen != 0
            && let (Some(net), Some(addr)) = (&self.net, socket_addr(data))
            && !net.concerns_targets(&addr)
        {
            net.ensure_listener(addr);
        }
        // Its written files are scanned now, and kept for the scan at the end: a child that
        // inherited a descriptor may write to them after this exit.
        if n.nr == libc::SYS_exit_group
            && let Some(paths) = self.written.get(&tgid).cloned()
        {
            let inner = self.tasks.get(&pid).and_then(|t| t.process);
            // The task's root, opened once and checked to still be this task's.
            let root = std::fs::File::open(format!("/proc/{pid}/root")).ok();
            if sys::notif_id_valid(self.listener.as_fd(), n.id)
                && let Some(root) = root
            {
                self.scan_files(&root, &paths, inner);
            }
        }
        reply
    }

    /// Remember `path`, written by process `tgid`, for the canary scan (within the caps).
    fn remember(&mut self, tgid: i32, path: Vec<u8>) {
        if self.written_total >= MAX_WRITTEN_TOTAL {
            return;
        }
        let list = self.written.entry(tgid).or_default();
        if list.len() < MAX_WRITTEN && !list.contains(&path) {
            list.push(path);
            self.written_total += 1;
        }
    }

    /// Remember `new`, the name `old` (written by process `tgid`) may have after a rename. With
    /// the lists full, the new name takes the old one's place instead (the rename most likely
    /// worked), so a program cannot fill them first and then move its loot out of sight.
    fn remember_renamed(&mut self, tgid: i32, old: &[u8], new: Vec<u8>) {
        let full = self.written_total >= MAX_WRITTEN_TOTAL
            || self
                .written
                .get(&tgid)
                .is_some_and(|l| l.len() >= MAX_WRITTEN);
        if !full {
            return self.remember(tgid, new);
        }
        if let Some(list) = self.written.get_mut(&tgid)
            && !list.contains(&new)
            && let Some(p) = list.iter_mut().find(|p| p.as_slice() == old)
        {
            *p = new;
        }
    }

    /// `exact`: the event's paths as bytes (see [`super::links::Exact`]).
    fn record(
        &mut self,
        kind: EventKind,
        mut data: Value,
        inner: Option<i32>,
        tgid: i32,
        n: &sys::Notification,
        exact: &super::links::Exact,
    ) {
        let exact_of = |key: &str| exact.iter().find(|(k, _)| *k == key).map(|(_, p)| p);
        if kind == EventKind::NetConnect {
            let fd = low_i32(n.args[0]);
            match data["op"].as_str() {
                Some("bind") if self.bound.len() < 4096 => {
                    self.bound.insert((tgid, fd), data.clone());
                }
                Some("listen") => {
                    if let Some(b) = self.bound.get(&(tgid, fd)) {
                        for k in ["family", "address", "port", "path"] {
                            if let Some(v) = b.get(k) {
                                data[k] = v.clone();
                            }
                        }
                    }
                }
                _ => {}
            }
            if let (Some(net), Some(addr)) = (&self.net, socket_addr(&data))
                && let Some(host) = net.host_of(addr.ip())
            {
                if net.allows(&host, addr.port()) {
                    data["egress"] = json!("allowed");
                }
                data["host"] = json!(host);
            }
        }
        if kind == EventKind::FileWrite
            // `creat` (no `op`) is an open for writing too.
            && data["op"].as_str().is_none_or(|op| op == "open")
            && let Some(path) = exact_of("path")
        {
            self.remember(tgid, path.clone());
        }
        // A written file renamed before its writer exits, or whose folder is, is scanned under
        // its new name too. The event comes before the rename runs: it may fail, or swap the
        // two names (`RENAME_EXCHANGE`), so both names are kept, each way.
        if kind == EventKind::FileRename
            && let (Some(from), Some(to)) = (exact_of("from"), exact_of("to"))
        {
            let moved: Vec<(i32, Vec<u8>, Vec<u8>)> = self
                .written
                .iter()
                .flat_map(|(t, list)| list.iter().map(move |p| (*t, p)))
                .flat_map(|(t, p)| {
                    [renamed(p, from, to), renamed(p, to, from)]
                        .into_iter()
                        .flatten()
                        .map(move |n| (t, p.clone(), n))
                })
                .collect();
            for (t, old, new) in moved {
                self.remember_renamed(t, &old, new);
            }
        }
        if kind == EventKind::EnvRead
            && let (Some(c), Some(name)) = (self.hub.canaries(), data["name"].as_str())
        {
            data["canary"] = json!(c.value(&format!("env:{name}")).is_some());
        }
        let payload = data
            .as_object_mut()
            .and_then(|m| m.remove("payload"))
            .and_then(|p| p.as_array().cloned());
        // Where a payload went, kept before the event is handed over (no copy of the event).
        let dest = payload
            .is_some()
            .then(|| (data["address"].clone(), data["port"].clone()));
        // Another program's command line carries what it was given: the argument canary (the
        // user's text passed on) and secrets alike are looked for in it.
        let argv = (kind == EventKind::ProcessSpawn)
            .then(|| argv_text(&data))
            .flatten()
            .map(|text| (text, data["path"].clone()));
        let id = self.hub.record(kind, inner, data);
        if let Some((text, path)) = argv {
            let ctx = json!({ "where": "argv", "path": path, "event": id });
            self.hub.scan(text.as_bytes(), inner, &ctx);
        }
        if let (Some(bytes), Some((address, port))) = (payload, dest) {
            let bytes: Vec<u8> = bytes
                .iter()
                .filter_map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
                .collect();
            let ctx = json!({ "where": "net", "address": address, "port": port, "event": id });
            self.hub.scan(&bytes, inner, &ctx);
            if port == 53 {
                for (name, qtype) in warden_trace::questions(&bytes) {
                    let dns =
                        json!({ "name": name, "type": qtype, "server": address, "answer": null });
                    let dns_id = self.hub.record(EventKind::NetDns, inner, dns);
                    let ctx = json!({ "where": "dns", "name": name, "event": dns_id });
                    self.hub.scan_name(&name, inner, &ctx);
                }
            }
        }
    }
}

/// An exec event's arguments after the program's name, joined by spaces (`None` when there
/// are none).
fn argv_text(data: &Value) -> Option<String> {
    let words: Vec<&str> = data["argv"]
        .as_array()?
        .iter()
        .skip(1)
        .filter_map(Value::as_str)
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

/// Whether an event is an open of a file the loader opens at each exec (the preload list, the
/// interposer).
fn loader_file(data: &Value) -> bool {
    data["path"]
        .as_str()
        .map(normalize)
        .is_some_and(|p| p == "/etc/ld.so.preload" || p == super::prepare::interposer_path())
}

/// `path` with `.`, `..` and repeated slashes resolved lexically.
pub(super) fn normalize(path: &str) -> String {
    String::from_utf8_lossy(&super::links::normalize(path.as_bytes())).into_owned()
}

/// Whether an event is Warden's own doing: the loader reading `/etc/ld.so.preload` (the jail's
/// own, naming only the interposer) and opening the interposer, Python reading (or trying to
/// cache) the hook. Only those exact files, only opens and the cache attempt —
/// never an exec or a delete, and a path that merely passes through the directory (`..`) is
/// judged by where it ends up.
fn ours(kind: EventKind, data: &Value) -> bool {
    let Some(path) = data["path"].as_str() else {
        return false;
    };
    let p = normalize(path);
    let tools = super::prepare::TOOLS_MOUNT;
    match kind {
        EventKind::FileOpen => {
            p == super::prepare::interposer_path()
                || p == "/etc/ld.so.preload"
                || p == format!("{tools}/python/sitecustomize.py")
                || p == format!("{tools}/python")
                || p.starts_with(&format!("{tools}/python/__pycache__/sitecustomize."))
        }
        EventKind::FileWrite => {
            data["op"] == "mkdir" && p == format!("{tools}/python/__pycache__")
                || p.starts_with(&format!("{tools}/python/__pycache__/sitecustomize."))
        }
        _ => false,
    }
}

/// `p` once `from` (the file itself or a folder above it) is named `to`; `None` when `from`
/// is not `p` or above it, or the new name is longer than any path the kernel takes.
fn renamed(p: &[u8], from: &[u8], to: &[u8]) -> Option<Vec<u8>> {
    let rest = p.strip_prefix(from)?;
    if !(rest.is_empty() || rest.starts_with(b"/")) {
        return None;
    }
    let mut out = to.to_vec();
    out.extend_from_slice(rest);
    (out.len() <= super::links::MAX_PATH).then_some(out)
}

/// A written file that is an agent client's MCP configuration in the decoy home: a
/// `file.write` (`op: agent_config`) naming the client and the servers it now lists that the
/// decoy did not (a rogue server planted for the user's agent to start).
fn agent_config(hub: &Hub, path: &[u8], bytes: &[u8], pid: Option<i32>) {
    let path = String::from_utf8_lossy(path);
    let home = format!("{}/", crate::persona::home());
    let Some(client) = path
        .strip_prefix(&home)
        .and_then(warden_trace::agents::client_of)
    else {
        return;
    };
    let added = warden_trace::agents::added(client, bytes);
    hub.record(
        EventKind::FileWrite,
        pid,
        json!({
            "path": path, "op": "agent_config", "client": client.name,
            "servers_added": added, "bytes": bytes.len(),
        }),
    );
}

/// Bytes of written files scanned per run, at most.
const MAX_SCAN_TOTAL: u64 = 64 << 20;
/// Paths remembered for the canary scan over all processes, at most.
const MAX_WRITTEN_TOTAL: usize = 4096;

impl Tracer {
    /// Scan `paths` (as seen from `root`) for canaries, within the run's scan budget.
    /// Scan the written file `rel` beneath `base` (the jail's root or one of its mounts held
    /// open), reported as `path`, within the scan budget.
    fn scan_one(&mut self, base: &std::fs::File, rel: &[u8], path: &[u8], pid: Option<i32>) {
        let left = MAX_SCAN_TOTAL.saturating_sub(self.scanned);
        if left == 0 {
            return;
        }
        if let Some(bytes) = read_in_root(base, rel, left.min(MAX_SCAN)) {
            use std::hash::BuildHasher;
            self.scanned += bytes.len() as u64;
            let hash = self.hasher.hash_one(&bytes);
            if self.seen.insert(path.to_vec(), hash) == Some(hash) {
                return;
            }
            let ctx = json!({ "where": "file", "path": String::from_utf8_lossy(path) });
            self.hub.scan(&bytes, pid, &ctx);
            agent_config(&self.hub, path, &bytes, pid);
        }
    }

    fn scan_files(&mut self, root: &std::fs::File, paths: &[Vec<u8>], pid: Option<i32>) {
        for path in paths {
            self.scan_one(root, path, path, pid);
        }
    }

    /// Once the tree is gone: every written file again (a process killed, or ended with a bare
    /// `exit`, was never scanned; one that exited may have left a child writing), through the
    /// root held since the start; a file unchanged since its last scan is passed over.
    fn scan_leftovers(&mut self) {
        let Some(root) = self.root.take() else {
            return;
        };
        let left: Vec<Vec<u8>> = std::mem::take(&mut self.written)
            .into_values()
            .flatten()
            .collect();
        // A path in one of the writable mounts is read through that mount (the deepest).
        let mounts = std::mem::take(&mut self.mounts);
        for path in left {
            let held = mounts
                .iter()
                .filter(|(m, _)| {
                    path.strip_prefix(m.as_bytes())
                        .is_some_and(|r| r.starts_with(b"/"))
                })
                .max_by_key(|(m, _)| m.len());
            match held {
                Some((m, f)) => self.scan_one(f, &path[m.len()..], &path, None),
                None => self.scan_one(&root, &path, &path, None),
            }
        }
    }
}

/// Read a file the process wrote, as the process sees it (its root, no escaping it through
/// symlinks), if it is a regular file on an ordinary file system (never procfs, sysfs or a
/// device: reading those can have side effects); at most `cap` bytes.
fn read_in_root(root: &std::fs::File, path: &[u8], cap: u64) -> Option<Vec<u8>> {
    use std::io::Read;
    let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
    let resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
    let rel = super::links::beneath_root(path);
    // O_PATH first: nothing is opened for reading until the type is known.
    let probe = sys::openat2(
        Some(root.as_fd()),
        rel,
        libc::O_PATH | libc::O_CLOEXEC,
        0,
        resolve,
    )
    .ok()?;
    let meta = std::fs::File::from(probe);
    if !meta.metadata().ok()?.is_file() || special_fs(&meta) {
        return None;
    }
    let fd = sys::openat2(Some(root.as_fd()), rel, flags, 0, resolve).ok()?;
    let file = std::fs::File::from(fd);
    if !file.metadata().ok()?.is_file() || special_fs(&file) {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(cap).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Whether `f` lives on procfs, sysfs, debugfs, securityfs or the like.
fn special_fs(f: &std::fs::File) -> bool {
    use nix::sys::statfs::{PROC_SUPER_MAGIC, SYSFS_MAGIC, fstatfs};
    fstatfs(f).map_or(true, |s| {
        let t = s.filesystem_type();
        t == PROC_SUPER_MAGIC
            || t == SYSFS_MAGIC
            || t.0 == 0x6462_6720 // debugfs
            || t.0 == 0x7363_6673 // securityfs
            || t.0 == 0x6e73_6673 // nsfs
            || t.0 == 0x6367_7270 // cgroup2
    })
}

/// A send's data: the destination and the first bytes (kept aside for the canary scan and DNS
/// decoding; they are not part of the event).
fn send_event(
    pid: i32,
    addr: u64,
    alen: u64,
    buf: u64,
    len: u64,
    via: &str,
) -> Option<(EventKind, Value)> {
    if addr == 0 {
        return None;
    }
    let mut d = sockaddr(pid, addr, alen);
    let bytes = payload(pid, buf, len);
    d["via"] = json!(via);
    d["bytes"] = json!(len);
    d["preview"] = json!(String::from_utf8_lossy(&bytes[..bytes.len().min(256)]));
    d["captured"] = json!("syscall");
    d["payload"] = json!(bytes);
    Some((EventKind::NetSend, d))
}

/// `struct msghdr`: the destination and the first buffer of a `sendmsg`.
fn sendmsg_event(pid: i32, msg: u64) -> Option<(EventKind, Value)> {
    let h = read_mem(pid, msg, 32).filter(|h| h.len() == 32)?;
    let word = |i: usize| u64::from_le_bytes(h[i..i + 8].try_into().unwrap_or([0; 8]));
    let (name, namelen, iov, iovlen) = (word(0), word(8) & 0xffff_ffff, word(16), word(24));
    let (base, len) = if iovlen > 0 {
        let v = read_mem(pid, iov, 16).filter(|v| v.len() == 16)?;
        (
            u64::from_le_bytes(v[0..8].try_into().unwrap_or([0; 8])),
            u64::from_le_bytes(v[8..16].try_into().unwrap_or([0; 8])),
        )
    } else {
        (0, 0)
    };
    send_event(pid, name, namelen, base, len, "sendmsg")
}

fn file_change(path: Option<String>, op: &str, mode: u64) -> Option<(EventKind, Value)> {
    Some((
        EventKind::FileWrite,
        json!({ "path": path, "op": op, "mode": format!("{:o}", mode & 0o7777) }),
    ))
}

fn net_op(mut d: Value, op: &str) -> Option<(EventKind, Value)> {
    d["op"] = json!(op);
    Some((EventKind::NetConnect, d))
}

/// An exec's data. A program named through a descriptor (`/proc/self/fd/N`, `/dev/fd/N`, or
/// an empty path with `AT_EMPTY_PATH`) is recorded as what that descriptor is; a memory file
/// (`memfd_create`) or a deleted file is `fileless`, with the memory file's name: nothing on
/// disk holds what ran.
fn exec_event(pid: i32, path: Option<String>, argv: Value) -> Value {
    let own = format!("/proc/{pid}/fd/");
    let fd = path.as_deref().and_then(|p| {
        [
            "/proc/self/fd/",
            "/dev/fd/",
            "/proc/thread-self/fd/",
            own.as_str(),
        ]
        .iter()
        .find_map(|prefix| p.strip_prefix(prefix))
        .and_then(|n| n.parse::<i32>().ok())
    });
    let path = match fd.and_then(|fd| std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok()) {
        Some(target) => Some(target.to_string_lossy().into_owned()),
        None => path,
    };
    let mut d = json!({ "path": path, "argv": argv });
    if let Some(p) = path.as_deref() {
        if let Some(name) = p.strip_prefix("/memfd:") {
            d["fileless"] = json!(true);
            d["memfd"] = json!(name.trim_end_matches(" (deleted)"));
        } else if p.ends_with(" (deleted)") {
            d["fileless"] = json!(true);
        }
    }
    d
}

/// Turn one observed syscall into an event (reads the stopped task's memory).
fn decode(nr: i64, pid: i32, a: &[u64; 6]) -> Option<(EventKind, Value)> {
    match nr {
        nr if nr == libc::SYS_execve => Some((
            EventKind::ProcessSpawn,
            exec_event(pid, path_arg(pid, None, a[0]), read_argv(pid, a[1])),
        )),
        nr if nr == libc::SYS_execveat => Some((
            EventKind::ProcessSpawn,
            exec_event(pid, path_arg(pid, Some(a[0]), a[1]), read_argv(pid, a[2])),
        )),
        nr if nr == libc::SYS_openat => {
            let (kind, mut d) = open_event(a[2]);
            d["path"] = json!(path_arg(pid, Some(a[0]), a[1]));
            Some((kind, d))
        }
        nr if nr == libc::SYS_unlinkat => Some((
            EventKind::FileDelete,
            json!({ "path": path_arg(pid, Some(a[0]), a[1]) }),
        )),
        nr if nr == libc::SYS_renameat || nr == libc::SYS_renameat2 => Some((
            EventKind::FileRename,
            json!({ "from": path_arg(pid, Some(a[0]), a[1]), "to": path_arg(pid, Some(a[2]), a[3]) }),
        )),
        nr if nr == libc::SYS_mkdirat => {
            file_change(path_arg(pid, Some(a[0]), a[1]), "mkdir", a[2])
        }
        nr if nr == libc::SYS_linkat => Some((
            EventKind::FileLink,
            json!({
                "op": "link",
                "from": path_arg(pid, Some(a[0]), a[1]),
                "to": path_arg(pid, Some(a[2]), a[3]),
                "follow": low_i32(a[4]) & libc::AT_SYMLINK_FOLLOW != 0,
            }),
        )),
        // A symbolic link's target is text, kept as written (it is resolved when used).
        nr if nr == libc::SYS_symlinkat => Some((
            EventKind::FileLink,
            json!({
                "op": "symlink",
                "target": read_cstr(pid, a[0]),
                "to": path_arg(pid, Some(a[1]), a[2]),
            }),
        )),
        nr if nr == libc::SYS_fchmodat || nr == crate::seccomp::FCHMODAT2 => {
            file_change(path_arg(pid, Some(a[0]), a[1]), "chmod", a[2])
        }
        nr if nr == libc::SYS_connect => net_op(sockaddr(pid, a[1], a[2]), "connect"),
        nr if nr == libc::SYS_bind => net_op(sockaddr(pid, a[1], a[2]), "bind"),
        nr if nr == libc::SYS_listen => net_op(json!({ "fd": low_i32(a[0]) }), "listen"),
        nr if nr == libc::SYS_sendto => send_event(pid, a[4], a[5], a[1], a[2], "sendto"),
        nr if nr == libc::SYS_sendmsg => sendmsg_event(pid, a[1]),
        nr if nr == libc::SYS_prctl && a[0] & 0xffff_ffff == ENV_READ_OPTION => {
            let via = if a[2] & 0xffff_ffff == 1 {
                "python"
            } else {
                "getenv"
            };
            Some((
                EventKind::EnvRead,
                json!({ "name": read_cstr(pid, a[1]), "via": via, "observed": "in_process" }),
            ))
        }
        // The status the process exits with (deaths by signal are reported for the command
        // itself by `sandbox.exited`).
        nr if nr == libc::SYS_exit_group => Some((
            EventKind::ProcessExit,
            json!({ "code": low_i32(a[0]) & 0xff }),
        )),
        #[cfg(target_arch = "x86_64")]
        nr if nr == libc::SYS_open => {
            let (kind, mut d) = open_event(a[1]);
            d["path"] = json!(path_arg(pid, None, a[0]));
            Some((kind, d))
        }
        #[cfg(target_arch = "x86_64")]
        nr if nr == libc::SYS_creat => Some((
            EventKind::FileWrite,
            json!({ "path": path_arg(pid, None, a[0]), "access": "write", "create": true }),
        )),
        #[cfg(target_arch = "x86_64")]
        nr if nr == libc::SYS_unlink || nr == libc::SYS_rmdir => Some((
            EventKind::FileDelete,
            json!({ "path": path_arg(pid, None, a[0]) }),
        )),
        #[cfg(target_arch = "x86_64")]
        nr if nr == libc::SYS_rename => Some((
            EventKind::FileRename,
            json!({ "from": path_arg(pid, None, a[0]), "to": path_arg(pid, None, a[1]) }),
        )),
        #[cfg(target_arch = "x86_64")]
        nr if nr == libc::SYS_link => Some((
            EventKind::FileLink,
            json!({ "op": "link", "from": path_arg(pid, None, a[0]), "to": path_arg(pid, None, a[1]), "follow": false }),
        )),
        #[cfg(target_arch = "x86_64")]
        nr if nr == libc::SYS_symlink => Some((
            EventKind::FileLink,
            json!({ "op": "symlink", "target": read_cstr(pid, a[0]), "to": path_arg(pid, None, a[1]) }),
        )),
        #[cfg(target_arch = "x86_64")]
        nr if nr == libc::SYS_mkdir => file_change(path_arg(pid, None, a[0]), "mkdir", a[1]),
        #[cfg(target_arch = "x86_64")]
        nr if nr == libc::SYS_chmod => file_change(path_arg(pid, None, a[0]), "chmod", a[1]),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::renamed;

    #[test]
    fn a_rename_moves_the_file_or_what_is_beneath_the_folder_within_the_longest_path() {
        assert_eq!(
            renamed(b"/tmp/a", b"/tmp/a", b"/tmp/b"),
            Some(b"/tmp/b".to_vec())
        );
        assert_eq!(
            renamed(b"/tmp/s/loot", b"/tmp/s", b"/tmp/t"),
            Some(b"/tmp/t/loot".to_vec())
        );
        // Not a folder above it, only a name that starts the same.
        assert_eq!(renamed(b"/tmp/sx/loot", b"/tmp/s", b"/tmp/t"), None);
        // A rename into a longer and longer name (it fails, but is seen before it runs)
        // never grows a remembered name past what the kernel takes.
        let long = [b"/tmp/s/".as_slice(), &[b'x'; 4000]].concat();
        let once = renamed(b"/tmp/s/loot", b"/tmp/s", &long).unwrap();
        assert_eq!(renamed(&once, b"/tmp/s", &long), None);
    }
}
