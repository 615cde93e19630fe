//! Landlock rules that mirror the mount plan: a second, independent layer over the file system.
//!
//! Read and execute where the plan binds system paths, read-write where it binds writable ones
//! (`/workspace`, `/tmp`, `/dev/shm`, extra binds and tmpfs), the five device nodes usable,
//! `/proc` readable, and on `/` itself only directory listing. Abstract unix sockets and
//! signals are scoped to the sandbox (Landlock ABI 6+). The level reached is reported; with
//! [`LandlockMode::Required`] anything short of full enforcement is an error.

use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, LandlockStatus, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
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

/// Restrict the calling process (and what it executes) to the mount plan.
pub fn restrict(prepared: &Prepared, policy: &Policy) -> Result<LandlockReport, SetupFailure> {
    if policy.landlock == LandlockMode::Off {
        return Ok(LandlockReport {
            status: "off".into(),
            abi: 0,
        });
    }
    let level = match policy.landlock {
        LandlockMode::Required => CompatLevel::HardRequirement,
        _ => CompatLevel::BestEffort,
    };
    let all = AccessFs::from_all(TARGET_ABI);
    let read = AccessFs::from_read(TARGET_ABI);
    let file_rw = read | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev;
    let (readable, writable, devices) = plan(prepared, policy);
    let file_only = AccessFs::from_file(TARGET_ABI);
    let rules = |paths: Vec<PathBuf>, access: BitFlags<AccessFs>| {
        paths.into_iter().filter_map(move |p| {
            // A path the plan skipped (not on this host) has nothing to allow; a file gets only
            // the rights that make sense for files, so the ruleset stays fully enforced.
            let access = if p.is_dir() {
                access
            } else {
                access & file_only
            };
            PathFd::new(&p)
                .ok()
                .map(|fd| Ok::<_, landlock::RulesetError>(PathBeneath::new(fd, access)))
        })
    };
    let created = Ruleset::default()
        .set_compatibility(level)
        .handle_access(all)
        .and_then(|r| r.scope(Scope::AbstractUnixSocket | Scope::Signal))
        .and_then(|r| r.create())
        .map_err(|e| fail(format!("creating the ruleset: {e}")))?;
    let root = PathFd::new("/").map_err(|e| fail(format!("opening /: {e}")))?;
    let created = created
        .add_rule(PathBeneath::new(root, AccessFs::ReadDir))
        .and_then(|r| r.add_rules(rules(readable, read)))
        .and_then(|r| r.add_rules(rules(writable, all)))
        .and_then(|r| r.add_rules(rules(devices, file_rw)))
        .map_err(|e| fail(format!("adding rules: {e}")))?;
    let status = created
        .restrict_self()
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
