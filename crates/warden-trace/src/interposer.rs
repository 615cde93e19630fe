//! The environment-read observers injected into traced programs: a getenv/secure_getenv
//! interposer (a shared object built from `interposer/getenv.c` by this crate's build script,
//! loaded through the jail's `/etc/ld.so.preload`) and a Python `sitecustomize` hook for
//! `os.environ`, which Python fills at start-up without calling getenv (the interposer points
//! each Python interpreter at it, and the hook hides that again: `interposer/python.c`).
//!
//! Both announce a read of a credential-like name with `prctl(ENV_READ_OPTION, name, origin)`,
//! which the jail's filter hands to the tracer. They run inside the subject, so their reports
//! are in-process observations: a program can skip or forge them. Canaries are the
//! tamper-proof signal.

/// The `prctl` option that announces an environment read (`name` pointer, origin: 0 for
/// getenv, 1 for Python). No kernel implements it (the kernel answers EINVAL once the tracer
/// has recorded it). `prctl` because every container runtime's default seccomp profile allows
/// it: a made-up syscall number is refused by such a profile (EPERM, which outranks the jail's
/// notification), so reads went unrecorded in containers.
pub const ENV_READ_OPTION: u64 = 0x5744_0000;

const WORDS: &str = include_str!("../interposer/words.txt");

/// Where the interposer, the Python hook (`python/`) and the clock record appear inside the jail.
pub const TOOLS_DIR: &str = env!("WARDEN_TOOLS_DIR");
/// The interposer's file name in [`TOOLS_DIR`].
pub const LIBRARY_NAME: &str = env!("WARDEN_LIBRARY_NAME");

/// The interposer library.
pub const LIBRARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libwarden_env.so"));

/// Substrings (upper case) that make a variable name credential-like.
pub fn credential_words() -> impl Iterator<Item = &'static str> {
    WORDS.lines().map(str::trim).filter(|w| !w.is_empty())
}

/// Whether `name` looks like it holds a credential.
pub fn credential_like(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    credential_words().any(|w| upper.contains(w))
}

/// The Python `sitecustomize.py`.
pub fn sitecustomize() -> String {
    let words: Vec<String> = credential_words().map(|w| format!("{w:?}, ")).collect();
    include_str!("../interposer/sitecustomize.py")
        .replace("@WORDS@", &words.concat())
        .replace("@NR@", &libc::SYS_prctl.to_string())
        .replace("@OPTION@", &ENV_READ_OPTION.to_string())
        .replace("@HOOK@", &format!("{TOOLS_DIR}/python"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_artifacts() {
        assert!(credential_like("GITHUB_TOKEN"));
        assert!(credential_like("aws_secret_access_key"));
        assert!(!credential_like("PATH"));
        assert!(!credential_like("PYTHONHASHSEED"));
        assert!(LIBRARY.starts_with(b"\x7fELF"));
        let py = sitecustomize();
        assert!(py.contains("\"TOKEN\", ") && py.contains(&ENV_READ_OPTION.to_string()));
        assert!(!py.contains('@'));
    }
}
