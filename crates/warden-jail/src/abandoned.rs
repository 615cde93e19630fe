//! Folders a Warden process names after itself (`PREFIX<pid>-…`: run cgroups, detonation
//! package folders, `serve` state folders), and whether one was abandoned by an owner that
//! died without cleaning up (killed with SIGKILL).
//!
//! Guarantees: only reads. An entry is abandoned only when its name carries a pid, that pid is
//! neither this process nor alive in this `/proc`, and the entry is at least `min_age` old —
//! the age guard is for folders another pid namespace may share (a container's Warden, whose
//! pids this `/proc` does not show).

use std::path::Path;
use std::time::Duration;

/// Whether `entry` (named `PREFIX<pid>-…`) was abandoned by its owner.
pub fn by_owner(entry: &std::fs::DirEntry, prefix: &str, min_age: Duration) -> bool {
    let name = entry.file_name();
    let Some(pid) = name
        .to_str()
        .and_then(|n| n.strip_prefix(prefix))
        .and_then(|rest| rest.split('-').next())
        .and_then(|p| p.parse::<u32>().ok())
    else {
        return false;
    };
    (min_age.is_zero() || older_than(entry, min_age))
        && pid != std::process::id()
        && !Path::new(&format!("/proc/{pid}")).exists()
}

/// Whether `entry` was last modified more than `age` ago (false when that cannot be read).
pub fn older_than(entry: &std::fs::DirEntry, age: Duration) -> bool {
    entry
        .metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|elapsed| elapsed > age)
}
