//! `warden sweep merge DIR… --out DIR`: shard outputs into one. Every shard's `results.jsonl`
//! lines are joined (a target judged in two shards keeps the line of the later shard on the
//! command line), reports are copied, and the summary and index are made again from the merged
//! outcomes, so they equal what one sweep of the whole list would have written.
//!
//! Guarantees: a shard's `results.jsonl` is input, not trusted: a slug that is not a sweep's
//! ([`crate::list::is_slug`]) stops the merge with the shard and line; reports are read
//! beneath their shard and written beneath `--out` only (`cap-std` directories: no `..`, no
//! absolute path, no link leading out), each written whole and renamed into place; a report
//! that already is the destination (the same file, by device and inode) is left alone.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;

use cap_std::ambient_authority;
use cap_std::fs::{Dir, MetadataExt};

use crate::results::{self, Outcome};
use crate::runner::SweepError;

/// Copy `name` from `from` to `to` (both a shard's or the output's `reports` folder), unless it
/// is missing, not a plain file, or already the destination file.
fn copy_report(from: &Dir, to: &Dir, name: &str) -> std::io::Result<()> {
    let Ok(meta) = from.metadata(name) else {
        return Ok(());
    };
    if !meta.is_file() {
        return Ok(());
    }
    if let Ok(dest) = to.metadata(name)
        && dest.dev() == meta.dev()
        && dest.ino() == meta.ino()
    {
        return Ok(());
    }
    let mut bytes = Vec::new();
    from.open(name)?.read_to_end(&mut bytes)?;
    let part = format!("{name}.part");
    let mut f = to.create(&part)?;
    f.write_all(&bytes)?;
    f.sync_all()?;
    to.rename(&part, to, name)
}

/// Merge `inputs` into `out`; the merged outcomes.
pub fn merge(inputs: &[&Path], out: &Path) -> Result<BTreeMap<String, Outcome>, SweepError> {
    let io = |e: std::io::Error| SweepError::Io(e.to_string());
    fn at(p: &Path) -> impl Fn(std::io::Error) -> SweepError + '_ {
        move |e| SweepError::Io(format!("{}: {e}", p.display()))
    }
    std::fs::create_dir_all(out.join("reports")).map_err(at(out))?;
    let out_reports =
        Dir::open_ambient_dir(out.join("reports"), ambient_authority()).map_err(at(out))?;
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
        let shard = Dir::open_ambient_dir(dir, ambient_authority()).map_err(at(dir))?;
        let reports = shard.open_dir("reports").ok();
        for (k, o) in part {
            if let Some(reports) = &reports {
                for ext in ["json", "html", "sarif"] {
                    copy_report(reports, &out_reports, &format!("{}.{ext}", o.slug))
                        .map_err(at(dir))?;
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
