//! Warden's shared vocabulary: what a traced sandbox reports ([`Event`]) and what the rules
//! conclude ([`Finding`], [`Category`], [`Severity`], [`Verdict`]).
//!
//! These are plain data with a stable JSON form (snake_case names, the event kinds as dotted
//! strings), shared by the tracer, the rules engine, the detonation harness and the reports.
//! [`Recorder`] collects events with sequential ids, times relative to the start of the run, the
//! attribution window each one happened in, and a hard cap (what is dropped is counted).

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod recorder;
mod vocabulary;

pub use recorder::{RESERVE, RESERVE_BYTES, Recorder, Window, reserved};
pub use vocabulary::{Category, Event, EventKind, Finding, Location, Severity, Verdict};
