//! What Warden's tracer needs besides syscalls: canary tokens and their matcher, the decoy home
//! and canary environment, the DNS stub's codec and fake address range, sniffing of captured
//! connections (TLS SNI, HTTP request line), the framing of the HTTP requests on one
//! connection, the environment-read interposers and the virtual clock they carry.
//!
//! Everything here is pure logic over bytes the sandboxed program controls: it is bounded,
//! never panics on malformed input (property-tested) and does no I/O of its own. The jail
//! (`warden-jail`) does the system side: seccomp notifications, the network namespace, files.

pub mod agents;
pub mod canary;
pub mod clock;
pub mod decoys;
pub mod dns;
pub mod hosts;
pub mod imds;
pub mod interposer;
pub mod requests;
pub mod sniff;

pub use canary::{Canaries, Canary, Form, Hit, Reported};
pub use decoys::{DecoyFile, Decoys, is_argument, is_configured};
pub use dns::{DnsMode, Query, SplitNames, Stub, questions};
pub use sniff::{Sniffed, sniff};
