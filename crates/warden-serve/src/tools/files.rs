//! File tools, confined beneath the session's workspace.
//!
//! Every path is resolved by `cap-std` relative to a descriptor of the workspace (openat2 with
//! `RESOLVE_BENEATH` on Linux): `..` out of it, absolute paths, and symlinks planted by
//! sandboxed code that point outside all fail, and since every step is relative to descriptors
//! there is no window for a rename race to swap a directory for a link. On top of that,
//! arguments are checked up front for clear errors (absolute paths and `..` are refused), sizes
//! are bounded, and the operator may restrict extensions.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Component, Path, PathBuf};

use base64::Engine;
use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions};
use serde::Deserialize;
use serde_json::{Value, json};
use thiserror::Error;

use super::{Hints, MAX_PATH_BYTES, Spec, ToolError, parse};
use crate::config::Profile;
use crate::state::CallContext;

/// Why a path was refused or could not be used.
#[derive(Debug, Error)]
pub enum PathError {
    /// Absolute, empty, or containing `..`.
    #[error("path {0:?} must be relative to the workspace, without `..`")]
    NotRelative(String),
    /// Resolving it would leave the workspace (a symlink pointing outside, for instance).
    #[error("path {0:?} leads outside the workspace")]
    Escapes(String),
    /// Nothing there.
    #[error("{0:?} does not exist")]
    NotFound(String),
    /// Something is already there.
    #[error("{0:?} already exists")]
    Exists(String),
    /// The operator's extension allowlist does not include it.
    #[error("{0:?} has an extension the server does not allow")]
    Extension(String),
    /// The session's workspace is full (its disk quota).
    #[error("{0:?}: the session's workspace is full (its disk quota, workspace_max_bytes)")]
    DiskFull(String),
    /// The path runs code later outside the sandbox (git hooks, `.mcp.json`…) and is read-only.
    #[error(
        "{0:?} is a protected path (it would run code outside the sandbox later); the server's allow_protected setting can open it"
    )]
    Protected(String),
    /// Text was asked for but the file is not UTF-8.
    #[error("{0:?} is not UTF-8 text; read it with encoding \"base64\"")]
    NotText(String),
    /// Another file-system error.
    #[error("{path:?}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

impl PathError {
    /// Machine-readable kind.
    pub fn kind(&self) -> &'static str {
        match self {
            PathError::NotRelative(_) => "invalid_path",
            PathError::Escapes(_) => "path_escapes_workspace",
            PathError::NotFound(_) => "not_found",
            PathError::Exists(_) => "already_exists",
            PathError::Extension(_) => "extension_not_allowed",
            PathError::NotText(_) => "not_text",
            PathError::Protected(_) => "protected_path",
            PathError::DiskFull(_) => "disk_full",
            PathError::Io { .. } => "io_error",
        }
    }

    fn io(path: &str, e: std::io::Error) -> PathError {
        use std::io::ErrorKind;
        match e.kind() {
            ErrorKind::NotFound => PathError::NotFound(path.to_owned()),
            ErrorKind::AlreadyExists => PathError::Exists(path.to_owned()),
            // cap-std reports an escape as PermissionDenied ("a path led outside of the
            // filesystem"); ELOOP from RESOLVE_BENEATH shows up as "other" with errno 40.
            ErrorKind::PermissionDenied if e.to_string().contains("outside") => {
                PathError::Escapes(path.to_owned())
            }
            _ if e.raw_os_error() == Some(libc::ENOSPC) => PathError::DiskFull(path.to_owned()),
            _ if e.raw_os_error() == Some(libc_eloop())
                || e.raw_os_error() == Some(libc_exdev()) =>
            {
                PathError::Escapes(path.to_owned())
            }
            _ => PathError::Io {
                path: path.to_owned(),
                source: e,
            },
        }
    }
}

const fn libc_eloop() -> i32 {
    40
}

const fn libc_exdev() -> i32 {
    18
}

/// Entries `file_list` looks at, at most, whatever its pattern matches.
const MAX_VISITED: usize = 100_000;

/// Check a path argument: relative, no `..`, no NUL.
fn relative(path: &str) -> Result<PathBuf, PathError> {
    let p = Path::new(path);
    let ok = !path.is_empty()
        && !path.contains('\0')
        && p.components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if ok {
        Ok(p.to_owned())
    } else {
        Err(PathError::NotRelative(path.to_owned()))
    }
}

fn check_extension(profile: &Profile, path: &str) -> Result<(), PathError> {
    let Some(allowed) = &profile.allowed_extensions else {
        return Ok(());
    };
    let ext = Path::new(path)
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("");
    if allowed.iter().any(|a| a == ext) {
        Ok(())
    } else {
        Err(PathError::Extension(path.to_owned()))
    }
}

/// Create the missing parents of `rel`, one component at a time. An existing component that is a
/// symlink must resolve to a directory inside the workspace (cap-std refuses anything else, which
/// is reported as an escape), so nothing is ever created through a link that leads outside.
fn make_parents(dir: &Dir, rel: &Path, shown: &str) -> Result<(), PathError> {
    let Some(parent) = rel.parent() else {
        return Ok(());
    };
    let mut prefix = PathBuf::new();
    for c in parent.components() {
        prefix.push(c);
        if c == Component::CurDir {
            continue;
        }
        match dir.symlink_metadata(&prefix) {
            Ok(m) if m.is_dir() => {}
            Ok(m) if m.file_type().is_symlink() => {
                let target = dir.metadata(&prefix).map_err(|e| PathError::io(shown, e))?;
                if !target.is_dir() {
                    return Err(PathError::Io {
                        path: shown.to_owned(),
                        source: std::io::Error::other("a parent is not a directory"),
                    });
                }
            }
            Ok(_) => {
                return Err(PathError::Io {
                    path: shown.to_owned(),
                    source: std::io::Error::other("a parent is not a directory"),
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                dir.create_dir(&prefix)
                    .map_err(|e| PathError::io(shown, e))?;
            }
            Err(e) => return Err(PathError::io(shown, e)),
        }
    }
    Ok(())
}

/// With an extension allowlist, a name is not enough: `a.txt -> key.pem` would read `key.pem`.
/// So the final component may not be a symlink then.
fn check_not_link(profile: &Profile, dir: &Dir, rel: &Path, shown: &str) -> Result<(), PathError> {
    if profile.allowed_extensions.is_some()
        && dir
            .symlink_metadata(rel)
            .is_ok_and(|m| m.file_type().is_symlink())
    {
        return Err(PathError::Extension(shown.to_owned()));
    }
    Ok(())
}

fn workspace(cx: &CallContext) -> Result<Dir, ToolError> {
    let path = cx.session.workspace()?;
    Dir::open_ambient_dir(&path, ambient_authority())
        .map_err(|e| ToolError::Internal(format!("opening the workspace: {e}")))
}

fn path_prop(desc: &str) -> Value {
    json!({ "type": "string", "minLength": 1, "maxLength": MAX_PATH_BYTES, "description": desc })
}

fn entry_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": { "type": "string" },
            "type": { "enum": ["file", "dir", "symlink", "other"] },
            "size": { "type": "integer", "minimum": 0 },
            "modified_unix": { "type": ["integer", "null"] }
        },
        "required": ["path", "type", "size"]
    })
}

pub(super) fn spec(name: &str, profile: &Profile) -> Option<Spec> {
    let max = profile.max_file_bytes;
    let rel = "Path relative to the workspace (no `..`, not absolute).";
    let s = |name, title, description: &str, input, output, ro, destructive, idempotent| {
        let description = format!("{description} Paths are confined to the session's workspace.");
        let hints = Hints {
            read_only: ro,
            destructive,
            idempotent,
        };
        Spec::local(name, title, description, input, output, hints)
    };
    let spec = match name {
        "file_read" => s(
            "file_read",
            "Read a file",
            &format!(
                "Read a file as UTF-8 text or base64, optionally a byte range (at most {max} bytes)."
            ),
            json!({
                "type": "object",
                "properties": {
                    "path": path_prop(rel),
                    "encoding": { "enum": ["text", "base64"], "default": "text" },
                    "offset": { "type": "integer", "minimum": 0, "default": 0 },
                    "length": { "type": "integer", "minimum": 1, "maximum": max }
                },
                "required": ["path"],
                "additionalProperties": false
            }),
            json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string" }, "encoding": { "type": "string" },
                    "content": { "type": "string" }, "size": { "type": "integer" },
                    "offset": { "type": "integer" }, "bytes_read": { "type": "integer" },
                    "eof": { "type": "boolean" }
                },
                "required": ["path", "encoding", "content", "size", "offset", "bytes_read", "eof"]
            }),
            true,
            false,
            true,
        ),
        "file_write" => s(
            "file_write",
            "Write a file",
            &format!(
                "Create, overwrite (atomically) or append to a file, creating parent directories (at most {max} bytes)."
            ),
            json!({
                "type": "object",
                "properties": {
                    "path": path_prop(rel),
                    "content": { "type": "string", "maxLength": max.saturating_mul(2) },
                    "encoding": { "enum": ["text", "base64"], "default": "text" },
                    "mode": { "enum": ["overwrite", "create", "append"], "default": "overwrite",
                              "description": "create fails if the file exists." },
                    "create_parents": { "type": "boolean", "default": true }
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
            json!({
                "type": "object",
                "properties": { "path": { "type": "string" }, "bytes_written": { "type": "integer" },
                                "size": { "type": "integer" } },
                "required": ["path", "bytes_written", "size"]
            }),
            false,
            true,
            false,
        ),
        "file_list" => s(
            "file_list",
            "List files",
            "List a directory, optionally recursively and filtered by a glob pattern (`*.py`, `src/**/*.rs`), with sizes and modification times. Symlinks are listed, not followed.",
            json!({
                "type": "object",
                "properties": {
                    "path": path_prop("Directory relative to the workspace (default: the workspace)."),
                    "pattern": { "type": "string", "minLength": 1, "maxLength": 1024 },
                    "recursive": { "type": "boolean", "default": false },
                    "max_entries": { "type": "integer", "minimum": 1, "maximum": 10000, "default": 1000 }
                },
                "additionalProperties": false
            }),
            json!({
                "type": "object",
                "properties": { "entries": { "type": "array", "items": entry_schema() },
                                "truncated": { "type": "boolean" } },
                "required": ["entries", "truncated"]
            }),
            true,
            false,
            true,
        ),
        "file_info" => s(
            "file_info",
            "File information",
            "Type, size, permissions, modification time and (for a symlink) its target, without following it.",
            json!({
                "type": "object",
                "properties": { "path": path_prop(rel) },
                "required": ["path"],
                "additionalProperties": false
            }),
            json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string" }, "type": { "enum": ["file", "dir", "symlink", "other"] },
                    "size": { "type": "integer" }, "mode": { "type": "string" },
                    "modified_unix": { "type": ["integer", "null"] },
                    "symlink_target": { "type": ["string", "null"] }
                },
                "required": ["path", "type", "size", "mode"]
            }),
            true,
            false,
            true,
        ),
        "file_delete" => s(
            "file_delete",
            "Delete a file",
            "Delete a file, a symlink (not its target) or a directory (non-empty only with `recursive`).",
            json!({
                "type": "object",
                "properties": { "path": path_prop(rel), "recursive": { "type": "boolean", "default": false } },
                "required": ["path"],
                "additionalProperties": false
            }),
            json!({
                "type": "object",
                "properties": { "path": { "type": "string" }, "deleted": { "type": "boolean" } },
                "required": ["path", "deleted"]
            }),
            false,
            true,
            true,
        ),
        "file_move" => s(
            "file_move",
            "Move a file",
            "Move or rename a file or directory within the workspace, creating the destination's parents.",
            json!({
                "type": "object",
                "properties": {
                    "source": path_prop(rel),
                    "destination": path_prop(rel),
                    "overwrite": { "type": "boolean", "default": false }
                },
                "required": ["source", "destination"],
                "additionalProperties": false
            }),
            json!({
                "type": "object",
                "properties": { "source": { "type": "string" }, "destination": { "type": "string" } },
                "required": ["source", "destination"]
            }),
            false,
            true,
            false,
        ),
        _ => return None,
    };
    Some(spec)
}

#[derive(Deserialize)]
struct ReadArgs {
    path: String,
    #[serde(default)]
    encoding: Option<String>,
    #[serde(default)]
    offset: u64,
    length: Option<u64>,
}

#[derive(Deserialize)]
struct WriteArgs {
    path: String,
    content: String,
    encoding: Option<String>,
    mode: Option<String>,
    create_parents: Option<bool>,
}

#[derive(Deserialize)]
struct ListArgs {
    path: Option<String>,
    pattern: Option<String>,
    #[serde(default)]
    recursive: bool,
    max_entries: Option<usize>,
}

#[derive(Deserialize)]
struct PathArgs {
    path: String,
    #[serde(default)]
    recursive: bool,
}

#[derive(Deserialize)]
struct MoveArgs {
    source: String,
    destination: String,
    #[serde(default)]
    overwrite: bool,
}

/// Read a whole workspace file (confined like the file tools), refusing it beyond `max` bytes.
pub(super) async fn read_all(cx: &CallContext, path: &str, max: u64) -> Result<Vec<u8>, ToolError> {
    let dir = workspace(cx)?;
    let profile = cx.shared().config.profile.clone();
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || {
        let rel = relative(&path)?;
        check_extension(&profile, &path)?;
        check_not_link(&profile, &dir, &rel, &path)?;
        let io = |e| PathError::io(&path, e);
        let f = crate::wsfs::open_read(&dir, &rel).map_err(io)?;
        let mut buf = Vec::new();
        f.take(max + 1).read_to_end(&mut buf).map_err(io)?;
        if buf.len() as u64 > max {
            return Err(ToolError::TooLarge {
                what: "the file",
                limit: max,
            });
        }
        Ok(buf)
    })
    .await
    .map_err(|e| ToolError::Internal(e.to_string()))?
}

/// Run file tool `name`; file-system work happens on a blocking thread.
/// The protected-path rule of a lasting workspace (see `warden_jail::protect`), which the file
/// tools keep as the jail does for commands.
#[derive(Debug, Clone)]
struct Guard {
    on: bool,
    allow: Vec<String>,
}

impl Guard {
    fn check(&self, dir: &Dir, path: &str, whole: bool) -> Result<(), PathError> {
        if !self.on {
            return Ok(());
        }
        let git_dir = dir.symlink_metadata(".git").is_ok_and(|m| m.is_dir());
        if warden_jail::protect::touches(Path::new(path), whole, git_dir, &self.allow) {
            return Err(PathError::Protected(path.to_owned()));
        }
        Ok(())
    }
}

pub(super) async fn call(name: &str, args: Value, cx: &CallContext) -> Result<Value, ToolError> {
    let dir = workspace(cx)?;
    let profile = cx.shared().config.profile.clone();
    let settings = &cx.shared().config.settings;
    let guard = Guard {
        on: settings.lasting_workspaces(),
        allow: settings.allow_protected.clone(),
    };
    let name = name.to_owned();
    tokio::task::spawn_blocking(move || match name.as_str() {
        "file_read" => read(&dir, &profile, parse(args)?),
        "file_write" => write(&dir, &profile, &guard, parse(args)?),
        "file_list" => list(&dir, parse(args)?),
        "file_info" => info(&dir, parse(args)?),
        "file_delete" => delete(&dir, &guard, parse(args)?),
        "file_move" => rename(&dir, &profile, &guard, parse(args)?),
        other => Err(ToolError::Internal(format!("no file tool {other}"))),
    })
    .await
    .map_err(|e| ToolError::Internal(e.to_string()))?
}

fn read(dir: &Dir, profile: &Profile, a: ReadArgs) -> Result<Value, ToolError> {
    let rel = relative(&a.path)?;
    check_extension(profile, &a.path)?;
    check_not_link(profile, dir, &rel, &a.path)?;
    let io = |e| PathError::io(&a.path, e);
    let mut f = crate::wsfs::open_read(dir, &rel).map_err(io)?;
    let meta = f.metadata().map_err(io)?;
    let size = meta.len();
    let length = a
        .length
        .unwrap_or(profile.max_file_bytes)
        .min(profile.max_file_bytes);
    f.seek(SeekFrom::Start(a.offset)).map_err(io)?;
    let mut buf = Vec::new();
    f.take(length).read_to_end(&mut buf).map_err(io)?;
    let bytes_read = buf.len() as u64;
    let base64 = a.encoding.as_deref() == Some("base64");
    let content = if base64 {
        base64::engine::general_purpose::STANDARD.encode(&buf)
    } else {
        String::from_utf8(buf).map_err(|_| PathError::NotText(a.path.clone()))?
    };
    Ok(json!({
        "path": a.path,
        "encoding": if base64 { "base64" } else { "text" },
        "content": content,
        "size": size,
        "offset": a.offset,
        "bytes_read": bytes_read,
        "eof": a.offset.saturating_add(bytes_read) >= size,
    }))
}

fn write(dir: &Dir, profile: &Profile, guard: &Guard, a: WriteArgs) -> Result<Value, ToolError> {
    let rel = relative(&a.path)?;
    check_extension(profile, &a.path)?;
    guard.check(dir, &a.path, false)?;
    let data = if a.encoding.as_deref() == Some("base64") {
        base64::engine::general_purpose::STANDARD
            .decode(a.content.as_bytes())
            .map_err(|e| {
                ToolError::InvalidArguments(vec![super::ArgError {
                    instance_path: "/content".into(),
                    schema_path: String::new(),
                    message: format!("not valid base64: {e}"),
                }])
            })?
    } else {
        a.content.into_bytes()
    };
    let max = profile.max_file_bytes;
    if data.len() as u64 > max {
        return Err(ToolError::TooLarge {
            what: "the content",
            limit: max,
        });
    }
    let io = |e| PathError::io(&a.path, e);
    if a.create_parents.unwrap_or(true) {
        make_parents(dir, &rel, &a.path)?;
    }
    match a.mode.as_deref().unwrap_or("overwrite") {
        "append" => {
            let existing = dir.metadata(&rel).map(|m| m.len()).unwrap_or(0);
            if existing + data.len() as u64 > max {
                return Err(ToolError::TooLarge {
                    what: "the file after appending",
                    limit: max,
                });
            }
            let mut f = crate::wsfs::open_append(dir, &rel).map_err(io)?;
            f.write_all(&data).map_err(io)?;
        }
        "create" => {
            let mut f = dir
                .open_with(&rel, OpenOptions::new().write(true).create_new(true))
                .map_err(io)?;
            f.write_all(&data).map_err(io)?;
        }
        _ => {
            // Atomic replace: a fresh, uniquely named sibling, written and synced, renamed over.
            let (mut f, tmp) = crate::wsfs::create_temp(dir, &rel).map_err(io)?;
            let written = f.write_all(&data).and_then(|()| f.sync_data());
            drop(f);
            if let Err(e) = written.and_then(|()| dir.rename(&tmp, dir, &rel)) {
                let _ = dir.remove_file(&tmp);
                return Err(io(e).into());
            }
        }
    }
    let size = dir.metadata(&rel).map(|m| m.len()).map_err(io)?;
    Ok(json!({ "path": a.path, "bytes_written": data.len(), "size": size }))
}

fn kind(ft: &cap_std::fs::FileType) -> &'static str {
    if ft.is_symlink() {
        "symlink"
    } else if ft.is_dir() {
        "dir"
    } else if ft.is_file() {
        "file"
    } else {
        "other"
    }
}

fn modified(m: &cap_std::fs::Metadata) -> Option<u64> {
    m.modified()
        .ok()
        .and_then(|t| t.into_std().duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs())
}

fn list(dir: &Dir, a: ListArgs) -> Result<Value, ToolError> {
    let base = a.path.as_deref().unwrap_or(".");
    let rel = relative(base)?;
    let pattern = a
        .pattern
        .as_deref()
        .unwrap_or(if a.recursive { "**" } else { "*" });
    let glob = globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|e| {
            ToolError::InvalidArguments(vec![super::ArgError {
                instance_path: "/pattern".into(),
                schema_path: String::new(),
                message: e.to_string(),
            }])
        })?
        .compile_matcher();
    let max = a.max_entries.unwrap_or(1000);
    let root = if rel == Path::new(".") {
        dir.try_clone().map_err(|e| PathError::io(base, e))?
    } else {
        dir.open_dir(&rel).map_err(|e| PathError::io(base, e))?
    };
    let mut entries = Vec::new();
    let mut truncated = false;
    let mut visited = 0usize;
    // Paths, not open directories, wait on the stack: a wide tree must not exhaust our
    // descriptors. Every directory is reopened beneath `root` without following links.
    let mut stack: Vec<PathBuf> = vec![PathBuf::new()];
    'walk: while let Some(prefix) = stack.pop() {
        let d = if prefix.as_os_str().is_empty() {
            root.try_clone()
        } else {
            cap_fs_ext::DirExt::open_dir_nofollow(&root, &prefix)
        };
        let Ok(d) = d else { continue };
        let iter = d.entries().map_err(|e| PathError::io(base, e))?;
        let mut names: Vec<_> = iter.flatten().collect();
        names.sort_by_key(|e| e.file_name());
        for e in names {
            visited += 1;
            if visited > MAX_VISITED {
                truncated = true;
                break 'walk;
            }
            let name = PathBuf::from(e.file_name());
            let sub = prefix.join(&name);
            let Ok(meta) = e.metadata() else { continue };
            let ft = meta.file_type();
            if a.recursive && ft.is_dir() && !ft.is_symlink() {
                stack.push(sub.clone());
            }
            if glob.is_match(&sub) {
                if entries.len() == max {
                    truncated = true;
                    break 'walk;
                }
                let shown = if rel == Path::new(".") {
                    sub.clone()
                } else {
                    rel.join(&sub)
                };
                entries.push(json!({
                    "path": shown.to_string_lossy(),
                    "type": kind(&ft),
                    "size": meta.len(),
                    "modified_unix": modified(&meta),
                }));
            }
        }
    }
    Ok(json!({ "entries": entries, "truncated": truncated }))
}

fn info(dir: &Dir, a: PathArgs) -> Result<Value, ToolError> {
    let rel = relative(&a.path)?;
    let io = |e| PathError::io(&a.path, e);
    let meta = dir.symlink_metadata(&rel).map_err(io)?;
    let ft = meta.file_type();
    let target = if ft.is_symlink() {
        dir.read_link_contents(&rel)
            .ok()
            .map(|t| t.to_string_lossy().into_owned())
    } else {
        None
    };
    use cap_std::fs::PermissionsExt;
    Ok(json!({
        "path": a.path,
        "type": kind(&ft),
        "size": meta.len(),
        "mode": format!("{:o}", meta.permissions().mode() & 0o7777),
        "modified_unix": modified(&meta),
        "symlink_target": target,
    }))
}

fn delete(dir: &Dir, guard: &Guard, a: PathArgs) -> Result<Value, ToolError> {
    let rel = relative(&a.path)?;
    guard.check(dir, &a.path, true)?;
    if rel.components().all(|c| c == Component::CurDir) {
        return Err(PathError::NotRelative(a.path).into());
    }
    let io = |e| PathError::io(&a.path, e);
    let meta = dir.symlink_metadata(&rel).map_err(io)?;
    if meta.is_dir() {
        if a.recursive {
            dir.remove_dir_all(&rel)
        } else {
            dir.remove_dir(&rel)
        }
        .map_err(io)?;
    } else {
        dir.remove_file(&rel).map_err(io)?;
    }
    Ok(json!({ "path": a.path, "deleted": true }))
}

fn rename(dir: &Dir, profile: &Profile, guard: &Guard, a: MoveArgs) -> Result<Value, ToolError> {
    let from = relative(&a.source)?;
    let to = relative(&a.destination)?;
    guard.check(dir, &a.source, true)?;
    guard.check(dir, &a.destination, true)?;
    check_extension(profile, &a.source)?;
    check_extension(profile, &a.destination)?;
    dir.symlink_metadata(&from)
        .map_err(|e| PathError::io(&a.source, e))?;
    let io = |e| PathError::io(&a.destination, e);
    if !a.overwrite && dir.symlink_metadata(&to).is_ok() {
        return Err(PathError::Exists(a.destination).into());
    }
    make_parents(dir, &to, &a.destination)?;
    dir.rename(&from, dir, &to).map_err(io)?;
    Ok(json!({ "source": a.source, "destination": a.destination }))
}
