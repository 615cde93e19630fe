//! The build identity of the jail's helper protocol: a hash of the sources that define what
//! the caller and the helper say to each other (this crate's, and the event and trace types it
//! sends), so a helper binary from another build is recognised and never spoken to (see
//! `Jail::current_exe` and `helper_main`).

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn main() {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let dirs = [
        root.join("src"),
        root.join("../warden-events/src"),
        root.join("../warden-trace/src"),
    ];
    let mut all = Vec::new();
    for d in &dirs {
        files(d, &mut all);
        println!("cargo:rerun-if-changed={}", d.display());
    }
    all.sort();
    let mut h = DefaultHasher::new();
    std::env::var("CARGO_PKG_VERSION")
        .unwrap_or_default()
        .hash(&mut h);
    for f in &all {
        f.strip_prefix(&root).unwrap_or(f).hash(&mut h);
        std::fs::read(f).unwrap_or_default().hash(&mut h);
    }
    println!("cargo:rustc-env=WARDEN_JAIL_BUILD={:016x}", h.finish());
}
