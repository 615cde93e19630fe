//! The structured result of a jailed run: how it ended, what it used, which limit stopped it and
//! which mechanism enforced each limit.
//!
//! Everything here comes from the kernel (wait statuses, cgroup counters, the supervisor's own
//! clocks), never from what the sandboxed program printed.

use serde::{Deserialize, Serialize};

/// The limit that ended a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// The memory limit (the kernel's OOM killer fired in the jail's cgroup).
    Memory,
    /// The process limit (a fork or clone was refused).
    Pids,
    /// The wall-clock limit.
    WallTime,
    /// The CPU-time limit.
    CpuTime,
    /// Too much output on stdout or stderr.
    Output,
    /// The file-size limit (a process got SIGXFSZ).
    FileSize,
}

/// What enforced a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mechanism {
    /// A cgroup v2 controller.
    CgroupV2,
    /// A cgroup v1 controller.
    CgroupV1,
    /// A per-process resource limit (setrlimit).
    Rlimit,
    /// The supervisor (timers, output accounting, counter polling).
    Supervisor,
    /// A size-limited tmpfs.
    Tmpfs,
}

impl Mechanism {
    /// Whether this is a cgroup controller (v1 or v2).
    pub fn is_cgroup(self) -> bool {
        matches!(self, Mechanism::CgroupV1 | Mechanism::CgroupV2)
    }
}

/// Which mechanisms enforced each limit in this run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enforcement {
    /// Wall time.
    pub wall_time: Vec<Mechanism>,
    /// CPU time of the tree.
    pub cpu_time: Vec<Mechanism>,
    /// CPU rate of the tree (throttling); empty where no mechanism can throttle it.
    #[serde(default)]
    pub cpu_rate: Vec<Mechanism>,
    /// How this process got its cgroup v2 place for run groups (`own group`, `inherited leaf`,
    /// `leaf of our group`, `systemd scope NAME`), or why it has none.
    #[serde(default)]
    pub cgroup_v2: String,
    /// How the jail's init joined the run's cgroups: `clone_into_cgroup` (started inside its
    /// cgroup v2 group: no migration), `migration` (moved in once started: cgroup v1, or a
    /// kernel before 5.7) or `none` (no group).
    #[serde(default)]
    pub cgroup_join: String,
    /// Memory of the tree.
    pub memory: Vec<Mechanism>,
    /// Process count.
    pub pids: Vec<Mechanism>,
    /// Open files.
    pub open_files: Vec<Mechanism>,
    /// File size.
    pub file_size: Vec<Mechanism>,
    /// Captured output.
    pub output: Vec<Mechanism>,
    /// `/tmp` size.
    pub tmp: Vec<Mechanism>,
    /// The Landlock level reached.
    pub landlock: LandlockReport,
    /// Whether the seccomp filter was installed (always true for a run that started).
    pub seccomp: bool,
    /// User id of the command inside the jail.
    pub uid_inside: u32,
    /// The host user id that uid maps to.
    pub uid_host: u32,
    /// Where the jail's `/proc` came from: `fresh` (its own), `handed` (its own, made by the
    /// supervisor because a container masked this one) or `host_bind` (the container's,
    /// read-only: a weaker view).
    #[serde(default)]
    pub proc: crate::procfs::ProcSource,
    /// How the jail's root was switched: `pivot_root` (nothing of the host's tree beneath), or
    /// `move_chroot` where a container runtime's seccomp profile refuses `pivot_root`.
    #[serde(default)]
    pub root: crate::mounts::RootSwitch,
}

/// How far Landlock got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LandlockReport {
    /// `fully_enforced`, `partially_enforced`, `not_enforced` or `off`.
    pub status: String,
    /// The ABI version used (0 when unavailable).
    pub abi: u32,
}

/// Resources used, read after the run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Peak memory of the tree, in bytes (cgroup only).
    pub peak_memory_bytes: Option<u64>,
    /// CPU time of the tree, in milliseconds (cgroup only).
    pub cpu_time_ms: Option<u64>,
    /// Bytes the tree read from block devices (cgroup v2 `io` only).
    #[serde(default)]
    pub io_read_bytes: Option<u64>,
    /// Bytes the tree wrote to block devices (cgroup v2 `io` only).
    #[serde(default)]
    pub io_write_bytes: Option<u64>,
}

/// How a jailed run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// Exit code of the command, if it exited.
    pub exit_code: Option<i32>,
    /// The signal that killed the command, if one did.
    pub signal: Option<i32>,
    /// Wall time from start to the end of the whole tree, in milliseconds.
    pub duration_ms: u64,
    /// The limit that ended the run, if one did.
    pub limit_hit: Option<LimitKind>,
    /// Whether the caller killed the run.
    pub killed: bool,
    /// Captured stdout (capture mode only).
    #[serde(skip)]
    pub stdout: Vec<u8>,
    /// Captured stderr (capture mode only).
    #[serde(skip)]
    pub stderr: Vec<u8>,
    /// Bytes the command wrote to stdout (counted even when not kept).
    pub stdout_bytes: u64,
    /// Bytes the command wrote to stderr.
    pub stderr_bytes: u64,
    /// Whether stdout was cut at the output limit.
    pub stdout_truncated: bool,
    /// Whether stderr was cut at the output limit.
    pub stderr_truncated: bool,
    /// Resource usage.
    pub usage: Usage,
    /// Which mechanisms enforced what.
    pub enforcement: Enforcement,
    /// What the tree did, when the policy asked for tracing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<warden_events::Event>,
    /// Events dropped at the cap.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub events_dropped: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Outcome {
    /// The conventional shell status: the exit code, or 128 + the signal number.
    pub fn shell_status(&self) -> i32 {
        match (self.exit_code, self.signal) {
            (Some(code), _) => code,
            (None, Some(sig)) => 128 + sig,
            (None, None) => 125,
        }
    }
}
