//! The offline OSV source: a folder in osv-scanner's layout — `DIR/<Ecosystem>/all.zip` (also
//! under `DIR/osv-scanner/` and `DIR/osv-scalibr/`, where those tools keep their caches), or
//! the same folders holding the advisories unpacked as `*.json`.
//!
//! Only the ecosystems the inventory needs are read, and only advisories naming one of the
//! wanted packages are kept. Entries are bounded (an entry over [`MAX_ENTRY`] is skipped and
//! counted), so a hostile archive costs time, never unbounded memory. An ecosystem the folder
//! has no data for is reported as such: its components are *unknown*, not clean.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};

use super::Advisory;
use crate::component::Ecosystem;

/// Largest advisory read (real ones are a few KiB; the largest known ~1 MiB).
pub const MAX_ENTRY: u64 = 8 << 20;

/// Most advisories read from one ecosystem's data (PyPI has ~20k today).
pub const MAX_ENTRIES: usize = 2_000_000;

/// What the offline folder holds for the wanted packages.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Advisories by (ecosystem, normalised package name).
    pub by_package: BTreeMap<(Ecosystem, String), Vec<Advisory>>,
    /// Ecosystems the folder had data for, with the file or folder read.
    pub sources: BTreeMap<Ecosystem, PathBuf>,
    /// Ecosystems it had no data for.
    pub missing: Vec<Ecosystem>,
    /// Entries skipped as too large or not OSV JSON.
    pub skipped: usize,
}

/// Why the folder could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The folder is not there.
    #[error("{0}: no such folder")]
    NotAFolder(PathBuf),
    /// An archive could not be read.
    #[error("{path}: {why}")]
    Unreadable {
        /// The archive.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

/// Read what `dir` holds about `wanted` (ecosystem → normalised names).
pub fn load(dir: &Path, wanted: &BTreeMap<Ecosystem, BTreeSet<String>>) -> Result<Loaded, DbError> {
    if !dir.is_dir() {
        return Err(DbError::NotAFolder(dir.to_path_buf()));
    }
    let mut out = Loaded::default();
    for (&eco, names) in wanted {
        let Some(source) = locate(dir, eco) else {
            out.missing.push(eco);
            continue;
        };
        let mut keep = |bytes: &[u8]| match serde_json::from_slice::<Advisory>(bytes) {
            Ok(a) => {
                let hits: BTreeSet<String> = a
                    .affected
                    .iter()
                    .filter_map(|x| x.package.as_ref())
                    .filter(|p| p.ecosystem.split(':').next() == Some(eco.osv_name()))
                    .map(|p| eco.normal(&p.name))
                    .filter(|n| names.contains(n))
                    .collect();
                for n in hits {
                    out.by_package.entry((eco, n)).or_default().push(a.clone());
                }
            }
            Err(_) => out.skipped += 1,
        };
        let skipped = if source.is_file() {
            read_zip(&source, &mut keep)?
        } else {
            read_folder(&source, &mut keep)
        };
        out.skipped += skipped;
        out.sources.insert(eco, source);
    }
    Ok(out)
}

/// Where `dir` keeps `eco`'s data, in the layouts osv-scanner and osv-scalibr use.
fn locate(dir: &Path, eco: Ecosystem) -> Option<PathBuf> {
    let bases = [
        dir.to_path_buf(),
        dir.join("osv-scanner"),
        dir.join("osv-scalibr"),
    ];
    let zips = bases.iter().map(|b| b.join(eco.osv_name()).join("all.zip"));
    let folders = bases.iter().map(|b| b.join(eco.osv_name()));
    zips.clone()
        .find(|z| z.is_file())
        .or_else(|| folders.into_iter().find(|f| has_json(f)))
}

fn has_json(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut r| {
        r.any(|e| e.is_ok_and(|e| e.path().extension().is_some_and(|x| x == "json")))
    })
}

/// Every entry of the archive to `keep`; returns how many were skipped as too large.
fn read_zip(path: &Path, keep: &mut dyn FnMut(&[u8])) -> Result<usize, DbError> {
    let bad = |why: String| DbError::Unreadable {
        path: path.to_path_buf(),
        why,
    };
    let file = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
    let mut zip = zip::ZipArchive::new(file).map_err(|e| bad(e.to_string()))?;
    let mut skipped = 0;
    let mut buf = Vec::new();
    for i in 0..zip.len().min(MAX_ENTRIES) {
        let Ok(entry) = zip.by_index(i) else {
            skipped += 1;
            continue;
        };
        if !entry.name().is_ok_and(|n| n.ends_with(".json")) {
            continue;
        }
        buf.clear();
        // The declared size can lie: the read itself is bounded too.
        if entry.size() > MAX_ENTRY
            || entry.take(MAX_ENTRY + 1).read_to_end(&mut buf).is_err()
            || buf.len() as u64 > MAX_ENTRY
        {
            skipped += 1;
            continue;
        }
        keep(&buf);
    }
    Ok(skipped)
}

/// Every `*.json` in the folder (not below it) to `keep`; returns how many were skipped.
fn read_folder(dir: &Path, keep: &mut dyn FnMut(&[u8])) -> usize {
    let mut skipped = 0;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    for e in entries.flatten().take(MAX_ENTRIES) {
        let p = e.path();
        if p.extension().is_none_or(|x| x != "json") {
            continue;
        }
        match crate::read_bounded(&p, MAX_ENTRY) {
            Some(bytes) => keep(&bytes),
            None => skipped += 1,
        }
    }
    skipped
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn oversized_and_broken_entries_are_skipped_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("npm")).unwrap();
        let file = std::fs::File::create(dir.path().join("npm/all.zip")).unwrap();
        let mut z = zip::ZipWriter::new(file);
        let stored = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        let good = r#"{"id":"G-1","affected":[{"package":{"ecosystem":"npm","name":"x"},"versions":["1.0.0"]}]}"#;
        z.start_file("G-1.json", stored).unwrap();
        z.write_all(good.as_bytes()).unwrap();
        z.start_file("broken.json", stored).unwrap();
        z.write_all(b"{ not json").unwrap();
        z.start_file("huge.json", stored).unwrap();
        let chunk = vec![b' '; 1 << 20];
        for _ in 0..9 {
            z.write_all(&chunk).unwrap();
        }
        z.finish().unwrap();
        let wanted = BTreeMap::from([
            (Ecosystem::Npm, BTreeSet::from(["x".to_owned()])),
            (Ecosystem::PyPI, BTreeSet::from(["y".to_owned()])),
        ]);
        let loaded = load(dir.path(), &wanted).unwrap();
        assert_eq!(loaded.skipped, 2);
        assert_eq!(
            loaded.by_package[&(Ecosystem::Npm, "x".to_owned())].len(),
            1
        );
        assert_eq!(loaded.missing, [Ecosystem::PyPI]);
        assert!(load(&dir.path().join("nope"), &wanted).is_err());
    }
}
