//! Warm sandboxes for tool calls: jails prepared before the call that will use them.
//!
//! A call's sandbox is taken from the pool when one prepared for exactly its policy is
//! waiting (the key is the whole policy but its wall and CPU limits, which travel with the
//! command), and started from nothing otherwise; either way a replacement is prepared in the
//! background once the call's run has ended (preparing it never competes with the call for
//! the CPU), so the next call of the same session finds one. Guarantees:
//! - a prepared sandbox runs one command and is destroyed with it (see `warden_jail::warm`):
//!   nothing one call leaves behind reaches another;
//! - a sandbox is only handed to a call whose policy is the one it was prepared for (same
//!   workspace, binds, environment, limits, network): a different profile, session or setting
//!   never gets it;
//! - runs whose policy protects paths in the workspace (a lasting workspace: under
//!   `workspace_root`, or shared) always start cold, and so do the calls that ask for it
//!   ([`Pool::start_once`]: a policy of the call's own); traced runs (the web tools',
//!   `nmap_scan`'s and `nuclei_scan`'s) are prepared with their tracer waiting, their trace
//!   starting with the command;
//! - at most `size` sandboxes wait per policy and `max_waiting` in all; one unused for
//!   `idle_timeout_s` is destroyed, and a session's are destroyed when it ends, before its
//!   workspace goes. Each waiting sandbox is three processes (its supervisor, and its init and
//!   the command's process, already in the sandbox's cgroup under the policy's limits);
//!   `sandbox_metrics` reports their number and memory.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use warden_jail::warm::Command;
use warden_jail::{Jail, JailError, Policy, Running, Warm};

use crate::config::PoolFile;

/// How often idle sandboxes are looked for.
const SWEEP: Duration = Duration::from_secs(1);
/// How long a replacement's preparation waits after the run that used a sandbox ended, so that
/// the call's answer (a few hundred microseconds of the server's work) is not slowed by it.
const AFTER_ANSWER: Duration = Duration::from_millis(2);
/// How long a session's end waits for sandboxes still being prepared for it.
const FORGET_WAIT: Duration = Duration::from_secs(10);

/// The pool of one server.
#[derive(Debug)]
pub struct Pool {
    jail: Jail,
    settings: PoolFile,
    state: Mutex<State>,
    /// Signalled when a preparation for a session has finished.
    prepared: Condvar,
    hits: AtomicU64,
    misses: AtomicU64,
    discarded: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    by_policy: HashMap<String, Slot>,
    /// Sessions whose sandboxes may still be kept (a sandbox prepared for a session that has
    /// ended is destroyed, not kept).
    live: HashSet<String>,
    /// Sandboxes being prepared for each session (its end waits for them to be let go).
    preparing_for: HashMap<String, usize>,
}

#[derive(Debug, Default)]
struct Slot {
    ready: VecDeque<Waiting>,
    preparing: usize,
}

#[derive(Debug)]
struct Waiting {
    warm: Warm,
    since: Instant,
    owner: Option<String>,
}

/// The pool's key for `policy` and `owner`: everything but the limits a command brings
/// itself, and the session the sandbox is for (a policy without a workspace of the session's
/// own, such as a web call's, is the same in every session; the owner keeps each session's
/// sandboxes its own). `None` if it cannot be written out: such a run starts cold.
fn key(policy: &Policy, owner: Option<&str>) -> Option<String> {
    let mut p = policy.clone();
    p.limits.wall_time_ms = 0;
    p.limits.cpu_time_ms = 0;
    let p = serde_json::to_string(&p).ok()?;
    Some(format!("{}\n{p}", owner.unwrap_or("")))
}

/// Destroy sandboxes away from the caller's path (each waits for its supervisor to finish).
fn discard(list: Vec<Waiting>) {
    if !list.is_empty() {
        std::thread::spawn(move || drop(list));
    }
}

impl Pool {
    /// A pool (with `settings.size == 0`, every call starts cold). Its idle sweep runs until
    /// the pool is dropped.
    pub fn new(jail: Jail, settings: PoolFile) -> Arc<Pool> {
        let pool = Arc::new(Pool {
            jail,
            settings,
            state: Mutex::new(State::default()),
            prepared: Condvar::new(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            discarded: AtomicU64::new(0),
        });
        if pool.enabled() {
            let weak = Arc::downgrade(&pool);
            std::thread::spawn(move || sweep_idle(&weak));
        }
        pool
    }

    fn enabled(&self) -> bool {
        self.settings.size > 0 && self.settings.max_waiting > 0
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Start `cmd` under `policy` for `owner` (a session whose sandboxes go with it; `None`
    /// for sandboxes any session with this policy may use). Blocking. The replacement is
    /// prepared when the returned [`Refill`] is dropped: keep it until the run has ended, so
    /// that preparing the next sandbox never competes with this call for the CPU.
    pub fn start(
        self: &Arc<Self>,
        policy: &Policy,
        cmd: &Command,
        owner: Option<&str>,
    ) -> (Result<Running, JailError>, Refill) {
        // What the jail cannot prepare ahead (lasting workspaces with protected paths: see
        // `warden_jail::warm::unpreparable`) starts cold.
        let k = match key(policy, owner) {
            Some(k) if self.enabled() && warden_jail::warm::unpreparable(policy).is_none() => k,
            _ => return (self.cold(policy, cmd), Refill(None)),
        };
        let (warm, stale) = self.take(&k, owner);
        discard(stale);
        let running = match warm {
            Some(w) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                // The key leaves the time limits out because they travel with the command: a
                // command that brings none gets this call's policy's, never the ones the
                // sandbox was prepared with (another call's).
                let mut cmd = cmd.clone();
                cmd.wall_time_ms.get_or_insert(policy.limits.wall_time_ms);
                cmd.cpu_time_ms.get_or_insert(policy.limits.cpu_time_ms);
                w.start(&cmd)
            }
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                self.cold(policy, cmd)
            }
        };
        let refill = Refill(Some((
            Arc::clone(self),
            k,
            policy.clone(),
            owner.map(str::to_owned),
        )));
        (running, refill)
    }

    /// Start `cmd` under `policy` cold, with no replacement prepared: for a policy no later
    /// call will have (a recon call's output folder is its own), whose waiting sandbox would
    /// only cost a preparation and memory until it expires.
    pub fn start_once(
        &self,
        policy: &Policy,
        cmd: &Command,
    ) -> (Result<Running, JailError>, Refill) {
        (self.cold(policy, cmd), Refill(None))
    }

    fn cold(&self, policy: &Policy, cmd: &Command) -> Result<Running, JailError> {
        let mut p = policy.clone();
        p.env
            .extend(cmd.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        if let Some(ms) = cmd.wall_time_ms {
            p.limits.wall_time_ms = ms;
        }
        if let Some(ms) = cmd.cpu_time_ms {
            p.limits.cpu_time_ms = ms;
        }
        self.jail.start_capture(&p, &cmd.argv, &cmd.stdin)
    }

    /// A live sandbox prepared for `key`, and the stale ones met on the way.
    fn take(&self, key: &str, owner: Option<&str>) -> (Option<Warm>, Vec<Waiting>) {
        let idle = Duration::from_secs(self.settings.idle_timeout_s);
        let mut stale = Vec::new();
        let mut st = self.state();
        if let Some(o) = owner {
            st.live.insert(o.to_owned());
        }
        let Some(slot) = st.by_policy.get_mut(key) else {
            return (None, stale);
        };
        while let Some(mut w) = slot.ready.pop_front() {
            if w.since.elapsed() < idle && w.warm.alive() {
                return (Some(w.warm), stale);
            }
            stale.push(w);
        }
        self.discarded
            .fetch_add(stale.len() as u64, Ordering::Relaxed);
        (None, stale)
    }

    /// Prepare one more sandbox for `key` in the background, if there is room.
    fn refill(self: &Arc<Self>, key: String, policy: Policy, owner: Option<String>) {
        {
            let mut st = self.state();
            let waiting: usize = st
                .by_policy
                .values()
                .map(|s| s.ready.len() + s.preparing)
                .sum();
            let slot = st.by_policy.entry(key.clone()).or_default();
            if slot.ready.len() + slot.preparing >= self.settings.size
                || waiting >= self.settings.max_waiting
            {
                return;
            }
            slot.preparing += 1;
            if let Some(o) = &owner {
                *st.preparing_for.entry(o.clone()).or_default() += 1;
            }
        }
        let pool = Arc::clone(self);
        std::thread::spawn(move || {
            // The call that took a sandbox is answering now: its answer goes out first.
            std::thread::sleep(AFTER_ANSWER);
            let prepared = pool.jail.prepare(&policy);
            let mut st = pool.state();
            let keep = owner.as_ref().is_none_or(|o| st.live.contains(o));
            let slot = st.by_policy.entry(key).or_default();
            slot.preparing = slot.preparing.saturating_sub(1);
            let unused = match prepared {
                Ok(warm) if keep => {
                    slot.ready.push_back(Waiting {
                        warm,
                        since: Instant::now(),
                        owner: owner.clone(),
                    });
                    None
                }
                Ok(warm) => Some(warm),
                Err(e) => {
                    tracing::debug!(error = %e, "preparing a sandbox");
                    None
                }
            };
            // A sandbox whose session ended meanwhile is torn down before that session's end
            // (which waits for it, below) goes on to remove the workspace.
            drop(st);
            drop(unused);
            if let Some(o) = owner {
                let mut st = pool.state();
                if let Some(n) = st.preparing_for.get_mut(&o) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        st.preparing_for.remove(&o);
                    }
                }
                pool.prepared.notify_all();
            }
        });
    }

    /// A session ended: destroy its sandboxes now (before its workspace goes), wait for the
    /// ones being prepared for it to be let go (at most [`FORGET_WAIT`]), and keep none
    /// prepared for it later.
    pub fn forget(&self, owner: &str) {
        let gone: Vec<Waiting> = {
            let mut st = self.state();
            st.live.remove(owner);
            let deadline = Instant::now() + FORGET_WAIT;
            while st.preparing_for.contains_key(owner) {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                st = self
                    .prepared
                    .wait_timeout(st, left)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
            let mut gone = Vec::new();
            for slot in st.by_policy.values_mut() {
                let (theirs, others): (VecDeque<_>, VecDeque<_>) = slot
                    .ready
                    .drain(..)
                    .partition(|w| w.owner.as_deref() == Some(owner));
                slot.ready = others;
                gone.extend(theirs);
            }
            st.by_policy
                .retain(|_, s| !s.ready.is_empty() || s.preparing > 0);
            gone
        };
        drop(gone);
    }

    /// Destroy the sandboxes unused for longer than the idle timeout.
    fn expire(&self) {
        let idle = Duration::from_secs(self.settings.idle_timeout_s);
        let old: Vec<Waiting> = {
            let mut st = self.state();
            let mut old = Vec::new();
            for slot in st.by_policy.values_mut() {
                let (expired, fresh): (VecDeque<_>, VecDeque<_>) = slot
                    .ready
                    .drain(..)
                    .partition(|w| w.since.elapsed() >= idle);
                slot.ready = fresh;
                old.extend(expired);
            }
            st.by_policy
                .retain(|_, s| !s.ready.is_empty() || s.preparing > 0);
            old
        };
        self.discarded
            .fetch_add(old.len() as u64, Ordering::Relaxed);
        drop(old);
    }

    /// What `sandbox_metrics` says of the pool.
    pub fn report(&self) -> Value {
        // Read under the lock: a waiting sandbox's helper is not reaped while it is listed, so
        // its pid cannot have been reused.
        let (waiting, preparing, pids, memory) = {
            let st = self.state();
            let helpers: Vec<u32> = st
                .by_policy
                .values()
                .flat_map(|s| s.ready.iter().filter_map(|w| w.warm.supervisor_pid()))
                .collect();
            let preparing: usize = st.by_policy.values().map(|s| s.preparing).sum();
            let (mut pids, mut memory) = (0u64, 0u64);
            for pid in &helpers {
                for p in tree(*pid) {
                    pids += 1;
                    memory += rss_bytes(p);
                }
            }
            (helpers.len(), preparing, pids, memory)
        };
        json!({
            "enabled": self.enabled(),
            "size": self.settings.size,
            "max_waiting": self.settings.max_waiting,
            "idle_timeout_s": self.settings.idle_timeout_s,
            "waiting": waiting,
            "preparing": preparing,
            "waiting_pids": pids,
            "waiting_memory_bytes": memory,
            "hits": self.hits.load(Ordering::Relaxed),
            "misses": self.misses.load(Ordering::Relaxed),
            "discarded": self.discarded.load(Ordering::Relaxed),
        })
    }
}

/// A replacement to prepare once the call that took a sandbox no longer needs the CPU (on
/// drop; nothing when the run was not one the pool serves).
#[must_use = "the replacement is prepared when this is dropped"]
#[derive(Debug)]
pub struct Refill(Option<(Arc<Pool>, String, Policy, Option<String>)>);

impl Drop for Refill {
    fn drop(&mut self) {
        if let Some((pool, key, policy, owner)) = self.0.take() {
            pool.refill(key, policy, owner);
        }
    }
}

fn sweep_idle(pool: &Weak<Pool>) {
    loop {
        std::thread::sleep(SWEEP);
        match pool.upgrade() {
            Some(p) => p.expire(),
            None => return,
        }
    }
}

/// `pid` and its descendants (from `/proc/PID/task/PID/children`).
fn tree(pid: u32) -> Vec<u32> {
    let mut all = vec![pid];
    let mut i = 0;
    while i < all.len() && all.len() < 64 {
        let p = all[i];
        if let Ok(list) = std::fs::read_to_string(format!("/proc/{p}/task/{p}/children")) {
            all.extend(
                list.split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
        i += 1;
    }
    all
}

/// Resident memory of `pid`, in bytes (0 when it cannot be read).
fn rss_bytes(pid: u32) -> u64 {
    let pages = std::fs::read_to_string(format!("/proc/{pid}/statm"))
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(4096);
    pages * page
}
