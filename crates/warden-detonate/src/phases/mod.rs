//! The detonation's phases, in order: [`source`] (fetch a package, or resolve a local target),
//! [`browser`] (with `--browser`: the machine's Chromium offered to a server that drives one,
//! which touches the install, the start's policy and the events),
//! [`install`] (its install lifecycle in the sandbox), [`scan`] (what the source and the
//! install left are made of: components, known vulnerabilities), [`start`] (the start command and the
//! policy it runs under), [`session`] (the harness against the running server), [`decoys`], [`audience`], [`intent`], [`userdata`] and [`explain`] (decoy identity, credentials used on their own service,
//! metadata requests and scans, where the user's own text went, and where and when a secret went, on the events) and [`verdict`] (rules, score, and whether the run happened at all). Each phase is a function
//! with its own result type; a phase that could not do its work says so in that result (an
//! [`verdict::Inconclusive`]) and the later phases decide what it means, so a detonation that
//! did not happen is a result, never a silent pass.

pub mod answers;
pub mod audience;
pub mod browser;
pub mod decoys;
pub mod explain;
pub mod install;
pub mod intent;
pub mod scan;
pub mod session;
pub mod source;
pub mod start;
pub mod userdata;
pub mod verdict;

use warden_jail::Policy;

use crate::Options;

/// The policy every phase starts from: tracing and decoys on, the jail's wall time a backstop
/// 30 s past `budget` (the phase's own deadline ends it first).
pub fn base_policy(budget: std::time::Duration, options: &Options) -> Policy {
    let mut policy = Policy {
        hostname: persona().hostname.to_owned(),
        user: persona().user.to_owned(),
        trace: true,
        decoys: true,
        open_tls: !options.no_boundary,
        capture: !options.no_boundary,
        allow_host_proc: options.allow_host_proc,
        ..Policy::default()
    };
    policy.limits.wall_time_ms = u64::try_from(budget.as_millis())
        .unwrap_or(u64::MAX)
        .saturating_add(30_000);
    policy
}

/// This run's persona (user, home and host name of a developer's machine, from
/// `warden_jail::persona`'s pool), drawn once per process (one detonation) and adopted, so every
/// phase shows the same machine and the tracer and the analysis name the same home. The
/// report's `sandbox.user` and `sandbox.hostname` say which.
pub fn persona() -> warden_jail::persona::Persona {
    static DRAWN: std::sync::OnceLock<warden_jail::persona::Persona> = std::sync::OnceLock::new();
    *DRAWN.get_or_init(|| {
        let p = warden_jail::persona::draw();
        if warden_jail::persona::adopt(p.user) {
            p
        } else {
            // This process already named its user: keep that one's home.
            warden_jail::persona::Persona {
                user: warden_jail::persona::user(),
                hostname: p.hostname,
            }
        }
    })
}

/// Progress on stderr, when asked for.
pub fn progress(options: &Options, line: &str) {
    if options.progress {
        eprintln!("warden detonate: {line}");
    }
}
