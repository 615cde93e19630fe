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

#[test]
fn binary_search_dispatch_finds_every_syscall() {
    // Many groups force several tree levels; each syscall must reach its own rule and others the
    // default, including numbers between and around the groups.
    let nrs: Vec<i64> = (0..60).map(|i| 3 * i + 1).collect();
    let rules: Vec<Rule> = nrs
        .iter()
        .map(|&nr| Rule {
            nr,
            conds: vec![],
            action: Action::Errno(nr as u16),
        })
        .collect();
    let prog = assemble(&rules, Action::Allow).unwrap();
    // Walk the program in a tiny interpreter over seccomp_data.
    for nr in 0..200i64 {
        let want = if nrs.contains(&nr) {
            Action::Errno(nr as u16).ret_value()
        } else {
            Action::Allow.ret_value()
        };
        assert_eq!(interpret(&prog, nr as u32), want, "syscall {nr}");
    }
}

#[test]
fn real_filter_blocks_and_allows_through_the_tree() {
    let prog = crate::seccomp::program(false).unwrap();
    let getppid = || {
        // SAFETY: integer-only syscall.
        errno_of(unsafe { libc::syscall(libc::SYS_getppid) })
    };
    assert_eq!(under_filter(&prog, getppid), 0);
    let unshare = || {
        // SAFETY: integer-only syscall.
        errno_of(unsafe { libc::syscall(libc::SYS_unshare, libc::CLONE_NEWUSER) })
    };
    assert_eq!(under_filter(&prog, unshare), libc::EPERM);
    let uring = || {
        // SAFETY: a NULL params pointer; denied before the kernel reads it.
        errno_of(unsafe { libc::syscall(libc::SYS_io_uring_setup, 1, 0) })
    };
    assert_eq!(under_filter(&prog, uring), libc::ENOSYS);
}

/// Minimal classic-BPF interpreter for the instructions the assembler emits.
fn interpret(prog: &[libc::sock_filter], nr: u32) -> u32 {
    let data = |off: u32| -> u32 {
        match off {
            0 => nr,
            4 => AUDIT_ARCH,
            _ => 0,
        }
    };
    let (mut pc, mut acc) = (0usize, 0u32);
    loop {
        let i = prog[pc];
        pc += 1;
        match i.code {
            BPF_LD_W_ABS => acc = data(i.k),
            BPF_ALU_AND_K => acc &= i.k,
            BPF_RET_K => return i.k,
            BPF_JMP_JA => pc += i.k as usize,
            BPF_JMP_JEQ_K => pc += usize::from(if acc == i.k { i.jt } else { i.jf }),
            BPF_JMP_JGT_K => pc += usize::from(if acc > i.k { i.jt } else { i.jf }),
            BPF_JMP_JGE_K => pc += usize::from(if acc >= i.k { i.jt } else { i.jf }),
            other => panic!("unknown opcode {other:#x}"),
        }
    }
}
