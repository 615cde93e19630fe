//! The supervisor: starts the jail and watches it until the whole tree is gone.
//!
//! Runs in a single-threaded process (the `warden run` process itself, or the helper that the
//! library re-executes). It prepares mounts and the seccomp program while it still has host
//! privileges, creates the run's cgroup, clones the jail's init into fresh user, mount, pid,
//! network, IPC and UTS namespaces, writes the id maps, then polls: the init's pidfd, the
//! command's output pipes, stdin to forward, the caller's lifeline, termination signals and a
//! clock for the wall-time limit and the cgroup counters.
//!
//! Guarantees: every limit that is hit ends the run by killing the init (and with it the whole
//! pid namespace) and is reported; the supervisor returns only after the init is reaped, so no
//! sandboxed process remains; captured output never exceeds the output limit.

use std::ffi::CString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, sigprocmask};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use crate::cgroup::{Counters, RunCgroup};
use crate::error::{JailError, SetupFailure, Stage};
use crate::idmap;
use crate::init::{self, Launch};
use crate::mounts;
use crate::outcome::{Enforcement, LandlockReport, LimitKind, Mechanism, Outcome, Usage};
use crate::policy::Policy;
use crate::procfs::{self, ProcSource};
use crate::protocol::{StatusMessage, send_handoff};
use crate::seccomp;
use crate::stdio::{Output, StdinPump, drain};
use crate::sys::{self, CloneResult};
use crate::trace::net::Net;
use crate::trace::{Hub, Sink, StreamScan};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// How the command's stdin, stdout and stderr are connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IoMode {
    /// Feed the request's stdin bytes; keep stdout and stderr (up to the limit) in the outcome.
    Capture,
    /// Forward our stdin to the command and its output to our stdout and stderr, counting it.
    Stream,
    /// Give the command our own descriptors 0-2 (for long-lived children behind pipes); no
    /// output limit applies.
    Inherit,
}

/// One command to run in the jail.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    /// The policy.
    pub policy: Policy,
    /// The command line (program first).
    pub argv: Vec<String>,
    /// How stdio is wired.
    pub io: IoMode,
    /// Bytes for the command's stdin in [`IoMode::Capture`].
    #[serde(skip)]
    pub stdin: Vec<u8>,
    /// The caller already warned that `/proc` is the container's (say it once per process).
    #[serde(default)]
    pub proc_warned: bool,
    /// Prepare the jail and wait: `argv` is empty, and the command comes later on the
    /// lifeline as a [`crate::warm::Command`] (see [`crate::warm`]).
    #[serde(default)]
    pub deferred: bool,
    /// Why the caller (which arranged cgroup v2 for its jails) has no cgroup v2 place, for the
    /// outcome; set by [`crate::Jail`] for its helper.
    #[serde(default)]
    pub cgroup_why: Option<String>,
}

/// Debug-level timing of the set-up and tear-down steps (`WARDEN_LOG=debug`).
fn log_phase(started: Instant, phase: &str) {
    tracing::debug!(phase, us = started.elapsed().as_micros(), "jail");
}

/// Poll interval for cgroup counters (pids refused, OOM kills, CPU time).
const TICK: Duration = Duration::from_millis(50);

fn cstrings(list: impl IntoIterator<Item = String>) -> Result<Vec<CString>, JailError> {
    list.into_iter()
        .map(|s| CString::new(s).map_err(|_| JailError::BadCommand("a NUL byte in the command")))
        .collect()
}

fn sup_err(detail: &str) -> impl Fn(Errno) -> JailError + '_ {
    move |e| JailError::Setup(SetupFailure::errno(Stage::Supervisor, detail, e))
}

fn pipe() -> Result<(OwnedFd, OwnedFd), JailError> {
    nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(sup_err("pipe2"))
}

fn set_nonblocking(fd: &OwnedFd) -> Result<(), JailError> {
    fcntl(fd, FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).map_err(sup_err("fcntl"))?;
    Ok(())
}

/// Events kept per run, at most (the rest are counted).
const MAX_EVENTS: usize = 20_000;

/// What the caller adds to a traced run.
#[derive(Default)]
pub struct Observer<'a> {
    /// Where events are streamed as JSON lines while the run lasts (they are then not kept in
    /// the outcome). Window acknowledgements (`{"ack": NAME}`) and, with decoys, the canaries
    /// (the planted canaries are in the first, `sandbox.started`) go there too.
    pub sink: Option<Sink>,
    /// Where the caller opens and closes attribution windows: one JSON object per line,
    /// `{"window": "tool_call:3"}` or `{"window": null}`, with `"rate": R` to run the traced
    /// programs' clocks R times as fast from then on. Each is acknowledged on the sink
    /// once every later event is attributed to it (`{"ack": NAME, "seq": N}`, with the `seq`
    /// the request carried). The caller's own events come the same way:
    /// `{"record": {"kind": K, "data": D}}` (the id comes back as `{"recorded": ID}`), with
    /// `"quiet": true` (no answer) or `"then_window": "tool_call:"` (that window, named after
    /// the new id, opens next).
    pub control: Option<BorrowedFd<'a>>,
}

impl std::fmt::Debug for Observer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer")
            .field("sink", &self.sink.is_some())
            .field("control", &self.control)
            .finish()
    }
}

/// The tracing side of a started jail.
struct Tracing {
    hub: Arc<Hub>,
    net: Option<Arc<Net>>,
    thread: Option<std::thread::JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    scans: [StreamScan; 2],
    /// Partial control line.
    pending: Vec<u8>,
    /// Says when the tracer has taken the init's seccomp listener (a prepared run's command
    /// may go to the init only after that answer, on the same socket).
    taken: Option<std::sync::mpsc::Receiver<()>>,
}

/// The supervisor's side of a started jail.
struct Running {
    init: Pid,
    /// A termination signal of the caller's that the watch read from its signalfd (so it was
    /// not delivered): raised again once the jail is gone.
    caller_signal: Option<i32>,
    tracing: Option<Tracing>,
    pidfd: OwnedFd,
    status: OwnedFd,
    stdout: Option<Output>,
    stderr: Option<Output>,
    stdin: StdinPump,
    cgroup: RunCgroup,
    started: Instant,
    proc: ProcSource,
    /// A prepared run's end of the sync socket, until its command is forwarded.
    sync: Option<OwnedFd>,
    /// The jail's mount namespace, held until the outcome is out.
    mount_ns: Option<OwnedFd>,
    /// The host uid the command's uid maps to (for the outcome).
    uid_host: u32,
    /// Whether the limit that stopped the run was recorded when it was seen (in the window of
    /// the call that hit it), not only at the end.
    limit_noted: bool,
}

/// What finished runs keep for after their outcome has been sent.
#[derive(Default)]
struct Leftovers {
    /// Mount namespaces (their teardown waits for an RCU grace period).
    namespaces: Vec<OwnedFd>,
    /// Emptied cgroups, to remove (only in a process that calls [`after_reply`]).
    cgroups: Vec<RunCgroup>,
}

static AFTER_REPLY: std::sync::Mutex<Leftovers> = std::sync::Mutex::new(Leftovers {
    namespaces: Vec::new(),
    cgroups: Vec::new(),
});

/// Set by a process that calls [`after_reply`] once it has replied (the helper): its runs'
/// cgroups are removed then, not before the outcome.
static REPLIES_FIRST: AtomicBool = AtomicBool::new(false);

fn after_reply_list() -> std::sync::MutexGuard<'static, Leftovers> {
    AFTER_REPLY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Promise to call [`after_reply`] once this process has sent its runs' outcomes: their
/// emptied cgroups are then removed after the reply rather than before it.
pub fn replies_first() {
    REPLIES_FIRST.store(true, Ordering::SeqCst);
}

/// Release what finished runs kept for after their outcome was sent: their mount namespaces
/// (whose teardown waits for an RCU grace period) and, after [`replies_first`], their emptied
/// cgroups. Called by the helper once it has replied; a process that never calls it releases
/// the namespaces when it exits (and removes its cgroups before the outcome).
pub fn after_reply() {
    let held = std::mem::take(&mut *after_reply_list());
    drop(held.namespaces);
    for cg in held.cgroups {
        cg.remove();
    }
}

/// Why the supervisor ended the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Limit(LimitKind),
    /// Ended by the caller: its lifeline closed, or it got the termination signal in the
    /// field (read from our signalfd, so not delivered: `finish` raises it again).
    Killed(Option<i32>),
}

/// The cgroup mechanism among `held` (null in JSON when only rlimits held the limit).
fn by_cgroup(held: &[Mechanism]) -> Option<Mechanism> {
    held.iter().copied().find(|m| m.is_cgroup())
}

fn limit_from_counters(c: &Counters, cpu_limit_ms: u64) -> Option<LimitKind> {
    if c.oom_kills > 0 {
        return Some(LimitKind::Memory);
    }
    if c.pids_refused > 0 {
        return Some(LimitKind::Pids);
    }
    match c.cpu_ns {
        Some(ns) if ns / 1_000_000 >= cpu_limit_ms => Some(LimitKind::CpuTime),
        _ => None,
    }
}

fn block_termination_signals() -> Result<(SignalFd, SigSet), JailError> {
    let mut set = SigSet::empty();
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        set.add(s);
    }
    let mut old = SigSet::empty();
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&set), Some(&mut old))
        .map_err(sup_err("sigprocmask"))?;
    let sfd = SignalFd::with_flags(&set, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
        .map_err(sup_err("signalfd"))?;
    Ok((sfd, old))
}

/// Run `req` in the jail and wait for the whole tree to end. `lifeline`, when given, is a pipe
/// whose other end the caller holds: when it closes, the run is killed.
pub fn supervise(req: &Request, lifeline: Option<BorrowedFd<'_>>) -> Result<Outcome, JailError> {
    supervise_with(req, lifeline, Observer::default())
}

/// [`supervise`], with a sink for the events and a control channel for windows (tracing).
pub fn supervise_with(
    req: &Request,
    lifeline: Option<BorrowedFd<'_>>,
    observer: Observer<'_>,
) -> Result<Outcome, JailError> {
    req.policy.validate()?;
    // The tracer names the decoy home by the process's persona: this run's.
    if !crate::persona::adopt(&req.policy.user) {
        tracing::warn!(
            user = %req.policy.user,
            adopted = crate::persona::user(),
            "this process already serves another persona; the decoy home is judged by its"
        );
    }
    // While this process is still single-threaded (a helper only looks; its caller arranged).
    crate::cgroup::establish();
    if req.deferred {
        if let Some(why) = crate::warm::unpreparable(&req.policy) {
            return Err(JailError::BadCommand(why));
        }
        if lifeline.is_none() || req.io != IoMode::Capture {
            return Err(JailError::BadCommand(
                "a prepared run needs a lifeline and captured output",
            ));
        }
    } else if req.argv.is_empty() {
        return Err(JailError::BadCommand("empty command line"));
    }
    if sys::thread_count() != Some(1) {
        return Err(JailError::MultiThreaded);
    }
    let mut policy = req.policy.clone();
    // Placeholders are removed when `protection` goes, however the run ends.
    let protection = crate::protect::Protection::plan(&policy)?;
    policy.binds.extend(protection.binds.iter().cloned());
    let observation = crate::trace::prepare::prepare(&mut policy)?;
    let hub = policy.trace.then(|| {
        let canaries = observation
            .as_ref()
            .and_then(|o| o.decoys.as_ref())
            .map(|d| d.canaries.clone());
        let capture = crate::trace::net::Capture {
            tap: (canaries.is_some() && policy.capture) || policy.pcap.is_some(),
            pcap: policy.pcap.clone(),
            authority: observation.as_ref().and_then(|o| o.authority.clone()),
        };
        let ids = observation
            .as_ref()
            .map(|o| o.decoy_ids.clone())
            .unwrap_or_default();
        Arc::new(
            Hub::new(MAX_EVENTS, observer.sink, canaries)
                .with_capture(capture)
                .with_decoy_ids(ids)
                .with_clock(observation.as_ref().and_then(|o| o.clock.clone())),
        )
    });
    // A prepared run's trace starts with its command (see `release`).
    if let Some(hub) = hub.as_ref().filter(|_| !req.deferred) {
        announce(hub, &req.argv, &policy);
    }
    let (sfd, old_mask) = block_termination_signals()?;
    let result = start(req, &policy, hub).and_then(|mut running| {
        let mut policy = policy.clone();
        if req.deferred
            && let Some(lifeline) = lifeline
            && let Err(e) = release(&mut running, &mut policy, lifeline, sfd.as_fd())
        {
            let _ = kill(running.init, Signal::SIGKILL);
            let _ = finish(running, &policy, Some(Stop::Killed(None)), &old_mask);
            return Err(e);
        }
        let stop = watch(&mut running, &policy, lifeline, observer.control, &sfd);
        finish(running, &policy, stop, &old_mask)
    });
    let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&old_mask), None);
    drop(observation);
    result
}

/// A trace's first event, `sandbox.started` (the command, the limits, the planted canaries:
/// so every line of a trace is an event), then the policy's first window.
fn announce(hub: &Hub, argv: &[String], policy: &Policy) {
    let data = serde_json::json!({
        "argv": argv,
        "decoys": policy.decoys,
        // Whose home the paths name (the rules read `~/` as it).
        "user": policy.user,
        "home": policy.decoys.then(|| policy.decoy_home()),
        "dns": policy.dns,
        "limits": policy.limits,
        "canaries": hub.canaries().map(|c| listed(c.list())),
    });
    hub.record(warden_events::EventKind::SandboxStarted, None, data);
    if let Some(w) = &policy.initial_window {
        hub.set_window(Some(w.clone()), None, None);
    }
}

/// The canaries as the trace lists them: a credential the operator configured by its name
/// only (its value is theirs, and never written down).
fn listed(list: &[warden_trace::Canary]) -> Vec<warden_trace::Canary> {
    list.iter()
        .map(|c| warden_trace::Canary {
            planted: c.planted.clone(),
            value: if warden_trace::is_configured(&c.planted) {
                String::new()
            } else {
                c.value.clone()
            },
        })
        .collect()
}

/// How long a prepared traced run's command waits for the tracer to hold the listener, at
/// most (it took it during the preparation unless that is still going on; never longer than
/// the command's wall time).
const TRACER_READY: std::time::Duration = std::time::Duration::from_secs(10);

fn start(req: &Request, policy: &Policy, hub: Option<Arc<Hub>>) -> Result<Running, JailError> {
    let started = Instant::now();
    let ids = idmap::plan(policy.uid, policy.gid);
    // The jail's processes run under subordinate ids: only CAP_KILL lets us end them (a
    // timeout, a limit, teardown). Without it a run could not be stopped: refuse up front.
    if ids.host_root.is_some() && !crate::blockers::has_capability(crate::blockers::CAP_KILL) {
        return Err(JailError::Setup(SetupFailure::errno(
            Stage::Supervisor,
            "cap_kill",
            Errno::EPERM,
        )));
    }
    sys::cap_last_cap();
    let phase = |name: &str| log_phase(started, name);
    phase("ids");
    let program = seccomp::program(policy.trace)
        .map_err(|e| JailError::Setup(SetupFailure::plain(Stage::Seccomp, e.to_string())))?;
    let argv = cstrings(req.argv.iter().cloned())?;
    let env = cstrings(policy.env.iter().map(|(k, v)| format!("{k}={v}")))?;
    let path_var = policy
        .env
        .get("PATH")
        .map_or("/usr/bin:/bin", String::as_str);
    let path = cstrings(
        path_var
            .split(':')
            .filter(|d| !d.is_empty())
            .map(str::to_owned),
    )?;
    let (status_r, status_w) = pipe()?;
    let (sync_w, sync_r) = nix::sys::socket::socketpair(
        nix::sys::socket::AddressFamily::Unix,
        nix::sys::socket::SockType::SeqPacket,
        None,
        nix::sys::socket::SockFlag::SOCK_CLOEXEC,
    )
    .map_err(sup_err("socketpair"))?;
    let (stdio_child, stdout, stderr, stdin) = match req.io {
        IoMode::Inherit => (
            None,
            None,
            None,
            StdinPump {
                source: None,
                buf: Vec::new(),
                pos: 0,
                sink: None,
            },
        ),
        IoMode::Capture | IoMode::Stream => {
            let (in_r, in_w) = pipe()?;
            let (out_r, out_w) = pipe()?;
            let (err_r, err_w) = pipe()?;
            for fd in [&in_w, &out_r, &err_r] {
                set_nonblocking(fd)?;
            }
            let stream = req.io == IoMode::Stream;
            let pump = StdinPump {
                source: stream.then(|| sys::std_fd(0)),
                buf: if stream {
                    Vec::new()
                } else {
                    req.stdin.clone()
                },
                pos: 0,
                sink: Some(in_w),
            };
            let mut pump = pump;
            // A prepared run's stdin comes with its command.
            if !req.deferred {
                pump.close_if_done();
            }
            (
                Some([in_r, out_w, err_w]),
                Some(Output::new(out_r, stream.then(|| sys::std_fd(1)))),
                Some(Output::new(err_r, stream.then(|| sys::std_fd(2)))),
                pump,
            )
        }
    };
    let launch = Launch {
        policy: policy.clone(),
        argv,
        env,
        path,
        ids,
        prepared: mounts::Prepared::default(),
        landlock: None,
        seccomp: program,
        status: status_w,
        sync: sync_r,
        stdio: stdio_child,
        memory_cgroup: false,
        deferred: req.deferred,
    };
    let flags = libc::CLONE_NEWUSER
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWNET
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS;
    // The user namespace is created as the subordinate root, not as host root: per-user
    // charges of everything inside (inotify instances and watches, namespaces, processes) land
    // on that uid, so the jail cannot exhaust root's budgets.
    // The run's groups exist, limits written, before the init does; it is started inside its
    // cgroup v2 group where it can be, and moved into the others after it starts.
    let mut cgroup = if ids.privileged {
        let name = format!(
            "warden-{}-{}",
            std::process::id(),
            started.elapsed().as_nanos()
        );
        RunCgroup::create(&name, &policy.limits)
    } else {
        RunCgroup::default()
    };
    // Opened as root, before we become the subordinate root.
    let group_dir = group_for_clone(&cgroup);
    let creator = match ids.host_root.map(as_creator).transpose() {
        Ok(c) => c,
        Err(e) => {
            cgroup.remove();
            return Err(e);
        }
    };
    let cloned = match group_dir.filter(|_| creator.is_none() || raise_for_clone()) {
        Some(dir) => match sys::clone_into_cgroup(flags, dir.as_fd()) {
            Err(e) => {
                tracing::debug!("CLONE_INTO_CGROUP refused ({e}): the init is moved instead");
                sys::clone_into_namespaces(flags)
            }
            done => {
                cgroup.born_in();
                done
            }
        },
        None => sys::clone_into_namespaces(flags),
    };
    drop(creator);
    let init_pid = match cloned.map_err(|e| {
        // Nothing joined the groups: they go with the failure.
        std::mem::take(&mut cgroup).remove();
        sup_err("clone")(e)
    })? {
        CloneResult::Child => {
            // Our copies of the supervisor's ends must not keep pipes open.
            drop((status_r, sync_w, stdout, stderr, stdin));
            init::run(launch)
        }
        CloneResult::Parent(pid) => pid,
    };
    drop(launch);
    phase("cloned");
    let mut tracing = None;
    let mut proc = ProcSource::Fresh;
    let handed = hand_over(
        init_pid,
        &ids,
        policy,
        &sync_w,
        &mut cgroup,
        started,
        hub,
        &mut tracing,
        (!req.proc_warned, &mut proc),
    );
    let pidfd = handed.and_then(|()| {
        sys::pidfd_open(init_pid).map_err(|e| {
            HandOver::InitGone(SetupFailure::errno(Stage::Supervisor, "pidfd_open", e))
        })
    });
    let pidfd = match pidfd {
        Ok(fd) => fd,
        Err(failed) => {
            // Closing our end of the sync socket ends the init on its own (it fails on EOF),
            // whether or not the kill below is allowed.
            drop(sync_w);
            let _ = kill(init_pid, Signal::SIGKILL);
            let _ = nix::sys::wait::waitpid(init_pid, None);
            cgroup.remove();
            if let Some(t) = tracing {
                stop_tracing(t);
            }
            let f = match failed {
                // Our own failure is the cause; whatever the init said is its consequence.
                HandOver::Ours(f) => f,
                // The init went away first: its own report says why.
                HandOver::InitGone(f) => read_status(&status_r)
                    .into_iter()
                    .find_map(|m| match m {
                        StatusMessage::Failed(f) => Some(f),
                        _ => None,
                    })
                    .unwrap_or(f),
            };
            return Err(JailError::from(f));
        }
    };
    // Held by us, the jail's mount namespace outlives its init: the init's exit does not wait
    // for the whole tree to be unmounted (an RCU grace period), and the outcome goes out
    // first; the namespace goes after the reply (see [`after_reply`]).
    let mount_ns = std::fs::File::open(format!("/proc/{init_pid}/ns/mnt"))
        .ok()
        .map(OwnedFd::from);
    Ok(Running {
        mount_ns,
        init: init_pid,
        caller_signal: None,
        tracing,
        pidfd,
        status: status_r,
        stdout,
        stderr,
        stdin,
        cgroup,
        started,
        proc,
        sync: req.deferred.then_some(sync_w),
        uid_host: ids.host_uid,
        limit_noted: false,
    })
}

/// A prepared run: wait for its command, check it, and give it to the jail's waiting process.
/// The run's clock starts now. Without a command (the caller let go, the init failed, or a
/// termination signal came), the watch that follows ends the run and says why.
fn release(
    r: &mut Running,
    policy: &mut Policy,
    lifeline: BorrowedFd<'_>,
    sfd: BorrowedFd<'_>,
) -> Result<(), JailError> {
    let bad = |e: std::io::Error| {
        tracing::debug!(error = %e, "prepared run: no usable command");
        JailError::Protocol("the command for a prepared run was malformed")
    };
    let Some(cmd) = crate::warm::receive(lifeline, r.pidfd.as_fd(), sfd).map_err(bad)? else {
        return Ok(());
    };
    if cmd.argv.is_empty() {
        return Err(JailError::BadCommand("empty command line"));
    }
    if cmd
        .env
        .keys()
        .any(|k| k.is_empty() || k.contains('=') || k.contains('\0'))
    {
        return Err(JailError::BadCommand(
            "an environment variable name is invalid",
        ));
    }
    let env = crate::warm::environment(&policy.env, &cmd.env);
    // Checked here, so the init cannot fail on them.
    cstrings(cmd.argv.iter().cloned())?;
    cstrings(env.iter().cloned())?;
    if let Some(ms) = cmd.wall_time_ms {
        policy.limits.wall_time_ms = ms.clamp(1, 86_400_000);
    }
    if let Some(ms) = cmd.cpu_time_ms {
        policy.limits.cpu_time_ms = ms.clamp(1, 86_400_000);
    }
    let release = crate::warm::Release {
        argv: cmd.argv,
        env,
        cpu_time_ms: policy.limits.cpu_time_ms,
    };
    if let Some(t) = r.tracing.as_mut() {
        // The init reads the tracer's answer on the socket the command then goes down (to the
        // process it forks after that answer): the command goes only once the answer has.
        let ready = TRACER_READY.min(std::time::Duration::from_millis(policy.limits.wall_time_ms));
        if let Some(taken) = t.taken.take()
            && taken.recv_timeout(ready).is_err()
        {
            return Err(JailError::Setup(SetupFailure::plain(
                Stage::Seccomp,
                "the tracer did not take the listener",
            )));
        }
        t.hub.restart_clock();
        announce(&t.hub, &release.argv, policy);
    }
    r.started = Instant::now();
    r.stdin.buf = cmd.stdin;
    r.stdin.close_if_done();
    if let Some(sync) = r.sync.take() {
        // Too long is refused before anything is written; any other failed write means the
        // init is gone, and the watch reads why.
        if let Err(Errno::E2BIG | Errno::EINVAL) = crate::warm::forward(&sync, &release) {
            return Err(JailError::BadCommand(
                "the command line and environment are too long for a prepared run",
            ));
        }
    }
    Ok(())
}

/// Effective ids switched to `(uid, gid)` until dropped (real and saved ids stay root, so the
/// switch back is allowed).
struct Creator;

/// The run's cgroup v2 group, opened for `CLONE_INTO_CGROUP`, unless the operator asked for the
/// migration path (`WARDEN_CGROUP_JOIN=migrate`, for the side-by-side benchmark).
fn group_for_clone(cgroup: &RunCgroup) -> Option<std::fs::File> {
    if std::env::var_os("WARDEN_CGROUP_JOIN").is_some_and(|v| v == "migrate") {
        return None;
    }
    std::fs::File::open(cgroup.v2_dir()?).ok()
}

/// As the subordinate root (see `as_creator`: its effective set is empty), raise
/// `CAP_DAC_OVERRIDE` for the clone into the group: the kernel checks the caller's write access
/// to the group's `cgroup.procs` and its common ancestor's, which root owns. Going back to
/// euid 0 afterwards makes the effective set the permitted one again.
fn raise_for_clone() -> bool {
    match sys::raise_effective(CAP_DAC_OVERRIDE) {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!("CAP_DAC_OVERRIDE not raised for CLONE_INTO_CGROUP ({e})");
            false
        }
    }
}

/// `CAP_DAC_OVERRIDE` (linux/capability.h).
const CAP_DAC_OVERRIDE: u32 = 1;

fn as_creator((uid, gid): (u32, u32)) -> Result<Creator, JailError> {
    nix::unistd::setegid(nix::unistd::Gid::from_raw(gid)).map_err(sup_err("setegid"))?;
    if let Err(e) = nix::unistd::seteuid(nix::unistd::Uid::from_raw(uid)) {
        let _ = nix::unistd::setegid(nix::unistd::Gid::from_raw(0));
        return Err(sup_err("seteuid")(e));
    }
    Ok(Creator)
}

impl Drop for Creator {
    fn drop(&mut self) {
        let _ = nix::unistd::seteuid(nix::unistd::Uid::from_raw(0));
        let _ = nix::unistd::setegid(nix::unistd::Gid::from_raw(0));
    }
}

/// The command's pipe, when it should be polled for reading.
fn read_fd(o: &Option<Output>) -> Option<BorrowedFd<'_>> {
    o.as_ref()
        .filter(|o| o.wants_read())
        .and_then(|o| o.fd.as_ref())
        .map(|f| f.as_fd())
}

/// Our descriptor, when output waits to be forwarded to it.
fn flush_fd(o: &Option<Output>) -> Option<BorrowedFd<'static>> {
    o.as_ref()
        .filter(|o| o.wants_flush())
        .and_then(|o| o.forward)
}

fn push_fd<'a>(
    fds: &mut Vec<PollFd<'a>>,
    fd: Option<BorrowedFd<'a>>,
    ev: PollFlags,
) -> Option<usize> {
    fd.map(|fd| {
        fds.push(PollFd::new(fd, ev));
        fds.len() - 1
    })
}

/// How the supervisor's half of the set-up failed: by itself (its own failure is the cause), or
/// because the init is gone (then the init's own report, if any, is the cause).
#[derive(Debug)]
enum HandOver {
    Ours(SetupFailure),
    InitGone(SetupFailure),
}

/// The supervisor's half of the set-up, done while the init builds the system part of the view:
/// id maps, wake-up, the run's cgroup, the policy's own mounts, and the handoff.
#[allow(clippy::too_many_arguments)]
fn hand_over(
    init: Pid,
    ids: &idmap::IdPlan,
    policy: &Policy,
    sync: &OwnedFd,
    cgroup: &mut RunCgroup,
    started: Instant,
    hub: Option<Arc<Hub>>,
    tracing: &mut Option<Tracing>,
    (warn_proc, proc): (bool, &mut ProcSource),
) -> Result<(), HandOver> {
    let phase = |name: &str| log_phase(started, name);
    ids.write_maps(init)
        .map_err(|e| HandOver::InitGone(SetupFailure::io(Stage::IdMap, "writing id maps", &e)))?;
    nix::unistd::write(sync, b"1").map_err(|e| {
        HandOver::InitGone(SetupFailure::errno(Stage::Supervisor, "waking the init", e))
    })?;
    phase("maps written, init woken");
    // Policy mounts first: the init needs them to finish its root, and can pivot while we wait
    // for the cgroup attach below (on cgroup v1 the first write to cgroup.procs can wait for an
    // RCU grace period).
    let mut host = mounts::prepare_host(policy, ids).map_err(HandOver::Ours)?;
    // Inside a container whose runtime masked /proc, the init cannot mount its own.
    match procfs::plan(init, policy.allow_host_proc, warn_proc).map_err(HandOver::Ours)? {
        (_, Some(fd)) => host.hand_proc(fd),
        (source, None) => host.proc = source,
    }
    *proc = host.proc;
    let (handoff, fds) = host.into_handoff();
    send_handoff(sync, &handoff, &fds).map_err(|e| {
        HandOver::InitGone(SetupFailure::errno(
            Stage::Supervisor,
            "handing mounts to the init",
            e,
        ))
    })?;
    drop(fds);
    phase("mounts handed over");
    // No more forks from here on: the tracing threads can start. They must be ready before
    // the command is released, so its first syscall is already observed.
    if let Some(hub) = hub {
        *tracing = Some(start_tracing(init, policy, sync, hub).map_err(HandOver::Ours)?);
        phase("tracing started");
    }
    if ids.privileged {
        cgroup.add(init.as_raw()).map_err(|e| {
            HandOver::Ours(SetupFailure::io(
                Stage::Supervisor,
                "joining the cgroup",
                &e,
            ))
        })?;
    }
    if ids.privileged && (cgroup.memory().is_none() || cgroup.pids().is_none()) {
        crate::cgroup::warn_once_rlimits_only();
    }
    let go = [
        u8::from(!cgroup.is_empty()),
        u8::from(cgroup.memory().is_some()),
    ];
    nix::unistd::write(sync, &go).map_err(|e| {
        HandOver::InitGone(SetupFailure::errno(
            Stage::Supervisor,
            "releasing the init",
            e,
        ))
    })?;
    phase("cgroup joined, init released");
    Ok(())
}

/// Start the capture network in the init's network namespace and the notification thread,
/// which receives the seccomp listener from the init on `sync`.
fn start_tracing(
    init: Pid,
    policy: &Policy,
    sync: &OwnedFd,
    hub: Arc<Hub>,
) -> Result<Tracing, SetupFailure> {
    let ns_path = format!("/proc/{init}/ns/net");
    let netns = std::fs::File::open(&ns_path).map_err(|e| {
        SetupFailure::io(
            Stage::Supervisor,
            "opening the jail's network namespace",
            &e,
        )
    })?;
    let net = Net::start(
        OwnedFd::from(netns),
        hub.clone(),
        policy.dns,
        policy.egress.clone(),
        policy.target_list(),
        hub.capture().clone(),
    )
    .map_err(|e| SetupFailure::plain(Stage::Supervisor, format!("capture network: {e}")))?;
    let net = Arc::new(net);
    let stop = Arc::new(AtomicBool::new(false));
    let sock = sync
        .try_clone()
        .map_err(|e| SetupFailure::io(Stage::Supervisor, "duplicating the sync socket", &e))?;
    let (taken_tx, taken) = std::sync::mpsc::channel();
    let thread = crate::trace::notify::spawn(
        sock,
        init,
        hub.clone(),
        Some(net.clone()),
        stop.clone(),
        taken_tx,
    );
    let thread = match thread {
        Ok(t) => t,
        Err(e) => {
            net.stop();
            return Err(SetupFailure::io(
                Stage::Supervisor,
                "starting the tracer",
                &e,
            ));
        }
    };
    Ok(Tracing {
        hub,
        net: Some(net),
        thread: Some(thread),
        stop,
        scans: [StreamScan::default(), StreamScan::default()],
        pending: Vec::new(),
        taken: Some(taken),
    })
}

/// Stop the tracing threads (the tree is gone) and wait for them.
/// Returns the hub and what the boundary capture saw (`null` without one).
fn stop_tracing(mut t: Tracing) -> (Arc<Hub>, serde_json::Value) {
    t.stop.store(true, Ordering::Release);
    if let Some(thread) = t.thread.take() {
        let _ = thread.join();
    }
    let mut capture = serde_json::Value::Null;
    if let Some(net) = t.net.take() {
        net.stop();
        capture = net.capture_summary();
    }
    (t.hub, capture)
}

/// Longest control line kept (a recorded event carries a tool call's arguments).
const MAX_CONTROL_LINE: usize = 1 << 20;

/// Apply the complete lines the caller wrote on the control channel (windows, and events to
/// record); false once it is closed.
fn read_control(t: &mut Tracing, fd: BorrowedFd<'_>, cpu_ms: Option<u64>) -> bool {
    let mut buf = [0u8; 4096];
    let open = match nix::unistd::read(fd, &mut buf) {
        Ok(0) => false,
        Ok(n) => {
            t.pending.extend_from_slice(&buf[..n]);
            true
        }
        Err(Errno::EAGAIN | Errno::EINTR) => true,
        Err(_) => false,
    };
    while let Some(end) = t.pending.iter().position(|b| *b == b'\n') {
        let line: Vec<u8> = t.pending.drain(..=end).collect();
        match serde_json::from_slice::<serde_json::Value>(&line) {
            Ok(v) if v.get("window").is_some() => {
                // What the boundary saw so far belongs to the window closing.
                if let Some(net) = &t.net {
                    net.sync_capture();
                }
                // With `rate`, the traced programs' clocks switch first (the window's
                // acknowledgement then says they run at it).
                if let Some(rate) = v["rate"].as_f64() {
                    t.hub.set_rate(rate);
                }
                let name = v["window"].as_str().map(str::to_owned);
                t.hub.set_window(name, v["seq"].as_u64(), cpu_ms);
            }
            // The caller's own observations (the detonation harness's protocol events) join
            // the same numbered, windowed sequence; the id comes back on the sink.
            // With `then_window: PREFIX`, the window `PREFIX<id>` (or `fallback` past the cap)
            // opens right after; with `quiet: true`, no id comes back (the caller does not wait).
            Ok(v) if v.get("record").is_some() => {
                let kind = serde_json::from_value(v["record"]["kind"].clone());
                let id = kind.ok().and_then(|kind| {
                    let data = v["record"]["data"].clone();
                    t.hub.record(kind, None, data)
                });
                if let Some(prefix) = v["then_window"].as_str() {
                    let name = match id {
                        Some(id) => format!("{prefix}{id}"),
                        None => v["fallback"].as_str().unwrap_or(prefix).to_owned(),
                    };
                    t.hub
                        .set_window(Some(name.chars().take(200).collect()), None, None);
                }
                if v["quiet"] != true {
                    t.hub
                        .announce(&serde_json::json!({ "recorded": id, "seq": v["seq"].as_u64(), "cpu_ms": cpu_ms }));
                }
            }
            _ => tracing::debug!("ignoring a malformed control line"),
        }
    }
    if t.pending.len() > MAX_CONTROL_LINE {
        t.pending.clear();
    }
    open
}

/// `sandbox.limit_hit`, in the window open now.
fn record_limit(hub: &Hub, kind: LimitKind) {
    hub.record(
        warden_events::EventKind::SandboxLimitHit,
        None,
        serde_json::json!({ "limit": kind }),
    );
}

/// Poll until the init exits; returns why we stopped it, if we did.
fn watch(
    r: &mut Running,
    policy: &Policy,
    lifeline: Option<BorrowedFd<'_>>,
    control: Option<BorrowedFd<'_>>,
    sfd: &SignalFd,
) -> Option<Stop> {
    let mut control = control.filter(|_| r.tracing.is_some());
    let limits = &policy.limits;
    let deadline = r.started + Duration::from_millis(limits.wall_time_ms);
    let mut stop: Option<Stop> = None;
    let mut lifeline = lifeline;
    let mut next_tick = Instant::now() + TICK;
    loop {
        let now = Instant::now();
        if stop.is_none() && now >= deadline {
            stop = Some(Stop::Limit(LimitKind::WallTime));
            let _ = kill(r.init, Signal::SIGKILL);
        }
        if now >= next_tick {
            next_tick = now + TICK;
            if stop.is_none()
                && let Some(kind) = limit_from_counters(&r.cgroup.counters(), limits.cpu_time_ms)
            {
                stop = Some(Stop::Limit(kind));
                let _ = kill(r.init, Signal::SIGKILL);
                // Now, in the window of the call that hit it: at the end, the caller may have
                // moved on.
                if let Some(t) = &r.tracing {
                    record_limit(&t.hub, kind);
                    r.limit_noted = true;
                }
            }
        }
        let wake = if stop.is_some() {
            next_tick
        } else {
            deadline.min(next_tick)
        };
        let timeout = wake.saturating_duration_since(Instant::now());
        let ms = u16::try_from(timeout.as_millis().max(1)).unwrap_or(u16::MAX);

        let mut fds = vec![PollFd::new(r.pidfd.as_fd(), PollFlags::POLLIN)];
        let out_i = push_fd(&mut fds, read_fd(&r.stdout), PollFlags::POLLIN);
        let err_i = push_fd(&mut fds, read_fd(&r.stderr), PollFlags::POLLIN);
        let out_w = push_fd(&mut fds, flush_fd(&r.stdout), PollFlags::POLLOUT);
        let err_w = push_fd(&mut fds, flush_fd(&r.stderr), PollFlags::POLLOUT);
        let src_i = push_fd(
            &mut fds,
            r.stdin.wants_input().then_some(r.stdin.source).flatten(),
            PollFlags::POLLIN,
        );
        let sink_i = push_fd(
            &mut fds,
            r.stdin
                .wants_output()
                .then(|| r.stdin.sink.as_ref().map(|s| s.as_fd()))
                .flatten(),
            PollFlags::POLLOUT,
        );
        let life_i = push_fd(&mut fds, lifeline, PollFlags::POLLIN);
        let ctl_i = push_fd(&mut fds, control, PollFlags::POLLIN);

        let sig_i = push_fd(&mut fds, Some(sfd.as_fd()), PollFlags::POLLIN);
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => std::thread::sleep(Duration::from_millis(1)),
        }
        let ready = |i: Option<usize>| {
            i.and_then(|i| fds.get(i))
                .and_then(|f| f.revents())
                .is_some_and(|ev| !ev.is_empty())
        };
        let (out_w, err_w) = (ready(out_w), ready(err_w));
        let (init_done, out_r, err_r, src_r, sink_r, life_r, sig_r) = (
            ready(Some(0)),
            ready(out_i),
            ready(err_i),
            ready(src_i),
            ready(sink_i),
            ready(life_i),
            ready(sig_i),
        );
        let ctl_r = ready(ctl_i);
        drop(fds);
        if let Some(t) = &r.tracing {
            t.hub.flush();
        }
        // The CPU time so far goes back with every answer: what each call cost.
        let cpu_ms = ctl_r
            .then(|| r.cgroup.counters().cpu_ns)
            .flatten()
            .map(|ns| ns / 1_000_000);
        if ctl_r
            && let (Some(t), Some(fd)) = (r.tracing.as_mut(), control)
            && !read_control(t, fd, cpu_ms)
        {
            control = None;
        }
        let cap = limits.output_bytes;
        let mut over = false;
        for (i, (readable, out)) in [(out_r, &mut r.stdout), (err_r, &mut r.stderr)]
            .into_iter()
            .enumerate()
        {
            if let (true, Some(o)) = (readable, out.as_mut()) {
                let before = o.kept.len();
                over |= o.pump(cap);
                if let Some(t) = r.tracing.as_mut() {
                    let name = if i == 0 { "stdout" } else { "stderr" };
                    t.scans[i].feed(&t.hub, name, &o.kept[before..]);
                }
            }
        }
        if out_w && let Some(o) = r.stdout.as_mut() {
            o.flush_some();
        }
        if err_w && let Some(o) = r.stderr.as_mut() {
            o.flush_some();
        }
        if over && stop.is_none() {
            stop = Some(Stop::Limit(LimitKind::Output));
            let _ = kill(r.init, Signal::SIGKILL);
        }
        if src_r {
            r.stdin.read_source();
        }
        if sink_r {
            r.stdin.write_sink();
        }
        if life_r || sig_r {
            if sig_r && let Ok(Some(info)) = sfd.read_signal() {
                // Whatever ended the run (a limit may have already), the caller asked for
                // this: it is raised again in `finish`.
                r.caller_signal = i32::try_from(info.ssi_signo).ok();
            }
            if life_r {
                lifeline = None;
            }
            if stop.is_none() {
                stop = Some(Stop::Killed(r.caller_signal));
            }
            let _ = kill(r.init, Signal::SIGKILL);
        }
        if init_done {
            return stop;
        }
    }
}

/// Read every status line the init and the command sent.
fn read_status(fd: &OwnedFd) -> Vec<StatusMessage> {
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    // The writers are gone; read to EOF, bounded.
    while all.len() < 1 << 16 {
        match nix::unistd::read(fd, &mut buf) {
            Ok(0) => break,
            Ok(n) => all.extend_from_slice(&buf[..n]),
            Err(Errno::EINTR) => {}
            Err(_) => break,
        }
    }
    all.split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .filter_map(|l| serde_json::from_slice(l).ok())
        .collect()
}

fn finish(
    mut r: Running,
    policy: &Policy,
    stop: Option<Stop>,
    caller_mask: &SigSet,
) -> Result<Outcome, JailError> {
    let phase = |name: &str| log_phase(r.started, name);
    phase("init exited");
    let _ = nix::sys::wait::waitpid(r.init, None);
    if let Some(ns) = r.mount_ns.take() {
        after_reply_list().namespaces.push(ns);
    }
    let cap = policy.limits.output_bytes;
    let before = [&r.stdout, &r.stderr].map(|o| o.as_ref().map_or(0, |o| o.kept.len()));
    drain(&mut r.stdout, cap);
    drain(&mut r.stderr, cap);
    // The tree is gone: stop the tracing threads (whatever the outcome) after the last output
    // was scanned.
    let hub = r.tracing.take().map(|mut t| {
        for (i, o) in [&r.stdout, &r.stderr].into_iter().enumerate() {
            if let Some(o) = o {
                let name = if i == 0 { "stdout" } else { "stderr" };
                let start = before[i].min(o.kept.len());
                t.scans[i].feed(&t.hub, name, &o.kept[start..]);
            }
        }
        stop_tracing(t)
    });
    let duration_ms = u64::try_from(r.started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let counters = r.cgroup.counters();
    let mut landlock = LandlockReport {
        status: "not_reached".into(),
        abi: 0,
    };
    let mut exit: Option<(Option<i32>, Option<i32>)> = None;
    let mut failure: Option<SetupFailure> = None;
    let mut root = crate::mounts::RootSwitch::default();
    for msg in read_status(&r.status) {
        match msg {
            StatusMessage::Failed(f) => failure = failure.or(Some(f)),
            StatusMessage::Landlock(l) => landlock = l,
            StatusMessage::Root(r) => root = r,
            StatusMessage::Exited { code, signal } => exit = Some((code, signal)),
        }
    }
    let mut enforcement = enforcement(&r.cgroup, landlock, policy, r.uid_host);
    enforcement.proc = r.proc;
    enforcement.root = root;
    phase("status read");
    // After the reply unless a termination signal came: it is raised again below and ends us
    // before any reply.
    if REPLIES_FIRST.load(Ordering::SeqCst) && r.caller_signal.is_none() {
        after_reply_list().cgroups.push(r.cgroup);
    } else {
        r.cgroup.remove();
        log_phase(r.started, "cgroup removed");
    }
    // The jail is gone; forwarding the rest of its output may wait on a slow reader, so let the
    // caller's signals through again while it does.
    let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(caller_mask), None);
    // A termination signal we read from the signalfd was the caller's: deliver it again now
    // that it is unblocked, rather than wait on a reader that may never read.
    if let Some(sig) = r.caller_signal
        && let Ok(sig) = Signal::try_from(sig)
    {
        let _ = nix::sys::signal::raise(sig);
    }
    for o in [&mut r.stdout, &mut r.stderr].into_iter().flatten() {
        o.flush_all();
    }
    if let Some(f) = failure {
        return Err(f.into());
    }
    let (exit_code, signal) = exit.unwrap_or((None, Some(Signal::SIGKILL as i32)));
    let limit_hit = match stop {
        Some(Stop::Limit(kind)) => Some(kind),
        _ => limit_from_counters(&counters, policy.limits.cpu_time_ms).or(match signal {
            Some(s) if s == Signal::SIGXCPU as i32 => Some(LimitKind::CpuTime),
            Some(s) if s == Signal::SIGXFSZ as i32 => Some(LimitKind::FileSize),
            _ => None,
        }),
    };
    let (events, events_dropped) = match hub {
        Some((hub, capture)) => {
            use warden_events::EventKind;
            if let Some(kind) = limit_hit.filter(|_| !r.limit_noted) {
                record_limit(&hub, kind);
            }
            let data = serde_json::json!({
                "exit_code": exit_code,
                "signal": signal,
                "duration_ms": duration_ms,
                "killed": matches!(stop, Some(Stop::Killed(_))),
                "peak_memory_bytes": counters.peak_memory,
                "events_dropped": hub.dropped(),
                "events_repeated": hub.repeated(),
                "cpu_time_ms": counters.cpu_ns.map(|ns| ns / 1_000_000),
                // Which mechanism held the tree's memory and process limits (null: only the
                // per-process rlimits), and where cgroup v2 stood.
                "limits_by": {
                    "memory": by_cgroup(&enforcement.memory),
                    "pids": by_cgroup(&enforcement.pids),
                    "cgroup_v2": enforcement.cgroup_v2,
                },
                // What the network boundary's packet capture saw (null: none ran).
                "capture": capture,
            });
            hub.record(EventKind::SandboxExited, None, data);
            hub.take()
        }
        None => (Vec::new(), 0),
    };
    log_phase(r.started, "tracing stopped");
    let (out, err) = (r.stdout.take(), r.stderr.take());
    let parts = |o: Option<Output>| {
        o.map_or((Vec::new(), 0, false), |o| {
            let kept = if o.streamed { Vec::new() } else { o.kept };
            (kept, o.total, o.truncated)
        })
    };
    let (stdout, stdout_bytes, stdout_truncated) = parts(out);
    let (stderr, stderr_bytes, stderr_truncated) = parts(err);
    Ok(Outcome {
        exit_code,
        signal,
        duration_ms,
        limit_hit,
        killed: matches!(stop, Some(Stop::Killed(_))),
        stdout,
        stderr,
        stdout_bytes,
        stderr_bytes,
        stdout_truncated,
        stderr_truncated,
        usage: Usage {
            peak_memory_bytes: counters.peak_memory,
            cpu_time_ms: counters.cpu_ns.map(|ns| ns / 1_000_000),
            io_read_bytes: counters.io_bytes.map(|(r, _)| r),
            io_write_bytes: counters.io_bytes.map(|(_, w)| w),
        },
        enforcement,
        events,
        events_dropped,
    })
}

fn enforcement(
    cg: &RunCgroup,
    landlock: LandlockReport,
    policy: &Policy,
    uid_host: u32,
) -> Enforcement {
    let with = |m: Option<Mechanism>, rest: &[Mechanism]| {
        m.into_iter()
            .chain(rest.iter().copied())
            .collect::<Vec<_>>()
    };
    Enforcement {
        wall_time: vec![Mechanism::Supervisor],
        cpu_time: with(cg.cpu(), &[Mechanism::Rlimit]),
        cpu_rate: cg.cpu_rate().into_iter().collect(),
        cgroup_v2: crate::cgroup::establish().how.clone(),
        cgroup_join: cg.join().into(),
        memory: cg.memory().map_or(vec![Mechanism::Rlimit], |m| vec![m]),
        pids: with(cg.pids(), &[Mechanism::Rlimit]),
        open_files: vec![Mechanism::Rlimit],
        file_size: vec![Mechanism::Rlimit],
        output: vec![Mechanism::Supervisor],
        tmp: vec![Mechanism::Tmpfs],
        landlock,
        seccomp: true,
        uid_inside: policy.uid,
        uid_host,
        proc: ProcSource::Fresh,
        root: crate::mounts::RootSwitch::PivotRoot,
    }
}
