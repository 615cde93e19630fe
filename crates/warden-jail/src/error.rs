//! Errors of the jail, typed, including failures that happen in the sandbox's own set-up
//! processes and cross a pipe to reach the caller.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::policy::PolicyError;

/// The set-up step that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// The supervisor itself (pipes, clone, polling).
    Supervisor,
    /// Writing the user namespace's id maps.
    IdMap,
    /// Preparing or attaching mounts, pivoting into the new root.
    Mounts,
    /// Bringing up loopback or other network set-up.
    Network,
    /// Host name, cgroup namespace and other namespace tweaks.
    Namespaces,
    /// Changing ids or dropping capabilities.
    Credentials,
    /// Resource limits.
    Rlimits,
    /// Landlock.
    Landlock,
    /// The seccomp filter.
    Seccomp,
    /// Wiring stdin/stdout/stderr.
    Stdio,
    /// `execve` of the command.
    Exec,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        f.write_str(&s)
    }
}

/// A set-up failure reported by one of the sandbox's processes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Error)]
#[error("{stage}: {detail}{}", errno.map(|e| format!(" ({})", nix::errno::Errno::from_raw(e).desc())).unwrap_or_default())]
pub struct SetupFailure {
    /// Where it failed.
    pub stage: Stage,
    /// The errno, when a syscall failed.
    pub errno: Option<i32>,
    /// What was being done.
    pub detail: String,
}

impl SetupFailure {
    /// A failure at `stage` doing `detail`, with the syscall's errno.
    pub fn errno(stage: Stage, detail: impl Into<String>, errno: nix::errno::Errno) -> Self {
        SetupFailure {
            stage,
            errno: Some(errno as i32),
            detail: detail.into(),
        }
    }
    /// A failure without an errno.
    pub fn plain(stage: Stage, detail: impl Into<String>) -> Self {
        SetupFailure {
            stage,
            errno: None,
            detail: detail.into(),
        }
    }
    /// The same from an I/O error.
    pub fn io(stage: Stage, detail: impl Into<String>, e: &std::io::Error) -> Self {
        SetupFailure {
            stage,
            errno: e.raw_os_error(),
            detail: detail.into(),
        }
    }
}

/// Everything that can go wrong starting or supervising a jailed command.
#[derive(Debug, Error)]
pub enum JailError {
    /// The policy was refused.
    #[error("invalid policy")]
    Policy(#[from] PolicyError),
    /// The command line was empty or had a NUL byte.
    #[error("invalid command line: {0}")]
    BadCommand(&'static str),
    /// The program was not found in the jail's PATH.
    #[error("command not found in the sandbox: {0}")]
    NotFound(String),
    /// The program exists but cannot be executed.
    #[error("cannot execute {program} in the sandbox: {}", nix::errno::Errno::from_raw(*errno).desc())]
    NotExecutable {
        /// The program.
        program: String,
        /// Why.
        errno: i32,
    },
    /// Set-up failed inside one of the sandbox's processes.
    #[error("sandbox set-up failed")]
    Setup(#[source] SetupFailure),
    /// Set-up must run in a single-threaded process.
    #[error("the jail must be started from a single-threaded process (use the helper)")]
    MultiThreaded,
    /// The helper executable could not be started.
    #[error("starting the jail helper {path:?}")]
    Helper {
        /// The helper.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The helper broke the protocol (died, or sent something malformed).
    #[error("the jail helper {0}")]
    Protocol(&'static str),
}

impl JailError {
    /// The error with its causes on one line, and the fixing setting when Warden knows it
    /// (`…; fix: …`): what a caller shows a person.
    pub fn explain(&self) -> String {
        let mut text = self.to_string();
        let mut source = std::error::Error::source(self);
        while let Some(s) = source {
            text.push_str(": ");
            text.push_str(&s.to_string());
            source = s.source();
        }
        if let Some(hint) = self.hint() {
            text.push_str("; fix: ");
            text.push_str(&hint);
        }
        text
    }

    /// What would make this work, when Warden knows: the setting that unblocks the sandbox on
    /// this machine (see [`crate::blockers`]), or the `--ro-bind` that shows a program the
    /// jail does not (see [`crate::runtime`]).
    pub fn hint(&self) -> Option<String> {
        match self {
            JailError::Setup(f) => crate::blockers::hint(f, &crate::blockers::Host::probe()),
            JailError::NotFound(program) => {
                let host = crate::runtime::on_host(program)?;
                let system = crate::Policy::default().system_paths;
                let visible = |p: &std::path::Path| system.iter().any(|s| p.starts_with(s));
                match crate::runtime::installations(&host, &visible) {
                    Ok(dirs) if !dirs.is_empty() => Some(format!(
                        "{} is outside the sandbox's view; show its installation read-only with {}",
                        host.display(),
                        dirs.iter()
                            .map(|d| format!("--ro-bind {}", d.display()))
                            .collect::<Vec<_>>()
                            .join(" ")
                    )),
                    Ok(_) => None,
                    Err(why) => Some(format!(
                        "{why}; copy it into its own folder and --ro-bind that"
                    )),
                }
            }
            _ => None,
        }
    }
}

impl From<SetupFailure> for JailError {
    fn from(f: SetupFailure) -> Self {
        match (f.stage, f.errno) {
            (Stage::Exec, Some(libc::ENOENT)) => JailError::NotFound(f.detail),
            (Stage::Exec, Some(e)) if e == libc::EACCES || e == libc::ENOEXEC => {
                JailError::NotExecutable {
                    program: f.detail,
                    errno: e,
                }
            }
            _ => JailError::Setup(f),
        }
    }
}
