//! The tracer: turns the jail's seccomp user notifications into [`Event`]s.
//!
//! Each notification stops one syscall of one task. The tracer reads the syscall's arguments
//! from the task (`/proc/<pid>/mem`), checks that the notification is still valid — so what was
//! read belongs to that task and not to whatever reused its pid — records the event, and lets
//! the syscall continue unchanged. These reads are evidence, never enforcement: a task could
//! change its memory between our read and the kernel's, and enforcement stays with the jail's
//! own layers (the deny rules come before the notification in the filter).

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;

use serde_json::{Value, json};
use warden_events::{EventKind, Recorder};

use crate::sys;

/// Bytes read for one path or argument, at most.
const MAX_STRING: usize = 4096;
/// Arguments of an exec recorded, at most.
const MAX_ARGV: usize = 64;

/// Tasks whose `/proc` handles are kept open, at most.
const MAX_CACHED: usize = 512;

/// Decodes and answers notifications.
#[derive(Debug)]
pub struct Tracer {
    listener: OwnedFd,
    /// The events so far.
    pub recorder: Recorder,
    /// Per task (supervisor pid): its memory, opened once, and its pid inside the jail. A reused
    /// pid is caught by the notification-id check, which comes after every read.
    tasks: std::collections::HashMap<i32, Task>,
    /// Syscalls observed (let through); any other notification is a denial.
    observed: Vec<i64>,
}

#[derive(Debug)]
struct Task {
    mem: Option<std::fs::File>,
    inner: Option<i32>,
}

thread_local! {
    /// The memory of the task being decoded (set for the duration of one notification).
    static CURRENT: std::cell::RefCell<Option<std::fs::File>> = const { std::cell::RefCell::new(None) };
}

fn read_mem(_pid: i32, addr: u64, len: usize) -> Option<Vec<u8>> {
    CURRENT.with(|c| {
        let c = c.borrow();
        let f = c.as_ref()?;
        let mut buf = vec![0u8; len];
        let n = f.read_at(&mut buf, addr).ok()?;
        buf.truncate(n);
        Some(buf)
    })
}

fn read_cstr(pid: i32, addr: u64) -> Option<String> {
    if addr == 0 {
        return None;
    }
    let bytes = read_mem(pid, addr, MAX_STRING)?;
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    Some(String::from_utf8_lossy(&bytes[..end]).into_owned())
}

fn read_argv(pid: i32, addr: u64) -> Vec<String> {
    let Some(ptrs) = read_mem(pid, addr, MAX_ARGV * 8) else {
        return Vec::new();
    };
    ptrs.chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .take_while(|p| *p != 0)
        .filter_map(|p| read_cstr(pid, p))
        .collect()
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

/// The task's pid inside the jail (the last `NSpid` entry), for the event.
fn inner_pid(pid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .and_then(|v| v.split_whitespace().last())
        .and_then(|v| v.parse().ok())
}

/// A path argument, resolved against the task's working directory or `dirfd` when relative.
fn path_arg(pid: i32, dirfd: Option<u64>, addr: u64) -> Option<String> {
    let p = read_cstr(pid, addr)?;
    if p.starts_with('/') {
        return Some(p);
    }
    // `int` arguments: the kernel reads the low 32 bits, and so do we.
    let base = match dirfd.map(low_i32) {
        None | Some(libc::AT_FDCWD) => std::fs::read_link(format!("/proc/{pid}/cwd")).ok(),
        Some(fd) => std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok(),
    };
    Some(match base {
        Some(b) => b.join(&p).to_string_lossy().into_owned(),
        None => p,
    })
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
    let access = match acc {
        libc::O_WRONLY => "write",
        libc::O_RDWR => "read_write",
        _ => "read",
    };
    let kind = if acc == libc::O_RDONLY && !create {
        EventKind::FileOpen
    } else {
        EventKind::FileWrite
    };
    (kind, json!({ "access": access, "create": create }))
}

impl Tracer {
    /// A tracer reading `listener`, keeping at most `cap` events.
    pub fn new(listener: OwnedFd, cap: usize) -> Tracer {
        Tracer {
            listener,
            recorder: Recorder::new(cap),
            tasks: std::collections::HashMap::new(),
            observed: crate::seccomp::traced_syscalls(),
        }
    }

    /// Answer notifications on a thread of its own until every traced task is gone (the
    /// listener hangs up) or `stop` is set; returns the events. The supervisor no longer forks
    /// once the listener exists, so a second thread is safe there.
    pub fn spawn(
        mut self,
        stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> std::thread::JoinHandle<Recorder> {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        std::thread::spawn(move || {
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
                    || (idle && stop.load(std::sync::atomic::Ordering::Acquire))
                    || ready.is_err_and(|e| e != nix::errno::Errno::EINTR)
                {
                    return self.recorder;
                }
            }
        })
    }

    /// Handle one pending notification (call when the listener polled readable).
    pub fn handle_one(&mut self) {
        let Ok(n) = sys::notif_recv(self.listener.as_fd()) else {
            return;
        };
        let (pid, a) = (n.pid, n.args);
        // A denial the filter handed to us: answer it exactly as the deny list would, then
        // record the attempt. Never let it run.
        if !self.observed.contains(&n.nr) {
            let errno = crate::seccomp::denial_errno(n.nr).unwrap_or(libc::EPERM);
            let inner = inner_pid(pid);
            let _ = sys::notif_fail(self.listener.as_fd(), n.id, errno);
            let data = json!({
                "syscall": syscall_name(n.nr),
                "nr": n.nr,
                "args": &a[..3],
                "errno": errno,
                "by": "seccomp",
            });
            self.recorder.record(EventKind::SandboxDenied, inner, data);
            return;
        }
        if self.tasks.len() > MAX_CACHED {
            self.tasks.clear();
        }
        let task = self.tasks.entry(pid).or_insert_with(|| Task {
            mem: std::fs::File::open(format!("/proc/{pid}/mem")).ok(),
            inner: inner_pid(pid),
        });
        let inner = task.inner;
        let mem = task.mem.as_ref().and_then(|f| f.try_clone().ok());
        CURRENT.with(|c| *c.borrow_mut() = mem);
        // An exec replaces the address space: later reads need a fresh handle.
        if n.nr == libc::SYS_execve || n.nr == libc::SYS_execveat {
            self.tasks.remove(&pid);
        }
        let decoded: Option<(EventKind, Value)> = match n.nr {
            nr if nr == libc::SYS_execve => Some((
                EventKind::ProcessSpawn,
                json!({ "path": path_arg(pid, None, a[0]), "argv": read_argv(pid, a[1]) }),
            )),
            nr if nr == libc::SYS_execveat => Some((
                EventKind::ProcessSpawn,
                json!({ "path": path_arg(pid, Some(a[0]), a[1]), "argv": read_argv(pid, a[2]) }),
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
            nr if nr == libc::SYS_connect => {
                Some((EventKind::NetConnect, sockaddr(pid, a[1], a[2])))
            }
            nr if nr == libc::SYS_exit_group => {
                // The status the process exits with (deaths by signal are reported for the
                // command itself by `sandbox.exited`).
                Some((
                    EventKind::ProcessExit,
                    json!({ "code": low_i32(a[0]) & 0xff }),
                ))
            }
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
            nr if nr == libc::SYS_unlink => Some((
                EventKind::FileDelete,
                json!({ "path": path_arg(pid, None, a[0]) }),
            )),
            #[cfg(target_arch = "x86_64")]
            nr if nr == libc::SYS_rename => Some((
                EventKind::FileRename,
                json!({ "from": path_arg(pid, None, a[0]), "to": path_arg(pid, None, a[1]) }),
            )),
            _ => None,
        };
        CURRENT.with(|c| *c.borrow_mut() = None);
        // Only what still belongs to this notification is evidence.
        let valid = sys::notif_id_valid(self.listener.as_fd(), n.id);
        let _ = sys::notif_continue(self.listener.as_fd(), n.id);
        // Pid 1 is the jail's own init (Warden, not the subject).
        if let (true, Some((kind, data)), false) = (valid, decoded, inner == Some(1)) {
            self.recorder.record(kind, inner, data);
        }
    }
}
