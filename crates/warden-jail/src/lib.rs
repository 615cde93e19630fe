//! Warden's native Linux sandbox.
//!
//! A [`Policy`] and a command go in; the command runs as an unprivileged user in fresh user,
//! mount, pid, network, IPC, UTS and cgroup namespaces, on a minimal read-only root with a
//! read-write `/workspace`, under Landlock, a seccomp filter, rlimits and cgroup limits, with no
//! capabilities, no controlling terminal, no inherited descriptors and no inherited environment.
//! An [`Outcome`] comes out, built from what the kernel reports.
//!
//! Two ways to run:
//! - [`supervise`] in the current process, which must be single-threaded (`warden run`);
//! - [`Jail`], which re-executes a helper binary, for multi-threaded callers: [`Jail::run`]
//!   captures output, [`Jail::spawn`] gives pipes to a long-lived child.
//!
//! Process layout: supervisor (host) → init (pid 1 of the jail, reaps, holds no privilege once
//! the command starts) → command. The tree dies with the init, the init dies with the
//! supervisor, and the supervisor kills the init when a limit is hit, when the caller's lifeline
//! closes or when it gets SIGINT/SIGTERM/SIGHUP.

#![deny(missing_docs)]

pub mod abandoned;
pub mod blockers;
mod cgroup;
mod child;
pub mod error;
mod helper_process;
mod idmap;
mod init;
mod landlock;
mod mounts;
pub mod outcome;
pub mod persona;
pub mod policy;
pub mod procfs;
pub mod protect;
mod protocol;
pub mod runtime;
pub mod seccomp;
mod spawn;
mod stdio;
mod supervisor;
mod sys;
pub mod trace;
pub mod warm;

pub use cgroup::{Delegation, establish as arrange_cgroups};
pub use error::{JailError, SetupFailure, Stage};
pub use idmap::{give_tmpfs_to_jail_user, tmpfs_can_idmap};
pub use mounts::RootSwitch;
pub use outcome::{Enforcement, LandlockReport, LimitKind, Mechanism, Outcome, Usage};
pub use policy::{Bind, LandlockMode, Limits, NetworkMode, Policy, PolicyError, Tmpfs};
pub use spawn::{
    BUILD, HELPER_ARG, HELPER_BIN, Jail, Killer, Running, SELF_EXE, TraceLink, Warm, helper_main,
};
pub use supervisor::{IoMode, Observer, Request, supervise, supervise_with};
pub use trace::Sink;
pub use trace::prepare::TOOLS_MOUNT;
pub use warden_trace;
pub use warden_trace::DnsMode;
