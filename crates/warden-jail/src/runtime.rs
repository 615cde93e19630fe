//! The installation a program needs, for programs that live outside the jail's view:
//! interpreters from pyenv, nvm, conda, asdf or a copy under `/opt`, a virtual environment and
//! its base interpreter, a script and the interpreter its `#!` line names.
//!
//! [`installations`] follows the program's symbolic links and its `#!` interpreter (a few
//! levels deep) and answers, for each file it meets that the jail does not show, the smallest
//! folder that holds its installation: the prefix above its `bin/` (where a Python keeps its
//! `lib/pythonX.Y`, Node its `lib/node_modules`), a virtual environment and, through its
//! `pyvenv.cfg`, the base interpreter's prefix.
//!
//! Guarantees: only reads the file system (never runs the program); follows only executable
//! regular files that are programs (ELF or `#!`), and a venv's `home` only when the venv's own
//! `bin/python` leads there; never answers `/`, a top-level folder, the system's state and
//! configuration (`/etc`, `/run`, `/var/lib` and the like, `/proc`, `/sys`, `/dev`, `/boot`), a home folder, or
//! anything in a home that is not a known runtime layout (pyenv, nvm, uv, conda, asdf, mise,
//! volta, rye, rustup, a venv) — for a program directly in such a place, its own folder is
//! answered if that is allowed, else nothing is (an error says why). Not done: libraries a
//! binary loads from elsewhere through `RPATH` or `LD_LIBRARY_PATH`.

use std::path::{Path, PathBuf};

/// How deep `#!` interpreters and virtual environments are followed.
const MAX_DEPTH: usize = 4;

/// System folders whose contents are state or configuration, never an installation.
const SYSTEM_STATE: &[&str] = &[
    "/etc",
    "/run",
    "/var/run",
    "/var/lib",
    "/var/log",
    "/var/cache",
    "/var/spool",
    "/var/mail",
    "/var/backups",
    "/proc",
    "/sys",
    "/dev",
    "/boot",
];

/// Runtime layouts inside a home: the installation is the folder at the end of the pattern
/// (`*` one name).
const HOME_LAYOUTS: &[&str] = &[
    ".pyenv/versions/*",
    ".nvm/versions/node/*",
    ".local/share/uv/python/*",
    ".local/share/mise/installs/*/*",
    ".local/share/rtx/installs/*/*",
    ".asdf/installs/*/*",
    ".volta/tools/image/node/*",
    ".rye/py/*",
    ".rustup/toolchains/*",
    "miniconda3",
    "miniconda3/envs/*",
    "anaconda3",
    "anaconda3/envs/*",
    "miniforge3",
    "miniforge3/envs/*",
    "mambaforge",
    "mambaforge/envs/*",
    ".conda/envs/*",
    ".local/pipx/venvs/*",
];

/// The home folder `dir` lies in, if it lies in one (`/root`, `/home/NAME`, or `$HOME`).
fn home_of(dir: &Path) -> Option<PathBuf> {
    let env = std::env::var_os("HOME").map(PathBuf::from);
    let homes = [Some(PathBuf::from("/root")), env];
    if let Some(h) = homes.iter().flatten().find(|h| dir.starts_with(h)) {
        return Some(h.clone());
    }
    let mut c = dir.components();
    match (c.next(), c.next(), c.next()) {
        (Some(std::path::Component::RootDir), Some(h), Some(user)) if h.as_os_str() == "home" => {
            Some(Path::new("/home").join(user))
        }
        _ => None,
    }
}

/// Whether `dir` is too much to show a sandbox as a server's source folder: `/`, a top-level
/// folder, the system's state and configuration, a home, or a hidden folder directly in one.
pub fn source_too_broad(dir: &Path) -> bool {
    let hidden_in_home = home_of(dir).is_some_and(|h| {
        dir.parent() == Some(h.as_path())
            && dir
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
    });
    dir.components().count() < 3
        || SYSTEM_STATE.iter().any(|s| dir.starts_with(s))
        || home_of(dir).is_some_and(|h| h == dir)
        || hidden_in_home
}

/// Whether binding `dir` would show too much: `/`, a top-level folder, the system's state,
/// a home, or a folder in a home that is not a runtime layout (nor a venv).
fn too_broad(dir: &Path) -> bool {
    if dir.components().count() < 3 || SYSTEM_STATE.iter().any(|s| dir.starts_with(s)) {
        return true;
    }
    let Some(home) = home_of(dir) else {
        return false;
    };
    let Ok(rel) = dir.strip_prefix(&home) else {
        return true;
    };
    let layout = HOME_LAYOUTS.iter().any(|pattern| {
        let pat: Vec<&str> = pattern.split('/').collect();
        let names: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        names.len() == pat.len() && pat.iter().zip(&names).all(|(p, n)| *p == "*" || p == n)
    });
    let venv = !rel.as_os_str().is_empty() && dir.join("pyvenv.cfg").is_file();
    !(layout || venv)
}

/// The installation folder of `file` (a real path, no symbolic links): the prefix above its
/// `bin/`, unless that is [`too_broad`], then the file's own folder (unless that is too).
fn installation(file: &Path) -> Option<PathBuf> {
    let dir = file.parent()?;
    let prefix = (dir.file_name()? == "bin").then(|| dir.parent()).flatten();
    match prefix {
        Some(p) if !too_broad(p) => Some(p.to_path_buf()),
        _ if !too_broad(dir) => Some(dir.to_path_buf()),
        _ => None,
    }
}

/// Whether `file` (a real path) is a program: an executable regular file that starts as an ELF
/// binary or a `#!` script.
fn is_program(file: &Path) -> bool {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::symlink_metadata(file) else {
        return false;
    };
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return false;
    }
    let mut head = [0u8; 4];
    std::fs::File::open(file)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| head == *b"\x7fELF" || head.starts_with(b"#!"))
}

/// The interpreter a `#!` line of `file` names (not `/usr/bin/env NAME`: the jail's own `PATH`
/// resolves that).
fn shebang(file: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(file).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|b| *b == b'\n').unwrap_or(line.len())];
    let text = std::str::from_utf8(line).ok()?;
    let program = text.split_whitespace().next()?;
    (program.starts_with('/') && !program.ends_with("/env")).then(|| PathBuf::from(program))
}

/// The base interpreter's folder a virtual environment at `venv` names (`home = …` in its
/// `pyvenv.cfg`), only when the venv's own `bin/python` leads there (a venv made with
/// `--copies` needs its base's libraries; a `home` that names anything else is not followed).
fn venv_home(venv: &Path) -> Option<PathBuf> {
    let cfg = std::fs::read_to_string(venv.join("pyvenv.cfg")).ok()?;
    let home = cfg.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "home").then(|| PathBuf::from(v.trim()))
    })?;
    let home = std::fs::canonicalize(home).ok()?;
    let ours = ["python3", "python"]
        .iter()
        .find_map(|n| std::fs::canonicalize(venv.join("bin").join(n)).ok())?;
    let base = ["python3", "python"]
        .iter()
        .find_map(|n| std::fs::canonicalize(home.join(n)).ok())?;
    let same_program = ours.starts_with(&home)
        || std::fs::read(&ours)
            .ok()
            .zip(std::fs::read(&base).ok())
            .is_some_and(|(a, b)| a == b);
    (same_program && is_program(&base)).then_some(base)
}

/// The folders (real paths) that `program`, an absolute host path, needs and that `visible`
/// says the jail does not show, smallest first. `Err` names a file whose installation would
/// be too broad to bind.
pub fn installations(
    program: &Path,
    visible: &dyn Fn(&Path) -> bool,
) -> Result<Vec<PathBuf>, String> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut todo = vec![(program.to_path_buf(), 0usize)];
    while let Some((path, depth)) = todo.pop() {
        if depth > MAX_DEPTH {
            continue;
        }
        // The path as named (its links must resolve inside) and where it really is.
        let Ok(real) = std::fs::canonicalize(&path) else {
            continue;
        };
        if !is_program(&real) {
            continue;
        }
        for file in [&path, &real] {
            if visible(file) || out.iter().any(|o| file.starts_with(o)) {
                continue;
            }
            let Some(dir) = installation(file) else {
                return Err(format!(
                    "{} lives in {}, which Warden will not show (it is not a runtime's \
                     installation): install the runtime in its own folder",
                    file.display(),
                    file.parent().unwrap_or(Path::new("/")).display()
                ));
            };
            out.retain(|o| !o.starts_with(&dir));
            out.push(dir.clone());
            if let Some(base) = venv_home(&dir) {
                todo.push((base, depth + 1));
            }
        }
        if let Some(interpreter) = shebang(&real) {
            todo.push((interpreter, depth + 1));
        }
    }
    out.sort_by_key(|p| p.components().count());
    Ok(out)
}

/// `program` as the host finds it: an absolute path as given, a relative one made absolute,
/// a bare name looked up in the host's `PATH`.
pub fn on_host(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return std::path::absolute(program).ok().filter(|p| p.exists());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};

    fn exe(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn interpreters_venvs_and_scripts_bring_their_installations() {
        let t = tempfile::tempdir_in("/var/tmp").unwrap();
        let root = t.path();
        // A pyenv-style Python: bin/python3 → python3.11 in a prefix with lib/.
        let py = root.join("pyenv/versions/3.11.7");
        exe(&py.join("bin/python3.11"), "\x7fELF...");
        symlink("python3.11", py.join("bin/python3")).unwrap();
        std::fs::create_dir_all(py.join("lib/python3.11")).unwrap();
        // A venv made from it, and a console script in the venv.
        let venv = root.join("srv/venv");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::fs::write(
            venv.join("pyvenv.cfg"),
            format!("home = {}\n", py.join("bin").display()),
        )
        .unwrap();
        symlink(py.join("bin/python3"), venv.join("bin/python")).unwrap();
        let script = venv.join("bin/server");
        exe(
            &script,
            &format!("#!{}\nimport x\n", venv.join("bin/python").display()),
        );
        let nothing = |_: &Path| false;
        let got = installations(&script, &nothing).unwrap();
        let venv_real = std::fs::canonicalize(&venv).unwrap();
        let py_real = std::fs::canonicalize(&py).unwrap();
        assert!(got.contains(&venv_real), "{got:?}");
        assert!(got.contains(&py_real), "{got:?}");
        assert_eq!(got.len(), 2, "{got:?}");
        // What the jail shows already is not bound again.
        let shown = |p: &Path| p.starts_with(&py_real) || p.starts_with(&py);
        assert_eq!(installations(&script, &shown).unwrap(), vec![venv_real]);
        // A Node copied into /opt-like folder: the prefix above bin/.
        let node = root.join("opt/node-v20/bin/node");
        exe(&node, "\x7fELF...");
        assert_eq!(
            installations(&node, &nothing).unwrap(),
            vec![std::fs::canonicalize(root.join("opt/node-v20")).unwrap()]
        );
    }

    #[test]
    fn homes_and_what_is_in_them_are_never_bound_whole() {
        assert!(too_broad(Path::new("/root")));
        assert!(too_broad(Path::new("/home/ann")));
        assert!(too_broad(Path::new("/home/ann/.local")));
        assert!(too_broad(Path::new("/home/ann/.local/bin")));
        assert!(too_broad(Path::new("/root/.config/gh")));
        assert!(too_broad(Path::new("/home/ann/projects")));
        assert!(too_broad(Path::new("/opt")));
        assert!(too_broad(Path::new("/etc/ssh")));
        assert!(too_broad(Path::new(
            "/run/secrets/kubernetes.io/serviceaccount"
        )));
        assert!(too_broad(Path::new("/var/lib/secrets")));
        assert!(!too_broad(Path::new("/root/.pyenv/versions/3.11.7")));
        assert!(!too_broad(Path::new(
            "/home/ann/.nvm/versions/node/v20.1.0"
        )));
        assert!(!too_broad(Path::new("/home/ann/miniconda3")));
        assert!(!too_broad(Path::new("/opt/node-v20")));
        assert_eq!(installation(Path::new("/home/ann/.local/bin/tool")), None);
        assert_eq!(installation(Path::new("/root/tool")), None);
    }

    /// Review finding: a bundle's own `pyvenv.cfg` whose `home` holds a `python3` that is a
    /// link to a secret file made Warden bind the secret's folder. Only programs are followed,
    /// and a venv's home only when its own python leads there.
    #[test]
    fn a_planted_venv_home_cannot_bind_a_secret() {
        let t = tempfile::tempdir_in("/var/tmp").unwrap();
        let root = t.path();
        let secrets = root.join("secrets");
        std::fs::create_dir_all(&secrets).unwrap();
        std::fs::write(secrets.join("hosts.yml"), "token: gho_x").unwrap();
        let runtime = root.join("bundle/runtime");
        exe(&runtime.join("bin/node"), "\x7fELF...");
        std::fs::create_dir_all(runtime.join("h")).unwrap();
        std::fs::write(
            runtime.join("pyvenv.cfg"),
            format!("home = {}\n", runtime.join("h").display()),
        )
        .unwrap();
        symlink(secrets.join("hosts.yml"), runtime.join("h/python3")).unwrap();
        let got = installations(&runtime.join("bin/node"), &|_: &Path| false).unwrap();
        let runtime = std::fs::canonicalize(&runtime).unwrap();
        assert_eq!(got, vec![runtime], "the secret's folder is not bound");
        // Nor is a data file named as the program.
        assert!(
            installations(&secrets.join("hosts.yml"), &|_: &Path| false)
                .unwrap()
                .is_empty()
        );
    }
}
