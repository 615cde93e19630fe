//! `results.jsonl`: one line per judged target, appended as each detonation ends (one `write`
//! of the whole line with `O_APPEND`, then `fsync`), so a sweep killed at any point leaves
//! whole lines only, and `--resume` knows exactly what was done. A torn last line (a crash
//! inside the write) is ignored on reading.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// What one detonation gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The target's key (its spec, then its command).
    pub target: String,
    /// The version a resume compares.
    pub version: String,
    /// The report's file name under `reports/`, without the extension.
    pub slug: String,
    /// PASS … CRITICAL, INCONCLUSIVE, or `ERROR` when no report came out.
    pub verdict: String,
    /// 0–100 (0 without a report).
    pub score: u32,
    /// The finding categories, sorted, each once.
    pub categories: Vec<String>,
    /// The rules that drew findings, sorted, each once.
    #[serde(default)]
    pub rules: Vec<String>,
    /// Wall time of this target.
    pub duration_ms: u64,
    /// Why there is no verdict (a usage error, a fetch that failed, a crash), if there is none.
    #[serde(default)]
    pub error: Option<String>,
    /// Why the verdict is INCONCLUSIVE: `stage: reason`.
    #[serde(default)]
    pub why: Option<String>,
    /// The most memory any of its sandboxes (install, server) used, from the cgroup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_memory_bytes: Option<u64>,
}

/// Why the results file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    /// A line names a report that is not of a sweep's making (a hostile or corrupted file).
    #[error(
        "{path}:{line}: slug {slug:?} is not a name sweep makes (refused: it would name a file)"
    )]
    BadSlug {
        /// The file.
        path: String,
        /// 1-based line.
        line: usize,
        /// The slug, cut to 100 characters.
        slug: String,
    },
    /// Reading or writing it failed.
    #[error("{path}: {why}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        why: String,
    },
}

/// Every whole line of `path` (none if it does not exist), the last outcome per target key; a
/// line whose slug is not one [`crate::list::is_slug`] accepts is an error naming the line.
pub fn load(path: &Path) -> Result<BTreeMap<String, Outcome>, ResultsError> {
    let text = match read_bounded(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => {
            return Err(ResultsError::Io {
                path: path.display().to_string(),
                why: e.to_string(),
            });
        }
    };
    let mut out = BTreeMap::new();
    for (n, l) in text.lines().enumerate() {
        let Ok(o) = serde_json::from_str::<Outcome>(l) else {
            continue;
        };
        if !crate::list::is_slug(&o.slug) {
            return Err(ResultsError::BadSlug {
                path: path.display().to_string(),
                line: n + 1,
                slug: o.slug.chars().take(100).collect(),
            });
        }
        out.insert(o.target.clone(), o);
    }
    Ok(out)
}

/// A results file is at most this big (a million targets' lines, with room to spare).
const MAX_RESULTS: u64 = 1 << 30;

/// `path` read as the file it is: never through a link, never blocking on a FIFO, a regular
/// file only, at most [`MAX_RESULTS`] bytes (a shard's file is input, not trusted).
fn read_bounded(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() || meta.len() > MAX_RESULTS {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not a regular file of at most {MAX_RESULTS} bytes"),
        ));
    }
    let mut bytes = Vec::new();
    f.take(MAX_RESULTS).read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// End a torn last line (a crash inside a write) so the next line starts on its own.
pub fn repair(path: &Path) -> Result<(), ResultsError> {
    let io = |e: std::io::Error| ResultsError::Io {
        path: path.display().to_string(),
        why: e.to_string(),
    };
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(e)),
    };
    if bytes.last().is_some_and(|b| *b != b'\n') {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(io)?;
        f.write_all(b"\n").map_err(io)?;
    }
    Ok(())
}

/// Append `o` to `path` as one line, durably.
pub fn append(path: &Path, o: &Outcome) -> Result<(), ResultsError> {
    let io = |e: std::io::Error| ResultsError::Io {
        path: path.display().to_string(),
        why: e.to_string(),
    };
    let mut line = serde_json::to_string(o).map_err(|e| ResultsError::Io {
        path: path.display().to_string(),
        why: e.to_string(),
    })?;
    line.push('\n');
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io)?;
    f.write_all(line.as_bytes()).map_err(io)?;
    f.sync_data().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(t: &str, v: &str) -> Outcome {
        Outcome {
            target: t.into(),
            version: v.into(),
            slug: crate::list::Target::spec(t).slug(),
            verdict: "PASS".into(),
            score: 0,
            categories: vec![],
            rules: vec![],
            duration_ms: 1,
            error: None,
            why: None,
            peak_memory_bytes: None,
        }
    }

    #[test]
    fn a_torn_last_line_is_ignored_and_the_last_outcome_wins() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("results.jsonl");
        append(&p, &o("a", "1")).unwrap();
        append(&p, &o("b", "1")).unwrap();
        append(&p, &o("a", "2")).unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b"{\"target\":\"c\",\"ver").unwrap();
        repair(&p).unwrap();
        append(&p, &o("d", "1")).unwrap();
        let all = load(&p).unwrap();
        assert_eq!(all.len(), 3, "{all:?}");
        assert_eq!(all["a"].version, "2");
        assert!(load(&d.path().join("none")).unwrap().is_empty());
    }
}
