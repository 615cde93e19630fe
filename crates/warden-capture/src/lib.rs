//! The network boundary of a detonation.
//!
//! Everything the jail's network namespace sends is seen here, whatever syscall sent it:
//! [`tap`] reads every packet of the namespace's only interface, [`flow`] groups packets into
//! flows and puts what each initiator sent back in order, [`pcapng`] writes the session's
//! traffic for tshark or Wireshark, and [`tls`] opens TLS with an authority made for the run,
//! so the matcher reads what a client sent inside it. The jail's tracer keeps attribution
//! (which process, which window); this crate knows packets, flows and bytes only.

pub mod flow;
pub mod packet;
pub mod pcapng;
pub mod tap;
pub mod tls;

pub use flow::Flow;
pub use packet::Protocol;
pub use tap::{Config, Observer, Summary, Tap};
pub use tls::{Authority, Outcome};
