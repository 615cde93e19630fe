//! `warden scan`: the target fetched as `detonate` fetches it (no package code runs), read by
//! `warden-scan`, the report to stdout or `--out`, and the exit status: 0, 1 when a finding
//! reaches `--fail-on`, 2 on errors, 3 when no component's vulnerabilities could be checked,
//! or when `--fail-on` gates a scan that left files unread (unless `--allow-unknown`): a gate
//! must not pass on a check that did not happen, nor on one that did not read everything.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use warden_scan::{OsvSource, Root};

use crate::cli::ScanArgs;

/// Run it.
pub fn main(args: ScanArgs) -> ExitCode {
    match scan(&args) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!(
                "warden scan: {}",
                warden_scan::report::clip(&format!("{e:#}"), 2000)
            );
            ExitCode::from(2)
        }
    }
}

fn scan(args: &ScanArgs) -> Result<u8> {
    let source = match &args.osv_db {
        Some(dir) => OsvSource::Offline(dir.clone()),
        None => OsvSource::Online(args.osv_url.clone()),
    };
    let mut notes = Vec::new();
    // The fetched package's folder lives until the report is written.
    let fetched = warden_detonate::fetch::fetch(&args.target)?;
    let root: PathBuf = match &fetched {
        Some(f) => {
            if args.target.starts_with("pypi:") && !f.egress.is_empty() {
                notes.push(
                    "the package is not all wheels: its dependencies are known only once its \
                     source distribution is built, which a scan never does; `warden detonate` \
                     builds it in the sandbox and scans what the install leaves"
                        .into(),
                );
            }
            f.workspace.path().to_path_buf()
        }
        None => {
            let p = PathBuf::from(&args.target);
            let meta = std::fs::metadata(&p)
                .with_context(|| format!("{}: no such file or folder", p.display()))?;
            if meta.is_dir() {
                p
            } else {
                p.parent()
                    .map(|d| {
                        if d.as_os_str().is_empty() {
                            PathBuf::from(".")
                        } else {
                            d.to_path_buf()
                        }
                    })
                    .unwrap_or_else(|| PathBuf::from("."))
            }
        }
    };
    let roots = [Root {
        path: root,
        label: String::new(),
    }];
    let mut report = warden_scan::scan(&args.target, &roots, &source);
    report.notes.extend(notes);
    drop(fetched);
    let terminal = args.out.is_none() && std::io::stdout().is_terminal();
    let json = |text: String| {
        if terminal {
            warden_scan::report::json_for_a_terminal(&text)
        } else {
            text
        }
    };
    let text = match args.output.as_str() {
        "json" => json(serde_json::to_string_pretty(&report)?),
        "sarif" => json(serde_json::to_string_pretty(&report.sarif())?),
        "cyclonedx" => json(serde_json::to_string_pretty(&warden_scan::cyclonedx::bom(
            &report,
        ))?),
        _ => report.timeline(terminal),
    };
    crate::emit::emit(&text, args.out.as_deref())?;
    let gate = args.fail_on.as_deref().and_then(|s| {
        serde_json::from_value::<warden_events::Severity>(serde_json::Value::String(s.into())).ok()
    });
    let tripped = gate.is_some_and(|g| report.findings.iter().any(|f| f.severity >= g));
    let check = &report.vulnerability_check;
    if check.status == "unknown" {
        eprintln!(
            "warden scan: known vulnerabilities UNKNOWN: no component could be checked ({})",
            warden_scan::report::clip(&check.source, 300)
        );
        if !args.allow_unknown && !tripped {
            return Ok(3);
        }
    }
    if !report.unreadable.is_empty() {
        eprintln!(
            "warden scan: known vulnerabilities PARTIAL: {} file(s) not read (links, missing or outside includes, parse errors): their components are missing",
            report.unreadable.len()
        );
        if gate.is_some() && !args.allow_unknown && !tripped {
            return Ok(3);
        }
    }
    Ok(u8::from(tripped))
}
