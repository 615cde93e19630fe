//! Many detonations: `warden sweep LIST --out DIR` judges every target of a list (a registry's
//! export, a team's inventory) with up to N detonations at once, on one machine or as shards of
//! a Kubernetes Indexed Job, and puts the results in one place.
//!
//! [`list`] reads the targets and splits them into shards by a stable hash; [`runner`] runs each
//! as its own `warden detonate` process with its own budgets and appends each outcome to
//! `results.jsonl` as it ends ([`results`]: whole lines, so `--resume` knows what was done);
//! [`summary`] and [`index`] turn the outcomes into `summary.json`, a table and `index.html`;
//! [`merge`] joins shard outputs. Guarantees: a target's crash or hang costs that target only;
//! a sweep killed at any point resumes without redoing recorded work; no detonation outlives
//! the sweep; INCONCLUSIVE runs and errors are counted apart, each with why.

#![forbid(unsafe_code)]

pub mod index;
pub mod list;
pub mod merge;
pub mod results;
pub mod runner;
pub mod summary;

use std::collections::BTreeMap;
use std::path::Path;

pub use list::{Shard, Target};
pub use runner::{Options, Ran, SweepError};
pub use summary::Summary;

/// `s` without control characters, at most `max` characters.
pub fn clip(s: &str, max: usize) -> String {
    let clean: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if clean.chars().count() <= max {
        clean
    } else {
        clean
            .chars()
            .take(max)
            .chain(std::iter::once('…'))
            .collect()
    }
}

/// Write `summary.json` and `index.html` for the outcomes in `dir/results.jsonl`.
pub fn finish(dir: &Path, wall_ms: Option<u64>) -> Result<Summary, SweepError> {
    let outcomes: BTreeMap<String, results::Outcome> =
        results::load(&dir.join("results.jsonl")).map_err(|e| SweepError::Io(e.to_string()))?;
    let summary = summary::summarise(&outcomes, wall_ms);
    let json = serde_json::to_string_pretty(&summary).map_err(|e| SweepError::Io(e.to_string()))?;
    write_whole(&dir.join("summary.json"), json.as_bytes())?;
    let page = index::html(&summary, &outcomes, &dir.join("reports"));
    write_whole(&dir.join("index.html"), page.as_bytes())?;
    Ok(summary)
}

/// Write, then rename into place.
fn write_whole(path: &Path, bytes: &[u8]) -> Result<(), SweepError> {
    let part = path.with_extension("part");
    std::fs::write(&part, bytes)
        .and_then(|()| std::fs::rename(&part, path))
        .map_err(|e| SweepError::Io(format!("{}: {e}", path.display())))
}
