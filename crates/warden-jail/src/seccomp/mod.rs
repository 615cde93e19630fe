//! The jail's seccomp policy: which syscalls a sandboxed process may not make, as data.
//!
//! The filter is default-allow with a deny list aimed at kernel attack surface and sandbox
//! escapes (see [`deny_rules`]); the architecture check and the x32 check come from the
//! assembler in [`bpf`]. What it guarantees: the listed syscalls fail with the stated errno
//! whatever their arguments; processes entering through a foreign ABI are killed. What it does
//! not do: restrict ordinary file or network syscalls — the mount plan, Landlock and the network
//! namespace own those.

pub mod bpf;

use bpf::{Action, ArgCond, Cmp, Rule};
use thiserror::Error;

/// Errors installing the filter.
#[derive(Debug, Error)]
pub enum SeccompError {
    /// The rules could not be assembled.
    #[error("building the seccomp filter")]
    Build(#[from] bpf::BpfError),
    /// The kernel refused the program.
    #[error("installing the seccomp filter")]
    Install(#[source] nix::errno::Errno),
}

/// Errno values are small positive numbers (below 4096), so they fit the filter's 16-bit field.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
const fn errno(e: libc::c_int) -> u16 {
    e as u16
}

/// Ioctl request numbers are compared on their low 32 bits, as the kernel reads them.
#[allow(clippy::cast_possible_truncation)]
const fn low32(v: libc::c_ulong) -> u32 {
    v as u32
}

const EPERM: u16 = errno(libc::EPERM);
const ENOSYS: u16 = errno(libc::ENOSYS);
const EAFNOSUPPORT: u16 = errno(libc::EAFNOSUPPORT);

/// Syscalls denied outright with EPERM.
const DENY_EPERM: &[i64] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_pidfd_getfd,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_userfaultfd,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_open_by_handle_at,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_syslog,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_quotactl,
    libc::SYS_quotactl_fd,
    libc::SYS_vhangup,
    libc::SYS_fanotify_init,
    libc::SYS_lookup_dcookie,
    libc::SYS_name_to_handle_at,
    libc::SYS_kcmp,
    libc::SYS_process_madvise,
    libc::SYS_migrate_pages,
    libc::SYS_move_pages,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_modify_ldt,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_uselib,
];

/// Syscalls denied with ENOSYS, so that libraries fall back to an older interface (clone3 →
/// clone, io_uring → read/write) or report "not supported" instead of a permission problem.
const DENY_ENOSYS: &[i64] = &[
    libc::SYS_clone3,
    libc::SYS_open_tree,
    OPEN_TREE_ATTR,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    // Its mode sits in a struct the filter cannot read (see `privilege_bit_rules`); libraries
    // fall back to openat.
    libc::SYS_openat2,
];

/// `open_tree_attr(2)` (Linux 6.15), not yet in `libc`; the same number on every architecture
/// that uses the common syscall table.
const OPEN_TREE_ATTR: i64 = 467;

/// Namespace flags that `clone(2)` may not carry.
const NAMESPACE_FLAGS: &[u64] = &[
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWCGROUP as u64,
    0x80, // CLONE_NEWTIME
];

/// Socket families a sandboxed process may use.
const ALLOWED_FAMILIES: &[u64] = &[
    libc::AF_UNIX as u64,
    libc::AF_INET as u64,
    libc::AF_INET6 as u64,
];

/// Terminal ioctls that inject input or poke the console.
const DENIED_IOCTLS: &[u32] = &[low32(libc::TIOCSTI), low32(libc::TIOCLINUX)];

fn always(nr: i64, errno: u16) -> Rule {
    Rule {
        nr,
        conds: Vec::new(),
        action: Action::Errno(errno),
    }
}

fn when(nr: i64, arg: u8, cmp: Cmp, action: Action) -> Rule {
    Rule {
        nr,
        conds: vec![ArgCond { arg, cmp }],
        action,
    }
}

/// The jail's deny list.
pub fn deny_rules() -> Vec<Rule> {
    let mut rules: Vec<Rule> = DENY_EPERM.iter().map(|&nr| always(nr, EPERM)).collect();
    rules.extend(DENY_ENOSYS.iter().map(|&nr| always(nr, ENOSYS)));
    for &flag in NAMESPACE_FLAGS {
        let cmp = Cmp::MaskedEq {
            mask: flag,
            value: flag,
        };
        rules.push(when(libc::SYS_clone, 0, cmp, Action::Errno(EPERM)));
    }
    // personality: PER_LINUX and the query value only (no ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC).
    for allowed in [0u64, 0xffff_ffff] {
        let rule = when(libc::SYS_personality, 0, Cmp::Eq(allowed), Action::Allow);
        rules.push(rule);
    }
    rules.push(always(libc::SYS_personality, EPERM));
    for nr in [libc::SYS_socket, libc::SYS_socketpair] {
        for &family in ALLOWED_FAMILIES {
            rules.push(when(nr, 0, Cmp::Eq(family), Action::Allow));
        }
        rules.push(always(nr, EAFNOSUPPORT));
    }
    rules.extend(privilege_bit_rules());
    for &req in DENIED_IOCTLS {
        let cmp = Cmp::MaskedEq32 {
            mask: 0xffff_ffff,
            value: req,
        };
        rules.push(when(libc::SYS_ioctl, 1, cmp, Action::Errno(EPERM)));
    }
    rules
}

/// Mode bits that may never be set: with an id-mapped workspace, a setuid file the command
/// creates would be setuid to the workspace owner (often root) on the host's disk, where the
/// jail's `nosuid` no longer applies.
const PRIVILEGE_BITS: [u32; 2] = [libc::S_ISUID, libc::S_ISGID];

/// `fchmodat2(2)` (Linux 6.6), not yet in every `libc`.
pub(crate) const FCHMODAT2: i64 = 452;

/// Syscalls that set a mode, with the index of the mode argument and, for the `open` family,
/// the index of the flags argument (the mode only matters when creating).
fn mode_setters() -> Vec<(i64, u8, Option<u8>)> {
    let mut list = vec![
        (libc::SYS_fchmod, 1, None),
        (libc::SYS_fchmodat, 2, None),
        (FCHMODAT2, 2, None),
        (libc::SYS_mknodat, 2, None),
        (libc::SYS_openat, 3, Some(2)),
    ];
    #[cfg(target_arch = "x86_64")]
    list.extend([
        (libc::SYS_chmod, 1, None),
        (libc::SYS_creat, 1, None),
        (libc::SYS_mknod, 1, None),
        (libc::SYS_open, 2, Some(1)),
    ]);
    list
}

/// Deny setting setuid or setgid bits through any syscall that sets a mode.
fn privilege_bit_rules() -> Vec<Rule> {
    let bit = |arg: u8, b: u32| ArgCond {
        arg,
        cmp: Cmp::MaskedEq32 { mask: b, value: b },
    };
    let mut rules = Vec::new();
    for (nr, mode_arg, flags_arg) in mode_setters() {
        for b in PRIVILEGE_BITS {
            match flags_arg {
                None => rules.push(Rule {
                    nr,
                    conds: vec![bit(mode_arg, b)],
                    action: Action::Errno(EPERM),
                }),
                Some(flags) => {
                    // O_TMPFILE carries its own bit besides O_DIRECTORY.
                    for creating in [low32(libc::O_CREAT as libc::c_ulong), O_TMPFILE_BIT] {
                        rules.push(Rule {
                            nr,
                            conds: vec![bit(flags, creating), bit(mode_arg, b)],
                            action: Action::Errno(EPERM),
                        });
                    }
                }
            }
        }
    }
    rules
}

/// The bit of `O_TMPFILE` that is not `O_DIRECTORY` (`__O_TMPFILE`).
const O_TMPFILE_BIT: u32 = 0o20_000_000;

/// Syscalls the tracer observes (through user notification; they then run unchanged).
pub fn traced_syscalls() -> Vec<i64> {
    let mut v = vec![
        libc::SYS_execve,
        libc::SYS_execveat,
        libc::SYS_openat,
        libc::SYS_unlinkat,
        libc::SYS_renameat,
        libc::SYS_renameat2,
        libc::SYS_mkdirat,
        libc::SYS_linkat,
        libc::SYS_symlinkat,
        libc::SYS_fchmodat,
        FCHMODAT2,
        libc::SYS_connect,
        libc::SYS_bind,
        libc::SYS_listen,
        libc::SYS_sendto,
        libc::SYS_sendmsg,
        libc::SYS_exit_group,
        // A thread's own end: the tracer forgets what it cached for its pid (see
        // `trace::notify`), which the next task given that pid must not inherit.
        libc::SYS_exit,
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([
        libc::SYS_open,
        libc::SYS_creat,
        libc::SYS_unlink,
        libc::SYS_rmdir,
        libc::SYS_rename,
        libc::SYS_link,
        libc::SYS_symlink,
        libc::SYS_mkdir,
        libc::SYS_chmod,
    ]);
    v
}

/// The interposers' announcement of an environment read: `prctl` with their option (the low
/// 32 bits: the kernel reads the option as an `int`), and no other `prctl`.
fn env_read_rule() -> Rule {
    when(
        libc::SYS_prctl,
        0,
        Cmp::MaskedEq {
            mask: 0xffff_ffff,
            value: warden_trace::interposer::ENV_READ_OPTION,
        },
        Action::UserNotif,
    )
}

/// The notification rule for an observed syscall: `sendto` only when it names a destination
/// (a connected socket's sends are covered by its `connect` and the capture sink).
fn observe_rule(nr: i64) -> Rule {
    if nr == libc::SYS_sendto {
        return when(nr, 4, Cmp::Gt(0), Action::UserNotif);
    }
    Rule {
        nr,
        conds: Vec::new(),
        action: Action::UserNotif,
    }
}

/// The errno the deny list answers for `nr`, if it denies it at all (every syscall's denials
/// use one errno).
pub fn denial_errno(nr: i64) -> Option<i32> {
    deny_rules().into_iter().find_map(|r| match r.action {
        Action::Errno(e) if r.nr == nr => Some(i32::from(e)),
        _ => None,
    })
}

/// Assemble the jail's filter; with `trace`, the observed syscalls notify the supervisor once
/// every deny rule has had its say (rules for one syscall are tried in order), and the denials
/// of other syscalls become notifications too, which the tracer always answers with the same
/// errno after recording the attempt (and which fail with ENOSYS if the tracer is gone).
pub fn program(trace: bool) -> Result<Vec<libc::sock_filter>, SeccompError> {
    let mut rules = deny_rules();
    if trace {
        let observed = traced_syscalls();
        for r in &mut rules {
            if matches!(r.action, Action::Errno(_)) && !observed.contains(&r.nr) {
                r.action = Action::UserNotif;
            }
        }
        rules.extend(traced_syscalls().into_iter().map(observe_rule));
        rules.push(env_read_rule());
    }
    Ok(bpf::assemble(&rules, Action::Allow)?)
}

/// Install `program` (built before the fork) on the calling thread. no_new_privs must be set.
pub fn install(program: &[libc::sock_filter]) -> Result<(), SeccompError> {
    crate::sys::seccomp_install(program).map_err(SeccompError::Install)
}
