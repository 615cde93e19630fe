//! Starting the jail from a program that may be multi-threaded (an async server, a test).
//!
//! The jail's set-up must happen in a single-threaded process, so [`Jail`] re-executes a helper
//! binary (the `warden` executable, whose `main` calls [`helper_main`] when its first argument
//! is [`HELPER_ARG`]). The helper gets the request on descriptor 3 — which then stays open as
//! the lifeline: closing it kills the run — and writes the outcome on descriptor 4. A traced run
//! also gets descriptor 5, a stream socket: the helper writes events (JSON lines) as they happen
//! and reads attribution windows from it ([`TraceLink`]).
//! The helper is started with `posix_spawn` (see [`crate::helper_process`]): the caller's memory
//! is never copied.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::process::{ChildStderr, ChildStdin, ChildStdout, Command};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use serde::{Deserialize, Serialize};

use crate::error::{JailError, SetupFailure};
use crate::helper_process::{HelperProcess, Spawned, Stdio};
use crate::outcome::Outcome;
use crate::policy::Policy;
use crate::protocol::{MAX_JSON_FRAME, read_frame, write_frame};

/// Whether a run of this process already warned that `/proc` is the container's (see
/// [`crate::procfs`]).
static PROC_WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
use crate::supervisor::{IoMode, Observer, Request, supervise_with};

/// First argument that makes the `warden` binary act as the jail helper.
pub const HELPER_ARG: &str = "__jail-supervise";

/// This build's identity of the helper protocol (a hash of the sources that define it: see
/// `build.rs`). The helper is started with it as its second argument and refuses a request
/// from any other build.
pub const BUILD: &str = env!("WARDEN_JAIL_BUILD");

/// The running executable, whatever has become of its file since it started.
pub const SELF_EXE: &str = "/proc/self/exe";

/// The name of the small helper binary installed beside `warden` (see [`Jail::current_exe`]).
pub const HELPER_BIN: &str = "warden-jail";

/// Largest stdin accepted in capture mode.
pub const MAX_STDIN: u32 = 64 << 20;

const REQUEST_FD: RawFd = 3;
const RESULT_FD: RawFd = 4;
/// Traced runs: events and acknowledgements from the helper, window lines to it.
const TRACE_FD: RawFd = 5;
/// Events a [`TraceLink`] keeps, at most (the rest are counted).
const LINK_EVENTS: usize = 20_000;
/// Bytes of events a [`TraceLink`] keeps, at most.
const LINK_BYTES: u64 = 64 << 20;
/// Longest line accepted from the helper's event stream.
const LINK_LINE: u64 = 1 << 20;
/// How long a finished traced run's outcome waits for the rest of its events.
const LINK_DRAIN: Duration = Duration::from_secs(2);
/// How long opening a window waits for the helper's acknowledgement.
const WINDOW_WAIT: Duration = Duration::from_secs(10);

/// What the helper sends back.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Reply {
    Outcome(Box<Outcome>),
    Failed(SetupFailure),
    NotFound(String),
    NotExecutable { program: String, errno: i32 },
    Refused(String),
}

/// Starts jailed commands through a helper executable.
#[derive(Debug, Clone)]
pub struct Jail {
    helper: PathBuf,
    /// When the helper is the `warden-jail` found beside us: the file it was when it said it
    /// is of our build. Once the file at that path is another (an upgrade replaced it), the
    /// running executable is the helper instead.
    sibling: Option<FileId>,
}

/// What tells one file from its replacement at the same path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl FileId {
    fn of(path: &std::path::Path) -> Option<FileId> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::symlink_metadata(path).ok()?;
        Some(FileId {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            ctime_ns: i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()),
        })
    }
}

impl Jail {
    /// A jail whose helper is the small `warden-jail` binary beside the current executable
    /// when there is one of this very build (it starts faster than the whole `warden`), and
    /// the running executable itself otherwise, through `/proc/self/exe`: the file that is
    /// running, even if an upgrade has replaced or removed it on disk since, so two builds
    /// never meet.
    pub fn current_exe() -> Result<Jail, JailError> {
        let exe = std::env::current_exe().map_err(|source| JailError::Helper {
            path: PathBuf::from(SELF_EXE),
            source,
        })?;
        static SIBLING: std::sync::OnceLock<Option<(PathBuf, FileId)>> = std::sync::OnceLock::new();
        Ok(match SIBLING.get_or_init(|| sibling_helper(&exe)) {
            Some((path, id)) => Jail {
                helper: path.clone(),
                sibling: Some(*id),
            },
            None => Jail::with_helper(SELF_EXE),
        })
    }

    /// A jail whose helper is `path` (a `warden` binary).
    pub fn with_helper(path: impl Into<PathBuf>) -> Jail {
        Jail {
            helper: path.into(),
            sibling: None,
        }
    }

    /// The helper to start now: the sibling `warden-jail` while it is still the file that said
    /// it is of our build (one `lstat`), else the running executable.
    fn helper_now(&self) -> PathBuf {
        match self.sibling {
            Some(id) if FileId::of(&self.helper) != Some(id) => PathBuf::from(SELF_EXE),
            _ => self.helper.clone(),
        }
    }

    fn start(
        &self,
        req: &Request,
        stdio: [Stdio; 3],
    ) -> Result<(Spawned, File, File, Option<TraceLink>), JailError> {
        req.policy.validate()?;
        if req.argv.is_empty() && !req.deferred {
            return Err(JailError::BadCommand("empty command line"));
        }
        // Before the first helper starts: it must start in our cgroup v2 leaf, if we take one.
        crate::cgroup::establish();
        let helper = self.helper_now();
        let helper_err = |source| JailError::Helper {
            path: helper.clone(),
            source,
        };
        let io_err = |e: nix::errno::Errno| helper_err(std::io::Error::from(e));
        let (req_r, req_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(io_err)?;
        let (res_r, res_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(io_err)?;
        let traced = req.policy.traced();
        let link = if traced {
            let (ours, theirs) = std::os::unix::net::UnixStream::pair().map_err(helper_err)?;
            Some((ours, theirs))
        } else {
            None
        };
        let mut extras = vec![(req_r.as_fd(), REQUEST_FD), (res_w.as_fd(), RESULT_FD)];
        if let Some((_, theirs)) = &link {
            extras.push((theirs.as_fd(), TRACE_FD));
        }
        let program = helper.to_string_lossy();
        let mut child = crate::helper_process::spawn(
            &helper,
            &[program.as_ref(), HELPER_ARG, BUILD],
            stdio,
            &extras,
        )
        .map_err(io_err)?;
        drop((req_r, res_w));
        let link = match link {
            Some((ours, theirs)) => {
                drop(theirs);
                Some(TraceLink::start(ours).map_err(helper_err)?)
            }
            None => None,
        };
        let mut lifeline = File::from(req_w);
        // The weaker-/proc warning is said once per process, not once per run.
        let req = &Request {
            proc_warned: PROC_WARNED.load(std::sync::atomic::Ordering::Relaxed),
            cgroup_why: Some(crate::cgroup::establish().how.clone()),
            ..req.clone()
        };
        let body = serde_json::to_vec(req).map_err(|_| JailError::Protocol("request encoding"))?;
        // A prepared run's stdin comes later, with its command.
        let sent = write_frame(&mut lifeline, &body).and_then(|()| {
            if req.deferred {
                Ok(())
            } else {
                write_frame(&mut lifeline, &req.stdin)
            }
        });
        if sent.is_err() {
            child.process.kill();
            child.process.wait();
            return Err(JailError::Protocol("exited before reading its request"));
        }
        Ok((child, lifeline, File::from(res_r), link))
    }

    /// Run `argv` to completion and capture its output (up to the policy's output limit).
    pub fn run(
        &self,
        policy: &Policy,
        argv: &[String],
        stdin: &[u8],
    ) -> Result<Outcome, JailError> {
        self.start_capture(policy, argv, stdin)?.wait()
    }

    /// Start `argv` in capture mode: `wait` returns the outcome with the output; a [`Killer`]
    /// taken before waiting can end it from another thread.
    pub fn start_capture(
        &self,
        policy: &Policy,
        argv: &[String],
        stdin: &[u8],
    ) -> Result<Running, JailError> {
        if stdin.len() > MAX_STDIN as usize {
            return Err(JailError::BadCommand("stdin larger than 64 MiB"));
        }
        let req = Request {
            policy: policy.clone(),
            argv: argv.to_vec(),
            io: IoMode::Capture,
            stdin: stdin.to_vec(),
            proc_warned: false,
            deferred: false,
            cgroup_why: None,
        };
        let stdio = [Stdio::Null; 3];
        let (child, lifeline, result, trace) = self.start(&req, stdio)?;
        Ok(Running::captured(child.process, lifeline, result, trace))
    }

    /// Prepare a jail for `policy` ahead of its command (see [`crate::warm`]): the returned
    /// [`Warm`] is set up in the background and runs the one [`crate::warm::Command`] given to
    /// [`Warm::start`], in capture mode (a traced one carries its events in the outcome, as a
    /// cold one does). Policies that protect paths in the workspace cannot be prepared (their
    /// read-only binds are planned from the workspace as it is when the jail is set up, and
    /// would be stale by the time of the command).
    pub fn prepare(&self, policy: &Policy) -> Result<Warm, JailError> {
        if let Some(why) = crate::warm::unpreparable(policy) {
            return Err(JailError::BadCommand(why));
        }
        let req = Request {
            policy: policy.clone(),
            argv: Vec::new(),
            io: IoMode::Capture,
            stdin: Vec::new(),
            proc_warned: false,
            deferred: true,
            cgroup_why: None,
        };
        let stdio = [Stdio::Null; 3];
        let (child, lifeline, result, trace) = self.start(&req, stdio)?;
        Ok(Warm {
            parts: Some((child.process, lifeline, result)),
            trace,
        })
    }

    /// Start `argv` with piped stdin, stdout and stderr for a long-lived conversation.
    pub fn spawn(&self, policy: &Policy, argv: &[String]) -> Result<Running, JailError> {
        let req = Request {
            policy: policy.clone(),
            argv: argv.to_vec(),
            io: IoMode::Inherit,
            stdin: Vec::new(),
            proc_warned: false,
            deferred: false,
            cgroup_why: None,
        };
        let stdio = [Stdio::Piped; 3];
        let (child, lifeline, result, trace) = self.start(&req, stdio)?;
        Ok(Running {
            trace,
            stdin: child.stdin,
            stdout: child.stdout,
            stderr: child.stderr,
            child: child.process,
            lifeline: Killer(Arc::new(Mutex::new(Some(lifeline)))),
            result,
            reaped: false,
        })
    }
}

/// A jail prepared by [`Jail::prepare`], waiting for its one command. Dropping it unused
/// tears it down (the helper sees its lifeline close) and reaps the helper.
#[derive(Debug)]
pub struct Warm {
    /// `None` once handed to a [`Running`].
    parts: Option<(HelperProcess, File, File)>,
    /// A traced jail's events, from the helper.
    trace: Option<TraceLink>,
}

impl Warm {
    /// Run `cmd` in this jail. Errors of the set-up or of the command come from
    /// [`Running::wait`], as for a cold run.
    pub fn start(mut self, cmd: &crate::warm::Command) -> Result<Running, JailError> {
        if cmd.stdin.len() > MAX_STDIN as usize {
            return Err(JailError::BadCommand("stdin larger than 64 MiB"));
        }
        if cmd.argv.is_empty() {
            return Err(JailError::BadCommand("empty command line"));
        }
        let Some((child, mut lifeline, result)) = self.parts.take() else {
            return Err(JailError::Protocol("a prepared jail used twice"));
        };
        // A helper that is already gone (a set-up failure) left its reply: `wait` reads it.
        let _ = crate::warm::send(&mut lifeline, cmd);
        Ok(Running::captured(
            child,
            lifeline,
            result,
            self.trace.take(),
        ))
    }

    /// Whether the helper is still there (it exits early only when the set-up failed).
    pub fn alive(&mut self) -> bool {
        self.parts
            .as_mut()
            .is_some_and(|(child, _, _)| !child.exited())
    }

    /// Host pid of the helper (the supervisor of this jail).
    pub fn supervisor_pid(&self) -> Option<u32> {
        self.parts.as_ref().map(|(child, _, _)| child.id())
    }
}

impl Drop for Warm {
    fn drop(&mut self) {
        if let Some((mut child, lifeline, result)) = self.parts.take() {
            // EOF on the lifeline ends the helper, which tears the jail down first.
            drop((lifeline, result));
            child.wait();
        }
    }
}

/// Ends a run from anywhere: closing the lifeline makes the helper kill the whole tree (the
/// outcome then says `killed`). Cheap to clone; killing twice is harmless.
#[derive(Debug, Clone)]
pub struct Killer(Arc<Mutex<Option<File>>>);

impl Killer {
    /// Kill the run's whole tree.
    pub fn kill(&self) {
        if let Ok(mut lifeline) = self.0.lock() {
            lifeline.take();
        }
    }
}

/// A jailed command started with [`Jail::spawn`] or [`Jail::start_capture`].
#[derive(Debug)]
pub struct Running {
    child: HelperProcess,
    lifeline: Killer,
    result: File,
    /// The command's stdin.
    pub stdin: Option<ChildStdin>,
    /// The command's stdout.
    pub stdout: Option<ChildStdout>,
    /// The command's stderr.
    pub stderr: Option<ChildStderr>,
    /// Traced runs: the live event stream and the window control.
    pub trace: Option<TraceLink>,
    /// The helper was handed to a background reaper.
    reaped: bool,
}

/// `warden-jail` beside `exe`, if it is a regular file that is not a link, owned by `exe`'s
/// owner (root or us), writable by nobody else, in a folder nobody else may write to, and says
/// it is of this build (`warden-jail --build`, run once per process, answered within
/// [`PROBE_WAIT`]). Anything else (absent, stale from another build, foreign, slow) is not
/// used: the caller's own binary is the helper then.
fn sibling_helper(exe: &std::path::Path) -> Option<(PathBuf, FileId)> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let path = exe.with_file_name(HELPER_BIN);
    let meta = std::fs::symlink_metadata(&path).ok()?;
    let id = FileId::of(&path)?;
    let own = std::fs::metadata(exe).ok()?;
    let dir = std::fs::metadata(path.parent()?).ok()?;
    let trusted = |uid: u32| uid == 0 || uid == nix::unistd::geteuid().as_raw();
    if !meta.file_type().is_file()
        || meta.uid() != own.uid()
        || !trusted(meta.uid())
        || meta.mode() & 0o022 != 0
        || !trusted(dir.uid())
        || dir.mode() & 0o022 != 0
    {
        return None;
    }
    let mut child = Command::new(&path)
        .arg("--build")
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let mut out = child.stdout.take()?;
    let mut answer = [0u8; 64];
    let mut got = 0;
    let deadline = std::time::Instant::now() + PROBE_WAIT;
    while got < answer.len() {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
        let mut fds = [PollFd::new(out.as_fd(), PollFlags::POLLIN)];
        if ms == 0 || !matches!(poll(&mut fds, PollTimeout::from(ms)), Ok(n) if n > 0) {
            break;
        }
        match out.read(&mut answer[got..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    // Still the file that answered (not replaced while it did).
    (answer[..got].trim_ascii() == BUILD.as_bytes() && FileId::of(&path) == Some(id))
        .then_some((path, id))
}

/// How long `warden-jail --build` may take to answer.
const PROBE_WAIT: Duration = Duration::from_secs(2);

/// Longest event data sent on the trace link's control side (the supervisor drops lines over
/// 1 MiB, and a dropped record would never be answered).
const MAX_RECORD: usize = 256 << 10;
/// Strings in event data over the limit are cut to this many characters.
const CUT_STRING: usize = 4096;

/// `data` as it may travel: unchanged when small enough; else every string cut to
/// [`CUT_STRING`] characters (marked `truncated`); else only a note of its size.
fn bounded(data: serde_json::Value) -> serde_json::Value {
    fn cut(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::String(s) if s.chars().count() > CUT_STRING => {
                *s = format!("{}…", s.chars().take(CUT_STRING).collect::<String>());
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(cut),
            serde_json::Value::Object(m) => m.values_mut().for_each(cut),
            _ => {}
        }
    }
    let size = |v: &serde_json::Value| v.to_string().len();
    if size(&data) <= MAX_RECORD {
        return data;
    }
    let mut small = data;
    cut(&mut small);
    if let serde_json::Value::Object(m) = &mut small {
        m.insert("truncated".into(), true.into());
    }
    if size(&small) <= MAX_RECORD {
        small
    } else {
        serde_json::json!({ "truncated": true, "bytes": size(&small) })
    }
}

/// The live side of a traced run started through the helper: events as they happen, the
/// run's canaries, and attribution windows.
#[derive(Debug)]
pub struct TraceLink {
    writer: Mutex<std::os::unix::net::UnixStream>,
    state: Arc<(Mutex<LinkState>, std::sync::Condvar)>,
    /// The last request number sent (answers carry it back).
    seq: std::sync::atomic::AtomicU64,
}

#[derive(Debug, Default)]
struct LinkState {
    events: Vec<warden_events::Event>,
    dropped: u64,
    /// The request number of the latest answer (answers come in order).
    answered: u64,
    /// The id an answer to a record carried.
    last_record: Option<u64>,
    /// The run's CPU time when the latest answer was sent (when its cgroup counts it).
    cpu_ms: Option<u64>,
    /// The traced programs' clock rate when the latest window answer was sent (`None`: no
    /// clock).
    rate: Option<f64>,
    canaries: Vec<warden_trace::Canary>,
    closed: bool,
}

impl TraceLink {
    fn start(stream: std::os::unix::net::UnixStream) -> std::io::Result<TraceLink> {
        let reader = stream.try_clone()?;
        let state: Arc<(Mutex<LinkState>, std::sync::Condvar)> = Arc::default();
        let shared = state.clone();
        std::thread::Builder::new()
            .name("warden-trace-link".into())
            .spawn(move || read_link(reader, &shared))?;
        Ok(TraceLink {
            writer: Mutex::new(stream),
            state,
            seq: std::sync::atomic::AtomicU64::new(0),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LinkState> {
        self.state
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Send `request` with the next request number and wait for the answer that carries it
    /// back (a late answer to an earlier request that timed out cannot pass for this one). One
    /// round trip at a time: the writer lock is held until the answer is back.
    fn round_trip(
        &self,
        mut request: serde_json::Value,
    ) -> Result<std::sync::MutexGuard<'_, LinkState>, JailError> {
        let mut w = self
            .writer
            .lock()
            .map_err(|_| JailError::Protocol("trace link poisoned"))?;
        let seq = self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        request["seq"] = seq.into();
        w.write_all(request.to_string().as_bytes())
            .and_then(|()| w.write_all(b"\n"))
            .map_err(|_| JailError::Protocol("the run is over"))?;
        let (lock, cv) = &*self.state;
        let guard = lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (guard, _) = cv
            .wait_timeout_while(guard, WINDOW_WAIT, |s| s.answered < seq && !s.closed)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if guard.answered == seq {
            Ok(guard)
        } else {
            Err(JailError::Protocol("the tracer did not answer"))
        }
    }

    /// Open the window `name` (`install`, `startup`, `tool_call:<id>`), or close the open one
    /// with `None`. Returns once the tracer has switched (every event after this returns is
    /// attributed to the new window), with the run's CPU time in milliseconds at the switch
    /// (when its cgroup counts it).
    pub fn window(&self, name: Option<&str>) -> Result<Option<u64>, JailError> {
        self.round_trip(serde_json::json!({ "window": name }))
            .map(|state| state.cpu_ms)
    }

    /// [`TraceLink::window`], with the traced programs' clocks running `rate` times as fast
    /// from the switch on (1: real speed again; the lead they gained stays). Time acceleration
    /// reaches what loads the interposer: see `warden_trace::clock`.
    /// Fails when the clocks did not take the rate (no clock, or the switch failed): the
    /// window switched all the same.
    pub fn window_at_rate(&self, name: Option<&str>, rate: f64) -> Result<Option<u64>, JailError> {
        let state = self.round_trip(serde_json::json!({ "window": name, "rate": rate }))?;
        let took = state
            .rate
            .is_some_and(|r| (r - rate).abs() <= rate.max(1.0) * 1e-3);
        if took {
            Ok(state.cpu_ms)
        } else {
            Err(JailError::Protocol(
                "the traced programs' clock did not switch",
            ))
        }
    }

    /// Record an event of the caller's own (`mcp.tool_call`, `harness.payload`…) in the run's
    /// sequence, in the open window; returns its id (`None` past the cap).
    pub fn record(
        &self,
        kind: warden_events::EventKind,
        data: serde_json::Value,
    ) -> Result<Option<u64>, JailError> {
        self.round_trip(serde_json::json!({ "record": { "kind": kind, "data": bounded(data) } }))
            .map(|state| state.last_record)
    }

    /// Record an event of the caller's own and open the window `PREFIX<its id>` (or
    /// `fallback` when it was dropped at the cap), in one round trip; returns the id and the
    /// run's CPU time in milliseconds when the window opened (when its cgroup counts it).
    pub fn record_then_window(
        &self,
        kind: warden_events::EventKind,
        data: serde_json::Value,
        prefix: &str,
        fallback: &str,
    ) -> Result<(Option<u64>, Option<u64>), JailError> {
        self.round_trip(serde_json::json!({
            "record": { "kind": kind, "data": bounded(data) },
            "then_window": prefix,
            "fallback": fallback,
        }))
        .map(|state| (state.last_record, state.cpu_ms))
    }

    /// Record an event of the caller's own without waiting for its id: it lands in the
    /// sequence before anything the caller asks for next.
    pub fn note(
        &self,
        kind: warden_events::EventKind,
        data: serde_json::Value,
    ) -> Result<(), JailError> {
        let line =
            serde_json::json!({ "record": { "kind": kind, "data": bounded(data) }, "quiet": true })
                .to_string();
        let mut w = self
            .writer
            .lock()
            .map_err(|_| JailError::Protocol("trace link poisoned"))?;
        w.write_all(line.as_bytes())
            .and_then(|()| w.write_all(b"\n"))
            .map_err(|_| JailError::Protocol("the run is over"))
    }

    /// The events received so far.
    pub fn events(&self) -> Vec<warden_events::Event> {
        self.lock().events.clone()
    }

    /// The events received so far whose id is greater than `id` (events arrive in id order).
    pub fn events_after(&self, id: u64) -> Vec<warden_events::Event> {
        let s = self.lock();
        let start = s.events.partition_point(|e| e.id <= id);
        s.events[start..].to_vec()
    }

    /// Events dropped at the cap (by the tracer or by this link).
    pub fn dropped(&self) -> u64 {
        self.lock().dropped
    }

    /// The run's canaries (with decoys on).
    pub fn canaries(&self) -> Vec<warden_trace::Canary> {
        self.lock().canaries.clone()
    }

    /// Wait up to `timeout` for the helper to end the stream (after the run ends).
    pub fn wait_closed(&self, timeout: Duration) -> bool {
        let (lock, cv) = &*self.state;
        let guard = lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cv.wait_timeout_while(guard, timeout, |s| !s.closed)
            .map(|(g, _)| g.closed)
            .unwrap_or(false)
    }
}

fn read_link(
    stream: std::os::unix::net::UnixStream,
    shared: &(Mutex<LinkState>, std::sync::Condvar),
) {
    use std::io::{BufRead, Read};
    let mut reader = std::io::BufReader::new(stream);
    let mut bytes: u64 = 0;
    loop {
        let mut line = Vec::new();
        let n = (&mut reader).take(LINK_LINE).read_until(b'\n', &mut line);
        let done = !matches!(n, Ok(n) if n > 0);
        // An over-long line: skip the rest of it and count it as dropped.
        let cut = !done && !line.ends_with(b"\n") && line.len() as u64 >= LINK_LINE;
        if cut {
            let mut rest = Vec::new();
            while let Ok(n) = (&mut reader).take(LINK_LINE).read_until(b'\n', &mut rest) {
                if n == 0 || rest.ends_with(b"\n") {
                    break;
                }
                rest.clear();
            }
            line.clear();
        }
        bytes += line.len() as u64;
        let value: Option<serde_json::Value> = serde_json::from_slice(&line).ok();
        let mut s = shared
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(v) = value {
            if v.get("ack").is_some() || v.get("recorded").is_some() {
                if let Some(seq) = v.get("seq").and_then(serde_json::Value::as_u64) {
                    s.answered = s.answered.max(seq);
                    s.last_record = v.get("recorded").and_then(serde_json::Value::as_u64);
                    s.cpu_ms = v.get("cpu_ms").and_then(serde_json::Value::as_u64);
                    s.rate = v.get("rate").and_then(serde_json::Value::as_f64);
                }
            } else if let Ok(e) = serde_json::from_value::<warden_events::Event>(v) {
                if e.kind == warden_events::EventKind::SandboxStarted
                    && let Some(list) = e.data.get("canaries")
                {
                    s.canaries = serde_json::from_value(list.clone()).unwrap_or_default();
                }
                // The tracer's own reserve, kept here too: past the cap, the end of the run
                // (with its count of what was dropped), canaries and the harness's events.
                let (max_events, max_bytes) = if warden_events::reserved(e.kind) {
                    (
                        LINK_EVENTS as u64 + warden_events::RESERVE,
                        LINK_BYTES + warden_events::RESERVE_BYTES,
                    )
                } else {
                    (LINK_EVENTS as u64, LINK_BYTES)
                };
                if (s.events.len() as u64) < max_events && bytes <= max_bytes {
                    s.events.push(e);
                } else {
                    s.dropped += 1;
                }
            }
        }
        if cut {
            s.dropped += 1;
        }
        if done {
            s.closed = true;
        }
        shared.1.notify_all();
        if done {
            return;
        }
    }
}

impl Running {
    /// Kill the whole sandboxed tree (the outcome then says `killed`).
    pub fn kill(&mut self) {
        self.lifeline.kill();
    }

    /// A handle that kills this run from another thread.
    pub fn killer(&self) -> Killer {
        self.lifeline.clone()
    }

    /// Host pid of the helper (the supervisor of this run); meaningful until [`Running::wait`]
    /// has returned (the helper is then reaped in the background and its pid may be reused).
    pub fn supervisor_pid(&self) -> u32 {
        self.child.id()
    }

    /// Wait for the run to end.
    pub fn wait(&mut self) -> Result<Outcome, JailError> {
        let reply = read_frame(&mut self.result, MAX_JSON_FRAME);
        let outcome = reply.and_then(|json| {
            let reply: Reply = serde_json::from_slice(&json).map_err(std::io::Error::other)?;
            Ok(reply)
        });
        let outcome = match outcome {
            Ok(Reply::Outcome(mut o)) => {
                // The helper has no log of its own: the first such run of this process says it.
                if o.enforcement.proc == crate::procfs::ProcSource::HostBind
                    && !PROC_WARNED.swap(true, std::sync::atomic::Ordering::Relaxed)
                {
                    crate::procfs::say_weaker();
                }
                let by_cgroup = |held: &[crate::Mechanism]| held.iter().any(|m| m.is_cgroup());
                if nix::unistd::geteuid().is_root()
                    && !(by_cgroup(&o.enforcement.memory) && by_cgroup(&o.enforcement.pids))
                {
                    crate::cgroup::warn_once_rlimits_only();
                }
                let cap =
                    u32::try_from(o.stdout_bytes.min(u64::from(u32::MAX))).unwrap_or(u32::MAX);
                o.stdout = read_frame(&mut self.result, cap).unwrap_or_default();
                let cap =
                    u32::try_from(o.stderr_bytes.min(u64::from(u32::MAX))).unwrap_or(u32::MAX);
                o.stderr = read_frame(&mut self.result, cap).unwrap_or_default();
                Ok(*o)
            }
            Ok(Reply::Failed(f)) => Err(f.into()),
            Ok(Reply::NotFound(p)) => Err(JailError::NotFound(p)),
            Ok(Reply::NotExecutable { program, errno }) => {
                Err(JailError::NotExecutable { program, errno })
            }
            Ok(Reply::Refused(why)) => Err(JailError::Setup(SetupFailure::plain(
                crate::error::Stage::Supervisor,
                why,
            ))),
            Err(_) => Err(JailError::Protocol("ended without an outcome")),
        };
        self.lifeline.kill();
        if self.trace.is_some() {
            self.child.wait();
        } else {
            // The helper has replied; what it still does (the jail's mount namespace goes
            // after the reply) is not the caller's wait. It is reaped in the background.
            self.reap_later();
        }
        // A traced run's events came over the trace link: the outcome carries them too, once
        // the helper (gone now) has closed it.
        outcome.map(|mut o| {
            if let Some(link) = &self.trace
                && o.events.is_empty()
            {
                link.wait_closed(LINK_DRAIN);
                o.events = link.events();
                o.events_dropped = o.events_dropped.max(link.dropped());
            }
            o
        })
    }

    /// Wait up to `timeout`; `Ok(None)` when the run is still going.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<Option<Outcome>, JailError> {
        let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
        let mut fds = [PollFd::new(self.result.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => Ok(None),
            _ => self.wait().map(Some),
        }
    }
}

impl Running {
    /// A run in capture mode (no pipes of its own: the outcome carries the output).
    fn captured(
        child: HelperProcess,
        lifeline: File,
        result: File,
        trace: Option<TraceLink>,
    ) -> Running {
        Running {
            trace,
            child,
            lifeline: Killer(Arc::new(Mutex::new(Some(lifeline)))),
            result,
            stdin: None,
            stdout: None,
            stderr: None,
            reaped: false,
        }
    }

    /// Reap the helper on another thread (once: the flag keeps `Drop` from waiting on a pid
    /// that may have been reused by then).
    fn reap_later(&mut self) {
        if self.reaped {
            return;
        }
        if self.child.exited() {
            self.reaped = true;
            return;
        }
        let pid = self.child.pid();
        let reaper = std::thread::Builder::new()
            .name("warden-reap".into())
            .spawn(move || {
                let _ = nix::sys::wait::waitpid(pid, None);
            });
        // Without a thread, reap it here (and `Drop` must then not wait again).
        if reaper.is_err() {
            self.child.wait();
        }
        self.child.given_away();
        self.reaped = true;
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // Closing the lifeline makes the helper kill the tree; reap the helper so it does not
        // linger as a zombie. The tree's death does not depend on this running.
        self.lifeline.kill();
        if !self.reaped {
            self.child.wait();
        }
    }
}

/// The helper's `main`: read the request on descriptor 3, supervise, answer on descriptor 4.
/// Returns the helper's exit code.
pub fn helper_main() -> i32 {
    // SAFETY: descriptors 3 and 4 were placed by `Jail::start` for us alone and nothing else in
    // this fresh process owns them.
    let (req_fd, res_fd) = unsafe {
        (
            OwnedFd::from_raw_fd(REQUEST_FD),
            OwnedFd::from_raw_fd(RESULT_FD),
        )
    };
    let mut req_file = File::from(req_fd);
    let mut out = File::from(res_fd);
    let same_build = std::env::args_os().nth(2).is_some_and(|b| b == BUILD);
    let reply = match read_request(&mut req_file) {
        Ok(_) if !same_build => (
            Reply::Refused(format!(
                "the jail helper {} is from another build of Warden than its caller",
                std::env::current_exe()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            )),
            Vec::new(),
            Vec::new(),
        ),
        Ok(req) => {
            // Where run groups go was arranged by our caller; the helper only looks.
            crate::cgroup::detect_only(req.cgroup_why.clone());
            let lifeline: BorrowedFd<'_> = req_file.as_fd();
            let link = req
                .policy
                .traced()
                .then(|| {
                    // SAFETY: `Jail::start` placed descriptor 5 for traced runs only, for us
                    // alone.
                    unsafe { OwnedFd::from_raw_fd(TRACE_FD) }
                })
                .map(File::from);
            let observer = match &link {
                Some(f) => match f.try_clone() {
                    Ok(sink) => Observer {
                        sink: Some(Box::new(std::io::BufWriter::new(sink))),
                        control: Some(f.as_fd()),
                    },
                    Err(_) => Observer::default(),
                },
                None => Observer::default(),
            };
            // The outcome goes out first; the run's cgroups are removed after it.
            crate::supervisor::replies_first();
            match supervise_with(&req, Some(lifeline), observer) {
                Ok(o) => {
                    let (stdout, stderr) = (o.stdout.clone(), o.stderr.clone());
                    (Reply::Outcome(Box::new(o)), stdout, stderr)
                }
                Err(e) => (error_reply(e), Vec::new(), Vec::new()),
            }
        }
        Err(why) => (Reply::Refused(why.to_owned()), Vec::new(), Vec::new()),
    };
    let json = serde_json::to_vec(&reply.0).unwrap_or_default();
    let sent = write_frame(&mut out, &json)
        .and_then(|()| write_frame(&mut out, &reply.1))
        .and_then(|()| write_frame(&mut out, &reply.2))
        .and_then(|()| out.flush());
    drop(out);
    crate::supervisor::after_reply();
    i32::from(sent.is_err())
}

fn read_request(r: &mut File) -> Result<Request, &'static str> {
    let json = read_frame(r, MAX_JSON_FRAME).map_err(|_| "request missing or too large")?;
    let mut req: Request = serde_json::from_slice(&json).map_err(|_| "request malformed")?;
    if !req.deferred {
        req.stdin = read_frame(r, MAX_STDIN).map_err(|_| "stdin missing or too large")?;
    }
    Ok(req)
}

fn error_reply(e: JailError) -> Reply {
    match e {
        JailError::Setup(f) => Reply::Failed(f),
        JailError::NotFound(p) => Reply::NotFound(p),
        JailError::NotExecutable { program, errno } => Reply::NotExecutable { program, errno },
        other => Reply::Refused(other.to_string()),
    }
}
