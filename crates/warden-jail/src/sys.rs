//! Thin safe wrappers over the raw system calls the jail needs and that `nix` does not cover.
//!
//! This is the only module of the crate with `unsafe`. Each wrapper takes and returns owned,
//! typed values (`OwnedFd`, `Pid`, slices), so callers never handle raw pointers. The wrappers
//! do no policy: they report the kernel's answer as an `Errno`.

use std::ffi::CString;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use nix::errno::Errno;
use nix::unistd::Pid;

/// `OPEN_TREE_CLONE`: make a detached copy of the mount instead of opening it.
pub const OPEN_TREE_CLONE: u32 = 1;
/// `MOVE_MOUNT_F_EMPTY_PATH`: the source is the file descriptor itself.
const MOVE_MOUNT_F_EMPTY_PATH: u32 = 0x0000_0004;
/// `MOUNT_ATTR_RDONLY`.
pub const MOUNT_ATTR_RDONLY: u64 = 0x0000_0001;
/// `MOUNT_ATTR_NOSUID`.
pub const MOUNT_ATTR_NOSUID: u64 = 0x0000_0002;
/// `MOUNT_ATTR_NODEV`.
pub const MOUNT_ATTR_NODEV: u64 = 0x0000_0004;
/// `MOUNT_ATTR_NOEXEC`.
pub const MOUNT_ATTR_NOEXEC: u64 = 0x0000_0008;
/// `MOUNT_ATTR_IDMAP`.
pub const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

fn to_cstring(path: &str) -> Result<CString, Errno> {
    CString::new(path).map_err(|_| Errno::EINVAL)
}

fn fd_result(ret: libc::c_long) -> Result<OwnedFd, Errno> {
    if ret < 0 {
        return Err(Errno::last());
    }
    let fd = RawFd::try_from(ret).map_err(|_| Errno::EBADF)?;
    // SAFETY: the kernel just returned `fd` as a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn unit_result(ret: libc::c_long) -> Result<(), Errno> {
    if ret < 0 { Err(Errno::last()) } else { Ok(()) }
}

/// Child half of [`clone_into_namespaces`].
#[derive(Debug)]
pub enum CloneResult {
    /// We are the parent; the child has this pid.
    Parent(Pid),
    /// We are the child.
    Child,
}

/// `clone(2)` with namespace flags and fork semantics (the child continues on a copy of the
/// stack). Only call from a single-threaded process: the child must not inherit locks held by
/// other threads.
pub fn clone_into_namespaces(flags: libc::c_int) -> Result<CloneResult, Errno> {
    let flags = libc::c_ulong::try_from(flags | libc::SIGCHLD).map_err(|_| Errno::EINVAL)?;
    // SAFETY: a NULL stack gives fork semantics (the child runs on a copy-on-write copy of our
    // stack); no pointer arguments are passed. The caller guarantees it is single-threaded, so
    // the child starts with consistent allocator and stdio state.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone,
            flags,
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::null_mut::<libc::c_int>(),
            std::ptr::null_mut::<libc::c_int>(),
            0usize,
        )
    };
    match ret {
        r if r < 0 => Err(Errno::last()),
        0 => Ok(CloneResult::Child),
        pid => Ok(CloneResult::Parent(Pid::from_raw(
            libc::pid_t::try_from(pid).map_err(|_| Errno::EINVAL)?,
        ))),
    }
}

/// `CLONE_INTO_CGROUP` (Linux 5.7): start the child in the cgroup v2 group given by descriptor.
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// `struct clone_args` of `clone3(2)`, up to `cgroup` (`CLONE_ARGS_SIZE_VER2`).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// [`clone_into_namespaces`] whose child starts inside the cgroup v2 group `cgroup` (`clone3`
/// with `CLONE_INTO_CGROUP`): no migration afterwards. `ENOSYS` before Linux 5.3, `E2BIG` or
/// `EINVAL` before 5.7; the caller's credentials must allow writing the group's
/// `cgroup.procs` and its common ancestor's with ours. Same single-thread rule.
pub fn clone_into_cgroup(flags: libc::c_int, cgroup: BorrowedFd<'_>) -> Result<CloneResult, Errno> {
    let namespaces = u64::try_from(flags).map_err(|_| Errno::EINVAL)?;
    let args = CloneArgs {
        flags: namespaces | CLONE_INTO_CGROUP,
        exit_signal: libc::SIGCHLD as u64,
        cgroup: u64::try_from(cgroup.as_raw_fd()).map_err(|_| Errno::EBADF)?,
        ..CloneArgs::default()
    };
    // SAFETY: `args` is a valid `clone_args` of the size passed, alive for the call; a zero
    // stack gives fork semantics (the child continues on a copy-on-write copy of our stack),
    // and the caller guarantees it is single-threaded, as for `clone_into_namespaces`.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &args as *const CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    match ret {
        r if r < 0 => Err(Errno::last()),
        0 => Ok(CloneResult::Child),
        pid => Ok(CloneResult::Parent(Pid::from_raw(
            libc::pid_t::try_from(pid).map_err(|_| Errno::EINVAL)?,
        ))),
    }
}

/// `fork(2)` for a single-threaded process.
pub fn fork_single_threaded() -> Result<CloneResult, Errno> {
    // SAFETY: callers only fork from the jail's single-threaded supervisor and init processes,
    // where the child may run arbitrary (non-async-signal-safe) code.
    match unsafe { nix::unistd::fork() }? {
        nix::unistd::ForkResult::Parent { child } => Ok(CloneResult::Parent(child)),
        nix::unistd::ForkResult::Child => Ok(CloneResult::Child),
    }
}

/// `pidfd_open(2)`: a descriptor that becomes readable when `pid` exits.
pub fn pidfd_open(pid: Pid) -> Result<OwnedFd, Errno> {
    // SAFETY: plain integer arguments.
    fd_result(unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) })
}

/// A pidfd of thread `tid` itself (`PIDFD_THREAD`, Linux 6.9+; `EINVAL` before): descriptors
/// taken through it are the thread's own, which differ from its process's when the thread was
/// cloned without `CLONE_FILES`.
pub fn pidfd_open_thread(tid: Pid) -> Result<OwnedFd, Errno> {
    // PIDFD_THREAD is O_EXCL (include/uapi/linux/pidfd.h).
    let flags = libc::O_EXCL;
    // SAFETY: plain integer arguments.
    fd_result(unsafe { libc::syscall(libc::SYS_pidfd_open, tid.as_raw(), flags) })
}

/// A duplicate of descriptor `fd` of the process behind `pidfd` (`pidfd_getfd(2)`; needs
/// ptrace access to it).
pub fn pidfd_getfd(pidfd: BorrowedFd<'_>, fd: i32) -> Result<OwnedFd, Errno> {
    // SAFETY: plain integer arguments; the kernel returns a new descriptor that we own.
    fd_result(unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) })
}

/// Dissolve a socket's association (`connect(2)` with an `AF_UNSPEC` address): a TCP socket
/// that was connecting is closed, ready to connect again.
pub fn disconnect(sock: BorrowedFd<'_>) -> Result<(), Errno> {
    let unspec = libc::sockaddr {
        sa_family: libc::sa_family_t::try_from(libc::AF_UNSPEC).unwrap_or(0),
        sa_data: [0; 14],
    };
    let len = libc::socklen_t::try_from(std::mem::size_of::<libc::sockaddr>()).unwrap_or(16);
    // SAFETY: `unspec` is a valid, initialised sockaddr of `len` bytes that outlives the call;
    // the kernel only reads it.
    unit_result(unsafe { libc::connect(sock.as_raw_fd(), &raw const unspec, len) }.into())
}

/// An integer socket option.
fn set_int_opt(sock: BorrowedFd<'_>, level: i32, name: i32, value: i32) -> Result<(), Errno> {
    let len = libc::socklen_t::try_from(std::mem::size_of::<i32>()).unwrap_or(4);
    // SAFETY: `value` is a valid i32 of `len` bytes that outlives the call; the kernel only
    // reads it.
    unit_result(
        unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                level,
                name,
                (&raw const value).cast(),
                len,
            )
        }
        .into(),
    )
}

/// The next sequence number a TCP socket sends (for a socket still connecting: its initial
/// sequence number plus one, what an answer to its SYN acknowledges), read in repair mode
/// (`TCP_REPAIR`, which needs `CAP_NET_ADMIN` over the socket's network namespace) and left
/// again at once.
pub fn tcp_send_seq(sock: BorrowedFd<'_>) -> Result<u32, Errno> {
    const TCP_SEND_QUEUE: i32 = 2;
    set_int_opt(sock, libc::IPPROTO_TCP, libc::TCP_REPAIR, 1)?;
    let read = set_int_opt(
        sock,
        libc::IPPROTO_TCP,
        libc::TCP_REPAIR_QUEUE,
        TCP_SEND_QUEUE,
    )
    .and_then(|()| {
        let mut seq: u32 = 0;
        let mut len = libc::socklen_t::try_from(std::mem::size_of::<u32>()).unwrap_or(4);
        // SAFETY: `seq` and `len` are valid for writes of their sizes and outlive the call.
        let ret = unsafe {
            libc::getsockopt(
                sock.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_QUEUE_SEQ,
                (&raw mut seq).cast(),
                &raw mut len,
            )
        };
        unit_result(ret.into()).map(|()| seq)
    });
    // Left without a window probe (`TCP_REPAIR_OFF_NO_WP`); should leaving fail (the program
    // made it a listener meanwhile), the socket is disconnected rather than left in repair.
    const TCP_REPAIR_OFF_NO_WP: i32 = -1;
    let off = set_int_opt(
        sock,
        libc::IPPROTO_TCP,
        libc::TCP_REPAIR,
        TCP_REPAIR_OFF_NO_WP,
    );
    if off.is_err() {
        let _ = disconnect(sock);
    }
    let seq = read?;
    off.map(|()| seq)
}

/// A TCP socket's state (`TCP_INFO`'s first byte: 2 is connecting, 7 closed).
pub fn tcp_state(sock: BorrowedFd<'_>) -> Option<u8> {
    let mut info = [0u8; 8];
    let mut len = libc::socklen_t::try_from(info.len()).unwrap_or(8);
    // SAFETY: `info` and `len` are valid for writes of their sizes; the kernel writes at most
    // `len` bytes.
    let ret = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr().cast(),
            &raw mut len,
        )
    };
    (ret == 0 && len > 0).then_some(info[0])
}

/// `openat2(2)` relative to `dir` (or the working directory) with `resolve` flags.
pub fn openat2(
    dir: Option<BorrowedFd<'_>>,
    path: &(impl AsRef<[u8]> + ?Sized),
    flags: libc::c_int,
    mode: u32,
    resolve: u64,
) -> Result<OwnedFd, Errno> {
    // A path as bytes: names that are not UTF-8 are opened as they are.
    let c = CString::new(path.as_ref()).map_err(|_| Errno::EINVAL)?;
    /// `struct open_how` (libc's is non-exhaustive).
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    let how = OpenHow {
        flags: u64::try_from(flags | libc::O_CLOEXEC).map_err(|_| Errno::EINVAL)?,
        mode: u64::from(mode),
        resolve,
    };
    let dirfd = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: `c` and `how` are valid for the duration of the call and we pass `how`'s size.
    fd_result(unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dirfd,
            c.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    })
}

/// An `O_PATH` descriptor for the absolute `path`, refusing symlinks in any component (so what
/// is opened is exactly the path the policy names, resolved once).
pub fn open_path_nofollow(path: &str) -> Result<OwnedFd, Errno> {
    let resolve = libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    openat2(None, path, libc::O_PATH, 0, resolve)
}

/// `open_tree(2)` on a descriptor: a detached, recursive copy of the mount tree at `fd`.
pub fn open_tree_clone_fd(fd: BorrowedFd<'_>) -> Result<OwnedFd, Errno> {
    let empty = c"";
    let flags = OPEN_TREE_CLONE
        | libc::O_CLOEXEC as u32
        | libc::AT_RECURSIVE as u32
        | libc::AT_EMPTY_PATH as u32;
    // SAFETY: `empty` is a static C string; the descriptor is borrowed for the call.
    fd_result(unsafe { libc::syscall(libc::SYS_open_tree, fd.as_raw_fd(), empty.as_ptr(), flags) })
}

/// `mkdirat(2)`; an existing entry is not an error.
pub fn mkdirat_exist_ok(dir: BorrowedFd<'_>, name: &str, mode: u32) -> Result<(), Errno> {
    match nix::sys::stat::mkdirat(dir, name, nix::sys::stat::Mode::from_bits_truncate(mode)) {
        Ok(()) | Err(Errno::EEXIST) => Ok(()),
        Err(e) => Err(e),
    }
}

/// A new, detached tmpfs (`fsopen`/`fsconfig`/`fsmount`), nosuid and nodev.
pub fn new_tmpfs(size: u64, mode: u32) -> Result<OwnedFd, Errno> {
    let options = [("size", size.to_string()), ("mode", format!("{mode:o}"))];
    new_fs(c"tmpfs", &options, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)
}

/// A new, detached procfs for the caller's active pid namespace, nosuid, nodev and noexec.
pub fn new_procfs() -> Result<OwnedFd, Errno> {
    new_fs(
        c"proc",
        &[],
        MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
    )
}

/// A new, detached mount of `fstype` (`fsopen`/`fsconfig`/`fsmount`) with string `options`
/// and mount `attrs`.
fn new_fs(
    fstype: &std::ffi::CStr,
    options: &[(&str, String)],
    attrs: u64,
) -> Result<OwnedFd, Errno> {
    const FSOPEN_CLOEXEC: u32 = 1;
    const FSCONFIG_SET_STRING: u32 = 1;
    const FSCONFIG_CMD_CREATE: u32 = 6;
    const FSMOUNT_CLOEXEC: u32 = 1;
    // SAFETY: `fstype` is a valid C string for the duration of the call.
    let fs =
        fd_result(unsafe { libc::syscall(libc::SYS_fsopen, fstype.as_ptr(), FSOPEN_CLOEXEC) })?;
    for (key, value) in options {
        let (k, v) = (to_cstring(key)?, to_cstring(value)?);
        // SAFETY: `k` and `v` are valid C strings that outlive the call.
        unit_result(unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                fs.as_raw_fd(),
                FSCONFIG_SET_STRING,
                k.as_ptr(),
                v.as_ptr(),
                0,
            )
        })?;
    }
    // SAFETY: integer and null-pointer arguments only.
    unit_result(unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_void>(),
            0,
        )
    })?;
    // SAFETY: integer arguments only.
    fd_result(unsafe { libc::syscall(libc::SYS_fsmount, fs.as_raw_fd(), FSMOUNT_CLOEXEC, attrs) })
}

/// `move_mount(2)` from a detached mount onto the directory or file open at `to`.
pub fn move_mount_fd(from: BorrowedFd<'_>, to: BorrowedFd<'_>) -> Result<(), Errno> {
    const MOVE_MOUNT_T_EMPTY_PATH: u32 = 0x0000_0040;
    let empty = c"";
    // SAFETY: `empty` is a static C string; both descriptors are borrowed for the call.
    unit_result(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            from.as_raw_fd(),
            empty.as_ptr(),
            to.as_raw_fd(),
            empty.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    })
}

/// `mount_setattr(2)` on a detached or attached mount given by descriptor, recursively.
pub fn mount_setattr(
    mount: BorrowedFd<'_>,
    attr_set: u64,
    attr_clr: u64,
    userns: Option<BorrowedFd<'_>>,
) -> Result<(), Errno> {
    // Always private: a clone of a shared mount would otherwise stay in the host's peer group,
    // and mounts made beneath it inside the jail would propagate back to the host.
    let attr = MountAttr {
        attr_set,
        attr_clr,
        propagation: libc::MS_PRIVATE,
        userns_fd: userns.map_or(0, |fd| u64::try_from(fd.as_raw_fd()).unwrap_or(0)),
    };
    let empty = c"";
    let flags = libc::AT_EMPTY_PATH | libc::AT_RECURSIVE;
    // SAFETY: `attr` is a properly laid out `struct mount_attr` whose size we pass; `empty` is
    // a static C string; the descriptor is borrowed for the duration of the call.
    unit_result(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            mount.as_raw_fd(),
            empty.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })
}

/// `move_mount(2)`: attach the detached mount `from` at the absolute path `to`.
pub fn move_mount_to(from: BorrowedFd<'_>, to: &str) -> Result<(), Errno> {
    let c = to_cstring(to)?;
    let empty = c"";
    // SAFETY: both strings are valid NUL-terminated C strings that outlive the call; the
    // descriptor is borrowed for the duration of the call.
    unit_result(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            from.as_raw_fd(),
            empty.as_ptr(),
            libc::AT_FDCWD,
            c.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    })
}

/// `close_range(2)` with no flags: close every descriptor in `first..=last`.
pub fn close_range(first: u32, last: u32) -> Result<(), Errno> {
    if first > last {
        return Ok(());
    }
    // SAFETY: closing descriptors cannot violate memory safety; callers only close ranges that
    // no live `OwnedFd` of theirs refers to (they run just before `execve`).
    unit_result(unsafe { libc::syscall(libc::SYS_close_range, first, last, 0u32) })
}

/// Close every descriptor from 3 up but those in `keep`.
pub fn close_all_but(keep: &[u32]) -> Result<(), Errno> {
    let mut keep = keep.to_vec();
    keep.sort_unstable();
    let mut first = 3u32;
    for k in keep.into_iter().filter(|&k| k >= 3) {
        // (`close_range` is a no-op when the range is empty: `k` right after the last kept.)
        close_range(first, k.saturating_sub(1))?;
        first = k.saturating_add(1);
    }
    close_range(first, u32::MAX)
}

/// `seccomp(SECCOMP_SET_MODE_FILTER, flags, program)`; returns the syscall's value.
fn seccomp_set_filter(program: &[libc::sock_filter], flags: libc::c_ulong) -> libc::c_long {
    let Ok(len) = u16::try_from(program.len()) else {
        Errno::E2BIG.set();
        return -1;
    };
    let prog = libc::sock_fprog {
        len,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: `prog` points into `program`, which outlives the call; the kernel copies the
    // filter before returning.
    unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &prog as *const libc::sock_fprog,
        )
    }
}

/// Install a seccomp BPF program for the calling thread. Requires no_new_privs (or
/// CAP_SYS_ADMIN).
pub fn seccomp_install(program: &[libc::sock_filter]) -> Result<(), Errno> {
    unit_result(seccomp_set_filter(program, 0))
}

/// Drop `cap` from the bounding set.
pub fn capbset_drop(cap: u32) -> Result<(), Errno> {
    // SAFETY: integer-only prctl.
    let ret = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap), 0, 0, 0) };
    unit_result(libc::c_long::from(ret))
}

/// Clear the ambient capability set.
pub fn ambient_clear_all() -> Result<(), Errno> {
    // SAFETY: integer-only prctl.
    let ret = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    unit_result(libc::c_long::from(ret))
}

/// Highest capability number the kernel knows (`/proc/sys/kernel/cap_last_cap`), 40 if unknown.
/// Read once (the supervisor reads it before cloning), so the init and the command, which
/// inherit the value, open no file for it: a traced command's first events are its own.
pub fn cap_last_cap() -> u32 {
    static LAST: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *LAST.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(40)
    })
}

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// One word of `struct __user_cap_data_struct` (v3 has two).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

fn capset(data: &[CapData; 2]) -> Result<(), Errno> {
    let header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    // SAFETY: `header` and `data` are valid v3 capability structures (two data words) that
    // outlive the call.
    unit_result(unsafe {
        libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr())
    })
}

fn capget() -> Result<[CapData; 2], Errno> {
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: `header` and `data` are valid, writable v3 capability structures (two data
    // words) that outlive the call.
    unit_result(unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut header as *mut CapHeader,
            data.as_mut_ptr(),
        )
    })?;
    Ok(data)
}

/// Empty the effective, permitted and inheritable capability sets.
pub fn capset_empty() -> Result<(), Errno> {
    capset(&[CapData::default(); 2])
}

/// Add `cap` (one of the permitted set) to the effective set: after `seteuid` away from root
/// the effective set is empty while the permitted one is kept, and going back to euid 0 makes
/// the effective set the permitted one again.
pub fn raise_effective(cap: u32) -> Result<(), Errno> {
    let mut data = capget()?;
    let word = data.get_mut((cap / 32) as usize).ok_or(Errno::EINVAL)?;
    word.effective |= 1 << (cap % 32);
    capset(&data)
}

/// `IFF_UP | IFF_RUNNING` (0x41) as the `short` that `ifreq` holds.
const IFF_UP_RUNNING: libc::c_short = 0x41;

/// Bring the loopback interface of the current network namespace up.
pub fn loopback_up() -> Result<(), Errno> {
    let sock = nix::sys::socket::socket(
        nix::sys::socket::AddressFamily::Inet,
        nix::sys::socket::SockType::Datagram,
        nix::sys::socket::SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    // SAFETY: `ifreq` is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = src.cast_signed();
    }
    // SAFETY: SIOCGIFFLAGS reads the flags of the interface named in `req` into `req`, which is
    // a valid, writable `ifreq`.
    let ret = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) };
    unit_result(libc::c_long::from(ret))?;
    // SAFETY: the union member `ifru_flags` was just filled by the kernel.
    unsafe {
        req.ifr_ifru.ifru_flags |= IFF_UP_RUNNING;
    }
    // SAFETY: SIOCSIFFLAGS reads `req`, a valid `ifreq` naming `lo`.
    let ret = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) };
    unit_result(libc::c_long::from(ret))
}

/// Reset every catchable signal to its default disposition and unblock all signals, so the
/// workload does not inherit our ignored SIGPIPE or a blocked mask.
pub fn reset_signals() {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
    let dfl = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
    for sig in Signal::iterator() {
        if matches!(sig, Signal::SIGKILL | Signal::SIGSTOP) {
            continue;
        }
        // SAFETY: installing SIG_DFL cannot invoke a Rust handler; failures (for signals the
        // kernel refuses) are harmless and ignored.
        let _ = unsafe { sigaction(sig, &dfl) };
    }
    let _ = nix::sys::signal::sigprocmask(
        nix::sys::signal::SigmaskHow::SIG_SETMASK,
        Some(&SigSet::empty()),
        None,
    );
}

/// Leave the process immediately, without running destructors or atexit handlers (used by
/// forked children that must not flush the parent's buffers).
pub fn exit_now(code: i32) -> ! {
    // SAFETY: `_exit` never returns and touches no Rust state.
    unsafe { libc::_exit(code) }
}

/// `execve(2)`. Returns only on failure.
pub fn execve(path: &CString, argv: &[CString], envp: &[CString]) -> Errno {
    match nix::unistd::execve(path, argv, envp) {
        Ok(never) => match never {},
        Err(e) => e,
    }
}

/// Make this process look like an ordinary init from inside the jail: its `comm` becomes
/// `comm`, and its command line (what `/proc/PID/cmdline` shows: the memory between the
/// kernel's `arg_start` and `arg_end`, read from `/proc/self/stat`) is overwritten in place
/// with `cmdline`, a NUL, and filler whose last byte is not NUL — so the kernel, taking the
/// area for one a program retitled itself in (`setproctitle`), shows it only up to that first
/// NUL: neither the host's command line (with whatever `--env` values it held) nor its length
/// is readable from inside. Call it in the forked init only: the memory is its own copy.
pub fn disguise(comm: &str, cmdline: &str) -> Result<(), Errno> {
    let name = CString::new(comm).map_err(|_| Errno::EINVAL)?;
    nix::sys::prctl::set_name(&name)?;
    let stat = read_proc("/proc/self/stat").map_err(|_| Errno::EIO)?;
    // Fields after the command name (which may hold spaces and parentheses) start at field 3;
    // arg_start and arg_end are fields 48 and 49.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).ok_or(Errno::EIO)?;
    let field = |n: usize| -> Option<usize> { rest.split_whitespace().nth(n - 3)?.parse().ok() };
    let (start, end) = field(48).zip(field(49)).ok_or(Errno::EIO)?;
    if end <= start || end - start > 2 << 20 {
        return Err(Errno::EINVAL);
    }
    let len = end - start;
    let bytes = cmdline.as_bytes();
    if len < bytes.len() + 2 {
        return Err(Errno::ENOSPC);
    }
    // SAFETY: [start, end) is this process's own argument area on its stack (the kernel's
    // record of where execve put argv, a writable mapping of this process, 2 MiB at most);
    // nothing else runs in this single-threaded forked process, and every byte written is
    // within the area's bounds (len >= cmdline + 2 checked above).
    unsafe {
        let area = start as *mut u8;
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), area, bytes.len());
        std::ptr::write_bytes(area.add(bytes.len()), 0, len - bytes.len());
        *area.add(len - 1) = b' ';
    }
    Ok(())
}

/// A small file of `/proc` (`status`, `stat`…), read in one go: procfs says such a file is
/// empty, so a plain `read_to_string` would probe it 32 bytes at a time (eight reads where
/// two do).
pub fn read_proc(path: &str) -> std::io::Result<String> {
    use std::io::Read;
    let mut s = String::with_capacity(4096);
    std::fs::File::open(path)?.read_to_string(&mut s)?;
    Ok(s)
}

/// Number of threads of the calling process, from `/proc/self/status`.
pub fn thread_count() -> Option<usize> {
    let status = read_proc("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Take ownership of descriptors the kernel just installed for us (`SCM_RIGHTS`).
pub fn adopt_received(fds: Vec<RawFd>) -> Vec<OwnedFd> {
    fds.into_iter()
        // SAFETY: each number is a descriptor `recvmsg` just added to our table; nothing else
        // refers to it.
        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
        .collect()
}

/// One of our own standard descriptors (0, 1 or 2), borrowed for the life of the process.
pub fn std_fd(fd: RawFd) -> BorrowedFd<'static> {
    debug_assert!((0..=2).contains(&fd));
    // SAFETY: a process's standard descriptors stay open for as long as it runs; the jail's
    // supervisor never closes its own.
    unsafe { BorrowedFd::borrow_raw(fd) }
}

/// Install a seccomp program that may answer `SECCOMP_RET_USER_NOTIF`, returning the listener
/// descriptor on which the notifications arrive.
pub fn seccomp_install_listener(program: &[libc::sock_filter]) -> Result<OwnedFd, Errno> {
    fd_result(seccomp_set_filter(
        program,
        libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
    ))
}

/// One seccomp user notification: a stopped syscall of a sandboxed task.
#[derive(Debug, Clone, Copy)]
pub struct Notification {
    /// The notification's id (valid until answered or the task dies).
    pub id: u64,
    /// The task, as a pid of the supervisor's pid namespace.
    pub pid: i32,
    /// Syscall number.
    pub nr: i64,
    /// Raw arguments.
    pub args: [u64; 6],
}

/// Ask the kernel to wake the notifying task and the tracer on the same CPU (Linux 6.6+): each
/// notification then costs a direct hand-off instead of a cross-CPU wake-up. Best effort.
pub fn notif_sync_wakeup(listener: BorrowedFd<'_>) -> Result<(), Errno> {
    // SAFETY: SET_FLAGS takes its flags by value (no pointer is passed).
    let ret = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS,
            1 as libc::c_ulong, // SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
        )
    };
    unit_result(libc::c_long::from(ret))
}

/// Receive one notification (blocks until one is pending; poll the listener first).
pub fn notif_recv(listener: BorrowedFd<'_>) -> Result<Notification, Errno> {
    // SAFETY: all-zero is a valid `seccomp_notif`, and the kernel requires it zeroed.
    let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: RECV fills `n`, a valid, writable `seccomp_notif`.
    let ret = unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_RECV, &mut n) };
    unit_result(libc::c_long::from(ret))?;
    Ok(Notification {
        id: n.id,
        pid: libc::pid_t::try_from(n.pid).unwrap_or(-1),
        nr: i64::from(n.data.nr),
        args: n.data.args,
    })
}

/// Whether notification `id` is still pending (its task has not died and been replaced): what
/// was read from the task's memory before this check can be trusted as belonging to it.
pub fn notif_id_valid(listener: BorrowedFd<'_>, id: u64) -> bool {
    // SAFETY: ID_VALID reads the u64 behind the pointer, which outlives the call.
    let ret = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &id,
        )
    };
    ret == 0
}

/// Let the notified syscall run as if it had not been stopped.
pub fn notif_continue(listener: BorrowedFd<'_>, id: u64) -> Result<(), Errno> {
    let resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: 0,
        flags: u32::try_from(libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE).unwrap_or(1),
    };
    // SAFETY: SEND reads `resp`, a valid `seccomp_notif_resp` that outlives the call.
    let ret = unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_SEND, &resp) };
    unit_result(libc::c_long::from(ret))
}

/// Fail the notified syscall with `errno`.
pub fn notif_fail(listener: BorrowedFd<'_>, id: u64, errno: i32) -> Result<(), Errno> {
    let resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: -errno,
        flags: 0,
    };
    // SAFETY: SEND reads `resp`, a valid `seccomp_notif_resp` that outlives the call.
    let ret = unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_SEND, &resp) };
    unit_result(libc::c_long::from(ret))
}

/// Whether `path` carries extended attribute `name` (any value; a missing path or attribute,
/// or a file system without them, is `false`).
pub fn has_xattr(path: &std::path::Path, name: &std::ffi::CStr) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: both strings are NUL-terminated and live across the call; a NULL buffer of size 0
    // only asks for the value's length, so nothing is written.
    let ret = unsafe { libc::getxattr(path.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0) };
    ret >= 0
}

/// Whether the running kernel's release is at least `major.minor` (false when unreadable).
pub fn kernel_at_least(major: u32, minor: u32) -> bool {
    let Ok(u) = nix::sys::utsname::uname() else {
        return false;
    };
    let release = u.release().to_string_lossy().into_owned();
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse::<u32>().ok());
    match (parts.next(), parts.next()) {
        (Some(a), Some(b)) => (a, b) >= (major, minor),
        _ => false,
    }
}
