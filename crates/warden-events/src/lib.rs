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

pub use recorder::{RESERVE, RESERVE_BYTES, RESERVED_KINDS, Recorder, Window, reserved};

/// Syscalls the C library and runtimes try on their own and fall back from when the sandbox
/// refuses them with `ENOSYS` (threads try `clone3`, libuv tries io_uring, file APIs try
/// `openat2`): probes, not behaviour. The `sandbox-violation` rule excludes the same list.
pub const FALLBACK_PROBES: [&str; 5] = [
    "clone3",
    "openat2",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
];
pub use vocabulary::{Basis, Category, Event, EventKind, Finding, Location, Severity, Verdict};
