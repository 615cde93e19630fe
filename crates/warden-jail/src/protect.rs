//! Protected paths in writable workspaces and binds: the files that run code later, outside
//! the sandbox, when a person or a tool opens the folder — git's configuration and hooks,
//! agents' and editors' project settings, `direnv` and dotenv files, shell start-up files.
//!
//! For every writable root (the host workspace, each writable bind of a folder) the policy's
//! protected set becomes read-only binds of those paths onto themselves. A path that does not
//! exist yet gets an empty placeholder (file or folder) to bind over, so it cannot be created
//! either; placeholders are removed after the run when they are still empty. `.git` itself is
//! pinned (bound writable onto itself: commits still work, but the folder cannot be renamed
//! away, removed or replaced, since a mount point cannot be), with its `config`, `hooks/`,
//! `info/` and each submodule's `config` and `hooks/` read-only.
//!
//! Guarantees: enforced by the mount table (read-only mounts refuse writes with `EROFS`; mount
//! points cannot be renamed, removed or replaced: `EBUSY`), which the sandboxed program cannot
//! change (no capabilities, `mount`/`umount` denied by seccomp). Landlock cannot carve a
//! read-only exception out of a writable hierarchy, so it adds nothing here. A protected path
//! that is a symbolic link is refused with an error (it could be replaced through its folder).
//! Not done: a placeholder left by a run that was killed with SIGKILL stays (empty).

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::AtFlags;
use nix::sys::stat::{FileStat, Mode, SFlag};

use crate::error::{SetupFailure, Stage};
use crate::policy::{Bind, Policy, WORKSPACE_MOUNT};
use crate::sys;

/// What a protected entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A file.
    File,
    /// A folder (read-only as a whole).
    Dir,
    /// `.git`: pinned, its dangerous parts read-only.
    GitDir,
}

/// One protected path, relative to a writable root; `placeholder`: also when it is missing.
#[derive(Debug, Clone, Copy)]
struct Entry {
    path: &'static str,
    kind: Kind,
    placeholder: bool,
}

const fn entry(path: &'static str, kind: Kind, placeholder: bool) -> Entry {
    Entry {
        path,
        kind,
        placeholder,
    }
}

/// The default protected set. Placeholders go where a new file would run code unasked: git
/// (hooks, `core.fsmonitor`…), agents' MCP and hook settings, editor tasks and settings,
/// `direnv`, dotenv. Shell start-up files and `.gitmodules` are protected when they exist (a
/// new `.bashrc` in a project folder runs nothing; `.gitmodules` needs `.git`).
const DEFAULT: &[Entry] = &[
    entry(".git", Kind::GitDir, true),
    entry(".gitmodules", Kind::File, false),
    entry(".mcp.json", Kind::File, true),
    entry(".claude", Kind::Dir, true),
    entry(".cursor", Kind::Dir, true),
    entry(".vscode", Kind::Dir, true),
    entry(".idea", Kind::Dir, true),
    entry(".envrc", Kind::File, true),
    entry(".env", Kind::File, true),
    entry(".bashrc", Kind::File, false),
    entry(".bash_profile", Kind::File, false),
    entry(".bash_login", Kind::File, false),
    entry(".bash_logout", Kind::File, false),
    entry(".profile", Kind::File, false),
    entry(".zshrc", Kind::File, false),
    entry(".zshenv", Kind::File, false),
    entry(".zprofile", Kind::File, false),
    entry(".zlogin", Kind::File, false),
];

/// Inside an existing `.git` (and each `.git/modules/NAME`): read-only parts.
const GIT_PARTS: &[Entry] = &[
    entry("config", Kind::File, true),
    entry("config.worktree", Kind::File, false),
    entry("hooks", Kind::Dir, true),
    entry("info", Kind::Dir, false),
    // Git takes `config` and `hooks/` from the folder `commondir` names, for any git folder:
    // protected when they exist. No placeholder: git refuses an empty `commondir` (it dies
    // reading it), so a missing one cannot be pinned by an empty file; the file tools and a
    // snapshot restore refuse to write one all the same (`touches`).
    entry("commondir", Kind::File, false),
    entry("gitdir", Kind::File, false),
];

/// A placeholder created for a run, to be removed after it.
#[derive(Debug)]
struct Placeholder {
    /// The writable root it was created beneath.
    root: std::sync::Arc<OwnedFd>,
    /// Its path relative to the root.
    rel: PathBuf,
}

/// The protection of one run: extra binds, and the placeholders to remove afterwards.
#[derive(Debug, Default)]
pub struct Protection {
    /// Read-only binds (and `.git`'s writable pin), targets inside the jail.
    pub binds: Vec<Bind>,
    placeholders: Vec<Placeholder>,
}

/// The names of the default protected set (relative to a writable root), for documentation
/// and `--allow-protected`.
pub fn defaults() -> Vec<&'static str> {
    DEFAULT.iter().map(|e| e.path).collect()
}

/// Whether changing `rel` (relative to a writable root) would change a protected path, for
/// tools that write on the host themselves (`warden serve`'s file tools) and so must keep the
/// same rule as the jail: `rel` is protected or lies beneath a read-only protected folder;
/// with `whole` (a removal or a rename) also when it holds one or is `.git` itself.
/// `git_dir`: whether `.git` is a folder there (otherwise it is read-only as a whole, as its
/// placeholder is). Paths in `allow` and beneath them are not protected.
pub fn touches(rel: &Path, whole: bool, git_dir: bool, allow: &[String]) -> bool {
    let rel: PathBuf = rel
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect();
    if allow
        .iter()
        .any(|a| rel.starts_with(a.trim_end_matches('/')))
    {
        return false;
    }
    let mut patterns: Vec<String> = DEFAULT
        .iter()
        .filter(|e| e.kind != Kind::GitDir || !git_dir)
        .map(|e| e.path.to_owned())
        .chain([".env.*".to_owned()])
        .collect();
    if git_dir {
        for part in GIT_PARTS {
            patterns.push(format!(".git/{}", part.path));
            patterns.push(format!(".git/modules/*/{}", part.path));
        }
    }
    let matches = |pattern: &str, path: &Path| {
        let pat: Vec<&str> = pattern.split('/').collect();
        let comps: Vec<String> = path
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        comps.len() >= pat.len()
            && pat
                .iter()
                .zip(&comps)
                .all(|(p, c)| match p.strip_suffix('*') {
                    Some(prefix) => c.starts_with(prefix),
                    None => p == c,
                })
    };
    let beneath = patterns.iter().any(|p| matches(p, &rel));
    let holds = whole
        && (rel.as_os_str().is_empty()
            || rel == Path::new(".git")
            || patterns.iter().any(|p| {
                let depth = rel.components().count();
                let head: Vec<&str> = p.split('/').take(depth).collect();
                head.len() == depth && matches(&head.join("/"), &rel)
            }));
    beneath || holds
}

fn fail(detail: String, e: Errno) -> SetupFailure {
    SetupFailure::errno(Stage::Mounts, detail, e)
}

const RESOLVE: u64 =
    libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;

/// What sits at `rel` beneath `root` (not following links); `None` when nothing does.
fn stat_beneath(root: &OwnedFd, rel: &Path) -> Result<Option<FileStat>, Errno> {
    let (parent, name) = split(rel)?;
    let dir = match sys::openat2(
        Some(root.as_fd()),
        parent,
        libc::O_PATH | libc::O_DIRECTORY,
        0,
        RESOLVE,
    ) {
        Ok(d) => d,
        Err(Errno::ENOENT) => return Ok(None),
        Err(e) => return Err(e),
    };
    match nix::sys::stat::fstatat(&dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(st)),
        Err(Errno::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `rel` as (parent, name); the parent `.` for a top-level name. (Names that are not UTF-8
/// are never ours: `EINVAL`.)
fn split(rel: &Path) -> Result<(&str, &str), Errno> {
    let parent = rel
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = rel.file_name().ok_or(Errno::EINVAL)?;
    Ok((
        parent.to_str().ok_or(Errno::EINVAL)?,
        name.to_str().ok_or(Errno::EINVAL)?,
    ))
}

fn kind_of(st: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits())
}

impl Protection {
    /// Plan the protection of `policy`'s writable roots, creating the placeholders now.
    pub fn plan(policy: &Policy) -> Result<Protection, SetupFailure> {
        let mut p = Protection::default();
        if !policy.protect {
            return Ok(p);
        }
        let mut roots: Vec<(PathBuf, PathBuf)> = Vec::new();
        if let Some(ws) = &policy.workspace {
            roots.push((ws.clone(), PathBuf::from(WORKSPACE_MOUNT)));
        }
        for b in policy
            .binds
            .iter()
            .filter(|b| b.writable && b.source.is_dir())
        {
            roots.push((b.source.clone(), b.target().to_owned()));
        }
        for (host, inside) in roots {
            let root = sys::open_path_nofollow(
                host.to_str()
                    .ok_or_else(|| SetupFailure::plain(Stage::Mounts, "path is not UTF-8"))?,
            )
            .map_err(|e| match e {
                Errno::ELOOP => fail(
                    format!(
                        "{} goes through a symlink; name the real path",
                        host.display()
                    ),
                    e,
                ),
                e => fail(format!("opening {}", host.display()), e),
            })?;
            let root = std::sync::Arc::new(root);
            let result = p.protect_root(&root, &host, &inside, &policy.allow_protected);
            if let Err(e) = result {
                p.remove_placeholders();
                return Err(e);
            }
        }
        Ok(p)
    }

    fn protect_root(
        &mut self,
        root: &std::sync::Arc<OwnedFd>,
        host: &Path,
        inside: &Path,
        allow: &[String],
    ) -> Result<(), SetupFailure> {
        let allowed = |rel: &Path| {
            allow
                .iter()
                .any(|a| rel.starts_with(a.trim_end_matches('/')))
        };
        let mut todo: Vec<(PathBuf, Entry)> = DEFAULT
            .iter()
            .map(|e| (PathBuf::from(e.path), *e))
            .collect();
        // Existing dotenv variants (`.env.local`, `.env.production`…).
        if let Ok(dir) = std::fs::read_dir(host) {
            for name in dir.flatten().map(|d| d.file_name()) {
                let n = name.to_string_lossy();
                if n.starts_with(".env.") {
                    todo.push((PathBuf::from(&*n), entry(".env.*", Kind::File, false)));
                }
            }
        }
        while let Some((rel, e)) = todo.pop() {
            if allowed(&rel) {
                continue;
            }
            let st = stat_beneath(root, &rel)
                .map_err(|err| fail(format!("protecting {}", host.join(&rel).display()), err))?;
            let found = st.as_ref().map(kind_of);
            if found == Some(SFlag::S_IFLNK) {
                return Err(SetupFailure::plain(
                    Stage::Mounts,
                    format!(
                        "{} is a symbolic link in a writable folder, which Warden cannot protect: \
                         remove it, or allow it with --allow-protected {}",
                        host.join(&rel).display(),
                        rel.display()
                    ),
                ));
            }
            if found.is_none() {
                if !e.placeholder {
                    continue;
                }
                let dir = e.kind != Kind::File;
                if !self.create_placeholder(root, &rel, dir)? {
                    continue;
                }
            }
            if e.kind == Kind::GitDir && found == Some(SFlag::S_IFDIR) {
                // Pinned, writable; its dangerous parts follow (and each submodule's).
                self.bind(host, inside, &rel, true);
                for part in GIT_PARTS {
                    todo.push((rel.join(part.path), *part));
                }
                if let Ok(modules) = std::fs::read_dir(host.join(&rel).join("modules")) {
                    for m in modules.flatten().filter(|m| m.path().is_dir()) {
                        let base = rel.join("modules").join(m.file_name());
                        for part in GIT_PARTS {
                            todo.push((base.join(part.path), *part));
                        }
                    }
                }
                continue;
            }
            self.bind(host, inside, &rel, false);
        }
        Ok(())
    }

    fn bind(&mut self, host: &Path, inside: &Path, rel: &Path, writable: bool) {
        self.binds.push(Bind {
            source: host.join(rel),
            target: Some(inside.join(rel)),
            writable,
        });
    }

    /// Create an empty file or folder at `rel` beneath `root`, owned like the root; false when
    /// something appeared there first (then it is protected as it is, and never removed).
    fn create_placeholder(
        &mut self,
        root: &std::sync::Arc<OwnedFd>,
        rel: &Path,
        dir: bool,
    ) -> Result<bool, SetupFailure> {
        let failed = |e| fail(format!("creating the placeholder {}", rel.display()), e);
        let (parent, name) = split(rel).map_err(failed)?;
        let pdir = sys::openat2(
            Some(root.as_fd()),
            parent,
            libc::O_PATH | libc::O_DIRECTORY,
            0,
            RESOLVE,
        )
        .map_err(failed)?;
        let owner = nix::sys::stat::fstat(root.as_ref()).map_err(failed)?;
        let created = if dir {
            nix::sys::stat::mkdirat(&pdir, name, Mode::from_bits_truncate(0o755))
        } else {
            let flags = libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC;
            sys::openat2(Some(pdir.as_fd()), name, flags, 0o644, RESOLVE).map(drop)
        };
        match created {
            Ok(()) => {}
            Err(Errno::EEXIST) => return Ok(false),
            Err(e) => return Err(failed(e)),
        }
        let _ = nix::unistd::fchownat(
            &pdir,
            name,
            Some(nix::unistd::Uid::from_raw(owner.st_uid)),
            Some(nix::unistd::Gid::from_raw(owner.st_gid)),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        );
        self.placeholders.push(Placeholder {
            root: root.clone(),
            rel: rel.to_owned(),
        });
        Ok(true)
    }

    /// Remove the placeholders that are still empty (newest first).
    pub fn remove_placeholders(&mut self) {
        while let Some(p) = self.placeholders.pop() {
            let Ok((parent, name)) = split(&p.rel) else {
                continue;
            };
            let Ok(pdir) = sys::openat2(
                Some(p.root.as_fd()),
                parent,
                libc::O_PATH | libc::O_DIRECTORY,
                0,
                RESOLVE,
            ) else {
                continue;
            };
            let Ok(st) = nix::sys::stat::fstatat(&pdir, name, AtFlags::AT_SYMLINK_NOFOLLOW) else {
                continue;
            };
            let how = match kind_of(&st) {
                SFlag::S_IFREG if st.st_size == 0 => nix::unistd::UnlinkatFlags::NoRemoveDir,
                // rmdir refuses a folder that is not empty.
                SFlag::S_IFDIR => nix::unistd::UnlinkatFlags::RemoveDir,
                _ => continue,
            };
            let _ = nix::unistd::unlinkat(&pdir, name, how);
        }
    }
}

impl Drop for Protection {
    fn drop(&mut self) {
        self.remove_placeholders();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(ws: &Path) -> Policy {
        Policy {
            workspace: Some(ws.to_owned()),
            ..Policy::default()
        }
    }

    fn targets(p: &Protection) -> Vec<(String, bool)> {
        let mut t: Vec<(String, bool)> = p
            .binds
            .iter()
            .map(|b| (b.target().display().to_string(), b.writable))
            .collect();
        t.sort();
        t
    }

    #[test]
    fn a_repository_gets_its_git_pinned_and_placeholders_that_go_away() {
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(root.join(".git/modules/lib/hooks")).unwrap();
        std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(root.join(".git/modules/lib/config"), "[core]\n").unwrap();
        std::fs::write(root.join(".env.local"), "A=1\n").unwrap();
        std::fs::write(root.join(".bashrc"), "").unwrap();
        let mut p = Protection::plan(&policy(root)).unwrap();
        let t = targets(&p);
        assert!(t.contains(&("/workspace/.git".into(), true)), "{t:?}");
        for ro in [
            "/workspace/.git/config",
            "/workspace/.git/hooks",
            "/workspace/.git/modules/lib/config",
            "/workspace/.git/modules/lib/hooks",
            "/workspace/.mcp.json",
            "/workspace/.vscode",
            "/workspace/.env",
            "/workspace/.env.local",
            "/workspace/.bashrc",
        ] {
            assert!(t.contains(&(ro.into(), false)), "{ro}: {t:?}");
        }
        assert!(
            !t.iter().any(|(p, _)| p == "/workspace/.zshrc"),
            "not created: {t:?}"
        );
        assert!(root.join(".mcp.json").is_file() && root.join(".vscode").is_dir());
        assert!(
            !root.join(".git/info").exists(),
            "info is protected only when it exists"
        );
        // Something written into a placeholder keeps it (it is never ours to delete then).
        std::fs::write(root.join(".envrc"), "x").unwrap();
        p.remove_placeholders();
        assert!(!root.join(".mcp.json").exists() && !root.join(".vscode").exists());
        assert!(root.join(".envrc").exists());
        assert!(root.join(".git/config").exists() && root.join(".bashrc").exists());
    }

    #[test]
    fn host_side_tools_keep_the_same_rule() {
        let t = |rel: &str, whole: bool| touches(Path::new(rel), whole, true, &[]);
        assert!(t(".git/config", false) && t(".git/hooks/pre-commit", false));
        assert!(t("./.mcp.json", false) && t(".vscode/tasks.json", false));
        assert!(t(".env.production", false) && t(".git/modules/lib/hooks/x", false));
        assert!(!t(".git/objects/ab/cd", false) && !t("src/main.rs", false));
        // An outside review: git reads config and hooks from where `commondir` points.
        assert!(t(".git/commondir", false) && t(".git/modules/lib/commondir", false));
        assert!(t(".git/gitdir", false));
        assert!(!t(".environment", false));
        // Removing or renaming: .git itself, or a folder that holds a protected path.
        assert!(t(".git", true) && !t(".git/objects", true) && t(".git/modules", true));
        assert!(!t("src", true));
        // Without a .git folder, all of .git is read-only.
        assert!(touches(Path::new(".git/objects/x"), false, false, &[]));
        assert!(!touches(
            Path::new(".vscode/x"),
            false,
            true,
            &[".vscode".into()]
        ));
    }

    #[test]
    fn allowed_paths_and_symlinks() {
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path();
        let mut pol = policy(root);
        pol.allow_protected = vec![".vscode".into(), ".git".into()];
        let p = Protection::plan(&pol).unwrap();
        let t = targets(&p);
        assert!(
            !t.iter().any(|(p, _)| p.starts_with("/workspace/.vscode")),
            "{t:?}"
        );
        assert!(
            !t.iter().any(|(p, _)| p.starts_with("/workspace/.git")),
            "{t:?}"
        );
        drop(p);
        assert!(
            !root.join(".mcp.json").exists(),
            "dropped: placeholders removed"
        );
        std::os::unix::fs::symlink("/etc/passwd", root.join(".env")).unwrap();
        let err = Protection::plan(&policy(root)).unwrap_err();
        assert!(err.detail.contains("--allow-protected .env"), "{err}");
        assert!(
            !root.join(".mcp.json").exists(),
            "a failed plan leaves nothing"
        );
        pol.protect = false;
        assert!(Protection::plan(&pol).unwrap().binds.is_empty());
    }
}
