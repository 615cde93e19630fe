//! The audit log: one JSON line per tool call (time, session, tool, arguments with large
//! values elided, outcome, duration, limit hit), appended with a single write each, flushed to
//! disk, and rotated by size (`audit.jsonl` → `.1` → … → `.N`). The last 100 entries are also
//! kept in memory for the `warden://audit` resource.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::Value;

/// Entries kept in memory.
const RECENT: usize = 100;
/// Strings longer than this are elided in logged arguments.
const MAX_LOGGED_STRING: usize = 256;

/// The audit log.
#[derive(Debug)]
pub struct Audit {
    path: PathBuf,
    max_bytes: u64,
    keep: u32,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    file: File,
    size: u64,
    recent: VecDeque<Value>,
}

fn open_append(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

impl Audit {
    /// Open (or create) the log at `path`.
    pub fn open(path: &Path, max_bytes: u64, keep: u32) -> std::io::Result<Audit> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = open_append(path)?;
        let size = file.metadata()?.len();
        Ok(Audit {
            path: path.to_owned(),
            max_bytes,
            keep,
            inner: Mutex::new(Inner {
                file,
                size,
                recent: VecDeque::new(),
            }),
        })
    }

    /// Where the log is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one entry. Failures are logged, never propagated: auditing must not take the
    /// server down, but it must not be silent either.
    pub fn record(&self, entry: Value) {
        let mut line = serde_json::to_vec(&entry).unwrap_or_default();
        line.push(b'\n');
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        if inner.size + line.len() as u64 > self.max_bytes && inner.size > 0 {
            match self.rotate() {
                Ok(file) => {
                    inner.file = file;
                    inner.size = 0;
                }
                Err(e) => tracing::error!(error = %e, "rotating the audit log"),
            }
        }
        let written = inner
            .file
            .write_all(&line)
            .and_then(|()| inner.file.sync_data());
        match written {
            Ok(()) => inner.size += line.len() as u64,
            Err(e) => tracing::error!(error = %e, "writing the audit log"),
        }
        if inner.recent.len() == RECENT {
            inner.recent.pop_front();
        }
        inner.recent.push_back(entry);
    }

    fn rotate(&self) -> std::io::Result<File> {
        let name = |n: u32| PathBuf::from(format!("{}.{n}", self.path.display()));
        if self.keep == 0 {
            std::fs::remove_file(&self.path)?;
        } else {
            for n in (1..self.keep).rev() {
                if name(n).exists() {
                    std::fs::rename(name(n), name(n + 1))?;
                }
            }
            std::fs::rename(&self.path, name(1))?;
        }
        open_append(&self.path)
    }

    /// The last entries, oldest first.
    pub fn recent(&self) -> Vec<Value> {
        self.inner
            .lock()
            .map(|i| i.recent.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// A copy of `v` with long strings and large arrays replaced by a note of their size.
pub fn elide(v: &Value) -> Value {
    match v {
        Value::String(s) if s.len() > MAX_LOGGED_STRING => {
            let mut cut = MAX_LOGGED_STRING;
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            Value::String(format!("{}…[{} bytes elided]", &s[..cut], s.len() - cut))
        }
        Value::Array(a) if a.len() > 64 => {
            let mut head: Vec<Value> = a.iter().take(64).map(elide).collect();
            head.push(Value::String(format!("…[{} more items]", a.len() - 64)));
            Value::Array(head)
        }
        Value::Array(a) => Value::Array(a.iter().map(elide).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), elide(v))).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rotates_by_size_and_keeps_n_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let audit = Audit::open(&path, 200, 2).unwrap();
        for i in 0..20 {
            audit.record(json!({ "i": i, "pad": "x".repeat(50) }));
        }
        assert!(std::fs::metadata(&path).unwrap().len() <= 200);
        assert!(dir.path().join("audit.jsonl.1").exists());
        assert!(dir.path().join("audit.jsonl.2").exists());
        assert!(!dir.path().join("audit.jsonl.3").exists());
        let last = std::fs::read_to_string(&path).unwrap();
        assert!(last.lines().last().unwrap().contains("\"i\":19"));
        for line in last.lines() {
            serde_json::from_str::<Value>(line).unwrap();
        }
        assert_eq!(audit.recent().len(), 20);
    }

    #[test]
    fn long_values_are_elided() {
        let v = elide(&json!({ "code": "a".repeat(1000), "n": 1 }));
        let code = v["code"].as_str().unwrap();
        assert!(
            code.len() < 300 && code.contains("744 bytes elided"),
            "{code}"
        );
        assert_eq!(v["n"], 1);
    }
}
