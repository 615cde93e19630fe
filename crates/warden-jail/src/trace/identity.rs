//! Decoys by identity, not by name: the planted files' device and inode numbers, and the
//! labelling of an open (or a hard link) that reaches one under any other name — a hard link
//! made in the home, a renamed folder, a path through `/proc/self/fd/N`.
//!
//! The file is looked up the way the kernel does, inside the stopped task's root
//! (`openat2` with `RESOLVE_IN_ROOT`, so an absolute link inside resolves within the jail, and
//! `O_PATH`, so nothing is opened for reading), while the task waits. Such an open is recorded
//! as the decoy itself (`path`), with the name used kept as `link_path` and
//! `identity: "inode"`, so every rule about the decoy applies to it.
//!
//! Guarantees: only files the chamber planted are ever named; a lookup that fails labels
//! nothing. Limit: a sibling thread of the task may swap a name between this lookup and the
//! kernel's own; the boundary capture (what leaves) and the content scans do not depend on it.

use std::os::fd::AsFd;

use serde_json::{Value, json};
use warden_events::EventKind;

/// A planted file: its device, its inode and its path inside the jail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecoyId {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
    /// Where the jail sees it (`/home/sandbox/.aws/credentials`).
    pub path: String,
}

/// Where a decoy can be reached under another name: a hard link or a rename stays on the
/// decoy home's own file system, whose only mount in the jail is the home (the jail cannot
/// mount), and links through `/proc` are resolved to the file's own name by the tracer first.
/// Other opens are not looked up, so they cost nothing more.
fn may_be_decoy(path: &str) -> bool {
    path.strip_prefix(crate::persona::home())
        .is_some_and(|rest| rest.starts_with('/'))
}

/// The device and inode `path` (absolute, as the task sees it) names in the task's root
/// `root`; the last link is followed when `follow`.
pub fn lookup(root: &std::fs::File, path: &str, follow: bool) -> Option<(u64, u64)> {
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
    let mut flags = OFlag::O_PATH | OFlag::O_CLOEXEC;
    if !follow {
        flags |= OFlag::O_NOFOLLOW;
    }
    let how = OpenHow::new()
        .flags(flags)
        .resolve(ResolveFlag::RESOLVE_IN_ROOT | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    let fd = openat2(root.as_fd(), path, how).ok()?;
    let st = nix::sys::stat::fstat(&fd).ok()?;
    Some((st.st_dev, st.st_ino))
}

/// Label `data` (an event of `kind`) when its file is a planted decoy reached by another name.
pub fn label(ids: &[DecoyId], root: Option<&std::fs::File>, kind: EventKind, data: &mut Value) {
    let (Some(root), false) = (root, ids.is_empty()) else {
        return;
    };
    let (key, follow) = match kind {
        EventKind::FileOpen | EventKind::FileWrite if data["op"] == "open" => {
            ("path", data["nofollow"] != true)
        }
        // A hard link names the file itself (linkat follows a last link only when asked).
        EventKind::FileLink if data["op"] == "link" => ("from", data["follow"] == true),
        _ => return,
    };
    let Some(path) = data[key].as_str().map(str::to_owned) else {
        return;
    };
    if !may_be_decoy(&path) {
        return;
    }
    // A hard link made from the decoy's own name: the decoy, with no lookup needed.
    if kind == EventKind::FileLink
        && let Some(d) = ids.iter().find(|d| d.path == path)
    {
        data["decoy_path"] = json!(d.path);
        data["identity"] = json!("inode");
        return;
    }
    if ids.iter().any(|d| d.path == path) {
        return;
    }
    let Some((dev, ino)) = lookup(root, &path, follow) else {
        return;
    };
    let Some(decoy) = ids.iter().find(|d| d.dev == dev && d.ino == ino) else {
        return;
    };
    match kind {
        EventKind::FileLink => {
            data["decoy_path"] = json!(decoy.path);
        }
        _ => {
            data["link_path"] = json!(path);
            data["path"] = json!(decoy.path);
        }
    }
    data["identity"] = json!("inode");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hard_link_or_a_renamed_folder_is_the_decoy() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path().join("home/sandbox");
        std::fs::create_dir_all(home.join(".aws")).unwrap();
        std::fs::write(home.join(".aws/credentials"), "secret").unwrap();
        let root = std::fs::File::open(d.path()).unwrap();
        let (dev, ino) = lookup(&root, "/home/sandbox/.aws/credentials", true).unwrap();
        let ids = vec![DecoyId {
            dev,
            ino,
            path: "/home/sandbox/.aws/credentials".into(),
        }];
        std::fs::create_dir_all(home.join(".cache")).unwrap();
        std::fs::hard_link(home.join(".aws/credentials"), home.join(".cache/state")).unwrap();
        // An absolute link inside resolves within the root, never on the host.
        std::os::unix::fs::symlink("/home/sandbox/.cache/state", home.join("via")).unwrap();
        for name in ["/home/sandbox/.cache/state", "/home/sandbox/via"] {
            let mut data = json!({ "op": "open", "path": name });
            label(&ids, Some(&root), EventKind::FileOpen, &mut data);
            assert_eq!(data["path"], "/home/sandbox/.aws/credentials", "{name}");
            assert_eq!(data["link_path"], name);
            assert_eq!(data["identity"], "inode");
        }
        std::fs::rename(home.join(".aws"), home.join("x")).unwrap();
        let mut data = json!({ "op": "open", "path": "/home/sandbox/x/credentials" });
        label(&ids, Some(&root), EventKind::FileOpen, &mut data);
        assert_eq!(data["identity"], "inode");
        let mut link =
            json!({ "op": "link", "from": "/home/sandbox/x/credentials", "to": "/tmp/y" });
        label(&ids, Some(&root), EventKind::FileLink, &mut link);
        assert_eq!(link["decoy_path"], "/home/sandbox/.aws/credentials");
        // Another file is no decoy.
        std::fs::write(home.join("notes"), "n").unwrap();
        let mut other = json!({ "op": "open", "path": "/home/sandbox/notes" });
        label(&ids, Some(&root), EventKind::FileOpen, &mut other);
        assert!(other.get("identity").is_none());
    }
}
