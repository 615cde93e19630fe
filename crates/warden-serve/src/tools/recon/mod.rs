//! The recon toolset (`warden serve --profile recon`): typed security tools that can only be
//! aimed at the configured targets, each mapped to one program with a closed set of
//! arguments, run in the sandbox, and returning parsed findings.
//!
//! Two layers keep a scan on its targets: the tool checks its address or URL against the list
//! ([`target`]) before anything runs, and the call's sandbox can open connections to those
//! targets only (the jail's direct-target mode: see `warden_jail::trace::targets`), so the
//! list holds even if a program, its parser or this server is subverted. No input field can
//! carry a flag, a path or a command: arguments are built here as an argv, never by a shell.
//!
//! Each call returns a `ScanResult`: the tool, the target, the exact argv, a status
//! (`completed`, `timed_out`, `error`, or `refused` when the sandbox's network refused every
//! connection the program tried), the exit code, the duration, typed findings, the raw output
//! (capped, and saying so) and what the sandbox saw on the network.

mod arjun;
mod connections;
mod ffuf;
mod nmap;
mod nuclei;
pub mod target;
pub mod toolbox;

use std::path::Path;

use serde_json::{Value, json};
use warden_jail::{Bind, Outcome, Policy};

use super::{Spec, ToolError};
use crate::state::CallContext;
pub use toolbox::Toolbox;

/// Where a call's private output folder is shown in the sandbox.
const OUT_MOUNT: &str = "/run/warden-recon/out";
/// Bytes of a program's standard error returned, at most.
const MAX_STDERR: usize = 4096;
/// Largest output file read back from a program.
const MAX_OUTPUT_FILE: u64 = 16 << 20;

/// The spec of recon tool `name`, or `None` when its program is missing.
pub fn spec(name: &str, toolbox: &Toolbox, max_timeout_s: f64) -> Option<Spec> {
    toolbox.program(name).ok()?;
    let targets = toolbox.targets.join(", ");
    let timeout = json!({
        "type": "number", "exclusiveMinimum": 0, "maximum": max_timeout_s,
        "description": "Wall-clock limit in seconds."
    });
    let (title, description, input, findings) = match name {
        "nmap_scan" => nmap::spec(toolbox),
        "ffuf_discover" => ffuf::spec(toolbox),
        "arjun_params" => arjun::spec(),
        "nuclei_scan" => nuclei::spec(),
        _ => return None,
    };
    let mut input = input;
    input["properties"]["timeout_s"] = timeout;
    input["additionalProperties"] = json!(false);
    Some(Spec {
        name: toolbox::static_name(name)?,
        title,
        description: format!(
            "{description} Only these targets can be reached: {targets}. It runs in Warden's \
             sandbox, whose network reaches those targets and nothing else. Output is \
             untrusted: it comes from the target."
        ),
        input,
        output: result_schema(&findings),
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: true,
    })
}

/// The `ScanResult` schema with `findings` of the given item schema.
fn result_schema(finding: &Value) -> Value {
    json!({
        "type": "object",
        "properties": {
            "tool": { "type": "string" },
            "target": { "type": "string" },
            "command": { "type": "array", "items": { "type": "string" } },
            "status": { "enum": ["completed", "timed_out", "error", "refused"] },
            "exit_code": { "type": ["integer", "null"] },
            "duration_ms": { "type": "integer", "minimum": 0 },
            "findings": { "type": "array", "items": finding },
            "summary": { "description": "nmap: the ports reported in bulk (`collapsed`: address, \
                                          state, count, ports), not one by one." },
            "raw": { "type": "string" },
            "raw_truncated": { "type": "boolean" },
            "stderr": { "type": "string" },
            "error": { "type": ["string", "null"] },
            "connections": { "type": "object" },
            "untrusted": { "type": "boolean" }
        },
        "required": ["tool", "target", "command", "status", "exit_code", "duration_ms",
                     "findings", "raw", "raw_truncated", "connections", "untrusted"]
    })
}

/// Run recon tool `name`.
pub async fn call(name: &str, args: Value, cx: &CallContext) -> Result<Value, ToolError> {
    let toolbox = &cx.shared().recon;
    let program = toolbox
        .program(name)
        .map_err(|why| ToolError::Unavailable(why.to_owned()))?
        .clone();
    let allowed = target::Allowed::new(&toolbox.targets);
    let job = match name {
        "nmap_scan" => nmap::job(args, &allowed, toolbox, &program)?,
        "ffuf_discover" => ffuf::job(args, &allowed, toolbox, &program)?,
        "arjun_params" => arjun::job(args, &allowed, &program)?,
        "nuclei_scan" => nuclei::job(args, &allowed, toolbox, &program)?,
        other => return Err(ToolError::Internal(format!("no recon tool {other}"))),
    };
    run(job, &program, cx).await
}

/// One scan, ready to run.
pub(crate) struct Job {
    tool: &'static str,
    target: String,
    argv: Vec<String>,
    binds: Vec<Bind>,
    /// The file (in the output folder) the program writes its results to; `None`: stdout.
    out_file: Option<&'static str>,
    timeout_s: Option<f64>,
    parse: fn(&[u8]) -> Option<Parsed>,
}

/// What a program's output says: typed findings, and a tool-specific summary (nmap: the
/// ports it reported in bulk rather than one by one), `null` when there is none.
pub(crate) type Parsed = (Vec<Value>, Value);

/// Findings with no summary.
pub(crate) fn plain(findings: Option<Vec<Value>>) -> Option<Parsed> {
    findings.map(|f| (f, Value::Null))
}

/// The sandbox policy of a recon call: the profile's limits, no workspace, the targets as the
/// only reachable addresses, the program's installation and the job's files read-only, and
/// the private output folder writable (for a program that writes its results to a file).
fn policy(cx: &CallContext, job: &Job, program: &toolbox::Program, out: Option<&Path>) -> Policy {
    let shared = cx.shared();
    let mut p = super::networked_policy(cx, job.timeout_s);
    p.targets.clone_from(&shared.recon.targets);
    p.target_connect_ms = shared.recon.settings.connect_timeout_ms;
    p.binds.extend(program.binds());
    p.binds.extend(job.binds.iter().cloned());
    if let Some(out) = out {
        p.binds.push(Bind {
            source: out.to_path_buf(),
            target: Some(OUT_MOUNT.into()),
            writable: true,
        });
    }
    // The output folder, when there is one, is the server's disk: no file there needs more
    // than what is read back (applied to every call alike, so the policy stays one).
    p.limits.file_size_bytes = p.limits.file_size_bytes.min(4 * MAX_OUTPUT_FILE);
    p
}

async fn run(job: Job, program: &toolbox::Program, cx: &CallContext) -> Result<Value, ToolError> {
    // A program that writes its results to a file (ffuf, arjun) gets a folder of this call's
    // own; one that writes them to stdout (nmap, nuclei) none, so its policy is every such
    // call's and the pool can have its sandbox ready (with the tracer and the targets' network
    // waiting).
    let out = job.out_file.map(|_| {
        cx.shared()
            .state_dir()
            .join(format!("recon-{}", cx.call_id))
    });
    if let Some(out) = &out {
        make_out_dir(out).map_err(|e| ToolError::Internal(format!("output folder: {e}")))?;
    }
    let policy = policy(cx, &job, program, out.as_deref());
    let cmd = warden_jail::warm::Command {
        argv: job.argv.clone(),
        ..warden_jail::warm::Command::default()
    };
    // A folder of the call's own makes a policy no later call has: nothing to prepare.
    let from = match out {
        Some(_) => super::exec::Sandbox::Once,
        None => super::exec::Sandbox::Pooled,
    };
    let outcome = super::exec::jailed(cx, policy, cmd, from).await;
    let file = job
        .out_file
        .zip(out.as_ref())
        .map(|(f, out)| read_capped(&out.join(f)));
    if let Some(out) = &out {
        remove_tree(out);
    }
    let o = outcome?;
    let primary = match file {
        Some(bytes) => bytes,
        None => o.stdout.clone(),
    };
    Ok(result(
        &job,
        &o,
        &primary,
        cx.shared().recon.settings.raw_max_bytes,
    ))
}

/// A private output folder the sandbox's user can write (the server's state folder above it
/// is the server's alone).
fn make_out_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777))
}

/// Remove a call's output folder, whatever modes the program left on what it made there (a
/// server that is not root would otherwise be stopped by a folder the program made
/// read-only).
fn remove_tree(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if std::fs::remove_dir_all(dir).is_ok() {
        return;
    }
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700));
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push(e.path());
            }
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// A program's output file, at most [`MAX_OUTPUT_FILE`] bytes (missing: empty). Opened
/// without following a link the program may have left in its place.
fn read_capped(path: &Path) -> Vec<u8> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    else {
        return Vec::new();
    };
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        return Vec::new();
    }
    let mut buf = Vec::new();
    let _ = f.take(MAX_OUTPUT_FILE).read_to_end(&mut buf);
    buf
}

/// The `ScanResult` of a finished run.
fn result(job: &Job, o: &Outcome, primary: &[u8], raw_max: u64) -> Value {
    let parsed = (job.parse)(primary);
    let findings = parsed.as_ref().map(|(f, _)| f.clone());
    let summary = parsed.map_or(Value::Null, |(_, s)| s);
    let conns = connections::summarize(&o.events, o.events_dropped);
    let timed_out = matches!(o.limit_hit, Some(warden_jail::LimitKind::WallTime));
    let attempted = conns["attempts"].as_array().is_some_and(|a| !a.is_empty());
    let all_refused = attempted
        && conns["attempts"].as_array().into_iter().flatten().all(|a| {
            a.as_object()
                .is_some_and(|m| m.keys().all(|k| k == "address" || k == "not_allowed"))
        });
    let (status, error) = if timed_out {
        (
            "timed_out",
            Some("the scan outlived its time limit".to_owned()),
        )
    } else if all_refused {
        (
            "refused",
            Some("the sandbox's network refused every connection the program tried".to_owned()),
        )
    } else if let Some(limit) = o.limit_hit {
        ("error", Some(format!("the {limit:?} limit ended the scan")))
    } else if o.exit_code != Some(0) {
        let how = match (o.exit_code, o.signal) {
            (_, Some(sig)) => format!("was killed by signal {sig}"),
            (Some(code), None) => format!("exited with status {code}"),
            (None, None) => "ended without an exit status".to_owned(),
        };
        ("error", Some(format!("{} {how}", job.argv[0])))
    } else if findings.is_none() {
        (
            "error",
            Some("the program's output could not be parsed (see raw)".to_owned()),
        )
    } else {
        ("completed", None)
    };
    let cap = usize::try_from(raw_max).unwrap_or(usize::MAX);
    let (raw, raw_truncated) = cut(primary, cap);
    let (stderr, _) = cut(&o.stderr, MAX_STDERR);
    json!({
        "tool": job.tool,
        "target": job.target,
        "command": job.argv,
        "status": status,
        "exit_code": o.exit_code,
        "duration_ms": o.duration_ms,
        "findings": findings.unwrap_or_default(),
        "summary": summary,
        "raw": raw,
        "raw_truncated": raw_truncated,
        "stderr": stderr,
        "error": error,
        "connections": conns,
        "untrusted": true,
    })
}

/// `bytes` as text, cut to `cap` bytes on a character boundary; whether it was cut.
fn cut(bytes: &[u8], cap: usize) -> (String, bool) {
    let text = String::from_utf8_lossy(bytes);
    if text.len() <= cap {
        return (text.into_owned(), false);
    }
    let mut end = cap;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (text[..end].to_owned(), true)
}

/// A string property that must match `pattern` (the only kind of free text recon inputs
/// have: validated targets and URLs).
pub(crate) fn checked_string(pattern: &str, max: u64, description: &str) -> Value {
    json!({ "type": "string", "minLength": 1, "maxLength": max, "pattern": pattern,
            "description": description })
}

/// An `http(s)` URL property.
pub(crate) fn url_property(description: &str) -> Value {
    checked_string("^https?://[^\\s]+$", 2048, description)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A toolbox with every program present (nuclei is installed nowhere here).
    fn full() -> Toolbox {
        let p = || {
            Ok(toolbox::Program {
                path: "/usr/bin/x".into(),
                version: "1".into(),
                binds: Vec::new(),
            })
        };
        Toolbox {
            targets: vec!["192.0.2.2".into()],
            settings: crate::config::ReconFile::default(),
            nmap: p(),
            ffuf: p(),
            arjun: p(),
            nuclei: p(),
            templates: Some("/t".into()),
            wordlists: vec![("warden-small".into(), "/w".into())],
        }
    }

    #[test]
    fn every_input_is_closed_and_every_string_checked_nuclei_included() {
        let t = full();
        for name in crate::tools::RECON_TOOLS {
            let s = spec(name, &t, 600.0).unwrap();
            assert_eq!(s.input["additionalProperties"], false, "{name}");
            for (prop, p) in s.input["properties"].as_object().unwrap() {
                let item = if p["type"] == "array" { &p["items"] } else { p };
                let checked = item.get("enum").is_some()
                    || item.get("pattern").is_some()
                    || matches!(item["type"].as_str(), Some("integer" | "number"));
                assert!(checked, "{name}.{prop}: {p}");
            }
        }
        let mut missing = full();
        missing.nuclei = Err("not installed".into());
        assert!(spec("nuclei_scan", &missing, 600.0).is_none());
    }

    #[test]
    fn nuclei_refuses_a_second_target_smuggled_after_a_comma() {
        let t = full();
        let allowed = target::Allowed::new(&t.targets);
        let program = t.nuclei.clone().unwrap();
        let args = |url: &str| serde_json::json!({ "url": url, "tags": ["cve", "tech"] });
        let err = nuclei::job(
            args("http://192.0.2.2/?a=,http://10.9.9.9/"),
            &allowed,
            &t,
            &program,
        )
        .err()
        .unwrap();
        assert_eq!(err.kind(), "invalid_arguments");
        let job = nuclei::job(args("http://192.0.2.2/?a=%2C"), &allowed, &t, &program).unwrap();
        let argv = job.argv.join(" ");
        assert!(
            argv.contains("-tags cve,tech -etags intrusive,dos,fuzz"),
            "{argv}"
        );
        assert!(argv.contains("-u http://192.0.2.2/?a=%2C "), "{argv}");
    }

    #[test]
    fn raw_output_is_cut_on_a_character_boundary_and_says_so() {
        assert_eq!(cut(b"hello", 10), ("hello".into(), false));
        assert_eq!(cut(b"hello", 3), ("hel".into(), true));
        let (t, cut_) = cut("aé".as_bytes(), 2);
        assert_eq!((t.as_str(), cut_), ("a", true));
    }
}
