//! Builds the interposer (`interposer/getenv.c`, the environment reads, and
//! `interposer/clock.c`, the virtual clock, and `interposer/python.c`, which points a Python
//! interpreter at its hook) into a shared object that the
//! crate embeds. Needs a C compiler (`cc`, or `$CC`).

use std::path::PathBuf;
use std::process::Command;

/// The prctl option the interposer announces a read with (`interposer::ENV_READ_OPTION`).
const ENV_READ_OPTION: u32 = 0x5744_0000;
/// Where the interposer, the Python hook and the clock record appear inside the jail
/// (`interposer::TOOLS_DIR`): a name no different from any other library folder, since a program
/// that finds a sandbox's name in its maps, its `sys.path` or its mounts may stay quiet.
const TOOLS_DIR: &str = "/var/lib/ldhooks";
/// The interposer's file name there (`interposer::LIBRARY_NAME`).
const LIBRARY_NAME: &str = "libldhooks.so";
/// Where the run's clock record appears inside the jail (`clock::FILE_IN_JAIL`).
const CLOCK_FILE: &str = "/var/lib/ldhooks/clock";
/// The record's mark (`clock::MAGIC`).
const CLOCK_MAGIC: u32 = 0x4b4c_4357;

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
    let clock = format!(
        "#define WARDEN_CLOCK_FILE \"{CLOCK_FILE}\"\n#define WARDEN_CLOCK_MAGIC {CLOCK_MAGIC}u\n\
         #define WARDEN_PYTHON_HOOK \"{TOOLS_DIR}/python\"\n"
    );
    if let Err(e) = std::fs::write(out.join("clock.h"), clock) {
        panic!("writing clock.h: {e}");
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
        .arg("interposer/clock.c")
        .arg("interposer/python.c")
        .arg("-ldl")
        .status();
    match status {
        Ok(s) if s.success() => {}
        other => panic!("building the environment interposer with {cc}: {other:?}"),
    }
    println!("cargo::rerun-if-changed=interposer");
    println!("cargo::rerun-if-env-changed=CC");
    println!("cargo::rustc-env=WARDEN_ENV_READ_OPTION={ENV_READ_OPTION}");
    println!("cargo::rustc-env=WARDEN_CLOCK_FILE={CLOCK_FILE}");
    println!("cargo::rustc-env=WARDEN_TOOLS_DIR={TOOLS_DIR}");
    println!("cargo::rustc-env=WARDEN_LIBRARY_NAME={LIBRARY_NAME}");
    println!("cargo::rustc-env=WARDEN_CLOCK_MAGIC={CLOCK_MAGIC}");
}
