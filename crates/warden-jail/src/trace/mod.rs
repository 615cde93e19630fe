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
//! counts the rest. With decoys on, every byte it is shown is also searched for the run's
//! canaries, and each find becomes a `canary.seen` event.

pub mod egress;
pub mod net;
mod netlink;
pub mod notify;
pub mod park;
pub mod prepare;
pub mod refuse;
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
}

struct State {
    recorder: Recorder,
    sink: Option<Sink>,
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
            state: Mutex::new(State { recorder, sink }),
            canaries,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Record (and stream) an event; its id, unless the cap dropped it.
    pub fn record(&self, kind: EventKind, pid: Option<i32>, data: Value) -> Option<u64> {
        let mut s = self.lock();
        let event = s.recorder.record_event(kind, pid, data)?;
        if let Some(sink) = s.sink.as_mut() {
            write_line(sink, &event);
        }
        Some(event.id)
    }

    /// Open the window `name` (or close the open one with `None`), then tell the sink, whose
    /// reader learns that every later event belongs to the new window (its name cut to 200
    /// characters); `seq` is the caller's
    /// request number, carried back in the acknowledgement.
    pub fn set_window(&self, name: Option<String>, seq: Option<u64>) {
        // Names come from the caller: 200 characters at most.
        let name: Option<String> = name.map(|n| n.chars().take(200).collect());
        let mut s = self.lock();
        match &name {
            Some(n) => s.recorder.open_named(n.clone()),
            None => s.recorder.close(),
        }
        if let Some(sink) = s.sink.as_mut() {
            let _ = serde_json::to_writer(&mut *sink, &json!({ "ack": name, "seq": seq }));
            let _ = sink.write_all(b"\n");
            let _ = sink.flush();
        }
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
        let Some(c) = &self.canaries else {
            return Vec::new();
        };
        c.find(bytes)
            .into_iter()
            .filter_map(|hit| {
                let mut data = json!({ "planted": hit.planted, "encoding": hit.encoding });
                merge(&mut data, context);
                self.record(EventKind::CanarySeen, pid, data)
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
