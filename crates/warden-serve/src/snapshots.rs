//! Workspace snapshots: content-addressed, deduplicated, crash-safe, exactly restorable.
//!
//! A store is a directory beside the workspace (never inside it, where sandboxed code could
//! tamper with it): `blobs/<sha256>` holds file contents once however many snapshots use them;
//! `manifests/<id>.json` lists every entry of a snapshot (path, kind, size, mode, mtime, hash,
//! symlink target). Blobs are written first and a manifest last, each as write → fsync →
//! rename → fsync of the directory, so a crash at any point leaves the old or the new state and
//! never a manifest that refers to a missing blob. Leftover temporary files are swept on open.
//!
//! The workspace is read and written through `cap-std`, so a symlink that sandboxed code swaps
//! in cannot make a snapshot read, or a restore write, anything outside the workspace.
//!
//! Names are kept exactly: a path or link target that is not UTF-8 is stored as its bytes
//! (base64, beside a display form with `\xNN` escapes), so a restore recreates and removes the
//! very names that were there, and two names that differ only in invalid bytes stay two.
//! Special files (FIFOs, sockets, devices) cannot be snapshotted: they are listed as skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use std::time::{Duration, UNIX_EPOCH};

use cap_fs_ext::{DirExt, SystemTimeSpec};
use cap_std::fs::{Dir, PermissionsExt};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error;

/// Entries per snapshot, at most.
const MAX_ENTRIES: usize = 100_000;
/// Snapshots per store, at most.
const MAX_SNAPSHOTS: usize = 200;

/// Errors of the store.
#[derive(Debug, Error)]
pub enum SnapshotError {
    /// No such snapshot.
    #[error("no snapshot {0:?}")]
    NotFound(String),
    /// The store would grow past its limit.
    #[error("the snapshot store would exceed its limit of {limit} bytes ({needed} needed)")]
    TooLarge {
        /// The limit.
        limit: u64,
        /// What it would take.
        needed: u64,
    },
    /// Too many files.
    #[error("the workspace has more than {MAX_ENTRIES} entries")]
    TooManyEntries,
    /// Too many snapshots.
    #[error("the store already holds {MAX_SNAPSHOTS} snapshots; delete some")]
    TooMany,
    /// A manifest names a blob that is not there (the store was tampered with).
    #[error("snapshot {0:?} is damaged: a blob is missing")]
    Damaged(String),
    /// An I/O error.
    #[error("{what}: {source}")]
    Io {
        /// Doing what.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SnapshotError {
    let what = what.into();
    move |source| SnapshotError::Io { what, source }
}

/// What an entry is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
}

/// One entry of a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Path relative to the workspace, for display (bytes that are not UTF-8 as `\xNN`).
    pub path: String,
    /// The path's exact bytes (base64) when it is not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_bytes: Option<String>,
    /// Kind.
    pub kind: Kind,
    /// Size in bytes (files).
    pub size: u64,
    /// Permission bits.
    pub mode: u32,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: u128,
    /// Content hash (files).
    pub sha256: Option<String>,
    /// Link target (symlinks), for display.
    pub target: Option<String>,
    /// The link target's exact bytes (base64) when it is not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_bytes: Option<String>,
}

/// A name's display form (invalid bytes as `\xNN`) and, when it is not UTF-8, its exact
/// bytes in base64.
fn named(name: &OsStr) -> (String, Option<String>) {
    match name.to_str() {
        Some(s) => (s.to_owned(), None),
        None => {
            let bytes = name.as_bytes();
            let mut shown = String::new();
            for chunk in bytes.utf8_chunks() {
                shown.push_str(chunk.valid());
                for b in chunk.invalid() {
                    shown.push_str(&format!("\\x{b:02x}"));
                }
            }
            let exact = base64::engine::general_purpose::STANDARD.encode(bytes);
            (shown, Some(exact))
        }
    }
}

/// The exact name back from its display form and bytes.
fn exact(shown: &str, bytes: Option<&String>) -> OsString {
    bytes
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .map_or_else(|| OsString::from(shown), OsString::from_vec)
}

impl Entry {
    /// The path, exactly.
    pub fn exact_path(&self) -> PathBuf {
        PathBuf::from(exact(&self.path, self.path_bytes.as_ref()))
    }

    /// The link target, exactly.
    pub fn exact_target(&self) -> Option<OsString> {
        self.target
            .as_deref()
            .map(|t| exact(t, self.target_bytes.as_ref()))
    }

    /// The key entries are compared and sorted by: the exact path bytes.
    fn key(&self) -> Vec<u8> {
        self.exact_path().into_os_string().into_vec()
    }
}

/// A snapshot's manifest.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    /// Its id.
    pub id: String,
    /// The caller's description.
    pub description: String,
    /// Creation time, milliseconds since the epoch.
    pub created_ms: u128,
    /// Sum of file sizes.
    pub total_bytes: u64,
    /// Entries, sorted by path.
    pub entries: Vec<Entry>,
    /// Special files (FIFOs, sockets, devices) that were not snapshotted (display paths).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
}

/// Paths changed since a snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Diff {
    /// In the workspace, not in the snapshot.
    pub added: Vec<String>,
    /// In the snapshot, not in the workspace.
    pub removed: Vec<String>,
    /// In both, but different (kind, content, mode or link target).
    pub modified: Vec<String>,
}

/// A snapshot store for one workspace.
#[derive(Debug)]
pub struct Store {
    root: PathBuf,
    limit: u64,
}

fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), SnapshotError> {
    let tmp = dir.join(format!(".tmp-{name}-{}", std::process::id()));
    let mut f = std::fs::File::create(&tmp).map_err(io(format!("creating {tmp:?}")))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(io(format!("writing {tmp:?}")))?;
    drop(f);
    std::fs::rename(&tmp, dir.join(name)).map_err(io(format!("renaming {tmp:?}")))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(format!("syncing {dir:?}")))
}

fn mtime_ns(m: &cap_std::fs::Metadata) -> u128 {
    m.modified()
        .ok()
        .and_then(|t| t.into_std().duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos())
}

fn hash_file(f: &mut cap_std::fs::File) -> std::io::Result<(String, u64)> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut n = 0u64;
    loop {
        let k = f.read(&mut buf)?;
        if k == 0 {
            break;
        }
        n += k as u64;
        h.update(&buf[..k]);
    }
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok((hex, n))
}

/// What a walk of the workspace found.
type Scanned = Vec<(Entry, Option<PathBuf>)>;

/// Walk the workspace without following symlinks; entries sorted by their exact path, and the
/// special files that cannot be snapshotted.
fn scan(ws: &Dir) -> Result<(Scanned, Vec<String>), SnapshotError> {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let d = if rel.as_os_str().is_empty() {
            ws.try_clone().map_err(io("opening the workspace"))?
        } else {
            ws.open_dir_nofollow(&rel)
                .map_err(io(format!("opening {rel:?}")))?
        };
        for e in d
            .entries()
            .map_err(io(format!("listing {rel:?}")))?
            .flatten()
        {
            if out.len() >= MAX_ENTRIES {
                return Err(SnapshotError::TooManyEntries);
            }
            let path = rel.join(e.file_name());
            let Ok(m) = e.metadata() else { continue };
            let ft = m.file_type();
            let (shown, path_bytes) = named(path.as_os_str());
            let entry = |kind, size, sha256, target: Option<&OsStr>| {
                let (target, target_bytes) = target.map(named).unzip();
                Entry {
                    path: shown.clone(),
                    path_bytes: path_bytes.clone(),
                    kind,
                    size,
                    mode: m.permissions().mode() & 0o7777,
                    mtime_ns: mtime_ns(&m),
                    sha256,
                    target,
                    target_bytes: target_bytes.flatten(),
                }
            };
            if ft.is_symlink() {
                let t = ws
                    .read_link_contents(&path)
                    .map_err(io(format!("reading {path:?}")))?;
                out.push((entry(Kind::Symlink, 0, None, Some(t.as_os_str())), None));
            } else if ft.is_dir() {
                stack.push(path.clone());
                out.push((entry(Kind::Dir, 0, None, None), None));
            } else if ft.is_file() {
                out.push((entry(Kind::File, m.len(), None, None), Some(path.clone())));
            } else {
                skipped.push(shown);
            }
        }
    }
    out.sort_by_cached_key(|a| a.0.key());
    skipped.sort();
    Ok((out, skipped))
}

impl Store {
    /// Open (creating) the store at `root` with a total-size `limit`.
    pub fn open(root: &Path, limit: u64) -> Result<Store, SnapshotError> {
        for d in ["blobs", "manifests"] {
            let dir = root.join(d);
            std::fs::create_dir_all(&dir).map_err(io(format!("creating {dir:?}")))?;
            // A crash may have left temporary files: they are not part of any snapshot.
            for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                if e.file_name().to_string_lossy().starts_with(".tmp-") {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        Ok(Store {
            root: root.to_owned(),
            limit,
        })
    }

    fn blob(&self, hash: &str) -> PathBuf {
        self.root.join("blobs").join(hash)
    }

    /// Bytes used by blobs and manifests.
    pub fn bytes(&self) -> u64 {
        ["blobs", "manifests"]
            .iter()
            .flat_map(|d| {
                std::fs::read_dir(self.root.join(d))
                    .into_iter()
                    .flatten()
                    .flatten()
            })
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum()
    }

    /// Copy one workspace file into a temporary blob while hashing it, then file it under its
    /// hash (dropping the copy if that content is already stored). Counts new bytes in `used`.
    fn store_blob(
        &self,
        ws: &Dir,
        path: &Path,
        used: &mut u64,
        added: &mut Vec<PathBuf>,
    ) -> Result<(String, u64), SnapshotError> {
        let blobs = self.root.join("blobs");
        let mut src = crate::wsfs::open_read(ws, path).map_err(io(format!("reading {path:?}")))?;
        let tmp = blobs.join(format!(".tmp-{}-{}", std::process::id(), added.len()));
        let mut out = std::fs::File::create(&tmp).map_err(io(format!("creating {tmp:?}")))?;
        let mut h = Sha256::new();
        let mut buf = vec![0u8; 1 << 16];
        let mut n = 0u64;
        let copied = loop {
            let k = match src.read(&mut buf) {
                Ok(0) => break Ok(()),
                Ok(k) => k,
                Err(e) => break Err(io(format!("reading {path:?}"))(e)),
            };
            n += k as u64;
            if *used + n > self.limit {
                break Err(SnapshotError::TooLarge {
                    limit: self.limit,
                    needed: *used + n,
                });
            }
            h.update(&buf[..k]);
            if let Err(e) = out.write_all(&buf[..k]) {
                break Err(io(format!("writing {tmp:?}"))(e));
            }
        };
        let synced = copied.and_then(|()| out.sync_all().map_err(io(format!("syncing {tmp:?}"))));
        drop(out);
        if let Err(e) = synced {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        let hash: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        let blob = self.blob(&hash);
        if blob.exists() {
            let _ = std::fs::remove_file(&tmp);
        } else {
            std::fs::rename(&tmp, &blob).map_err(io(format!("storing {hash}")))?;
            std::fs::File::open(&blobs)
                .and_then(|d| d.sync_all())
                .map_err(io("syncing the blob directory"))?;
            *used += n;
            added.push(blob);
        }
        Ok((hash, n))
    }

    fn list_ids(&self) -> Vec<String> {
        std::fs::read_dir(self.root.join("manifests"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                e.file_name()
                    .to_str()
                    .and_then(|n| n.strip_suffix(".json"))
                    .map(str::to_owned)
            })
            .filter(|n| !n.starts_with('.'))
            .collect()
    }

    /// Snapshot the workspace. A failed snapshot leaves no blob of its own behind.
    pub fn create(&self, ws: &Dir, description: &str) -> Result<Manifest, SnapshotError> {
        let mut added = Vec::new();
        let result = self.create_inner(ws, description, &mut added);
        if result.is_err() {
            for blob in added {
                let _ = std::fs::remove_file(blob);
            }
        }
        result
    }

    fn create_inner(
        &self,
        ws: &Dir,
        description: &str,
        added: &mut Vec<PathBuf>,
    ) -> Result<Manifest, SnapshotError> {
        let (scanned, skipped) = scan(ws)?;
        let mut entries = Vec::with_capacity(scanned.len());
        let mut used = self.bytes();
        let mut total = 0u64;
        for (mut e, file) in scanned {
            if let Some(path) = file {
                // One pass: what is hashed is exactly what is stored, however the file changes.
                let (hash, size) = self.store_blob(ws, &path, &mut used, added)?;
                e.size = size;
                total += size;
                e.sha256 = Some(hash);
            }
            entries.push(e);
        }
        if self.list_ids().len() >= MAX_SNAPSHOTS {
            return Err(SnapshotError::TooMany);
        }
        let created_ms = std::time::SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let n = std::fs::read_dir(self.root.join("manifests")).map_or(0, |d| d.count());
        let id = format!("snap-{created_ms:x}-{n}");
        let m = Manifest {
            id: id.clone(),
            description: description.to_owned(),
            created_ms,
            total_bytes: total,
            entries,
            skipped,
        };
        let json = serde_json::to_vec(&m).unwrap_or_default();
        write_atomic(&self.root.join("manifests"), &format!("{id}.json"), &json)?;
        Ok(m)
    }

    /// Every snapshot, oldest first.
    pub fn list(&self) -> Vec<Manifest> {
        let mut all: Vec<Manifest> = std::fs::read_dir(self.root.join("manifests"))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .filter_map(|e| std::fs::read(e.path()).ok())
            .filter_map(|b| serde_json::from_slice(&b).ok())
            .collect();
        all.sort_by_key(|m| (m.created_ms, m.id.clone()));
        all
    }

    /// One snapshot.
    pub fn get(&self, id: &str) -> Result<Manifest, SnapshotError> {
        if !id.starts_with("snap-") || id.contains(['/', '.']) {
            return Err(SnapshotError::NotFound(id.to_owned()));
        }
        let bytes = std::fs::read(self.root.join("manifests").join(format!("{id}.json")))
            .map_err(|_| SnapshotError::NotFound(id.to_owned()))?;
        serde_json::from_slice(&bytes).map_err(|_| SnapshotError::Damaged(id.to_owned()))
    }

    /// Delete a snapshot and the blobs no other snapshot uses.
    pub fn delete(&self, id: &str) -> Result<(), SnapshotError> {
        self.get(id)?;
        let path = self.root.join("manifests").join(format!("{id}.json"));
        std::fs::remove_file(&path).map_err(io(format!("removing {path:?}")))?;
        let live: BTreeSet<String> = self
            .list()
            .into_iter()
            .flat_map(|m| m.entries.into_iter().filter_map(|e| e.sha256))
            .collect();
        for e in std::fs::read_dir(self.root.join("blobs"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.starts_with('.') && !live.contains(&name) {
                let _ = std::fs::remove_file(e.path());
            }
        }
        Ok(())
    }

    /// What changed in the workspace since snapshot `id`.
    pub fn diff(&self, ws: &Dir, id: &str) -> Result<Diff, SnapshotError> {
        let snap = self.get(id)?;
        let then: BTreeMap<Vec<u8>, &Entry> = snap.entries.iter().map(|e| (e.key(), e)).collect();
        let (now, _) = scan(ws)?;
        let mut added = Vec::new();
        let mut modified = Vec::new();
        let mut seen = BTreeSet::new();
        for (mut e, file) in now {
            let key = e.key();
            let Some(old) = then.get(&key) else {
                added.push(e.path);
                continue;
            };
            seen.insert(key);
            if let Some(path) = file {
                // Same size: compare contents by hash (mtimes alone are not trusted).
                if old.size == e.size {
                    let mut f = crate::wsfs::open_read(ws, &path)
                        .map_err(io(format!("reading {path:?}")))?;
                    e.sha256 = Some(
                        hash_file(&mut f)
                            .map_err(io(format!("reading {path:?}")))?
                            .0,
                    );
                }
            }
            let same = old.kind == e.kind
                && old.mode == e.mode
                && old.exact_target() == e.exact_target()
                && (e.kind != Kind::File || (old.size == e.size && old.sha256 == e.sha256));
            if !same {
                modified.push(e.path);
            }
        }
        let removed = then
            .iter()
            .filter(|(k, _)| !seen.contains(*k))
            .map(|(_, e)| e.path.clone())
            .collect();
        Ok(Diff {
            added,
            removed,
            modified,
        })
    }

    /// Make the workspace exactly snapshot `id`: extra entries removed, changed ones rewritten,
    /// missing ones recreated, modes and modification times restored.
    pub fn restore(&self, ws: &Dir, id: &str) -> Result<Manifest, SnapshotError> {
        self.restore_except(ws, id, &|_, _| false).map(|(m, _)| m)
    }

    /// [`Self::restore`], except that every path `left(path, is_dir)` names is left as it is
    /// now — neither removed, nor created, rewritten or re-moded (the protected paths of a
    /// lasting workspace: a snapshot must not bring back a git hook or an agent's
    /// configuration that was removed since). Returns the snapshot and the paths left alone.
    pub fn restore_except(
        &self,
        ws: &Dir,
        id: &str,
        left: &dyn Fn(&Path, bool) -> bool,
    ) -> Result<(Manifest, Vec<String>), SnapshotError> {
        let mut left_alone: Vec<String> = Vec::new();
        let mut skip = |e: &Entry| {
            let hit = left(&e.exact_path(), e.kind == Kind::Dir);
            if hit && !left_alone.contains(&e.path) {
                left_alone.push(e.path.clone());
            }
            hit
        };
        let snap = self.get(id)?;
        for e in &snap.entries {
            if let Some(h) = &e.sha256
                && !self.blob(h).exists()
            {
                return Err(SnapshotError::Damaged(id.to_owned()));
            }
        }
        let want: BTreeMap<Vec<u8>, &Entry> = snap.entries.iter().map(|e| (e.key(), e)).collect();
        // Remove what should not be there (deepest first), or is of another kind.
        let (mut current, _) = scan(ws)?;
        current.reverse();
        for (e, _) in &current {
            let keep = want.get(&e.key()).is_some_and(|w| w.kind == e.kind);
            if !keep && !skip(e) {
                let p = e.exact_path();
                let r = if e.kind == Kind::Dir {
                    ws.remove_dir_all(&p)
                } else {
                    ws.remove_file(&p)
                };
                if let Err(err) = r
                    && err.kind() != std::io::ErrorKind::NotFound
                {
                    return Err(io(format!("removing {:?}", e.path))(err));
                }
            }
        }
        let now: BTreeMap<Vec<u8>, Entry> =
            scan(ws)?.0.into_iter().map(|(e, _)| (e.key(), e)).collect();
        for e in &snap.entries {
            if skip(e) {
                continue;
            }
            let p = e.exact_path();
            let p = p.as_path();
            let here = now.get(&e.key());
            match e.kind {
                Kind::Dir => {
                    if here.is_none() {
                        ws.create_dir(p)
                            .map_err(io(format!("creating {:?}", e.path)))?;
                    }
                }
                Kind::Symlink => {
                    let target = e.exact_target().unwrap_or_default();
                    if here.and_then(Entry::exact_target).as_ref() != Some(&target) {
                        let _ = ws.remove_file(p);
                        ws.symlink_contents(&target, p)
                            .map_err(io(format!("linking {:?}", e.path)))?;
                    }
                }
                Kind::File => {
                    let hash = e.sha256.as_deref().unwrap_or("");
                    let unchanged = here.is_some_and(|c| {
                        c.size == e.size
                            && crate::wsfs::open_read(ws, p)
                                .ok()
                                .and_then(|mut f| hash_file(&mut f).ok())
                                .is_some_and(|(h, _)| h == hash)
                    });
                    if !unchanged {
                        let data = std::fs::read(self.blob(hash))
                            .map_err(io(format!("reading blob {hash}")))?;
                        let (mut f, tmp) = crate::wsfs::create_temp(ws, p)
                            .map_err(io(format!("writing {:?}", e.path)))?;
                        f.write_all(&data)
                            .and_then(|()| f.sync_data())
                            .map_err(io(format!("writing {:?}", e.path)))?;
                        drop(f);
                        ws.rename(&tmp, ws, p)
                            .map_err(io(format!("writing {:?}", e.path)))?;
                    }
                }
            }
        }
        // Modes and times last, children before parents (writing into a directory changes its
        // mtime); symlinks have no mode of their own on Linux.
        for e in snap.entries.iter().rev() {
            if skip(e) {
                continue;
            }
            let p = e.exact_path();
            let p = p.as_path();
            let secs = u64::try_from(e.mtime_ns / 1_000_000_000).unwrap_or(0);
            let nanos = u32::try_from(e.mtime_ns % 1_000_000_000).unwrap_or(0);
            let t = cap_std::time::SystemTime::from_std(UNIX_EPOCH + Duration::new(secs, nanos));
            let spec = Some(SystemTimeSpec::Absolute(t));
            if e.kind == Kind::Symlink {
                let _ = ws.set_symlink_times(p, None, spec);
            } else {
                // Never setuid/setgid: the server writes these files with its own (root) ids.
                ws.set_permissions(p, cap_std::fs::Permissions::from_mode(e.mode & 0o1777))
                    .map_err(io(format!("chmod {:?}", e.path)))?;
                ws.set_times(p, None, spec)
                    .map_err(io(format!("touch {:?}", e.path)))?;
            }
        }
        left_alone.sort();
        Ok((snap, left_alone))
    }
}
