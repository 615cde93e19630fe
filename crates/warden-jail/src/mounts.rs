//! The jail's file system view, in two phases.
//!
//! Phase one clones every host path the jail will see into a detached mount
//! (`open_tree(OPEN_TREE_CLONE | AT_RECURSIVE)`) and gives it its attributes — read-only, nosuid,
//! nodev, and for writable directories an id mapping. [`prepare_host`] does the policy's own
//! paths in the supervisor, with the caller's privileges (only the host can set an id mapping);
//! [`prepare_system`] does the world-readable system paths in the init, in parallel with the
//! supervisor's cgroup work. Every source is resolved before anything sandboxed runs.
//!
//! [`build`] runs in the jail's init, inside the new user and mount namespaces: it makes a
//! private tmpfs root, attaches the prepared mounts, adds `/tmp`, a minimal `/dev`, a fresh
//! `/proc` (with `/proc/sys` and friends read-only), synthetic `/etc` files (`ld.so.preload` when
//! the policy preloads a library), pivots into the new
//! root, detaches the old one and makes `/` read-only.
//!
//! Guarantees: nothing of the host is visible but what the policy lists; system paths are
//! read-only whatever uid the jail runs as; no device node but null, zero, full, random and
//! urandom. Not done: hiding host kernel information in `/proc` beyond what the pid and user
//! namespaces already hide.

use std::fs;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::symlink;
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::mount::{MntFlags, MsFlags, mount, umount2};

use crate::error::{SetupFailure, Stage};
use crate::idmap::{self, IdPlan};
use crate::policy::{Policy, WORKSPACE_MOUNT};
use crate::procfs::ProcSource;
use crate::protocol::Handoff;
use crate::sys;

/// Where the new root is assembled inside the jail's mount namespace.
const STAGING: &str = "/tmp";

/// Device nodes bound into the jail's `/dev`.
pub const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom"];

/// What to put at a target path.
#[derive(Debug)]
enum Source {
    /// A detached mount tree.
    Tree { fd: OwnedFd, dir: bool },
    /// A symlink with this content.
    Symlink(PathBuf),
    /// A small regular file copied into the (read-only) root: cheaper than a mount to set up
    /// and to tear down.
    Copy(Vec<u8>),
}

/// Regular files up to this size are copied rather than bound.
const COPY_MAX: u64 = 256 << 10;

/// One prepared entry of the view.
#[derive(Debug)]
struct Entry {
    target: PathBuf,
    source: Source,
}

/// The detached mounts and symlinks of a run, ready to be attached by [`build`].
#[derive(Debug, Default)]
pub struct Prepared {
    entries: Vec<Entry>,
    /// Paths (inside) readable by the command, for Landlock.
    pub readable: Vec<PathBuf>,
    /// Paths (inside) writable by the command, for Landlock.
    pub writable: Vec<PathBuf>,
    /// Where `/proc` comes from (a handed procfs is one of the entries, at `/proc`).
    pub proc: ProcSource,
    /// How the root was switched (set once the root is in place).
    pub root: RootSwitch,
}

fn fail(detail: String, e: Errno) -> SetupFailure {
    SetupFailure::errno(Stage::Mounts, detail, e)
}

fn path_str(p: &Path) -> Result<&str, SetupFailure> {
    p.to_str()
        .ok_or_else(|| SetupFailure::plain(Stage::Mounts, format!("path {p:?} is not UTF-8")))
}

impl Prepared {
    /// Clone the host path `source` into a detached tree for `target`, with `attrs` and, when
    /// `idmap` is given, an id mapping that makes the source's owner the command's user.
    ///
    /// The source is opened once, refusing a symlink in any component (a link planted by an
    /// earlier run must not redirect a bind), and everything else — owner, type, the clone —
    /// works on that descriptor, so nothing can be swapped in between.
    fn tree(
        &mut self,
        source: &Path,
        target: &Path,
        attrs: u64,
        idmap: Option<&IdPlan>,
    ) -> Result<(), SetupFailure> {
        let src = path_str(source)?;
        let opened = sys::open_path_nofollow(src).map_err(|e| match e {
            Errno::ELOOP => SetupFailure::errno(
                Stage::Mounts,
                format!("{src} goes through a symlink; name the real path"),
                e,
            ),
            e => fail(format!("opening {src}"), e),
        })?;
        let st = nix::sys::stat::fstat(&opened).map_err(|e| fail(format!("stat {src}"), e))?;
        let fd = sys::open_tree_clone_fd(opened.as_fd())
            .map_err(|e| fail(format!("cloning {src}"), e))?;
        sys::mount_setattr(fd.as_fd(), attrs, 0, None)
            .map_err(|e| fail(format!("setting attributes of {src}"), e))?;
        if let Some(ids) = idmap {
            let ns = idmap::idmap_userns(ids, (st.st_uid, st.st_gid))
                .map_err(|e| fail(format!("id map for {src}"), e))?;
            match sys::mount_setattr(fd.as_fd(), sys::MOUNT_ATTR_IDMAP, 0, Some(ns.as_fd())) {
                Ok(()) => {}
                // The file system cannot be id-mapped on this kernel (a tmpfs before Linux
                // 6.3): a folder the jail's user already owns on the host needs no map.
                Err(Errno::EINVAL) if (st.st_uid, st.st_gid) == (ids.host_uid, ids.host_gid) => {}
                Err(Errno::EINVAL) => {
                    return Err(SetupFailure::errno(
                        Stage::Mounts,
                        format!(
                            "{src} is on a file system this kernel cannot id-map (overlayfs, \
                             as a container's root is; a tmpfs before Linux 6.3): put it on \
                             ext4, xfs or btrfs (a volume), or make it owned by {}:{}, the jail \
                             user's host ids",
                            ids.host_uid, ids.host_gid
                        ),
                        Errno::EINVAL,
                    ));
                }
                Err(e) => return Err(fail(format!("id-mapping {src}"), e)),
            }
        }
        let dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
        self.entries.push(Entry {
            target: target.to_owned(),
            source: Source::Tree { fd, dir },
        });
        Ok(())
    }

    /// A read-only host path at the same place: a symlink is recreated, a missing path skipped.
    fn system(&mut self, path: &Path) -> Result<(), SetupFailure> {
        let Ok(meta) = fs::symlink_metadata(path) else {
            return Ok(());
        };
        if meta.file_type().is_symlink() {
            let link = fs::read_link(path)
                .map_err(|e| SetupFailure::io(Stage::Mounts, format!("reading {path:?}"), &e))?;
            self.entries.push(Entry {
                target: path.to_owned(),
                source: Source::Symlink(link),
            });
            return Ok(());
        }
        if meta.is_file() && meta.len() <= COPY_MAX {
            let bytes = fs::read(path)
                .map_err(|e| SetupFailure::io(Stage::Mounts, format!("reading {path:?}"), &e))?;
            self.entries.push(Entry {
                target: path.to_owned(),
                source: Source::Copy(bytes),
            });
        } else {
            let ro = sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV;
            self.tree(path, path, ro, None)?;
        }
        self.readable.push(path.to_owned());
        Ok(())
    }

    /// A writable host path, id-mapped when we can so the command owns what the path's owner
    /// owns (setuid and setgid bits stay impossible to set: see the seccomp policy).
    fn writable(&mut self, source: &Path, target: &Path, ids: &IdPlan) -> Result<(), SetupFailure> {
        let attrs = sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV;
        self.tree(source, target, attrs, ids.privileged.then_some(ids))?;
        self.writable.push(target.to_owned());
        Ok(())
    }
}

impl Prepared {
    /// Add a procfs made for the jail's pid namespace (see [`crate::procfs`]), to be attached
    /// at `/proc` instead of the one the init would mount.
    pub fn hand_proc(&mut self, fd: OwnedFd) {
        self.entries.push(Entry {
            target: PathBuf::from("/proc"),
            source: Source::Tree { fd, dir: true },
        });
        self.proc = ProcSource::Handed;
    }

    /// Split into what crosses the socket: descriptions and descriptors (host entries are
    /// always detached trees).
    pub fn into_handoff(self) -> (Handoff, Vec<OwnedFd>) {
        let mut mounts = Vec::new();
        let mut fds = Vec::new();
        for e in self.entries {
            if let Source::Tree { fd, dir } = e.source {
                mounts.push((e.target, dir));
                fds.push(fd);
            }
        }
        let handoff = Handoff {
            mounts,
            readable: self.readable,
            writable: self.writable,
            proc: self.proc,
        };
        (handoff, fds)
    }

    /// Rebuild from a handoff; the descriptor count must match.
    pub fn from_handoff(h: Handoff, fds: Vec<OwnedFd>) -> Result<Prepared, SetupFailure> {
        if h.mounts.len() != fds.len() {
            return Err(SetupFailure::plain(
                Stage::Mounts,
                "mount handoff lost descriptors",
            ));
        }
        let entries = h
            .mounts
            .into_iter()
            .zip(fds)
            .map(|((target, dir), fd)| Entry {
                target,
                source: Source::Tree { fd, dir },
            })
            .collect();
        Ok(Prepared {
            entries,
            readable: h.readable,
            writable: h.writable,
            proc: h.proc,
            root: RootSwitch::default(),
        })
    }
}

/// Phase one, host side (supervisor, host privileges): the workspace and the policy's binds,
/// which may need the caller's privileges to reach and an id mapping only the host can set.
pub fn prepare_host(policy: &Policy, ids: &IdPlan) -> Result<Prepared, SetupFailure> {
    let mut p = Prepared::default();
    if let Some(ws) = &policy.workspace {
        p.writable(ws, Path::new(WORKSPACE_MOUNT), ids)?;
    }
    let mut binds: Vec<_> = policy.binds.iter().collect();
    binds.sort_by_key(|b| b.target().components().count());
    for b in binds {
        if b.writable {
            p.writable(&b.source, b.target(), ids)?;
        } else {
            let ro = sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV;
            p.tree(&b.source, b.target(), ro, None)?;
            p.readable.push(b.target().to_owned());
        }
    }
    Ok(p)
}

/// Phase one, jail side (the init, in its own user and mount namespaces, before the pivot): the
/// world-readable system paths and device nodes. Running here lets it overlap the supervisor's
/// host-side work.
pub fn prepare_system(policy: &Policy) -> Result<Prepared, SetupFailure> {
    let mut p = Prepared::default();
    for path in policy.system_paths.iter().chain(&policy.etc_paths) {
        p.system(path)?;
    }
    for dev in DEVICES {
        let path = PathBuf::from(format!("/dev/{dev}"));
        // Device nodes need `dev`; they stay nosuid.
        p.tree(&path, &path, sys::MOUNT_ATTR_NOSUID, None)?;
    }
    Ok(p)
}

fn staged(target: &Path) -> PathBuf {
    Path::new(STAGING).join(target.strip_prefix("/").unwrap_or(target))
}

fn mkdirs(path: &Path) -> Result<(), SetupFailure> {
    fs::create_dir_all(path)
        .map_err(|e| SetupFailure::io(Stage::Mounts, format!("creating {path:?}"), &e))
}

fn write_file(path: &Path, text: &str) -> Result<(), SetupFailure> {
    fs::write(path, text)
        .map_err(|e| SetupFailure::io(Stage::Mounts, format!("writing {path:?}"), &e))
}

fn tmpfs(target: &Path, size: u64, mode: &str, flags: MsFlags) -> Result<(), SetupFailure> {
    mkdirs(target)?;
    let data = format!("size={size},mode={mode}");
    mount(
        Some("tmpfs"),
        target,
        Some("tmpfs"),
        flags,
        Some(data.as_str()),
    )
    .map_err(|e| fail(format!("mounting tmpfs at {target:?}"), e))
}

fn attach(entry: Entry) -> Result<(), SetupFailure> {
    let at = staged(&entry.target);
    match entry.source {
        Source::Symlink(link) => {
            if let Some(parent) = at.parent() {
                mkdirs(parent)?;
            }
            symlink(&link, &at)
                .map_err(|e| SetupFailure::io(Stage::Mounts, format!("symlink {at:?}"), &e))
        }
        Source::Copy(bytes) => {
            if let Some(parent) = at.parent() {
                mkdirs(parent)?;
            }
            fs::write(&at, bytes)
                .map_err(|e| SetupFailure::io(Stage::Mounts, format!("copying to {at:?}"), &e))
        }
        Source::Tree { fd, dir } => {
            if dir {
                mkdirs(&at)?;
            } else {
                if let Some(parent) = at.parent() {
                    mkdirs(parent)?;
                }
                if !at.exists() {
                    write_file(&at, "")?;
                }
            }
            sys::move_mount_to(fd.as_fd(), path_str(&at)?)
                .map_err(|e| fail(format!("attaching {:?}", entry.target), e))
        }
    }
}

/// Switches the filesystem ids to the command's for as long as it lives (the init creates mount
/// points inside an id-mapped host workspace, where only the command's user is mapped).
struct FsIds {
    uid: nix::unistd::Uid,
    gid: nix::unistd::Gid,
}

impl FsIds {
    fn switch((uid, gid): (u32, u32)) -> FsIds {
        let gid = nix::unistd::setfsgid(nix::unistd::Gid::from_raw(gid));
        let uid = nix::unistd::setfsuid(nix::unistd::Uid::from_raw(uid));
        FsIds { uid, gid }
    }
}

impl Drop for FsIds {
    fn drop(&mut self) {
        nix::unistd::setfsuid(self.uid);
        nix::unistd::setfsgid(self.gid);
    }
}

/// Open, creating as needed, the mount point for `target` beneath the staging `root`. No
/// component may be a symlink (a host workspace holds whatever earlier runs left in it) and
/// nothing can be reached outside `root`. Beneath a host workspace, entries are created as
/// `as_user`, the only user mapped there.
fn mountpoint(
    root: &OwnedFd,
    target: &Path,
    dir: bool,
    as_user: Option<(u32, u32)>,
) -> Result<OwnedFd, SetupFailure> {
    let names: Vec<&str> = target
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => n.to_str(),
            _ => None,
        })
        .collect();
    let in_workspace = target.starts_with(WORKSPACE_MOUNT) && target != Path::new(WORKSPACE_MOUNT);
    let _ids = in_workspace.then_some(as_user).flatten().map(FsIds::switch);
    let resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    let fail_at = |e: Errno| match e {
        Errno::ELOOP => SetupFailure::errno(
            Stage::Mounts,
            format!("mount point {target:?} goes through a symlink"),
            e,
        ),
        e => fail(format!("mount point {target:?}"), e),
    };
    let dir_flags = libc::O_PATH | libc::O_DIRECTORY;
    let mut cur = sys::openat2(Some(root.as_fd()), ".", dir_flags, 0, resolve).map_err(fail_at)?;
    for (i, name) in names.iter().enumerate() {
        if i + 1 == names.len() && !dir {
            let create = libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY;
            match sys::openat2(Some(cur.as_fd()), name, create, 0o644, resolve) {
                Ok(_) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(fail_at(e)),
            }
            return sys::openat2(Some(cur.as_fd()), name, libc::O_PATH, 0, resolve)
                .map_err(fail_at);
        }
        sys::mkdirat_exist_ok(cur.as_fd(), name, 0o755).map_err(fail_at)?;
        cur = sys::openat2(Some(cur.as_fd()), name, dir_flags, 0, resolve).map_err(fail_at)?;
    }
    Ok(cur)
}

/// Attach a prepared tree (from the host side) at its target, through [`mountpoint`].
fn attach_beneath(
    root: &OwnedFd,
    entry: Entry,
    as_user: Option<(u32, u32)>,
) -> Result<(), SetupFailure> {
    let Source::Tree { fd, dir } = entry.source else {
        return attach(entry);
    };
    let at = mountpoint(root, &entry.target, dir, as_user)?;
    sys::move_mount_fd(fd.as_fd(), at.as_fd())
        .map_err(|e| fail(format!("attaching {:?}", entry.target), e))
}

/// Bind `path` onto itself read-only (inside the new `/proc`).
fn bind_readonly(path: &Path) -> Result<(), SetupFailure> {
    if !path.exists() {
        return Ok(());
    }
    let bind = MsFlags::MS_BIND | MsFlags::MS_REC;
    mount(Some(path), path, None::<&str>, bind, None::<&str>)
        .map_err(|e| fail(format!("binding {path:?}"), e))?;
    let ro = MsFlags::MS_BIND
        | MsFlags::MS_REMOUNT
        | MsFlags::MS_RDONLY
        | MsFlags::MS_NOSUID
        | MsFlags::MS_NODEV
        | MsFlags::MS_NOEXEC;
    mount(None::<&str>, path, None::<&str>, ro, None::<&str>)
        .map_err(|e| fail(format!("making {path:?} read-only"), e))
}

fn etc_files(root: &Path, policy: &Policy) -> Result<(), SetupFailure> {
    let etc = root.join("etc");
    mkdirs(&etc)?;
    let (uid, gid) = (policy.uid, policy.gid);
    let home = policy
        .env
        .get("HOME")
        .map_or(WORKSPACE_MOUNT, String::as_str)
        .replace([':', '\n'], "");
    // The tracer's DNS stub listens here (with tracing off nothing does: lookups fail fast).
    write_file(
        &etc.join("resolv.conf"),
        "nameserver 127.0.0.53\noptions timeout:1 attempts:1\n",
    )?;
    write_file(
        &etc.join("passwd"),
        &format!(
            "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n\
             {user}:x:{uid}:{gid}:{user}:{home}:/bin/bash\n\
             nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
            user = policy.user
        ),
    )?;
    write_file(
        &etc.join("group"),
        &format!(
            "root:x:0:\n{user}:x:{gid}:\nnogroup:x:65534:\n",
            user = policy.user
        ),
    )?;
    if let Some(lib) = &policy.preload {
        write_file(&etc.join("ld.so.preload"), &format!("{}\n", lib.display()))?;
    }
    write_file(&etc.join("hostname"), &format!("{}\n", policy.hostname))?;
    write_file(
        &etc.join("hosts"),
        &format!(
            "127.0.0.1 localhost {h}\n::1 localhost {h}\n",
            h = policy.hostname
        ),
    )
}

/// Phase two, first half (jail init): a private tmpfs root with `/dev` and the system paths
/// attached. Returns the path lists (for Landlock) without the consumed mounts.
pub fn stage_system(system: Prepared, policy: &Policy) -> Result<Prepared, SetupFailure> {
    let lists = Prepared {
        entries: Vec::new(),
        readable: system.readable,
        writable: system.writable,
        proc: ProcSource::Fresh,
        root: RootSwitch::default(),
    };
    let private = MsFlags::MS_REC | MsFlags::MS_PRIVATE;
    mount(None::<&str>, "/", None::<&str>, private, None::<&str>)
        .map_err(|e| fail("making / private".into(), e))?;
    let root = PathBuf::from(STAGING);
    let nosuid_nodev = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    tmpfs(&root, 1 << 20, "0755", nosuid_nodev)?;
    let dev_flags = MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC;
    tmpfs(&root.join("dev"), 64 << 10, "0755", dev_flags)?;
    if policy.workspace.is_none() {
        let ws = staged(Path::new(WORKSPACE_MOUNT));
        tmpfs(&ws, policy.limits.tmp_bytes, "0777", nosuid_nodev)?;
    }
    for entry in system.entries {
        attach(entry)?;
    }
    Ok(lists)
}

/// Phase two, second half (jail init): attach the host side's mounts, add `/tmp`, `/dev/shm`,
/// extra tmpfs, synthetic `/etc` files and a fresh `/proc`, then pivot into the new root. On
/// return the process's root is the new tree and its working directory `/workspace`; the path
/// lists of `lists` and `host` are merged. `as_user` is the command's (uid, gid) when a host
/// workspace is id-mapped to it and we are privileged (mount points beneath it are created as
/// that user).
pub fn finish_root(
    mut lists: Prepared,
    host: Prepared,
    policy: &Policy,
    as_user: Option<(u32, u32)>,
) -> Result<Prepared, SetupFailure> {
    lists.readable.extend(host.readable);
    lists.writable.extend(host.writable);
    let root_fd =
        sys::open_path_nofollow(STAGING).map_err(|e| fail("opening the root".into(), e))?;
    for entry in host.entries {
        attach_beneath(&root_fd, entry, as_user)?;
    }
    for t in &policy.tmpfs {
        let fs = sys::new_tmpfs(t.size_bytes, 0o777)
            .map_err(|e| fail(format!("tmpfs for {:?}", t.target), e))?;
        let at = mountpoint(&root_fd, &t.target, true, as_user)?;
        sys::move_mount_fd(fs.as_fd(), at.as_fd())
            .map_err(|e| fail(format!("attaching tmpfs at {:?}", t.target), e))?;
    }
    let root = PathBuf::from(STAGING);
    let nosuid_nodev = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    let dev = root.join("dev");
    for (name, link) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        symlink(link, dev.join(name))
            .map_err(|e| SetupFailure::io(Stage::Mounts, format!("/dev/{name}"), &e))?;
    }
    tmpfs(
        &dev.join("shm"),
        policy.limits.tmp_bytes,
        "1777",
        nosuid_nodev,
    )?;
    tmpfs(
        &root.join("tmp"),
        policy.limits.tmp_bytes,
        "1777",
        nosuid_nodev,
    )?;
    etc_files(&root, policy)?;
    let proc_dir = root.join("proc");
    mkdirs(&proc_dir)?;
    mount_proc(&proc_dir, host.proc)?;
    // No nested user namespaces: the limit is per user namespace and ours is writable by us
    // only now, before /proc/sys becomes read-only and our capabilities go. (Through a bound
    // host /proc it is the container's read-only one: seccomp still refuses new namespaces.)
    let tolerant = host.proc == ProcSource::HostBind;
    for (name, value) in [
        ("max_user_namespaces", "0"),
        // inotify is charged per user up the namespace chain; cap this jail's share.
        ("max_inotify_instances", "64"),
        ("max_inotify_watches", "16384"),
    ] {
        match write_file(&proc_dir.join("sys/user").join(name), value) {
            Err(_) if tolerant => {}
            other => other?,
        }
    }
    for sub in ["sys", "sysrq-trigger", "irq", "bus", "fs"] {
        bind_readonly(&proc_dir.join(sub))?;
    }
    lists.root = pivot(&root)?;
    Ok(lists)
}

/// The jail's `/proc` at `at`, from where [`crate::procfs`] said (a handed procfs is already
/// attached there).
fn mount_proc(at: &Path, source: ProcSource) -> Result<(), SetupFailure> {
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    match source {
        ProcSource::Handed => Ok(()),
        ProcSource::Fresh => mount(Some("proc"), at, Some("proc"), flags, None::<&str>)
            .map_err(|e| fail("mounting /proc".into(), e)),
        ProcSource::HostBind => {
            let bind = MsFlags::MS_BIND | MsFlags::MS_REC;
            mount(Some("/proc"), at, None::<&str>, bind, None::<&str>)
                .map_err(|e| fail("binding the host's /proc".into(), e))?;
            let ro = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | flags;
            mount(None::<&str>, at, None::<&str>, ro, None::<&str>)
                .map_err(|e| fail("making the host's /proc read-only".into(), e))
        }
    }
}

/// How the jail's root became `/`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RootSwitch {
    /// `pivot_root`, then the old root detached: nothing of the host's tree is left beneath.
    #[default]
    PivotRoot,
    /// The new root moved over the old one and `chroot` into it, where a container runtime's
    /// seccomp profile refuses `pivot_root` (Docker's and containerd's do, even with
    /// `CAP_SYS_ADMIN`), as runc's no-pivot mode does. The old root stays beneath, out of
    /// reach: `..` and `setns` stop at the moved root, the command holds no capability
    /// (`CAP_SYS_CHROOT` included) and is not dumpable, and the jail's filter refuses `chroot`,
    /// `pivot_root`, every mount call and new namespaces. (Where the jail's `/proc` is the
    /// container's own, `host_bind`, that view is wider whichever way the root was switched.)
    MoveChroot,
}

fn pivot(root: &Path) -> Result<RootSwitch, SetupFailure> {
    nix::unistd::chdir(root).map_err(|e| fail("chdir to the new root".into(), e))?;
    let switch = match nix::unistd::pivot_root(".", ".") {
        Ok(()) => {
            umount2(".", MntFlags::MNT_DETACH)
                .map_err(|e| fail("detaching the old root".into(), e))?;
            RootSwitch::PivotRoot
        }
        Err(Errno::EPERM) => {
            mount(Some("."), "/", None::<&str>, MsFlags::MS_MOVE, None::<&str>)
                .map_err(|e| fail("pivot_root refused; moving the new root over /".into(), e))?;
            nix::unistd::chroot(".").map_err(|e| {
                fail(
                    "pivot_root refused (a container runtime's seccomp profile refuses it), and \
                     chroot too: give the container CAP_SYS_CHROOT (in Docker's default set; \
                     the runtime's profile allows chroot with it)"
                        .into(),
                    e,
                )
            })?;
            RootSwitch::MoveChroot
        }
        Err(e) => return Err(fail("pivot_root".into(), e)),
    };
    nix::unistd::chdir("/").map_err(|e| fail("chdir /".into(), e))?;
    let ro = MsFlags::MS_BIND
        | MsFlags::MS_REMOUNT
        | MsFlags::MS_RDONLY
        | MsFlags::MS_NOSUID
        | MsFlags::MS_NODEV;
    mount(None::<&str>, "/", None::<&str>, ro, None::<&str>)
        .map_err(|e| fail("making / read-only".into(), e))?;
    nix::unistd::chdir(WORKSPACE_MOUNT).map_err(|e| fail("chdir /workspace".into(), e))?;
    Ok(switch)
}
