//! Builds the environment interposer (`interposer/getenv.c`) into a shared object that the
//! crate embeds. Needs a C compiler (`cc`, or `$CC`).

use std::path::PathBuf;
use std::process::Command;

/// The prctl option the interposer announces a read with (`interposer::ENV_READ_OPTION`).
const ENV_READ_OPTION: u32 = 0x5744_0000;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    let words = std::fs::read_to_string("interposer/words.txt").unwrap_or_default();
    let list: Vec<String> = words
        .lines()
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .map(|w| format!("\"{w}\""))
        .collect();
    let header = format!(
        "static const char *const WARDEN_WORDS[] = {{{}, 0}};\n#define WARDEN_ENV_READ_OPTION {ENV_READ_OPTION}L\n",
        list.join(", ")
    );
    if let Err(e) = std::fs::write(out.join("words.h"), header) {
        panic!("writing words.h: {e}");
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args([
            "-shared",
            "-fPIC",
            "-O2",
            "-Wall",
            "-Werror",
            "-nostartfiles",
        ])
        .arg("-I")
        .arg(&out)
        .arg("-o")
        .arg(out.join("libwarden_env.so"))
        .arg("interposer/getenv.c")
        .status();
    match status {
        Ok(s) if s.success() => {}
        other => panic!("building the environment interposer with {cc}: {other:?}"),
    }
    println!("cargo::rerun-if-changed=interposer");
    println!("cargo::rerun-if-env-changed=CC");
    println!("cargo::rustc-env=WARDEN_ENV_READ_OPTION={ENV_READ_OPTION}");
}
