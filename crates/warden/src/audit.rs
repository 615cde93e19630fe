//! `warden audit`: the configurations found (`warden-audit`), each server's plan, the judged
//! ones detonated by `warden-sweep`'s scheduler (each a `warden detonate` of its own, so none
//! is ever started outside the chamber), pins compared and saved, the report written. Exit 0;
//! 1 when `--fail-on` is reached; 2 on errors (a configuration that cannot be read is reported,
//! not an error).

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use warden_audit::convert::{Plan, plan};
use warden_audit::pins::{self, Pinned};
use warden_audit::report::{self, Audit, PinState, Server};

use crate::cli::AuditArgs;
use crate::run::parse_duration;

/// Run it.
pub fn main(args: AuditArgs) -> ExitCode {
    match audit(&args) {
        Ok(failed) => ExitCode::from(u8::from(failed)),
        Err(e) => {
            eprintln!(
                "warden audit: {}",
                warden_sweep::clip(&format!("{e:#}"), 2000)
            );
            ExitCode::from(2)
        }
    }
}

fn audit(args: &AuditArgs) -> Result<bool> {
    let home = match &args.home {
        Some(h) => h.clone(),
        None => PathBuf::from(std::env::var_os("HOME").context("no $HOME: give --home")?),
    };
    let project = match &args.project {
        Some(p) => Some(p.clone()),
        None => std::env::current_dir().ok(),
    };
    let (configs, entries) =
        warden_audit::discover::discover(&home, project.as_deref(), &args.configs);
    if args.wrap {
        return rewrite(&configs, args.write).map(|()| false);
    }
    let plans: Vec<Plan> = entries.iter().map(plan).collect();
    // One detonation per distinct target, however many clients list it.
    let mut targets: Vec<warden_sweep::Target> = Vec::new();
    for p in &plans {
        if let Plan::Judge { target: t, .. } = p
            && !targets.iter().any(|o| o.key() == t.key())
        {
            targets.push(t.clone());
        }
    }
    let scratch;
    let out = match &args.keep {
        Some(dir) => dir.clone(),
        None => {
            scratch = tempfile::Builder::new()
                .prefix("warden-audit-")
                .tempdir()
                .context("a folder for the detonations")?;
            scratch.path().to_path_buf()
        }
    };
    let outcomes = if targets.is_empty() {
        BTreeMap::new()
    } else {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let target_timeout = parse_duration(&args.target_timeout)
            .with_context(|| format!("--target-timeout {:?}", args.target_timeout))?;
        let options = warden_sweep::Options {
            exe: std::env::current_exe().context("the warden binary")?,
            out: out.clone(),
            jobs: args.jobs.unwrap_or(cores).clamp(1, 64),
            // Never results of an earlier audit: a package's latest may have changed since.
            resume: false,
            detonate_args: args.detonate.clone(),
            formats: vec!["sarif".into()],
            target_timeout: target_timeout.max(Duration::from_secs(1)),
            bar: std::io::stderr().is_terminal(),
        };
        warden_sweep::runner::run(&targets, &options)?;
        warden_sweep::results::load(&out.join("results.jsonl"))?
    };
    let pins_path = args
        .pins
        .clone()
        .unwrap_or_else(|| pins::default_path(&home));
    let mut pinned = pins::load(&pins_path)?;
    let mut sarifs = Vec::new();
    let mut servers = Vec::new();
    for (e, p) in entries.iter().zip(&plans) {
        let mut s = Server {
            client: e.client.clone(),
            config: e.config.clone(),
            name: e.name.clone(),
            target: None,
            env_names: e.env_names.clone(),
            disabled: e.disabled,
            verdict: "NOT_JUDGED".into(),
            score: 0,
            top_findings: Vec::new(),
            why: None,
            pins: None,
            report: None,
        };
        match p {
            Plan::Skip(why) => s.why = Some(why.clone()),
            Plan::Judge { target: t, shown } => {
                s.target = Some(shown.clone());
                let outcome = outcomes.get(&t.key());
                s.verdict = outcome.map_or_else(|| "ERROR".into(), |o| o.verdict.clone());
                s.score = outcome.map_or(0, |o| o.score);
                s.why = outcome.and_then(|o| o.error.clone().or_else(|| o.why.clone()));
                let reports = out.join("reports");
                let slug = t.slug();
                let read = |ext: &str| {
                    std::fs::read_to_string(reports.join(format!("{slug}.{ext}")))
                        .ok()
                        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
                };
                if let Some(sarif) = read("sarif") {
                    sarifs.push(sarif);
                }
                if let Some(r) = read("json") {
                    s.top_findings = report::top_findings(&r);
                    let tools = pins::tools_of(&r);
                    let key = report::pin_key(&s);
                    let state = match pinned.servers.get(&key) {
                        None => ("new", Vec::new()),
                        Some(old) => {
                            let changes = pins::compare(old, shown, &tools);
                            match (changes.is_empty(), args.update_pins) {
                                (true, _) => ("unchanged", changes),
                                (false, false) => ("changed", changes),
                                (false, true) => ("accepted", changes),
                            }
                        }
                    };
                    if state.0 != "changed" {
                        pinned.servers.insert(
                            key,
                            Pinned {
                                target: shown.clone(),
                                tools,
                            },
                        );
                    }
                    s.pins = Some(PinState {
                        status: state.0,
                        changes: state.1,
                    });
                    s.report = Some(r);
                }
            }
        }
        servers.push(s);
    }
    pinned.schema = pins::SCHEMA.into();
    pins::save(&pins_path, &pinned)?;
    let audit = Audit {
        schema: report::SCHEMA,
        warden_version: env!("CARGO_PKG_VERSION"),
        configs,
        servers,
    };
    let text = match args.output.as_str() {
        "json" => serde_json::to_string_pretty(&audit)? + "\n",
        "sarif" => serde_json::to_string_pretty(&audit.sarif(&sarifs))? + "\n",
        "html" => audit.html(),
        _ => audit.table(),
    };
    match &args.out {
        Some(file) => {
            std::fs::write(file, text).with_context(|| format!("writing {}", file.display()))?
        }
        None => print!("{text}"),
    }
    Ok(args.fail_on.as_deref().is_some_and(|l| audit.fails(l)))
}

/// `--wrap`: each configuration found, its local servers under `warden wrap`, written beside it
/// (or in place with `--write`, the original kept as FILE.bak), through a new file renamed into
/// place.
fn rewrite(configs: &[warden_audit::discover::Found], in_place: bool) -> Result<()> {
    let warden = std::env::current_exe().context("the warden binary")?;
    let warden = warden.to_string_lossy();
    for c in configs.iter().filter(|c| c.error.is_none()) {
        let place = warden_audit::clients::place_of(&c.path);
        let text = std::fs::read_to_string(&c.path)
            .with_context(|| format!("reading {}", c.path.display()))?;
        match warden_audit::rewrite::wrapped(&text, &place, &warden) {
            Err(why) => eprintln!("warden audit: {}: {why}", c.path.display()),
            Ok(None) => eprintln!("warden audit: {}: nothing to wrap", c.path.display()),
            Ok(Some(new)) => {
                let dir = c.path.parent().unwrap_or(std::path::Path::new("."));
                let target = if in_place {
                    let backup = PathBuf::from(format!("{}.bak", c.path.display()));
                    std::fs::copy(&c.path, &backup)
                        .with_context(|| format!("backing up to {}", backup.display()))?;
                    c.path.clone()
                } else {
                    PathBuf::from(format!("{}.wrapped", c.path.display()))
                };
                let mut tmp = tempfile::Builder::new()
                    .prefix(".warden-wrap-")
                    .tempfile_in(dir)
                    .with_context(|| format!("a new file in {}", dir.display()))?;
                std::io::Write::write_all(&mut tmp, new.as_bytes())?;
                if let Ok(meta) = std::fs::metadata(&c.path) {
                    let _ = std::fs::set_permissions(tmp.path(), meta.permissions());
                }
                tmp.persist(&target)
                    .with_context(|| format!("writing {}", target.display()))?;
                println!("{} -> {}", c.path.display(), target.display());
            }
        }
    }
    Ok(())
}
