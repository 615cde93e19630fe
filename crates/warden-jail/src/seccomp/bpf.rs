//! A small classic-BPF assembler for seccomp filters.
//!
//! Input: a list of [`Rule`]s, each a syscall number, a conjunction of argument comparisons and
//! an [`Action`]. For one syscall the rules are tried in order and the first whose comparisons
//! all hold decides; a syscall with no matching rule gets the filter's default action.
//!
//! Guarantees of the generated program:
//! - the audit architecture is checked first; any other architecture (i386 entry through
//!   `int 0x80` on x86_64, for instance) kills the process;
//! - on x86_64, syscall numbers with the x32 bit set kill the process;
//! - 64-bit comparisons look at both halves of the argument, 32-bit ones only at the low half
//!   (the kernel ignores the high half of `int` arguments, so must we).
//!
//! Why not a crate: `seccompiler` has one match action per filter and no user notification;
//! `libseccomp` needs a C library and cannot express ordered exceptions ("personality(0) is fine,
//! anything else is not") with a default-allow filter. The assembler is ~200 lines and is
//! exercised by unit tests that load it into a forked child.

use std::collections::BTreeMap;

use thiserror::Error;

/// What the filter answers for a syscall.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Let the syscall run.
    Allow,
    /// Fail it with this errno.
    Errno(u16),
    /// Kill the whole process.
    KillProcess,
    /// Stop the task and notify the supervisor's listener (which lets it continue).
    UserNotif,
}

impl Action {
    fn ret_value(self) -> u32 {
        match self {
            Action::Allow => 0x7fff_0000,
            Action::Errno(e) => 0x0005_0000 | u32::from(e),
            Action::KillProcess => 0x8000_0000,
            Action::UserNotif => 0x7fc0_0000,
        }
    }
}

/// One comparison on a syscall argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    /// `arg == value` on all 64 bits.
    Eq(u64),
    /// `arg > value` on all 64 bits (unsigned).
    Gt(u64),
    /// `(arg & mask) == value` on all 64 bits.
    MaskedEq {
        /// Bits to keep.
        mask: u64,
        /// Expected value after masking.
        value: u64,
    },
    /// `(arg & mask) == value` on the low 32 bits only.
    MaskedEq32 {
        /// Bits to keep.
        mask: u32,
        /// Expected value after masking.
        value: u32,
    },
}

/// A comparison applied to argument `arg` (0..=5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgCond {
    /// Argument index, 0 to 5.
    pub arg: u8,
    /// The comparison.
    pub cmp: Cmp,
}

/// One rule: if syscall `nr` is called and every condition holds, answer `action`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The syscall number for the filter's architecture.
    pub nr: i64,
    /// All must hold (an empty list always holds).
    pub conds: Vec<ArgCond>,
    /// The answer.
    pub action: Action,
}

/// Errors building a program.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum BpfError {
    /// The rules for one syscall do not fit the 8-bit jump offsets of classic BPF.
    #[error("the rules for syscall {nr} are too long for a BPF jump")]
    JumpTooFar {
        /// The syscall.
        nr: i64,
    },
    /// An argument index above 5.
    #[error("argument index {0} out of range (0..=5)")]
    BadArg(u8),
    /// A syscall number that does not fit 32 bits.
    #[error("syscall number {0} out of range")]
    BadSyscall(i64),
    /// More than `u16::MAX` instructions.
    #[error("the filter has {0} instructions, more than BPF allows")]
    TooLong(usize),
}

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JMP_JEQ_K: u16 = 0x15;
const BPF_JMP_JGT_K: u16 = 0x25;
const BPF_JMP_JGE_K: u16 = 0x35;
const BPF_ALU_AND_K: u16 = 0x54;
const BPF_RET_K: u16 = 0x06;
const BPF_JMP_JA: u16 = 0x05;

const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
const OFF_ARGS: u32 = 16;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// Where a conditional jump of a rule body goes when it does not fall through.
#[derive(Clone, Copy)]
enum Target {
    /// The rule's action (all conditions held).
    Match,
    /// The next rule (a condition failed).
    Next,
}

/// An instruction whose jump offsets are resolved once the rule's length is known.
struct Pending {
    ins: libc::sock_filter,
    jt: Option<Target>,
    jf: Option<Target>,
}

fn lo(v: u64) -> u32 {
    (v & 0xffff_ffff) as u32
}

fn hi(v: u64) -> u32 {
    (v >> 32) as u32
}

fn arg_offsets(arg: u8) -> Result<(u32, u32), BpfError> {
    if arg > 5 {
        return Err(BpfError::BadArg(arg));
    }
    let base = OFF_ARGS + 8 * u32::from(arg);
    // Little-endian: the low word comes first.
    Ok((base, base + 4))
}

fn load(off: u32) -> Pending {
    Pending {
        ins: stmt(BPF_LD_W_ABS, off),
        jt: None,
        jf: None,
    }
}

fn cond_jump(code: u16, k: u32, jt: Option<Target>, jf: Option<Target>) -> Pending {
    Pending {
        ins: jump(code, k, 0, 0),
        jt,
        jf,
    }
}

/// Instructions for one condition: fall through when it holds, jump to `Next` when not (or to
/// `Match` early for the high half of a `Gt`).
fn compile_cond(cond: &ArgCond, out: &mut Vec<Pending>) -> Result<(), BpfError> {
    let (lo_off, hi_off) = arg_offsets(cond.arg)?;
    match cond.cmp {
        Cmp::Eq(v) => {
            out.push(load(hi_off));
            out.push(cond_jump(BPF_JMP_JEQ_K, hi(v), None, Some(Target::Next)));
            out.push(load(lo_off));
            out.push(cond_jump(BPF_JMP_JEQ_K, lo(v), None, Some(Target::Next)));
        }
        Cmp::MaskedEq { mask, value } => {
            out.push(load(hi_off));
            out.push(Pending {
                ins: stmt(BPF_ALU_AND_K, hi(mask)),
                jt: None,
                jf: None,
            });
            out.push(cond_jump(
                BPF_JMP_JEQ_K,
                hi(value),
                None,
                Some(Target::Next),
            ));
            out.push(load(lo_off));
            out.push(Pending {
                ins: stmt(BPF_ALU_AND_K, lo(mask)),
                jt: None,
                jf: None,
            });
            out.push(cond_jump(
                BPF_JMP_JEQ_K,
                lo(value),
                None,
                Some(Target::Next),
            ));
        }
        Cmp::MaskedEq32 { mask, value } => {
            out.push(load(lo_off));
            out.push(Pending {
                ins: stmt(BPF_ALU_AND_K, mask),
                jt: None,
                jf: None,
            });
            out.push(cond_jump(BPF_JMP_JEQ_K, value, None, Some(Target::Next)));
        }
        Cmp::Gt(v) => {
            // hi > vhi → holds; hi < vhi → fails; hi == vhi → compare lo.
            out.push(load(hi_off));
            out.push(cond_jump(BPF_JMP_JGT_K, hi(v), Some(Target::Match), None));
            out.push(cond_jump(BPF_JMP_JEQ_K, hi(v), None, Some(Target::Next)));
            out.push(load(lo_off));
            out.push(cond_jump(BPF_JMP_JGT_K, lo(v), None, Some(Target::Next)));
        }
    }
    Ok(())
}

/// Compile one rule. A `Gt` jumps straight to `Match` once its high half decides, which is only
/// correct for the last condition, so the (single) `Gt` of a rule is moved to the end.
fn compile_rule(rule: &Rule, out: &mut Vec<libc::sock_filter>) -> Result<(), BpfError> {
    let mut conds: Vec<&ArgCond> = rule.conds.iter().collect();
    // Move at most one Gt to the end; more than one Gt in a rule is split by the caller.
    conds.sort_by_key(|c| matches!(c.cmp, Cmp::Gt(_)));
    let gts = conds.iter().filter(|c| matches!(c.cmp, Cmp::Gt(_))).count();
    if gts > 1 {
        return Err(BpfError::JumpTooFar { nr: rule.nr });
    }
    let mut body = Vec::new();
    for c in conds {
        compile_cond(c, &mut body)?;
    }
    // Layout: body…, RET action, (next rule starts here).
    let match_at = body.len();
    let next_at = body.len() + 1;
    for (i, p) in body.iter().enumerate() {
        let resolve = |t: Option<Target>| -> Result<u8, BpfError> {
            let dest = match t {
                None => return Ok(0),
                Some(Target::Match) => match_at,
                Some(Target::Next) => next_at,
            };
            u8::try_from(dest - i - 1).map_err(|_| BpfError::JumpTooFar { nr: rule.nr })
        };
        let mut ins = p.ins;
        ins.jt = resolve(p.jt)?;
        ins.jf = resolve(p.jf)?;
        out.push(ins);
    }
    out.push(stmt(BPF_RET_K, rule.action.ret_value()));
    Ok(())
}

/// Groups per leaf of the search tree: a short linear run is cheaper than more branching.
const LEAF_GROUPS: usize = 4;

/// Emit a balanced binary search over `groups` (sorted by syscall number, each body ending in a
/// RET). The accumulator holds the syscall number throughout: only bodies clobber it, and they
/// always return.
fn emit_tree(
    groups: &[(u32, Vec<libc::sock_filter>)],
    default: Action,
    out: &mut Vec<libc::sock_filter>,
) -> Result<(), BpfError> {
    if groups.len() <= LEAF_GROUPS {
        for (k, body) in groups {
            let skip =
                u8::try_from(body.len()).map_err(|_| BpfError::JumpTooFar { nr: i64::from(*k) })?;
            out.push(jump(BPF_JMP_JEQ_K, *k, 0, skip));
            out.extend_from_slice(body);
        }
        out.push(stmt(BPF_RET_K, default.ret_value()));
        return Ok(());
    }
    let (low, high) = groups.split_at(groups.len() / 2);
    let mut left = Vec::new();
    emit_tree(low, default, &mut left)?;
    let over_left = u32::try_from(left.len()).map_err(|_| BpfError::TooLong(left.len()))?;
    // nr >= pivot: fall onto the JA that skips the low half; otherwise hop over it.
    out.push(jump(BPF_JMP_JGE_K, high[0].0, 0, 1));
    out.push(stmt(BPF_JMP_JA, over_left));
    out.extend(left);
    emit_tree(high, default, out)
}

/// Assemble `rules` into a seccomp program whose answer for anything unmatched is `default`.
/// Syscall numbers are dispatched by binary search, so the cost per syscall grows with the
/// logarithm of the number of syscalls that have rules, not linearly.
pub fn assemble(rules: &[Rule], default: Action) -> Result<Vec<libc::sock_filter>, BpfError> {
    let mut by_nr: BTreeMap<i64, Vec<&Rule>> = BTreeMap::new();
    for r in rules {
        by_nr.entry(r.nr).or_default().push(r);
    }
    let mut groups = Vec::with_capacity(by_nr.len());
    for (nr, group) in by_nr {
        let k = u32::try_from(nr).map_err(|_| BpfError::BadSyscall(nr))?;
        let mut body = Vec::new();
        for rule in group {
            compile_rule(rule, &mut body)?;
        }
        // No rule matched: the default answer.
        body.push(stmt(BPF_RET_K, default.ret_value()));
        groups.push((k, body));
    }
    let mut prog = vec![
        stmt(BPF_LD_W_ABS, OFF_ARCH),
        jump(BPF_JMP_JEQ_K, AUDIT_ARCH, 1, 0),
        stmt(BPF_RET_K, Action::KillProcess.ret_value()),
        stmt(BPF_LD_W_ABS, OFF_NR),
    ];
    #[cfg(target_arch = "x86_64")]
    {
        prog.push(jump(BPF_JMP_JGE_K, X32_SYSCALL_BIT, 0, 1));
        prog.push(stmt(BPF_RET_K, Action::KillProcess.ret_value()));
    }
    emit_tree(&groups, default, &mut prog)?;
    if prog.len() > usize::from(u16::MAX) {
        return Err(BpfError::TooLong(prog.len()));
    }
    Ok(prog)
}

#[cfg(test)]
#[path = "bpf_tests.rs"]
mod tests;
