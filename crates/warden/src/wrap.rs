//! `warden wrap -- CMD`: flags in, `warden_detonate::wrap` runs the server for the client on
//! this process's stdio. Exits with the server's status (137 when the policy killed it); 2 when
//! it could not be wrapped.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use warden_detonate::wrap::{Action, WrapOptions};
use warden_events::Severity;

use crate::cli::WrapArgs;

/// Run it.
pub fn main(args: WrapArgs) -> ExitCode {
    match wrap(&args) {
        Ok(code) => ExitCode::from(u8::try_from(code.clamp(0, 255)).unwrap_or(1)),
        Err(e) => {
            eprintln!("warden wrap: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// `--on SEVERITY=ACTION`.
fn policy(on: &str) -> Result<(Severity, Action)> {
    let Some((sev, action)) = on.split_once('=') else {
        bail!("--on {on:?}: expected SEVERITY=ACTION, e.g. high=block");
    };
    let at: Severity = serde_json::from_value(serde_json::Value::String(sev.to_owned()))
        .with_context(|| format!("--on {on:?}: {sev:?} is not a severity (low … critical)"))?;
    let action = match action {
        "block" => Action::Block,
        "kill" => Action::Kill,
        "alert" => Action::Alert,
        other => bail!("--on {on:?}: {other:?} is not block, kill or alert"),
    };
    Ok((at, action))
}

fn wrap(args: &WrapArgs) -> Result<i32> {
    let (at, on) = policy(&args.on)?;
    let log = match &args.log {
        Some(l) => l.clone(),
        None => match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
            Some(s) => PathBuf::from(s).join("warden/wrap.jsonl"),
            None => PathBuf::from(std::env::var_os("HOME").context("no $HOME: give --log")?)
                .join(".local/state/warden/wrap.jsonl"),
        },
    };
    let mut env = crate::detonate::env_pairs(&args.env)?;
    for name in &args.pass_env {
        if let Ok(v) = std::env::var(name) {
            env.push((name.clone(), v));
        }
    }
    let options = WrapOptions {
        command: args.command.clone(),
        workspace: args
            .workspace
            .as_ref()
            .map(std::path::absolute)
            .transpose()
            .context("--workspace")?,
        egress: args.egress.clone(),
        env,
        rules: args.rules.clone(),
        at,
        on,
        log,
    };
    let jail = warden_jail::Jail::current_exe()?;
    warden_detonate::wrap::wrap(&jail, &options)
}
