//! The build identity of the jail's helper: a hash of what goes into it (this crate and the
//! event and trace crates whole, the workspace's lock file and manifest, the profile and the
//! compiler), so a helper binary from another build is recognised and never used (see
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
    // The three crates whole (sources, manifests, build scripts, the interposer's C source),
    // and the workspace's lock file and manifest (a dependency's version is part of the build).
    let inputs = [
        root.clone(),
        root.join("../warden-events"),
        root.join("../warden-trace"),
        root.join("../../Cargo.lock"),
        root.join("../../Cargo.toml"),
    ];
    let mut all = Vec::new();
    for i in &inputs {
        if i.is_dir() {
            files(i, &mut all);
        } else {
            all.push(i.clone());
        }
        println!("cargo:rerun-if-changed={}", i.display());
    }
    all.sort();
    let mut h = DefaultHasher::new();
    // The package version, the profile and the compiler.
    for var in ["CARGO_PKG_VERSION", "PROFILE", "RUSTC"] {
        std::env::var(var).unwrap_or_default().hash(&mut h);
    }
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    if let Ok(v) = std::process::Command::new(rustc).arg("-vV").output() {
        v.stdout.hash(&mut h);
    }
    for f in &all {
        f.strip_prefix(&root).unwrap_or(f).hash(&mut h);
        std::fs::read(f).unwrap_or_default().hash(&mut h);
    }
    println!("cargo:rustc-env=WARDEN_JAIL_BUILD={:016x}", h.finish());
}
