//! The `warden` binary's integration tests: one test binary (link time matters on 2 cores),
//! one module per area under `suite/`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
