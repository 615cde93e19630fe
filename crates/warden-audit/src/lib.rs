//! `warden audit`: the MCP servers this machine's agent clients are configured with, found
//! ([`discover`]), turned into detonation targets the way each client would start them
//! ([`convert`]), judged in the chamber by `warden sweep`'s scheduler (never started on the
//! host), pinned between audits ([`pins`]) and reported ([`report`]: a table, JSON
//! `warden.audit/v1`, SARIF with one run per server, one HTML page); [`rewrite`] makes a
//! configuration whose servers run under `warden wrap`.
//!
//! Guarantees: no configured server is ever started outside a sandbox (every judged entry is a
//! `warden detonate` of its own); environment values from a configuration are never read into
//! anything (names only, with values of the chamber's own); a file that cannot be read is
//! reported beside the servers, never a reason to stop.

pub mod clients;
pub mod config;
pub mod convert;
pub mod discover;
pub mod pins;
pub mod report;
pub mod rewrite;
