//! Collecting events: sequential ids, times since the start of the run, the attribution window
//! open when each event happened, and a cap.
//!
//! The caller opens and closes named windows (`install`, `startup`, `tool_call:<id>`); every
//! event recorded while a window is open carries its name in `triggered_by`. Windows do not nest:
//! opening one closes the previous. Past the cap, events are counted and dropped, never stored,
//! so a flood from a sandboxed program cannot grow the recorder without bound.

use std::time::Instant;

use serde_json::Value;

use crate::{Event, EventKind};

/// Events of the reserved kinds (canaries, the end of the run, the harness's own protocol
/// events) accepted past the count cap.
pub const RESERVE: u64 = 10_000;
/// Bytes of reserved events accepted past the byte cap.
pub const RESERVE_BYTES: u64 = 16 << 20;

/// Whether events of `kind` have a reserve of their own past the caps (see [`RESERVE`]):
/// canary sightings, limits, the end of the run and the harness's own protocol events, so a
/// flood of ordinary events cannot push out the evidence that matters most, nor the record
/// that events were dropped. Every place that caps events (the tracer, the link that carries
/// them to the caller) applies the same reserve.
pub fn reserved(kind: EventKind) -> bool {
    RESERVED_KINDS.contains(&kind)
}

/// The kinds [`reserved`] keeps past the caps, for reports that say what was kept whole.
pub const RESERVED_KINDS: [EventKind; 12] = [
    EventKind::CanarySeen,
    EventKind::SandboxLimitHit,
    EventKind::SandboxExited,
    EventKind::McpInitialize,
    EventKind::McpToolList,
    EventKind::McpToolCall,
    EventKind::McpMetadataChanged,
    EventKind::McpTiming,
    EventKind::McpContent,
    EventKind::McpBehaviourChanged,
    EventKind::HarnessPayload,
    EventKind::InstallScript,
];
/// Bytes of event data kept or streamed per run, by default.
pub const DEFAULT_MAX_BYTES: u64 = 64 << 20;

/// A named attribution window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Window {
    /// Installing the package.
    Install,
    /// Starting the server, up to its first answer.
    Startup,
    /// One tool call, by the harness's call id.
    ToolCall(String),
}

impl Window {
    /// The name used in `triggered_by`.
    pub fn name(&self) -> String {
        match self {
            Window::Install => "install".into(),
            Window::Startup => "startup".into(),
            Window::ToolCall(id) => format!("tool_call:{id}"),
        }
    }
}

/// Collects the events of one run.
#[derive(Debug)]
pub struct Recorder {
    started: Instant,
    cap: usize,
    events: Vec<Event>,
    dropped: u64,
    window: Option<String>,
    /// Events numbered so far (kept or not).
    count: u64,
    /// Bytes of event data so far, and the most allowed.
    bytes: u64,
    max_bytes: u64,
    /// Whether events are kept in memory.
    keep: bool,
}

impl Recorder {
    /// Count `t_ms` from now (a run prepared ahead starts its clock with its command; call
    /// before the first event).
    pub fn restart_clock(&mut self) {
        self.started = Instant::now();
    }

    /// A recorder keeping at most `cap` events.
    pub fn new(cap: usize) -> Recorder {
        Recorder {
            started: Instant::now(),
            cap,
            events: Vec::new(),
            dropped: 0,
            window: None,
            count: 0,
            bytes: 0,
            max_bytes: DEFAULT_MAX_BYTES,
            keep: true,
        }
    }

    /// Open `w` (closing any open window).
    pub fn open(&mut self, w: &Window) {
        self.window = Some(w.name());
    }

    /// Open a window by its name (closing any open window).
    pub fn open_named(&mut self, name: String) {
        self.window = Some(name);
    }

    /// Close the open window.
    pub fn close(&mut self) {
        self.window = None;
    }

    /// Record an event; returns its id, or `None` when the cap dropped it.
    pub fn record(&mut self, kind: EventKind, pid: Option<i32>, data: Value) -> Option<u64> {
        self.stamp(kind, pid, data).map(|e| {
            let id = e.id;
            if self.keep {
                self.events.push(e);
            }
            id
        })
    }

    /// Like [`Recorder::record`], and hand back the event (for streaming it).
    pub fn record_event(
        &mut self,
        kind: EventKind,
        pid: Option<i32>,
        data: Value,
    ) -> Option<Event> {
        let e = self.stamp(kind, pid, data)?;
        if self.keep {
            self.events.push(e.clone());
        }
        Some(e)
    }

    /// Number, time and window for a new event, counting it against the caps. Canary
    /// sightings, limits and the end of the run have a reserve of their own beyond the count
    /// cap, so a flood of ordinary events cannot push them out.
    fn stamp(&mut self, kind: EventKind, pid: Option<i32>, data: Value) -> Option<Event> {
        let reserved = reserved(kind);
        let limit = self.cap as u64 + if reserved { RESERVE } else { 0 };
        let size = data.to_string().len() as u64;
        if self.count >= limit
            || self.bytes + size > self.max_bytes + if reserved { RESERVE_BYTES } else { 0 }
        {
            self.dropped += 1;
            return None;
        }
        self.bytes += size;
        self.count += 1;
        let t_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        Some(Event {
            id: self.count,
            t_ms,
            kind,
            pid,
            triggered_by: self.window.clone(),
            data,
        })
    }

    /// Set the byte cap on event data.
    pub fn max_bytes(&mut self, bytes: u64) {
        self.max_bytes = bytes;
    }

    /// Stop keeping events (they are streamed elsewhere); ids, times and the cap still apply.
    pub fn stream_only(&mut self) {
        self.keep = false;
        self.events.clear();
    }

    /// The open window's name.
    pub fn window(&self) -> Option<&str> {
        self.window.as_deref()
    }

    /// Events dropped at the cap.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The events, in order.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Take the events out.
    pub fn into_events(self) -> (Vec<Event>, u64) {
        (self.events, self.dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_windows_and_the_cap() {
        let mut r = Recorder::new(3);
        assert_eq!(
            r.record(EventKind::SandboxStarted, None, json!({})),
            Some(1)
        );
        r.open(&Window::ToolCall("7".into()));
        assert_eq!(
            r.record(EventKind::ProcessSpawn, Some(2), json!({"argv": ["sh"]})),
            Some(2)
        );
        r.open(&Window::Startup);
        r.record(EventKind::FileOpen, Some(2), json!({}));
        r.close();
        assert_eq!(r.record(EventKind::NetDns, None, json!({})), None);
        assert_eq!(r.dropped(), 1);
        let e = r.events();
        assert_eq!(e[0].triggered_by, None);
        assert_eq!(e[1].triggered_by.as_deref(), Some("tool_call:7"));
        assert_eq!(e[2].triggered_by.as_deref(), Some("startup"));
        assert!(
            e.windows(2)
                .all(|w| w[0].t_ms <= w[1].t_ms && w[0].id + 1 == w[1].id)
        );
    }

    #[test]
    fn reserved_kinds_and_the_byte_cap() {
        let mut r = Recorder::new(2);
        r.record(EventKind::FileOpen, None, json!({}));
        r.record(EventKind::FileOpen, None, json!({}));
        assert_eq!(r.record(EventKind::FileOpen, None, json!({})), None);
        assert_eq!(r.record(EventKind::CanarySeen, None, json!({})), Some(3));
        assert_eq!(r.record(EventKind::SandboxExited, None, json!({})), Some(4));
        let mut r = Recorder::new(100);
        r.max_bytes(100);
        assert!(
            r.record(
                EventKind::ProcessSpawn,
                None,
                json!({"argv": "x".repeat(80)})
            )
            .is_some()
        );
        assert_eq!(
            r.record(
                EventKind::ProcessSpawn,
                None,
                json!({"argv": "x".repeat(80)})
            ),
            None
        );
        assert_eq!(r.dropped(), 1);
    }
}
