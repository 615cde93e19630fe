//! `warden sweep merge DIR… --out DIR`: shard outputs into one. Every shard's `results.jsonl`
//! lines are joined (a target judged in two shards keeps the line of the later shard on the
//! command line), reports are copied, and the summary and index are made again from the merged
//! outcomes, so they equal what one sweep of the whole list would have written.

use std::collections::BTreeMap;
use std::path::Path;

use crate::results::{self, Outcome};
use crate::runner::SweepError;

/// Merge `inputs` into `out`; the merged outcomes.
pub fn merge(inputs: &[&Path], out: &Path) -> Result<BTreeMap<String, Outcome>, SweepError> {
    let io = |e: std::io::Error| SweepError::Io(e.to_string());
    std::fs::create_dir_all(out.join("reports")).map_err(io)?;
    let mut all: BTreeMap<String, Outcome> = BTreeMap::new();
    for dir in inputs {
        let part =
            results::load(&dir.join("results.jsonl")).map_err(|e| SweepError::Io(e.to_string()))?;
        if part.is_empty() && !dir.join("results.jsonl").exists() {
            return Err(SweepError::Io(format!(
                "{}: no results.jsonl",
                dir.display()
            )));
        }
        for (k, o) in part {
            for ext in ["json", "html", "sarif"] {
                let from = dir.join("reports").join(format!("{}.{ext}", o.slug));
                let to = out.join("reports").join(format!("{}.{ext}", o.slug));
                if from.is_file() && from != to {
                    std::fs::copy(&from, &to).map_err(io)?;
                }
            }
            all.insert(k, o);
        }
    }
    let merged = out.join("results.jsonl");
    let partial = out.join("results.jsonl.part");
    let _ = std::fs::remove_file(&partial);
    for o in all.values() {
        results::append(&partial, o).map_err(|e| SweepError::Io(e.to_string()))?;
    }
    if all.is_empty() {
        std::fs::write(&partial, b"").map_err(io)?;
    }
    std::fs::rename(&partial, &merged).map_err(io)?;
    Ok(all)
}
