//! Warm sandboxes: a jail prepared before its command is known.
//!
//! A prepared run goes through every set-up step a cold one does — helper started, namespaces
//! created, id maps written, root built and pivoted into, cgroup joined, Landlock ruleset
//! opened, seccomp filter installed in the init — and the init forks the command's process,
//! which takes every step a cold run's command takes before `execve` (new session, rlimits,
//! ids, capabilities, Landlock, descriptors) but the CPU limit, and waits. When a call
//! arrives, the caller sends one [`Command`] on the helper's lifeline; the supervisor checks
//! it and forwards the command line over the sync socket to that waiting process, which sets
//! the command's CPU limit and executes it. From there the run is an ordinary one: same
//! watch, same limits (the wall-time clock starts when the command arrives), same outcome.
//!
//! Guarantees: a prepared jail runs at most one command and is destroyed with it, so nothing a
//! command leaves behind (files outside the workspace, processes, IPC objects, cgroup counters,
//! inotify watches) can reach another command. The command cannot change the policy: only the
//! command line, extra environment variables and the wall and CPU time limits travel with it.
//! A traced run prepared ahead has its tracer and capture network running while it waits;
//! its trace starts when the command arrives (`sandbox.started` names the command, `t_ms`
//! counts from it), and the command goes to the init only once the tracer holds the seccomp
//! listener, so its first syscall is observed. Runs that protect workspace paths are never
//! prepared ahead (see [`unpreparable`]).

use std::collections::BTreeMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use serde::{Deserialize, Serialize};

use crate::error::{SetupFailure, Stage};
use crate::policy::Policy;
use crate::protocol::{MAX_JSON_FRAME, read_frame};
use crate::spawn::MAX_STDIN;

/// Largest command line (with its environment) a waiting jail accepts, in bytes of JSON.
const MAX_RELEASE: usize = 4 << 20;
/// Bytes per `SOCK_SEQPACKET` message when the command line goes to the command process.
const CHUNK: usize = 32 << 10;

/// What a prepared jail is given to run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Command {
    /// The command line (program first).
    pub argv: Vec<String>,
    /// Variables added to the policy's environment (they replace a policy variable of the
    /// same name).
    pub env: BTreeMap<String, String>,
    /// Bytes for the command's stdin.
    #[serde(skip)]
    pub stdin: Vec<u8>,
    /// This command's wall-time limit in milliseconds (`None`: the policy's).
    pub wall_time_ms: Option<u64>,
    /// This command's CPU-time limit in milliseconds (`None`: the policy's).
    pub cpu_time_ms: Option<u64>,
}

/// Why `policy` cannot be prepared ahead of its command, if it cannot: protected paths are
/// planned from the workspace as it is when the jail is set up (a placeholder or read-only
/// bind planned early would be stale).
pub fn unpreparable(policy: &Policy) -> Option<&'static str> {
    let writable_roots = policy.workspace.is_some() || policy.binds.iter().any(|b| b.writable);
    (policy.protect && writable_roots)
        .then_some("a run that protects workspace paths cannot be prepared ahead")
}

/// What the supervisor forwards to the waiting command process.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Release {
    pub argv: Vec<String>,
    pub env: Vec<String>,
    pub cpu_time_ms: u64,
}

impl Release {
    /// Command process: take the command line, environment and CPU limit.
    pub(crate) fn apply(self, launch: &mut crate::init::Launch) -> Result<(), SetupFailure> {
        let c = |s: String| {
            std::ffi::CString::new(s)
                .map_err(|_| SetupFailure::plain(Stage::Supervisor, "a NUL in the command"))
        };
        launch.argv = self.argv.into_iter().map(c).collect::<Result<_, _>>()?;
        launch.env = self.env.into_iter().map(c).collect::<Result<_, _>>()?;
        launch.policy.limits.cpu_time_ms = self.cpu_time_ms;
        Ok(())
    }
}

/// Supervisor: wait until the caller sends the command, the init goes away (a set-up
/// failure) or a termination signal arrives on `signals` (left unread there, for the watch).
/// `Ok(None)`: no command will come (the lifeline closed, the init is gone, or a signal); the
/// ordinary watch then ends the run and reports why.
pub(crate) fn receive(
    lifeline: BorrowedFd<'_>,
    init: BorrowedFd<'_>,
    signals: BorrowedFd<'_>,
) -> std::io::Result<Option<Command>> {
    loop {
        let mut fds = [
            PollFd::new(lifeline, PollFlags::POLLIN),
            PollFd::new(init, PollFlags::POLLIN),
            PollFd::new(signals, PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
            Ok(_) => {}
        }
        let ready = |fd: &PollFd| fd.revents().is_some_and(|r| !r.is_empty());
        if ready(&fds[1]) || ready(&fds[2]) {
            return Ok(None);
        }
        if ready(&fds[0]) {
            break;
        }
    }
    let mut r = std::fs::File::from(lifeline.try_clone_to_owned()?);
    let json = match read_frame(&mut r, MAX_JSON_FRAME) {
        Ok(json) => json,
        // The caller let the prepared jail go without using it.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut cmd: Command = serde_json::from_slice(&json).map_err(std::io::Error::other)?;
    cmd.stdin = read_frame(&mut r, MAX_STDIN)?;
    Ok(Some(cmd))
}

/// Supervisor: hand the command line to the waiting command process (length first, then
/// chunks).
pub(crate) fn forward(sync: &OwnedFd, release: &Release) -> nix::Result<()> {
    let body = serde_json::to_vec(release).map_err(|_| nix::errno::Errno::EINVAL)?;
    if body.len() > MAX_RELEASE {
        return Err(nix::errno::Errno::E2BIG);
    }
    let len = u32::try_from(body.len()).map_err(|_| nix::errno::Errno::E2BIG)?;
    nix::unistd::write(sync.as_fd(), &len.to_le_bytes())?;
    for chunk in body.chunks(CHUNK) {
        nix::unistd::write(sync.as_fd(), chunk)?;
    }
    Ok(())
}

/// Command process: wait for the command line (plain `read`s on the sync socket; EOF means
/// the supervisor let us go unused).
pub(crate) fn await_release(sync: &OwnedFd) -> Result<Release, SetupFailure> {
    let fail = |detail: &str| SetupFailure::plain(Stage::Supervisor, detail);
    let mut len = [0u8; 4];
    match nix::unistd::read(sync, &mut len) {
        Ok(4) => {}
        _ => return Err(fail("no command came for the prepared jail")),
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_RELEASE {
        return Err(fail("command line too large"));
    }
    let mut body = vec![0u8; len];
    let mut at = 0;
    while at < len {
        let end = (at + CHUNK).min(len);
        match nix::unistd::read(sync, &mut body[at..end]) {
            Ok(n) if n > 0 => at += n,
            _ => return Err(fail("the command line was cut short")),
        }
    }
    serde_json::from_slice(&body).map_err(|_| fail("the command line was malformed"))
}

/// Library: send `cmd` down a prepared helper's lifeline.
pub(crate) fn send(w: &mut impl std::io::Write, cmd: &Command) -> std::io::Result<()> {
    let json = serde_json::to_vec(cmd).map_err(std::io::Error::other)?;
    crate::protocol::write_frame(w, &json)?;
    crate::protocol::write_frame(w, &cmd.stdin)?;
    w.flush()
}

/// The environment a command runs with: the policy's, then the command's additions.
pub(crate) fn environment(
    policy: &BTreeMap<String, String>,
    extra: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut all = policy.clone();
    all.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    all.into_iter().map(|(k, v)| format!("{k}={v}")).collect()
}
