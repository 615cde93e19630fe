//! The scheduler: up to `jobs` detonations at once, each a `warden detonate` child process of
//! its own (a crash, a hang or a runaway server costs one target, never the sweep), each with
//! the detonation's own budgets and a backstop (`target_timeout`) after which it is killed.
//!
//! A child learns who its parent is (`WARDEN_SWEEP_PARENT`) and dies with it, so a sweep
//! killed even with SIGKILL leaves no detonation running; SIGINT and SIGTERM end the children
//! first. Each outcome is appended to `results.jsonl` as it ends; reports go to
//! `reports/<slug>.json` (and `.sarif`, `.html` when asked), written whole and renamed.

use std::collections::{BTreeMap, VecDeque};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::list::Target;
use crate::results::{self, Outcome};

/// The environment variable that tells a detonation its sweep's pid.
pub const PARENT_ENV: &str = "WARDEN_SWEEP_PARENT";

/// How to run the sweep.
#[derive(Debug, Clone)]
pub struct Options {
    /// The `warden` binary the detonations run.
    pub exe: PathBuf,
    /// The output folder.
    pub out: PathBuf,
    /// Detonations at once.
    pub jobs: usize,
    /// Skip targets already in `results.jsonl` at the same version.
    pub resume: bool,
    /// Arguments every `warden detonate` gets (its budgets, rules, OSV source…).
    pub detonate_args: Vec<String>,
    /// Extra report formats: `sarif`, `html`.
    pub formats: Vec<String>,
    /// Kill a detonation that is still running after this long.
    pub target_timeout: Duration,
    /// A progress bar (on a terminal) instead of a line per target.
    pub bar: bool,
}

/// Why a sweep could not run, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// The output folder already holds a sweep and `--resume` was not given.
    #[error("{0}: already holds results.jsonl: give --resume to continue it, or another folder")]
    NotEmpty(PathBuf),
    /// Files could not be written.
    #[error("{0}")]
    Io(String),
    /// SIGINT or SIGTERM: the running detonations were ended.
    #[error("interrupted: {done} targets judged and recorded; --resume continues")]
    Interrupted {
        /// How many were recorded.
        done: usize,
    },
}

/// What one run did.
#[derive(Debug, Clone)]
pub struct Ran {
    /// Targets judged now.
    pub judged: usize,
    /// Targets skipped as already done.
    pub skipped: usize,
    /// Wall time.
    pub wall: Duration,
}

/// Run the sweep over `targets`.
pub fn run(targets: &[Target], o: &Options) -> Result<Ran, SweepError> {
    let begun = Instant::now();
    let io = |e: std::io::Error| SweepError::Io(e.to_string());
    std::fs::create_dir_all(o.out.join("reports")).map_err(io)?;
    let results_path = o.out.join("results.jsonl");
    if results_path.exists() && !o.resume {
        return Err(SweepError::NotEmpty(o.out.clone()));
    }
    results::repair(&results_path).map_err(|e| SweepError::Io(e.to_string()))?;
    // There even when this shard has no target: the merge reads every shard's.
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&results_path)
        .map_err(io)?;
    let done = results::load(&results_path).map_err(|e| SweepError::Io(e.to_string()))?;
    let todo: VecDeque<Target> = targets
        .iter()
        .filter(|t| done.get(&t.key()).is_none_or(|d| d.version != t.version()))
        .cloned()
        .collect();
    let skipped = targets.len() - todo.len();
    let total = todo.len();
    let bar = progress(o.bar, total as u64);
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register(sig, Arc::clone(&stop));
    }
    let queue = Mutex::new(todo);
    let running: Mutex<BTreeMap<u32, ()>> = Mutex::new(BTreeMap::new());
    let recorded = Mutex::new(0usize);
    let failure: Mutex<Option<SweepError>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..o.jobs.max(1) {
            s.spawn(|| {
                loop {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let Some(t) = queue.lock().ok().and_then(|mut q| q.pop_front()) else {
                        return;
                    };
                    let outcome = judge(&t, o, &running, &stop);
                    if stop.load(Ordering::Relaxed) && outcome.error.as_deref() == Some(INTERRUPTED)
                    {
                        return;
                    }
                    if let Err(e) = results::append(&results_path, &outcome) {
                        if let Ok(mut f) = failure.lock() {
                            *f = Some(SweepError::Io(e.to_string()));
                        }
                        stop.store(true, Ordering::Relaxed);
                        return;
                    }
                    if let Ok(mut n) = recorded.lock() {
                        *n += 1;
                    }
                    report_progress(&bar, &outcome);
                }
            });
        }
        // Ends the running detonations as soon as a signal (or a failure) stops the sweep.
        s.spawn(|| {
            loop {
                let finished = queue.lock().map(|q| q.is_empty()).unwrap_or(true)
                    && running.lock().map(|r| r.is_empty()).unwrap_or(true);
                if stop.load(Ordering::Relaxed) {
                    if let Ok(r) = running.lock() {
                        for pid in r.keys() {
                            terminate(*pid);
                        }
                    }
                    return;
                }
                if finished && recorded.lock().map(|n| *n).unwrap_or(0) >= total {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
    });
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    if let Some(e) = failure.into_inner().ok().flatten() {
        return Err(e);
    }
    let judged = recorded.into_inner().unwrap_or(0);
    if stop.load(Ordering::Relaxed) {
        return Err(SweepError::Interrupted { done: judged });
    }
    Ok(Ran {
        judged,
        skipped,
        wall: begun.elapsed(),
    })
}

const INTERRUPTED: &str = "interrupted";

fn progress(bar: bool, total: u64) -> Option<indicatif::ProgressBar> {
    bar.then(|| {
        let b = indicatif::ProgressBar::new(total);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} {msg}",
        ) {
            b.set_style(style.progress_chars("=> "));
        }
        b
    })
}

fn report_progress(bar: &Option<indicatif::ProgressBar>, o: &Outcome) {
    let line = format!(
        "{:<12} {:>6} ms  {}{}",
        o.verdict,
        o.duration_ms,
        crate::clip(&o.target, 100),
        o.error
            .as_ref()
            .or(o.why.as_ref())
            .map(|e| format!("  ({})", crate::clip(e, 120)))
            .unwrap_or_default()
    );
    match bar {
        Some(b) => {
            b.inc(1);
            b.set_message(crate::clip(&o.target, 40));
            b.println(line);
        }
        None => eprintln!("warden sweep: {line}"),
    }
}

/// SIGTERM, then SIGKILL a moment later (the detonation cleans up its folders on SIGTERM).
fn terminate(pid: u32) {
    let Ok(raw) = i32::try_from(pid) else { return };
    let pid = nix::unistd::Pid::from_raw(raw);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
}

/// Detonate one target in a child process and read its report.
fn judge(
    t: &Target,
    o: &Options,
    running: &Mutex<BTreeMap<u32, ()>>,
    stop: &AtomicBool,
) -> Outcome {
    let begun = Instant::now();
    let slug = t.slug();
    let mut outcome = Outcome {
        target: t.key(),
        version: t.version(),
        slug: slug.clone(),
        verdict: "ERROR".into(),
        score: 0,
        categories: Vec::new(),
        rules: Vec::new(),
        duration_ms: 0,
        error: None,
        why: None,
        peak_memory_bytes: None,
    };
    if let Some(tr) = t.transport.as_deref().filter(|tr| *tr != "stdio") {
        outcome.error = Some(format!(
            "transport {tr}: detonate speaks stdio only (HTTP transports are not built yet)"
        ));
        return outcome;
    }
    let reports = o.out.join("reports");
    let part = reports.join(format!("{slug}.json.part"));
    let log = reports.join(format!("{slug}.log"));
    let mut cmd = Command::new(&o.exe);
    cmd.arg("detonate");
    if let Some(target) = &t.target {
        cmd.arg(target);
    }
    if let Some(c) = &t.command {
        cmd.args(["--mcp-command", c]);
    }
    for a in &t.args {
        cmd.arg(format!("--server-arg={a}"));
    }
    for (k, v) in &t.env {
        // One word, so a name that starts with `-` cannot be read as a flag.
        cmd.arg(format!("--env={k}={v}"));
    }
    cmd.args(["--output", "json", "--allow-inconclusive", "--out"])
        .arg(&part);
    let mut extra = Vec::new();
    for f in &o.formats {
        let file = reports.join(format!("{slug}.{f}"));
        cmd.arg("--also-output")
            .arg(format!("{f}={}.part", file.display()));
        extra.push(file);
    }
    cmd.args(&o.detonate_args)
        .env(PARENT_ENV, std::process::id().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    match std::fs::File::create(&log) {
        Ok(f) => {
            cmd.stderr(f);
        }
        Err(_) => {
            cmd.stderr(Stdio::null());
        }
    }
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            outcome.error = Some(format!("could not start warden detonate: {e}"));
            return outcome;
        }
    };
    let status = wait(child, o.target_timeout, running, stop);
    outcome.duration_ms = u64::try_from(begun.elapsed().as_millis()).unwrap_or(u64::MAX);
    let report: Option<Value> = std::fs::read(&part)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    match (status, report) {
        (_, Some(r)) => {
            let _ = std::fs::rename(&part, reports.join(format!("{slug}.json")));
            for file in extra {
                let _ = std::fs::rename(file.with_extension(format!("{}.part", ext(&file))), &file);
            }
            read_report(&r, &mut outcome);
        }
        (Waited::Interrupted, None) => outcome.error = Some(INTERRUPTED.into()),
        (Waited::TimedOut, None) => {
            outcome.error = Some(format!(
                "killed after {} s without a report",
                o.target_timeout.as_secs()
            ));
        }
        (Waited::Exited(code), None) => {
            outcome.error = Some(format!(
                "warden detonate exited {} without a report: {}",
                code.map_or("on a signal".into(), |c| c.to_string()),
                tail(&log)
            ));
        }
    }
    let _ = std::fs::remove_file(&part);
    outcome
}

fn ext(p: &Path) -> String {
    p.extension()
        .map(|e| e.to_string_lossy().into_owned())
        .unwrap_or_default()
}

enum Waited {
    Exited(Option<i32>),
    TimedOut,
    Interrupted,
}

fn wait(
    mut child: Child,
    limit: Duration,
    running: &Mutex<BTreeMap<u32, ()>>,
    stop: &AtomicBool,
) -> Waited {
    let pid = child.id();
    if let Ok(mut r) = running.lock() {
        r.insert(pid, ());
    }
    let begun = Instant::now();
    let mut termed: Option<Instant> = None;
    let result = loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                break if stop.load(Ordering::Relaxed) && termed.is_some() {
                    Waited::Interrupted
                } else {
                    Waited::Exited(status.code())
                };
            }
            Ok(None) => {}
            Err(_) => break Waited::Exited(None),
        }
        let over = begun.elapsed() > limit;
        if (over || stop.load(Ordering::Relaxed)) && termed.is_none() {
            terminate(pid);
            termed = Some(Instant::now());
        }
        if termed.is_some_and(|t| t.elapsed() > Duration::from_secs(5)) {
            let _ = child.kill();
            let _ = child.wait();
            break if over {
                Waited::TimedOut
            } else {
                Waited::Interrupted
            };
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    if let Ok(mut r) = running.lock() {
        r.remove(&pid);
    }
    if matches!(result, Waited::Exited(_)) && begun.elapsed() > limit {
        return Waited::TimedOut;
    }
    result
}

/// The last 600 characters of the detonation's stderr.
fn tail(log: &Path) -> String {
    let mut s = String::new();
    if let Ok(mut f) = std::fs::File::open(log) {
        let _ = f.by_ref().take(1 << 20).read_to_string(&mut s);
    }
    let chars: Vec<char> = s.trim().chars().collect();
    let start = chars.len().saturating_sub(600);
    crate::clip(&chars[start..].iter().collect::<String>(), 600)
}

/// Verdict, score, categories, rules and the INCONCLUSIVE reason from a report.
fn read_report(r: &Value, o: &mut Outcome) {
    o.verdict = r["verdict"].as_str().unwrap_or("ERROR").to_owned();
    o.score = u32::try_from(r["score"].as_u64().unwrap_or(0)).unwrap_or(0);
    let findings = r["findings"].as_array().cloned().unwrap_or_default();
    let mut cats: Vec<String> = findings
        .iter()
        .filter_map(|f| f["category"].as_str().map(str::to_owned))
        .collect();
    cats.sort();
    cats.dedup();
    let mut rules: Vec<String> = findings
        .iter()
        .filter_map(|f| f["rule"].as_str().map(str::to_owned))
        .collect();
    rules.sort();
    rules.dedup();
    o.categories = cats;
    o.rules = rules;
    o.peak_memory_bytes = r["events"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["kind"] == "sandbox.exited")
        .filter_map(|e| e["data"]["peak_memory_bytes"].as_u64())
        .max();
    if let Some(why) = r.get("why").filter(|w| w.is_object()) {
        o.why = Some(format!(
            "{}: {}",
            why["stage"].as_str().unwrap_or("?"),
            crate::clip(why["reason"].as_str().unwrap_or(""), 300)
        ));
    }
}
