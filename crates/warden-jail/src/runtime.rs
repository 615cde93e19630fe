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
//! Guarantees: only reads the file system (never runs the program); never answers `/`, a home
//! folder, or a hidden folder directly in a home (`~/.local`, `~/.cargo`: they hold caches and
//! credentials), for which the program's own folder is answered instead. Not done: libraries a
//! binary loads from elsewhere through `RPATH` or `LD_LIBRARY_PATH`.

use std::path::{Path, PathBuf};

/// How deep `#!` interpreters and virtual environments are followed.
const MAX_DEPTH: usize = 4;

/// Whether `dir` is a home folder (`/root`, `/home/NAME`, or `$HOME`).
fn is_home(dir: &Path) -> bool {
    dir == Path::new("/root")
        || dir.parent() == Some(Path::new("/home"))
        || std::env::var_os("HOME").is_some_and(|h| Path::new(&h) == dir)
}

/// Whether binding `dir` would show too much: `/`, a top-level folder, a home folder, or a
/// hidden folder directly in a home.
fn too_broad(dir: &Path) -> bool {
    let hidden_in_home = dir.parent().is_some_and(is_home)
        && dir
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
    dir.components().count() < 3 || is_home(dir) || hidden_in_home
}

/// The installation folder of `file` (a real path, no symbolic links): the prefix above its
/// `bin/`, unless that is [`too_broad`], then the file's own folder.
fn installation(file: &Path) -> Option<PathBuf> {
    let dir = file.parent()?;
    let prefix = (dir.file_name()? == "bin").then(|| dir.parent()).flatten();
    match prefix {
        Some(p) if !too_broad(p) => Some(p.to_path_buf()),
        _ if !too_broad(dir) => Some(dir.to_path_buf()),
        _ => None,
    }
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
/// `pyvenv.cfg`).
fn venv_home(venv: &Path) -> Option<PathBuf> {
    let cfg = std::fs::read_to_string(venv.join("pyvenv.cfg")).ok()?;
    cfg.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "home").then(|| PathBuf::from(v.trim()))
    })
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
        for file in [&path, &real] {
            if visible(file) || out.iter().any(|o| file.starts_with(o)) {
                continue;
            }
            let Some(dir) = installation(file) else {
                return Err(format!(
                    "{} lives directly in {}, which Warden will not show whole",
                    file.display(),
                    file.parent().unwrap_or(Path::new("/")).display()
                ));
            };
            out.retain(|o| !o.starts_with(&dir));
            out.push(dir.clone());
            if let Some(home) = venv_home(&dir) {
                todo.push((home.join("python3"), depth + 1));
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
        exe(&py.join("bin/python3.11"), "\x7fELF");
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
        exe(&node, "\x7fELF");
        assert_eq!(
            installations(&node, &nothing).unwrap(),
            vec![std::fs::canonicalize(root.join("opt/node-v20")).unwrap()]
        );
    }

    #[test]
    fn homes_and_their_hidden_folders_are_never_bound_whole() {
        assert!(too_broad(Path::new("/root")));
        assert!(too_broad(Path::new("/home/ann")));
        assert!(too_broad(Path::new("/home/ann/.local")));
        assert!(too_broad(Path::new("/root/.cargo")));
        assert!(too_broad(Path::new("/opt")));
        assert!(!too_broad(Path::new("/root/.pyenv/versions/3.11.7")));
        assert!(!too_broad(Path::new("/home/ann/miniconda3")));
        // ~/.local/bin/tool: its own folder, not ~/.local.
        assert_eq!(
            installation(Path::new("/home/ann/.local/bin/tool")),
            Some(PathBuf::from("/home/ann/.local/bin"))
        );
        assert_eq!(installation(Path::new("/root/tool")), None);
    }
}
