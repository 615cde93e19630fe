//! A per-run cgroup for memory, process-count and CPU limits and accounting.
//!
//! Each controller is taken from cgroup v2 when this process arranged a delegated place for run
//! groups ([`delegate`]: our own leaf, a delegated unit, or a systemd scope), otherwise from the
//! cgroup v1 hierarchy that mounts it, otherwise not at all (the rlimits set on the command
//! remain the floor, and the outcome says so). The group is created beside the supervisor's
//! leaf (v2) or beneath its own group (v1) and removed after the run; groups that killed
//! supervisors left behind are removed by later runs (see `RunCgroup::sweep_stale`).
//!
//! Guarantees: limits are written before any sandboxed process joins; counters are read from the
//! kernel's files; on v2 the CPU rate is throttled by `cpu.max` besides the polled CPU-time
//! total, and the jail's init can be started inside its group (`CLONE_INTO_CGROUP`, see
//! [`RunCgroup::v2_dir`]) rather than moved there. The v2 `io` controller, where offered, only
//! counts bytes read and written: the jail's writable places are tmpfs (charged to memory),
//! and a bandwidth limit would need the device numbers of whatever the host binds in.

mod delegate;
mod systemd;

pub(crate) use delegate::detect_only;
pub use delegate::{Delegation, establish};

/// Say once per process that a run's memory or process limit is held by rlimits alone, and
/// why cgroup v2 could not be used.
pub(crate) fn warn_once_rlimits_only() {
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| {
        tracing::warn!(
            "no cgroup memory/pids controller available to Warden: only per-process rlimits \
             limit runs (cgroup v2: {}; in a container give it a writable cgroup file system: \
             docker run --cgroupns=private -v /sys/fs/cgroup:/sys/fs/cgroup:rw)",
            establish().how
        );
    });
}

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::outcome::Mechanism;
use crate::policy::Limits;

/// Age from which another process's empty run group counts as left behind.
const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// A controller the jail uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Controller {
    Memory,
    Pids,
    Cpu,
    /// Accounting only (cgroup v2).
    Io,
}

impl Controller {
    /// Every controller the jail uses, in the order they are enabled.
    fn wanted() -> [Controller; 4] {
        [
            Controller::Memory,
            Controller::Pids,
            Controller::Cpu,
            Controller::Io,
        ]
    }
    /// Whether the controller holds a limit (a place offering only `io` is no place for runs).
    fn limits(self) -> bool {
        self != Controller::Io
    }
    /// The cgroup v1 hierarchy used for it, if any.
    fn v1_name(self) -> Option<&'static str> {
        match self {
            Controller::Memory => Some("memory"),
            Controller::Pids => Some("pids"),
            Controller::Cpu => Some("cpuacct"),
            Controller::Io => None,
        }
    }
    fn v2_name(self) -> &'static str {
        match self {
            Controller::Memory => "memory",
            Controller::Pids => "pids",
            Controller::Cpu => "cpu",
            Controller::Io => "io",
        }
    }
}

/// One controller's directory for this run.
#[derive(Debug)]
struct Group {
    controller: Controller,
    v2: bool,
    dir: PathBuf,
}

/// Counters read from the run's cgroup.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// OOM kills in the group.
    pub oom_kills: u64,
    /// Forks refused at the pids limit.
    pub pids_refused: u64,
    /// CPU time used, in nanoseconds.
    pub cpu_ns: Option<u64>,
    /// Peak memory, in bytes.
    pub peak_memory: Option<u64>,
    /// Bytes read from and written to block devices (cgroup v2 `io.stat`).
    pub io_bytes: Option<(u64, u64)>,
}

/// The run's cgroup(s); removed by [`RunCgroup::remove`].
#[derive(Debug, Default)]
pub struct RunCgroup {
    groups: Vec<Group>,
    /// Whether `cpu.max` holds the CPU rate.
    throttled: bool,
    /// Directories created for cgroup v2, removed last-first.
    created: Vec<PathBuf>,
    /// Whether the init was started inside the v2 group (no migration into it).
    born_in: bool,
}

struct Hierarchies {
    /// (mount point, root) of v1 hierarchies by controller name.
    v1: Vec<(String, PathBuf, PathBuf)>,
    /// Mount point of the unified hierarchy: the first one mounted read-write, else the first.
    v2: Option<PathBuf>,
    /// Whether that mount is read-only (a container runtime's `/sys/fs/cgroup`).
    v2_read_only: bool,
    /// The part of the hierarchy that mount shows (`/` unless it binds a subtree).
    v2_root: PathBuf,
}

fn hierarchies() -> Hierarchies {
    let mut h = Hierarchies {
        v1: Vec::new(),
        v2: None,
        v2_read_only: false,
        v2_root: PathBuf::from("/"),
    };
    let Ok(info) = fs::read_to_string("/proc/self/mountinfo") else {
        return h;
    };
    for line in info.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let left: Vec<&str> = left.split(' ').collect();
        let right: Vec<&str> = right.split(' ').collect();
        if left.len() < 5 || right.len() < 3 {
            continue;
        }
        let (root, mnt) = (PathBuf::from(left[3]), PathBuf::from(left[4]));
        match right[0] {
            "cgroup2" => {
                let ro = left.get(5).is_some_and(|o| o.split(',').any(|x| x == "ro"));
                if h.v2.is_none() || (h.v2_read_only && !ro) {
                    h.v2 = Some(mnt);
                    h.v2_read_only = ro;
                    h.v2_root = root;
                }
            }
            "cgroup" => {
                for opt in right[2].split(',') {
                    h.v1.push((opt.to_owned(), mnt.clone(), root.clone()));
                }
            }
            _ => {}
        }
    }
    h
}

/// Our own cgroup path in the hierarchy whose `/proc/self/cgroup` line matches `pred`.
fn own_path(pred: impl Fn(&str, &str) -> bool) -> Option<PathBuf> {
    let text = fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (id, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
        pred(id, ctrls).then(|| PathBuf::from(path))
    })
}

fn join_rel(base: &Path, root: &Path, path: &Path) -> PathBuf {
    let rel = path.strip_prefix(root).unwrap_or(path);
    base.join(rel.strip_prefix("/").unwrap_or(rel))
}

fn write(dir: &Path, file: &str, value: &str) -> io::Result<()> {
    fs::write(dir.join(file), value)
}

fn read_key(dir: &Path, file: &str, key: &str) -> Option<u64> {
    let text = fs::read_to_string(dir.join(file)).ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// Bytes read and written, over every device of `io.stat` (`MAJ:MIN rbytes=N wbytes=N …`).
fn io_stat(dir: &Path) -> Option<(u64, u64)> {
    let text = fs::read_to_string(dir.join("io.stat")).ok()?;
    Some(parse_io_stat(&text))
}

fn parse_io_stat(text: &str) -> (u64, u64) {
    let mut total = (0u64, 0u64);
    for field in text.split_whitespace() {
        let Some((key, value)) = field.split_once('=') else {
            continue;
        };
        let Ok(n) = value.parse::<u64>() else {
            continue;
        };
        match key {
            "rbytes" => total.0 = total.0.saturating_add(n),
            "wbytes" => total.1 = total.1.saturating_add(n),
            _ => {}
        }
    }
    total
}

fn read_u64(dir: &Path, file: &str) -> Option<u64> {
    fs::read_to_string(dir.join(file)).ok()?.trim().parse().ok()
}

impl RunCgroup {
    /// Create the run's groups named `name` and write `limits` into them. Controllers that are
    /// unavailable (not mounted, not delegated, not root) are skipped.
    pub fn create(name: &str, limits: &Limits) -> RunCgroup {
        let mut run = RunCgroup::default();
        let h = hierarchies();
        let mut missing: Vec<Controller> = Controller::wanted().to_vec();
        let delegation = establish();
        if let Some(parent) = &delegation.base {
            RunCgroup::sweep_stale(parent, STALE_AFTER);
            let dir = parent.join(name);
            if fs::create_dir(&dir).is_ok() {
                run.created.push(dir.clone());
                for &c in &delegation.controllers {
                    if run.configure(c, true, &dir, limits).is_ok() {
                        missing.retain(|m| *m != c);
                    }
                }
            }
        }
        for (c, v1) in missing.into_iter().filter_map(|c| Some((c, c.v1_name()?))) {
            let Some((_, mnt, root)) = h.v1.iter().find(|(opt, _, _)| opt == v1) else {
                continue;
            };
            let Some(own) = own_path(|_, ctrls| ctrls.split(',').any(|x| x == v1)) else {
                continue;
            };
            let parent = join_rel(mnt, root, &own);
            RunCgroup::sweep_stale(&parent, STALE_AFTER);
            let dir = parent.join(name);
            if fs::create_dir(&dir).is_err() {
                continue;
            }
            run.created.push(dir.clone());
            let _ = run.configure(c, false, &dir, limits);
        }
        run
    }

    fn configure(&mut self, c: Controller, v2: bool, dir: &Path, l: &Limits) -> io::Result<()> {
        match (c, v2) {
            (Controller::Memory, true) => {
                write(dir, "memory.max", &l.memory_bytes.to_string())?;
                let _ = write(dir, "memory.swap.max", "0");
            }
            (Controller::Memory, false) => {
                write(dir, "memory.limit_in_bytes", &l.memory_bytes.to_string())?;
                // Absent without swap accounting; then there is no swap to escape into either.
                let _ = write(
                    dir,
                    "memory.memsw.limit_in_bytes",
                    &l.memory_bytes.to_string(),
                );
            }
            (Controller::Pids, _) => write(dir, "pids.max", &l.pids.to_string())?,
            (Controller::Cpu, true) => {
                // A period of 100 ms; the quota is the allowed share of it. Without it (no CFS
                // bandwidth control in this kernel) the group still counts CPU time.
                let quota = l.cpu_rate_milli.saturating_mul(100);
                if let Err(e) = write(dir, "cpu.max", &format!("{quota} 100000")) {
                    tracing::warn!("the CPU rate is not throttled (cpu.max: {e})");
                } else {
                    self.throttled = true;
                }
            }
            // Nothing to write: `io` counts (see the module's documentation).
            (Controller::Cpu, false) | (Controller::Io, _) => {}
        }
        self.groups.push(Group {
            controller: c,
            v2,
            dir: dir.to_owned(),
        });
        Ok(())
    }

    /// Remove run groups left behind by supervisors that were killed: any other process's run
    /// group at least `min_age` old. The kernel refuses to remove a group that still
    /// holds a process (EBUSY), and a live run's group holds its init from the moment it is
    /// filled until it is removed, so that refusal is what spares live runs; the owner's pid
    /// is not consulted, since a Warden in another pid namespace (a container's) names its
    /// groups after a pid that this `/proc` may show as an unrelated live process.
    fn sweep_stale(parent: &Path, min_age: std::time::Duration) {
        let Ok(entries) = fs::read_dir(parent) else {
            return;
        };
        let me = std::process::id().to_string();
        for e in entries.flatten() {
            let name = e.file_name();
            // Exactly a run group's name, `warden-<pid>-<nanoseconds>`, and not one of ours.
            let Some((pid, stamp)) = name
                .to_str()
                .and_then(|n| n.strip_prefix("warden-"))
                .and_then(|rest| rest.split_once('-'))
            else {
                continue;
            };
            let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
            if !digits(pid) || !digits(stamp) || pid == me {
                continue;
            }
            if crate::abandoned::older_than(&e, min_age) {
                let _ = fs::remove_dir(e.path());
            }
        }
    }

    /// The run's cgroup v2 group, in which the init can be started directly
    /// (`CLONE_INTO_CGROUP`); then [`RunCgroup::born_in`] says so.
    pub fn v2_dir(&self) -> Option<&Path> {
        self.groups.iter().find(|g| g.v2).map(|g| g.dir.as_path())
    }

    /// Record that the init was started inside [`RunCgroup::v2_dir`].
    pub fn born_in(&mut self) {
        self.born_in = true;
    }

    /// How the init joined the run's groups: `clone_into_cgroup` (started in its v2 group),
    /// `migration` (moved in after it started), both (`clone_into_cgroup+migration`: a v2
    /// group and v1 ones) or `none` (no group).
    pub fn join(&self) -> &'static str {
        let v1 = self.groups.iter().any(|g| !g.v2);
        match (self.groups.is_empty(), self.born_in, v1) {
            (true, _, _) => "none",
            (false, true, false) => "clone_into_cgroup",
            (false, true, true) => "clone_into_cgroup+migration",
            (false, false, _) => "migration",
        }
    }

    /// Move `pid` into every group it was not started in.
    pub fn add(&self, pid: i32) -> io::Result<()> {
        let mut done = Vec::new();
        for g in &self.groups {
            if done.contains(&&g.dir) || (g.v2 && self.born_in) {
                continue;
            }
            write(&g.dir, "cgroup.procs", &pid.to_string())?;
            done.push(&g.dir);
        }
        Ok(())
    }

    /// The mechanism enforcing `c`, if a group holds it.
    fn mechanism(&self, c: Controller) -> Option<Mechanism> {
        self.groups.iter().find(|g| g.controller == c).map(|g| {
            if g.v2 {
                Mechanism::CgroupV2
            } else {
                Mechanism::CgroupV1
            }
        })
    }

    /// Mechanism for the memory limit.
    pub fn memory(&self) -> Option<Mechanism> {
        self.mechanism(Controller::Memory)
    }
    /// Mechanism for the process limit.
    pub fn pids(&self) -> Option<Mechanism> {
        self.mechanism(Controller::Pids)
    }
    /// Mechanism for CPU accounting.
    pub fn cpu(&self) -> Option<Mechanism> {
        self.mechanism(Controller::Cpu)
    }
    /// Mechanism throttling the CPU rate (`cpu.max`, cgroup v2 only).
    pub fn cpu_rate(&self) -> Option<Mechanism> {
        self.throttled.then_some(Mechanism::CgroupV2)
    }
    /// Whether any group exists.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Read the counters.
    pub fn counters(&self) -> Counters {
        let mut c = Counters::default();
        for g in &self.groups {
            let d = &g.dir;
            match (g.controller, g.v2) {
                (Controller::Memory, true) => {
                    c.oom_kills = read_key(d, "memory.events", "oom_kill").unwrap_or(0);
                    c.peak_memory = read_u64(d, "memory.peak");
                }
                (Controller::Memory, false) => {
                    c.oom_kills = read_key(d, "memory.oom_control", "oom_kill").unwrap_or(0);
                    c.peak_memory = read_u64(d, "memory.max_usage_in_bytes");
                }
                (Controller::Pids, _) => {
                    c.pids_refused = read_key(d, "pids.events", "max").unwrap_or(0);
                }
                (Controller::Cpu, true) => {
                    c.cpu_ns = read_key(d, "cpu.stat", "usage_usec").map(|u| u * 1000);
                }
                (Controller::Cpu, false) => c.cpu_ns = read_u64(d, "cpuacct.usage"),
                (Controller::Io, _) => c.io_bytes = io_stat(d),
            }
        }
        c
    }

    /// Remove the groups. Call only once every process of the run has exited; retries briefly
    /// while the kernel finishes tearing the last ones down.
    pub fn remove(self) {
        for dir in self.created.iter().rev() {
            for _ in 0..100 {
                match fs::remove_dir(dir) {
                    Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                        std::thread::sleep(std::time::Duration::from_millis(2));
                    }
                    _ => break,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    /// A cgroup2 file system mounted for one test, with a group of the test's own: the unified
    /// hierarchy exists beside cgroup v1 ones too (then without the controllers v1 holds), so
    /// these tests run on both kinds of host. Needs root; unmounted on drop.
    pub(crate) struct V2Mount {
        mnt: tempfile::TempDir,
        pub(crate) group: PathBuf,
    }

    impl V2Mount {
        pub(crate) fn new(tag: &str) -> V2Mount {
            let mnt = tempfile::tempdir().unwrap();
            nix::mount::mount(
                None::<&str>,
                mnt.path(),
                Some("cgroup2"),
                nix::mount::MsFlags::empty(),
                None::<&str>,
            )
            .expect("mounting cgroup2 (these tests need root)");
            let group = mnt
                .path()
                .join(format!("warden-test-{}-{tag}", std::process::id()));
            fs::create_dir(&group).unwrap();
            V2Mount { mnt, group }
        }
        /// Whether the root offers `name` to its children (it does not on a cgroup v1 host).
        pub(crate) fn offers(&self, name: &str) -> bool {
            fs::read_to_string(self.mnt.path().join("cgroup.subtree_control"))
                .unwrap_or_default()
                .split_whitespace()
                .any(|c| c == name)
        }
    }

    impl Drop for V2Mount {
        fn drop(&mut self) {
            // Children first; a group whose last process just exited may be busy briefly.
            let mut dirs: Vec<PathBuf> = fs::read_dir(&self.group)
                .into_iter()
                .flatten()
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect();
            dirs.push(self.group.clone());
            for d in dirs {
                for _ in 0..200 {
                    if fs::remove_dir(&d).is_ok() || !d.exists() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            }
            let _ = nix::mount::umount2(self.mnt.path(), nix::mount::MntFlags::MNT_DETACH);
        }
    }

    #[test]
    fn io_stat_sums_bytes_over_devices() {
        let text = "8:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n\
                    254:1 rbytes=100 wbytes=1 rios=1 wios=1\n";
        assert_eq!(parse_io_stat(text), (4196, 8193));
        assert_eq!(parse_io_stat(""), (0, 0));
        assert_eq!(parse_io_stat("8:0 rbytes=x wbytes=-1"), (0, 0));
    }

    #[test]
    fn a_child_started_into_a_v2_group_is_there_from_its_first_instruction() {
        let m = V2Mount::new("clone");
        let run = m.group.join("run");
        fs::create_dir(&run).unwrap();
        let dir = fs::File::open(&run).unwrap();
        let (hold_r, hold_w) = nix::unistd::pipe().unwrap();
        // The test harness is multithreaded: the child only blocks on the pipe and exits.
        let child = match crate::sys::clone_into_cgroup(0, dir.as_fd()) {
            // (Our copy of the write end closed, the read ends at the parent's close.)
            Ok(crate::sys::CloneResult::Child) => {
                drop(hold_w);
                let mut b = [0u8; 1];
                let _ = nix::unistd::read(&hold_r, &mut b);
                crate::sys::exit_now(0)
            }
            Ok(crate::sys::CloneResult::Parent(pid)) => pid,
            Err(e) => panic!("clone3 with CLONE_INTO_CGROUP (Linux 5.7+): {e}"),
        };
        let members = fs::read_to_string(run.join("cgroup.procs")).unwrap();
        let own = fs::read_to_string(format!("/proc/{child}/cgroup")).unwrap();
        drop(hold_w);
        let _ = nix::sys::wait::waitpid(child, None);
        assert_eq!(members.trim(), child.to_string(), "cgroup.procs: {members}");
        let rel = run.strip_prefix(m.mnt.path()).unwrap();
        assert!(
            own.lines().any(|l| l == format!("0::/{}", rel.display())),
            "/proc/{child}/cgroup: {own}"
        );
    }

    #[test]
    fn a_run_group_is_made_limited_and_joined_without_migration_when_born_in_it() {
        let m = V2Mount::new("run");
        let mut run = RunCgroup::default();
        // A child of the root, which offers its controllers on a v2 host.
        let dir = m.group.clone();
        // The limits are written where the controller is offered (a v2 host), and the group
        // is recorded in any case.
        let limits = Limits::default();
        let memory = run
            .configure(Controller::Memory, true, &dir, &limits)
            .is_ok();
        assert_eq!(memory, m.offers("memory"), "memory.max written iff offered");
        if !memory {
            run.groups.push(Group {
                controller: Controller::Io,
                v2: true,
                dir: dir.clone(),
            });
        }
        assert_eq!(run.v2_dir(), Some(dir.as_path()));
        assert_eq!(run.join(), "migration");
        run.born_in();
        assert_eq!(run.join(), "clone_into_cgroup");
        // Born in it, the init is not moved again: `add` would fail for a pid that does not
        // exist, and does not try.
        run.add(i32::MAX).unwrap();
        assert_eq!(RunCgroup::default().join(), "none");
    }

    #[test]
    fn a_group_left_behind_is_removed_and_one_holding_a_process_too_young_or_foreign_is_kept() {
        let m = V2Mount::new("sweep");
        let parent = m.group.clone();
        let me = std::process::id();
        // Named after pid 1, alive in every `/proc`: the owner's pid does not decide, so the
        // groups of a Warden in another pid namespace are cleaned too.
        let left = parent.join(format!("warden-1-{me}1"));
        let live = parent.join(format!("warden-1-{me}2"));
        let other = parent.join(format!("warden-1-{me}-not-a-run"));
        for dir in [&left, &live, &other] {
            fs::create_dir(dir).unwrap();
        }
        let mut sleeper = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        fs::write(live.join("cgroup.procs"), sleeper.id().to_string()).unwrap();

        RunCgroup::sweep_stale(&parent, STALE_AFTER);
        let young_kept = left.exists();
        RunCgroup::sweep_stale(&parent, std::time::Duration::ZERO);
        let (left_gone, live_kept, other_kept) = (!left.exists(), live.exists(), other.exists());

        let _ = sleeper.kill();
        let _ = sleeper.wait();
        let _ = fs::remove_dir(&left);
        let _ = fs::remove_dir(&other);
        for _ in 0..100 {
            if fs::remove_dir(&live).is_ok() || !live.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(young_kept, "a group younger than the age was removed");
        assert!(left_gone, "an empty group old enough was kept");
        assert!(live_kept, "a group holding a process was removed");
        assert!(other_kept, "a group not named like a run's was removed");
    }
}
