//! `warden sweep`: flags in, the list read and sharded, the detonations run by `warden-sweep`,
//! then `summary.json`, `index.html` and the summary table. `warden sweep merge` joins shard
//! outputs. Exit 0 when every target was recorded; 2 on errors; 130 when interrupted (what was
//! recorded stays; `--resume` continues).

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use warden_sweep::{Shard, SweepError};

use crate::cli::{SweepArgs, SweepMerge};
use crate::run::parse_duration;

/// Memory one detonation may take: the jail's default memory limit for the server, and room
/// for the supervisor, the harness and an install's package manager.
pub const PER_DETONATION: u64 = (1 << 30) + (256 << 20);

/// Run it.
pub fn main(args: SweepArgs) -> ExitCode {
    match sweep(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "warden sweep: {}",
                warden_sweep::clip(&format!("{e:#}"), 2000)
            );
            match e.downcast_ref::<SweepError>() {
                Some(SweepError::Interrupted { .. }) => ExitCode::from(130),
                _ => ExitCode::from(2),
            }
        }
    }
}

fn sweep(args: &SweepArgs) -> Result<()> {
    if let Some(SweepMerge::Merge { dirs, out }) = &args.merge {
        let inputs: Vec<&Path> = dirs.iter().map(std::path::PathBuf::as_path).collect();
        warden_sweep::merge::merge(&inputs, out)?;
        let summary = warden_sweep::finish(out, None)?;
        print!("{}", summary.table());
        return Ok(());
    }
    let (Some(list), Some(out)) = (&args.list, &args.out) else {
        bail!("give a LIST and --out DIR (or `warden sweep merge DIR... --out DIR`)");
    };
    let mut targets = warden_sweep::list::read(list)?;
    if let Some(s) = &args.shard {
        let spec = match s.strip_prefix('/') {
            // `/N`: the index from Kubernetes' JOB_COMPLETION_INDEX.
            Some(n) => format!(
                "{}/{n}",
                std::env::var("JOB_COMPLETION_INDEX")
                    .context("--shard /N needs JOB_COMPLETION_INDEX")?
            ),
            None => s.clone(),
        };
        let shard = Shard::parse(&spec)
            .with_context(|| format!("--shard {spec:?}: expected I/N with 0 <= I < N"))?;
        targets.retain(|t| shard.takes(t));
    }
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let wanted = args.jobs.unwrap_or(cores).max(1);
    let memory = match &args.memory_total {
        Some(m) => warden_jail::policy::parse_size(m)
            .with_context(|| format!("--memory-total {m:?}: not a size"))?,
        None => available_memory().unwrap_or(u64::MAX),
    };
    let fit = usize::try_from((memory / PER_DETONATION).max(1)).unwrap_or(usize::MAX);
    let jobs = wanted.min(fit);
    if jobs < wanted {
        eprintln!(
            "warden sweep: {jobs} at once, not {wanted}: each detonation may take {} MiB and {} MiB are available",
            PER_DETONATION >> 20,
            memory >> 20
        );
    }
    let target_timeout = parse_duration(&args.target_timeout)
        .with_context(|| format!("--target-timeout {:?}", args.target_timeout))?;
    let options = warden_sweep::Options {
        exe: std::env::current_exe().context("the warden binary")?,
        out: out.clone(),
        jobs,
        resume: args.resume,
        detonate_args: args.detonate.clone(),
        formats: args.formats.clone(),
        target_timeout: target_timeout.max(Duration::from_secs(1)),
        bar: std::io::stderr().is_terminal(),
    };
    let ran = warden_sweep::runner::run(&targets, &options)?;
    let wall = u64::try_from(ran.wall.as_millis()).unwrap_or(u64::MAX);
    let summary = warden_sweep::finish(out, (ran.judged > 0).then_some(wall))?;
    eprintln!(
        "warden sweep: {} judged now, {} already recorded, {} ms, {} at once",
        ran.judged, ran.skipped, wall, jobs
    );
    print!("{}", summary.table());
    Ok(())
}

/// `MemAvailable` from /proc/meminfo, in bytes.
fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}
