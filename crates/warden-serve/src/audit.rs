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
    recent: Mutex<VecDeque<Value>>,
    /// Lines for the writer thread; `None` once shutting down.
    queue: Mutex<Option<std::sync::mpsc::Sender<Vec<u8>>>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

fn open_append(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

/// The writer thread's state: appends, rotates, and syncs once per batch (group commit), so
/// tool calls never wait on the disk.
struct Writer {
    path: PathBuf,
    max_bytes: u64,
    keep: u32,
    file: File,
    size: u64,
}

impl Writer {
    fn rotate(&mut self) -> std::io::Result<()> {
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
        self.file = open_append(&self.path)?;
        self.size = 0;
        Ok(())
    }

    fn append(&mut self, line: &[u8]) {
        if self.size + line.len() as u64 > self.max_bytes
            && self.size > 0
            && let Err(e) = self.file.sync_data().and_then(|()| self.rotate())
        {
            tracing::error!(error = %e, "rotating the audit log");
        }
        match self.file.write_all(line) {
            Ok(()) => self.size += line.len() as u64,
            Err(e) => tracing::error!(error = %e, "writing the audit log"),
        }
    }

    fn run(mut self, rx: std::sync::mpsc::Receiver<Vec<u8>>) {
        while let Ok(line) = rx.recv() {
            self.append(&line);
            while let Ok(more) = rx.try_recv() {
                self.append(&more);
            }
            if let Err(e) = self.file.sync_data() {
                tracing::error!(error = %e, "syncing the audit log");
            }
        }
    }
}

impl Audit {
    /// Open (or create) the log at `path`.
    pub fn open(path: &Path, max_bytes: u64, keep: u32) -> std::io::Result<Audit> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = open_append(path)?;
        let size = file.metadata()?.len();
        let writer = Writer {
            path: path.to_owned(),
            max_bytes,
            keep,
            file,
            size,
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let handle = std::thread::Builder::new()
            .name("warden-audit".into())
            .spawn(move || writer.run(rx))?;
        Ok(Audit {
            path: path.to_owned(),
            recent: Mutex::new(VecDeque::new()),
            queue: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(handle)),
        })
    }

    /// Where the log is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one entry (written and synced by the writer thread, in order).
    pub fn record(&self, entry: Value) {
        let mut line = serde_json::to_vec(&entry).unwrap_or_default();
        line.push(b'\n');
        if let Ok(q) = self.queue.lock()
            && let Some(tx) = q.as_ref()
            && tx.send(line).is_err()
        {
            tracing::error!("the audit writer is gone");
        }
        if let Ok(mut recent) = self.recent.lock() {
            if recent.len() == RECENT {
                recent.pop_front();
            }
            recent.push_back(entry);
        }
    }

    /// Write and sync everything recorded so far, then stop the writer.
    pub fn close(&self) {
        if let Ok(mut q) = self.queue.lock() {
            q.take();
        }
        if let Some(h) = self.writer.lock().ok().and_then(|mut w| w.take()) {
            let _ = h.join();
        }
    }

    /// The last entries, oldest first.
    pub fn recent(&self) -> Vec<Value> {
        self.recent
            .lock()
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default()
    }
}

impl Drop for Audit {
    fn drop(&mut self) {
        self.close();
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
        audit.close();
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
