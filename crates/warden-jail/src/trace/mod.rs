//! Behavioural tracing of a jailed tree: what it really does, from the kernel's point of view.
//!
//! Three observers feed one [`Hub`]:
//! - [`notify`]: the jail's seccomp filter stops the observed syscalls (exec, open, delete,
//!   rename, mkdir, chmod, connect, bind, listen, addressed sends, exit) and the denied ones;
//!   the tracer reads their arguments from the stopped task and lets them go on (or, for a
//!   denial, fails them with the deny list's errno).
//! - [`net`]: a thread living in the jail's network namespace answers DNS on 127.0.0.53 from a
//!   fake address range, routes every address to loopback and accepts connections to whatever
//!   destination a program asked for, recording the first bytes it sends. No packet leaves the
//!   namespace.
//! - [`egress`]: when the policy allowlists host names, connections to the fake addresses of
//!   those names (and only those) are forwarded to the real hosts from the supervisor's side.
//! - the supervisor, which scans the command's output for canaries and adds limits and the
//!   exit.
//!
//! The hub numbers events, stamps them with the open attribution window and streams them (JSON
//! lines) to the caller's sink as they happen; it keeps at most a fixed number of events and
//! counts the rest. Repeats are kept once and counted (`events_repeated` at the end of the
//! run): an event identical to one already kept in the same window (same kind, process and
//! data), and a read of a file of the read-only system tree (`/usr/lib`, `/lib`,
//! `/usr/share`…) already kept anywhere in the run (a fallback probe such as `clone3` counts
//! as the same whatever its pointer arguments). A browser or an interpreter started once
//! per tool call otherwise fills the cap with the same library loads and thread probes, and
//! pushes out what each call did that differs. Reserved kinds (canaries, the end of the run,
//! the harness's events) are never folded. With decoys on, every byte it is shown is also searched for the run's
//! canaries, and each find becomes a `canary.seen` event.

pub mod boundary;
pub mod clock;
pub mod egress;
pub mod identity;
pub mod links;
pub mod net;
mod netlink;
pub mod notify;
pub mod park;
pub mod prepare;
pub mod refuse;
pub mod route;
pub mod targets;

use std::io::Write;
use std::sync::Mutex;

use serde_json::{Value, json};
use warden_events::{Event, EventKind, Recorder};
use warden_trace::Canaries;

/// Bytes of a canary scan carried over between chunks of a stream, so a canary split across
/// two reads is still found.
const SCAN_OVERLAP: usize = 512;

/// Where events go while the run lasts (JSON lines), besides the outcome.
pub type Sink = Box<dyn Write + Send>;

/// The shared collector of one run's events.
pub struct Hub {
    state: Mutex<State>,
    canaries: Option<Canaries>,
    /// The run's boundary capture, as asked for.
    capture: net::Capture,
    /// The planted decoy files, by device and inode.
    decoy_ids: Vec<identity::DecoyId>,
    /// The run's virtual clock (when the interposer is there to read it).
    clock: Option<std::sync::Arc<clock::Clock>>,
}

struct State {
    recorder: Recorder,
    sink: Option<Sink>,
    /// The id kept for each repeat key (see [`repeat_key`]), at most [`MAX_REPEAT_KEYS`].
    kept: std::collections::HashMap<u64, u64>,
    /// Events folded into one kept before them.
    repeated: u64,
    /// Keys of this run's own (random) hashing, so a program cannot work out offline an event
    /// that would pass for one already kept.
    hasher: std::collections::hash_map::RandomState,
}

/// Repeat keys remembered per run, at most (past that, events are kept as they come).
const MAX_REPEAT_KEYS: usize = 200_000;
/// Folders of the read-only system tree whose reads are kept once per run.
const SYSTEM_TREE: &[&str] = &[
    "/usr/lib/",
    "/usr/lib32/",
    "/usr/lib64/",
    "/usr/libexec/",
    "/usr/share/",
    "/usr/bin/",
    "/usr/sbin/",
    "/lib/",
    "/lib32/",
    "/lib64/",
    "/bin/",
    "/sbin/",
];

/// Folders of installed packages and package caches in the jail's writable space: an install
/// writes (and renames into place) thousands of files there, and a runtime imports thousands
/// from there. Plain reads, writes, renames into and deletes within them are kept once per
/// folder, window, process and kind: the first file's event stands for its folder, and
/// `events_repeated` counts the rest. The path is the tracer's resolved one, so a link planted
/// there that leads to a decoy is recorded under the decoy's path and never folded here.
const PACKAGE_TREES: &[&str] = &[
    "/workspace/venv/",
    "/workspace/.venv/",
    "/workspace/node_modules/",
    "/workspace/src/node_modules/",
];

/// The package managers' caches in the decoy home, relative to it: package trees too.
const HOME_PACKAGE_TREES: &[&str] = &[".npm/_cacache/", ".cache/pip/", ".cache/uv/"];

/// The folder of `path` when it lies in a [`PACKAGE_TREES`] folder and names no `.` or `..`.
fn package_folder(path: &str) -> Option<&str> {
    if path.contains("/../") || path.contains("/./") || path.ends_with("/..") {
        return None;
    }
    let in_home = path
        .strip_prefix(crate::persona::home())
        .and_then(|rest| rest.strip_prefix('/'))
        .is_some_and(|rest| HOME_PACKAGE_TREES.iter().any(|t| rest.starts_with(t)));
    (in_home || PACKAGE_TREES.iter().any(|t| path.starts_with(t)))
        .then(|| path.rsplit_once('/').map_or(path, |(dir, _)| dir))
}

/// What makes an event a repeat of one already kept: for a plain read of a file of the system
/// tree, its data alone (one per run); for a plain read, write, delete or rename into a
/// package folder ([`PACKAGE_TREES`]), its folder, window, process and kind; for any other
/// event that is not of a reserved kind, its window, kind, process and data. `None`: never
/// folded.
fn repeat_key(
    hasher: &std::collections::hash_map::RandomState,
    kind: EventKind,
    pid: Option<i32>,
    data: &Value,
    window: Option<&str>,
) -> Option<u64> {
    use std::hash::{BuildHasher, Hash, Hasher};
    // What a process is running is never folded: a later exec of the same program is news to
    // whoever tracks the pid.
    if warden_events::reserved(kind) || kind == EventKind::ProcessSpawn {
        return None;
    }
    let mut h = hasher.build_hasher();
    // Only a path the program gave as it is: one rewritten from `..` (`raw_path`) may have gone
    // through a symbolic link of the program's own on the way.
    let system_read = kind == EventKind::FileOpen
        && data["access"] == "read"
        && data["create"] != true
        && data.get("raw_path").is_none()
        && data["path"].as_str().is_some_and(|p| {
            !p.contains("/../")
                && !p.contains("/./")
                && SYSTEM_TREE.iter().any(|d| p.starts_with(d))
        });
    // Where a write, delete or rename lands (a rename by its destination).
    let landing = match kind {
        EventKind::FileWrite | EventKind::FileDelete => data["path"].as_str(),
        EventKind::FileRename => data["to"].as_str(),
        EventKind::FileOpen if data["access"] == "read" && data["create"] != true => {
            data["path"].as_str()
        }
        _ => None,
    };
    let folder = landing
        .filter(|_| data.get("raw_path").is_none())
        .and_then(package_folder);
    if system_read {
        "system-read".hash(&mut h);
    } else if let Some(folder) = folder {
        "package-folder".hash(&mut h);
        window.hash(&mut h);
        pid.hash(&mut h);
        kind.hash(&mut h);
        folder.hash(&mut h);
        return Some(h.finish());
    } else {
        window.hash(&mut h);
        pid.hash(&mut h);
    }
    kind.hash(&mut h);
    // A fallback probe's arguments are pointers (a new stack each thread): the call is the
    // same probe whatever they are.
    let probe = kind == EventKind::SandboxDenied
        && data["syscall"]
            .as_str()
            .is_some_and(|s| warden_events::FALLBACK_PROBES.contains(&s));
    if probe {
        hash_json(&data["syscall"], &mut h);
    } else {
        hash_json(data, &mut h);
    }
    Some(h.finish())
}

/// Feed `v`'s JSON text to `h` as it is written (no string is built on this hot path).
fn hash_json(v: &Value, h: &mut impl std::hash::Hasher) {
    struct Feed<'a, H>(&'a mut H);
    impl<H: std::hash::Hasher> std::io::Write for Feed<'_, H> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.write(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let _ = serde_json::to_writer(Feed(h), v);
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("canaries", &self.canaries.as_ref().map(|c| c.list().len()))
            .finish_non_exhaustive()
    }
}

impl Hub {
    /// A hub keeping at most `cap` events; with a sink, events are streamed and not kept.
    pub fn new(cap: usize, sink: Option<Sink>, canaries: Option<Canaries>) -> Hub {
        let mut recorder = Recorder::new(cap);
        if sink.is_some() {
            recorder.stream_only();
        }
        Hub {
            state: Mutex::new(State {
                recorder,
                sink,
                kept: std::collections::HashMap::new(),
                repeated: 0,
                hasher: std::collections::hash_map::RandomState::new(),
            }),
            canaries,
            capture: net::Capture::default(),
            decoy_ids: Vec::new(),
            clock: None,
        }
    }

    /// The same hub, with the run's virtual clock.
    #[must_use]
    pub fn with_clock(mut self, clock: Option<std::sync::Arc<clock::Clock>>) -> Hub {
        self.clock = clock;
        self
    }

    /// Run the traced programs' clocks at `rate` from now on (see [`clock`]); the lead they
    /// have then, in milliseconds (`None` without a clock, or when the switch failed).
    pub fn set_rate(&self, rate: f64) -> Option<i64> {
        let clock = self.clock.as_ref()?;
        match clock.set_rate(rate) {
            Ok(_) => Some(clock.ahead_ms()),
            Err(e) => {
                tracing::warn!(error = %e, "the run's clock could not be switched");
                None
            }
        }
    }

    /// The same hub, knowing the planted files by identity.
    #[must_use]
    pub fn with_decoy_ids(mut self, ids: Vec<identity::DecoyId>) -> Hub {
        self.decoy_ids = ids;
        self
    }

    /// The planted files, by device and inode.
    pub fn decoy_ids(&self) -> &[identity::DecoyId] {
        &self.decoy_ids
    }

    /// The same hub, with the boundary capture `capture` for its network.
    #[must_use]
    pub fn with_capture(mut self, capture: net::Capture) -> Hub {
        self.capture = capture;
        self
    }

    /// The boundary capture asked for.
    pub fn capture(&self) -> &net::Capture {
        &self.capture
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Record (and stream) an event; its id (a repeat's: the id of the event kept for it),
    /// unless the cap dropped it.
    pub fn record(&self, kind: EventKind, pid: Option<i32>, data: Value) -> Option<u64> {
        let mut s = self.lock();
        Self::record_locked(&mut s, kind, pid, data)
    }

    /// Like [`Hub::record`], attributed to `window` (the window that was open when what the
    /// event reports began: a TLS connection read on a thread of its own may end after the
    /// caller moved on) rather than the one open now.
    pub fn record_in(
        &self,
        window: Option<String>,
        kind: EventKind,
        pid: Option<i32>,
        data: Value,
    ) -> Option<u64> {
        let mut s = self.lock();
        let now = s.recorder.window().map(str::to_owned);
        if now == window {
            return Self::record_locked(&mut s, kind, pid, data);
        }
        match &window {
            Some(w) => s.recorder.open_named(w.clone()),
            None => s.recorder.close(),
        }
        let id = Self::record_locked(&mut s, kind, pid, data);
        match now {
            Some(w) => s.recorder.open_named(w),
            None => s.recorder.close(),
        }
        id
    }

    fn record_locked(
        s: &mut std::sync::MutexGuard<'_, State>,
        kind: EventKind,
        pid: Option<i32>,
        data: Value,
    ) -> Option<u64> {
        let key = repeat_key(&s.hasher, kind, pid, &data, s.recorder.window());
        if let Some(id) = key.and_then(|k| s.kept.get(&k).copied()) {
            s.repeated += 1;
            return Some(id);
        }
        let event = s.recorder.record_event(kind, pid, data)?;
        if let Some(k) = key
            && s.kept.len() < MAX_REPEAT_KEYS
        {
            s.kept.insert(k, event.id);
        }
        if let Some(sink) = s.sink.as_mut() {
            write_line(sink, &event);
        }
        Some(event.id)
    }

    /// Count the events' `t_ms` from now (see [`Recorder::restart_clock`]).
    pub fn restart_clock(&self) {
        self.lock().recorder.restart_clock();
    }

    /// Events folded into one kept before them, so far.
    pub fn repeated(&self) -> u64 {
        self.lock().repeated
    }

    /// Open the window `name` (or close the open one with `None`), then tell the sink, whose
    /// reader learns that every later event belongs to the new window (its name cut to 200
    /// characters); `seq` is the caller's request number, carried back in the acknowledgement
    /// with `cpu_ms`, the CPU time the run has used so far (when its cgroup counts it), so the
    /// caller can tell what each window cost.
    pub fn set_window(&self, name: Option<String>, seq: Option<u64>, cpu_ms: Option<u64>) {
        // Names come from the caller: 200 characters at most.
        let name: Option<String> = name.map(|n| n.chars().take(200).collect());
        let mut s = self.lock();
        match &name {
            Some(n) => s.recorder.open_named(n.clone()),
            None => s.recorder.close(),
        }
        // The clocks' rate in force, so a caller that asked for one knows it took.
        let rate = self.clock.as_ref().map(|c| c.rate());
        if let Some(sink) = s.sink.as_mut() {
            let _ = serde_json::to_writer(
                &mut *sink,
                &json!({ "ack": name, "seq": seq, "cpu_ms": cpu_ms, "rate": rate }),
            );
            let _ = sink.write_all(b"\n");
            let _ = sink.flush();
        }
    }

    /// The attribution window open now.
    pub fn window(&self) -> Option<String> {
        self.lock().recorder.window().map(str::to_owned)
    }

    /// Write a control line (not an event) to the sink.
    pub fn announce(&self, line: &Value) {
        let mut s = self.lock();
        if let Some(sink) = s.sink.as_mut() {
            let _ = serde_json::to_writer(&mut *sink, line);
            let _ = sink.write_all(b"\n");
            let _ = sink.flush();
        }
    }

    /// Push buffered events out to the sink (the supervisor calls this on every wake-up, so
    /// events reach the sink within one tick).
    pub fn flush(&self) {
        if let Some(sink) = self.lock().sink.as_mut() {
            let _ = sink.flush();
        }
    }

    /// The run's canaries, when decoys are on.
    pub fn canaries(&self) -> Option<&Canaries> {
        self.canaries.as_ref()
    }

    /// Search `bytes` for canaries; record one `canary.seen` per find, with `context` (which
    /// says where the bytes were seen) merged into its data. Returns the event ids.
    pub fn scan(&self, bytes: &[u8], pid: Option<i32>, context: &Value) -> Vec<u64> {
        self.scan_in(self.window(), bytes, pid, context)
    }

    /// Like [`Hub::scan`], its sightings attributed to `window` (see [`Hub::record_in`]).
    pub fn scan_in(
        &self,
        window: Option<String>,
        bytes: &[u8],
        pid: Option<i32>,
        context: &Value,
    ) -> Vec<u64> {
        let Some(c) = &self.canaries else {
            return Vec::new();
        };
        c.find(bytes)
            .into_iter()
            .filter_map(|hit| {
                let mut data = json!({ "planted": hit.planted, "encoding": hit.encoding });
                merge(&mut data, context);
                self.record_in(window.clone(), EventKind::CanarySeen, pid, data)
            })
            .collect()
    }

    /// Like [`Hub::scan`] for a DNS name (labels joined).
    pub fn scan_name(&self, name: &str, pid: Option<i32>, context: &Value) -> Vec<u64> {
        let joined: String = name.chars().filter(|c| *c != '.').collect();
        self.scan(joined.as_bytes(), pid, context)
    }

    /// Events dropped at the caps so far.
    pub fn dropped(&self) -> u64 {
        self.lock().recorder.dropped()
    }

    /// The events kept and the number dropped.
    pub fn take(&self) -> (Vec<Event>, u64) {
        let mut s = self.lock();
        let dropped = s.recorder.dropped();
        let rec = std::mem::replace(&mut s.recorder, Recorder::new(0));
        let (events, _) = rec.into_events();
        if let Some(sink) = s.sink.as_mut() {
            let _ = sink.flush();
        }
        (events, dropped)
    }
}

fn write_line(sink: &mut Sink, event: &Event) {
    let _ = serde_json::to_writer(&mut *sink, event);
    let _ = sink.write_all(b"\n");
}

fn merge(into: &mut Value, from: &Value) {
    if let (Some(a), Some(b)) = (into.as_object_mut(), from.as_object()) {
        for (k, v) in b {
            a.insert(k.clone(), v.clone());
        }
    }
}

/// Canary scanning of a byte stream read in chunks (the command's stdout or stderr): a canary
/// split across two reads is still found, and each canary is reported once per stream.
#[derive(Debug, Default)]
pub struct StreamScan {
    tail: Vec<u8>,
    reported: std::collections::HashSet<(String, warden_trace::Form)>,
}

impl StreamScan {
    /// Scan the next chunk of the stream `name`.
    pub fn feed(&mut self, hub: &Hub, name: &str, chunk: &[u8]) {
        let Some(c) = hub.canaries() else { return };
        if chunk.is_empty() {
            return;
        }
        let mut window = std::mem::take(&mut self.tail);
        window.extend_from_slice(chunk);
        for hit in c.find(&window) {
            // The user's text given back in the server's answers is not a leak: the argument
            // canary is followed where it leaves, not to the caller.
            if warden_trace::is_argument(&hit.planted) {
                continue;
            }
            if self.reported.insert((hit.planted.clone(), hit.encoding)) {
                let data = json!({
                    "planted": hit.planted,
                    "encoding": hit.encoding,
                    "where": "output",
                    "stream": name,
                });
                hub.record(EventKind::CanarySeen, None, data);
            }
        }
        let keep = window.len().min(SCAN_OVERLAP);
        self.tail = window[window.len() - keep..].to_vec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(path: &str) -> Value {
        json!({ "op": "open", "path": path, "access": "read", "create": false })
    }

    #[test]
    fn an_event_recorded_in_an_earlier_window_leaves_the_open_one_open() {
        let hub = Hub::new(100, None, None);
        hub.set_window(Some("tool_call:1".into()), None, None);
        hub.set_window(Some("tool_call:2".into()), None, None);
        hub.record_in(
            Some("tool_call:1".into()),
            EventKind::TlsRefused,
            None,
            json!({ "a": 1 }),
        );
        hub.record(EventKind::NetFlow, None, json!({ "b": 2 }));
        let (events, _) = hub.take();
        assert_eq!(events[0].triggered_by.as_deref(), Some("tool_call:1"));
        assert_eq!(events[1].triggered_by.as_deref(), Some("tool_call:2"));
    }

    #[test]
    fn repeats_are_kept_once_and_counted() {
        let hub = Hub::new(100, None, None);
        hub.set_window(Some("tool_call:1".into()), None, None);
        let a = hub.record(
            EventKind::FileOpen,
            Some(7),
            open("/home/sandbox/.ssh/id_rsa"),
        );
        // The same read by the same process in the same window: folded into the first.
        let b = hub.record(
            EventKind::FileOpen,
            Some(7),
            open("/home/sandbox/.ssh/id_rsa"),
        );
        assert_eq!(a, b);
        // Another process, or a write, is another event.
        let c = hub.record(
            EventKind::FileOpen,
            Some(8),
            open("/home/sandbox/.ssh/id_rsa"),
        );
        assert_ne!(a, c);
        let lib = hub.record(
            EventKind::FileOpen,
            Some(7),
            open("/usr/lib/x86_64-linux-gnu/libz.so.1"),
        );
        // A path rewritten from `..` is not the system tree's, nor is a new program's start.
        let mut climbed = open("/usr/lib/x86_64-linux-gnu/libz.so.1");
        climbed["raw_path"] = json!("/tmp/L/../../usr/lib/x86_64-linux-gnu/libz.so.1");
        assert_ne!(hub.record(EventKind::FileOpen, Some(7), climbed), lib);
        let exec = || {
            hub.record(
                EventKind::ProcessSpawn,
                Some(7),
                json!({ "path": "/bin/sh" }),
            )
        };
        assert_ne!(exec(), exec());
        let probe = |ptr: u64| json!({ "syscall": "clone3", "args": [ptr, 88, 0], "errno": 38 });
        let p1 = hub.record(EventKind::SandboxDenied, Some(7), probe(1));
        assert_eq!(hub.record(EventKind::SandboxDenied, Some(7), probe(2)), p1);
        let unshare = |flags: u64| json!({ "syscall": "unshare", "args": [flags] });
        let u1 = hub.record(EventKind::SandboxDenied, Some(7), unshare(1));
        assert_ne!(
            hub.record(EventKind::SandboxDenied, Some(7), unshare(2)),
            u1
        );
        // The next call: its own reads are its own, a system library is not read anew.
        hub.set_window(Some("tool_call:2".into()), None, None);
        let d = hub.record(
            EventKind::FileOpen,
            Some(7),
            open("/home/sandbox/.ssh/id_rsa"),
        );
        assert_ne!(a, d);
        assert_eq!(
            hub.record(
                EventKind::FileOpen,
                Some(9),
                open("/usr/lib/x86_64-linux-gnu/libz.so.1")
            ),
            lib
        );
        // An install's thousands of files in a package folder: one event per folder, window,
        // process and kind; another folder, a climbing path or the home is its own event.
        hub.set_window(Some("install".into()), None, None);
        let w = |p: &str| json!({ "op": "open", "path": p, "access": "write", "create": true });
        let first = hub.record(
            EventKind::FileWrite,
            Some(7),
            w("/workspace/venv/lib/python3.11/site-packages/x/a.py"),
        );
        assert_eq!(
            hub.record(
                EventKind::FileWrite,
                Some(7),
                w("/workspace/venv/lib/python3.11/site-packages/x/b.py")
            ),
            first
        );
        assert_ne!(
            hub.record(
                EventKind::FileWrite,
                Some(7),
                w("/workspace/venv/lib/python3.11/site-packages/y/a.py")
            ),
            first
        );
        assert_ne!(
            hub.record(
                EventKind::FileWrite,
                Some(7),
                w("/workspace/venv/lib/../../../home/sandbox/.bashrc")
            ),
            first
        );
        let bashrc = hub.record(EventKind::FileWrite, Some(7), w("/home/sandbox/.bashrc"));
        assert_ne!(
            hub.record(EventKind::FileWrite, Some(7), w("/home/sandbox/.profile")),
            bashrc
        );
        let mv = |to: &str| json!({ "from": "/workspace/venv/tmp1", "to": to });
        let r1 = hub.record(
            EventKind::FileRename,
            Some(7),
            mv("/workspace/node_modules/a/x.js"),
        );
        assert_eq!(
            hub.record(
                EventKind::FileRename,
                Some(7),
                mv("/workspace/node_modules/a/y.js")
            ),
            r1
        );
        assert_ne!(
            hub.record(EventKind::FileRename, Some(7), mv("/home/sandbox/.bashrc")),
            r1
        );
        // Reserved kinds are never folded; paths that climb are never the system tree.
        let end = || hub.record(EventKind::SandboxExited, None, json!({ "exit_code": 0 }));
        assert_ne!(end(), end());
        let climb = open("/usr/lib/../../home/sandbox/.aws/credentials");
        let e1 = hub.record(EventKind::FileOpen, Some(1), climb.clone());
        hub.set_window(Some("tool_call:3".into()), None, None);
        assert_ne!(hub.record(EventKind::FileOpen, Some(1), climb), e1);
        assert_eq!(
            hub.repeated(),
            5,
            "three before, and two in the package folders"
        );
    }
}
