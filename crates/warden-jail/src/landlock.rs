//! Landlock rules that mirror the mount plan: a second, independent layer over the file system.
//!
//! Read and execute where the plan binds system paths, read-write where it binds writable ones
//! (`/workspace`, `/tmp`, `/dev/shm`, extra binds and tmpfs), the five device nodes usable,
//! `/proc` readable, and on `/` itself only directory listing. Abstract unix sockets and
//! signals are scoped to the sandbox (Landlock ABI 6+). The level reached is reported; with
//! [`LandlockMode::Required`] anything short of full enforcement is an error.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, LandlockStatus, PathBeneath, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};

use crate::error::{SetupFailure, Stage};
use crate::mounts::{DEVICES, Prepared};
use crate::outcome::LandlockReport;
use crate::policy::{LandlockMode, Policy, WORKSPACE_MOUNT};

/// The newest ABI we ask for.
const TARGET_ABI: ABI = ABI::V7;

fn fail(detail: impl Into<String>) -> SetupFailure {
    SetupFailure::plain(Stage::Landlock, detail)
}

/// The readable and writable path lists for `policy` (inside the jail).
fn plan(prepared: &Prepared, policy: &Policy) -> (Vec<PathBuf>, Vec<PathBuf>, Vec<PathBuf>) {
    let mut read: Vec<PathBuf> = prepared.readable.clone();
    read.extend(["/etc", "/proc"].map(PathBuf::from));
    let mut write: Vec<PathBuf> = prepared.writable.clone();
    write.extend(["/tmp", "/dev/shm", WORKSPACE_MOUNT].map(PathBuf::from));
    write.extend(policy.tmpfs.iter().map(|t| t.target.clone()));
    let devices = DEVICES.iter().map(|d| Path::new("/dev").join(d)).collect();
    (without_nested(read), without_nested(write), devices)
}

/// Drop paths that lie beneath another path of the same list: Landlock rights are inherited
/// down the tree, so the parent's rule already covers them (fewer rules, faster set-up).
fn without_nested(mut paths: Vec<PathBuf>) -> Vec<PathBuf> {
    paths.sort();
    paths.dedup();
    let mut kept: Vec<PathBuf> = Vec::new();
    for p in paths {
        if !kept.iter().any(|k| p.starts_with(k)) {
            kept.push(p);
        }
    }
    kept
}

/// The opened paths and rights of a ruleset, prepared by the init (which may still use
/// `openat2`; the command already runs under the seccomp filter) and enforced by the command.
#[derive(Debug)]
pub struct Plan {
    rules: Vec<(OwnedFd, BitFlags<AccessFs>)>,
}

/// Open every path of the ruleset for `policy`, refusing symlinks like the mounts do: a path the
/// plan skipped (not on this host) or a link swapped in since has nothing to allow. A file gets
/// only the rights that make sense for files, so the ruleset stays fully enforced.
pub fn prepare(prepared: &Prepared, policy: &Policy) -> Result<Option<Plan>, SetupFailure> {
    if policy.landlock == LandlockMode::Off {
        return Ok(None);
    }
    let all = AccessFs::from_all(TARGET_ABI);
    let read = AccessFs::from_read(TARGET_ABI);
    let file_rw = read | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev;
    let file_only = AccessFs::from_file(TARGET_ABI);
    let (readable, writable, devices) = plan(prepared, policy);
    let root = crate::sys::open_path_nofollow("/").map_err(|e| fail(format!("opening /: {e}")))?;
    let mut rules = vec![(root, BitFlags::from(AccessFs::ReadDir))];
    for (paths, access) in [(readable, read), (writable, all), (devices, file_rw)] {
        for p in paths {
            let Some(fd) = p
                .to_str()
                .and_then(|p| crate::sys::open_path_nofollow(p).ok())
            else {
                continue;
            };
            let is_dir = nix::sys::stat::fstat(&fd)
                .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR);
            rules.push((fd, if is_dir { access } else { access & file_only }));
        }
    }
    Ok(Some(Plan { rules }))
}

/// Restrict the calling process (and what it executes) to `plan`.
pub fn restrict(plan: Option<Plan>, mode: LandlockMode) -> Result<LandlockReport, SetupFailure> {
    let Some(plan) = plan else {
        return Ok(LandlockReport {
            status: "off".into(),
            abi: 0,
        });
    };
    let level = match mode {
        LandlockMode::Required => CompatLevel::HardRequirement,
        _ => CompatLevel::BestEffort,
    };
    let rules = plan
        .rules
        .into_iter()
        .map(|(fd, access)| Ok::<_, landlock::RulesetError>(PathBeneath::new(fd, access)));
    let status = Ruleset::default()
        .set_compatibility(level)
        .handle_access(AccessFs::from_all(TARGET_ABI))
        .and_then(|r| r.scope(Scope::AbstractUnixSocket | Scope::Signal))
        .and_then(|r| r.create())
        .and_then(|r| r.add_rules(rules))
        .and_then(|r| r.restrict_self())
        .map_err(|e| fail(format!("enforcing: {e}")))?;
    let abi = match status.landlock {
        LandlockStatus::Available { effective_abi, .. } => effective_abi as u32,
        _ => 0,
    };
    let status = match status.ruleset {
        RulesetStatus::FullyEnforced => "fully_enforced",
        RulesetStatus::PartiallyEnforced => "partially_enforced",
        RulesetStatus::NotEnforced => "not_enforced",
    };
    Ok(LandlockReport {
        status: status.into(),
        abi,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_paths_are_covered_by_their_parent() {
        let list = [
            "/etc/ssl",
            "/etc",
            "/usr",
            "/etc/ld.so.cache",
            "/usr",
            "/usrx",
        ];
        let got = without_nested(list.iter().map(PathBuf::from).collect());
        let want: Vec<PathBuf> = ["/etc", "/usr", "/usrx"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(got, want);
    }
}
