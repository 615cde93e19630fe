#![allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]
use super::*;
use crate::sys;

/// Run `probe` in a forked child under `prog`; returns the child's exit code, or 128+signal.
/// The child only makes raw syscalls (no allocation), as required after fork in a threaded
/// test process.
fn under_filter(prog: &[libc::sock_filter], probe: fn() -> i32) -> i32 {
    // SAFETY: the child calls only async-signal-safe functions (prctl, syscall, _exit).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // SAFETY: integer-only prctl.
        unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
        if sys::seccomp_install(prog).is_err() {
            sys::exit_now(99);
        }
        sys::exit_now(probe());
    }
    let mut status = 0;
    // SAFETY: waiting for our own child with a valid status pointer.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    }
}

fn errno_of(ret: libc::c_long) -> i32 {
    if ret < 0 { Errno::last_raw() } else { 0 }
}

use nix::errno::Errno;

fn personality_rules() -> Vec<Rule> {
    let nr = libc::SYS_personality;
    vec![
        Rule {
            nr,
            conds: vec![ArgCond {
                arg: 0,
                cmp: Cmp::Eq(0),
            }],
            action: Action::Allow,
        },
        Rule {
            nr,
            conds: vec![ArgCond {
                arg: 0,
                cmp: Cmp::Eq(0xffff_ffff),
            }],
            action: Action::Allow,
        },
        Rule {
            nr,
            conds: vec![],
            action: Action::Errno(libc::EPERM as u16),
        },
    ]
}

#[test]
fn ordered_rules_allow_the_exceptions_and_deny_the_rest() {
    let prog = assemble(&personality_rules(), Action::Allow).unwrap();
    let query = || {
        // SAFETY: integer-only syscall.
        errno_of(unsafe { libc::syscall(libc::SYS_personality, 0xffff_ffffu64) })
    };
    assert_eq!(under_filter(&prog, query), 0);
    let no_aslr = || {
        // SAFETY: integer-only syscall (ADDR_NO_RANDOMIZE).
        errno_of(unsafe { libc::syscall(libc::SYS_personality, 0x0040000u64) })
    };
    assert_eq!(under_filter(&prog, no_aslr), libc::EPERM);
}

#[test]
fn greater_than_looks_at_the_high_half() {
    let rules = vec![Rule {
        nr: libc::SYS_socket,
        conds: vec![ArgCond {
            arg: 0,
            cmp: Cmp::Gt(10),
        }],
        action: Action::Errno(libc::EAFNOSUPPORT as u16),
    }];
    let prog = assemble(&rules, Action::Allow).unwrap();
    let unix = || {
        // SAFETY: integer-only syscall; the descriptor is released by _exit.
        errno_of(unsafe { libc::syscall(libc::SYS_socket, libc::AF_UNIX, libc::SOCK_STREAM, 0) })
    };
    assert_eq!(under_filter(&prog, unix), 0);
    let high_bit_unix = || {
        // SAFETY: integer-only syscall.
        errno_of(unsafe { libc::syscall(libc::SYS_socket, 0x1_0000_0001u64, libc::SOCK_STREAM, 0) })
    };
    assert_eq!(under_filter(&prog, high_bit_unix), libc::EAFNOSUPPORT);
    let vsock = || {
        // SAFETY: integer-only syscall; never connected.
        errno_of(unsafe { libc::syscall(libc::SYS_socket, libc::AF_VSOCK, libc::SOCK_STREAM, 0) })
    };
    assert_eq!(under_filter(&prog, vsock), libc::EAFNOSUPPORT);
}

#[test]
fn masked_32_bit_compare_ignores_the_high_half() {
    let rules = vec![Rule {
        nr: libc::SYS_ioctl,
        conds: vec![ArgCond {
            arg: 1,
            cmp: Cmp::MaskedEq32 {
                mask: 0xffff_ffff,
                value: 0x5412,
            },
        }],
        action: Action::Errno(libc::EPERM as u16),
    }];
    let prog = assemble(&rules, Action::Allow).unwrap();
    let high_tiocsti = || {
        // SAFETY: ioctl on stdin with a NULL argument; denied before the kernel looks at it.
        errno_of(unsafe { libc::syscall(libc::SYS_ioctl, 0, 0x1_0000_5412u64, 0) })
    };
    assert_eq!(under_filter(&prog, high_tiocsti), libc::EPERM);
}

#[cfg(target_arch = "x86_64")]
#[test]
fn x32_syscalls_kill_the_process() {
    let prog = assemble(&[], Action::Allow).unwrap();
    let x32_getpid = || {
        // SAFETY: integer-only syscall.
        errno_of(unsafe { libc::syscall(0x4000_0000 | libc::SYS_getpid) })
    };
    assert_eq!(under_filter(&prog, x32_getpid), 128 + libc::SIGSYS);
}

#[test]
fn too_many_gt_in_one_rule_is_an_error() {
    let rules = vec![Rule {
        nr: 1,
        conds: vec![
            ArgCond {
                arg: 0,
                cmp: Cmp::Gt(1),
            },
            ArgCond {
                arg: 1,
                cmp: Cmp::Gt(1),
            },
        ],
        action: Action::KillProcess,
    }];
    assert!(matches!(
        assemble(&rules, Action::Allow),
        Err(BpfError::JumpTooFar { nr: 1 })
    ));
}
