//! `warden detonate`: options in, report out (stdout or --out), progress on stderr, and the
//! `--fail-on` exit status.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use warden_events::Severity;

use crate::cli::DetonateArgs;
use crate::run::parse_duration;

/// How a detonation ended, for the exit status.
enum Gate {
    /// Judged, and nothing reached --fail-on.
    Passed,
    /// A finding reached --fail-on.
    Tripped,
    /// The detonation did not happen (and --allow-inconclusive was not given).
    Inconclusive,
}

/// Run it; 0, 1 when --fail-on tripped, 2 on errors, 3 when the verdict is INCONCLUSIVE,
/// 128+N on signal N.
pub fn main(args: DetonateArgs) -> ExitCode {
    clean_up_on_signals();
    die_with_the_sweep();
    let result = detonate(&args);
    // Interrupted: whatever the run came to (a fetch failing as its folder is removed, say),
    // the signal's handler says how it ended, and exits.
    while INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
        std::thread::park();
    }
    match result {
        Ok(Gate::Tripped) => ExitCode::from(1),
        Ok(Gate::Passed) => ExitCode::SUCCESS,
        Ok(Gate::Inconclusive) => ExitCode::from(3),
        Err(e) => {
            // Error texts can carry what a package printed: no terminal escapes get through.
            eprintln!(
                "warden detonate: {}",
                warden_detonate::report::clean(&format!("{e:#}"))
            );
            ExitCode::from(2)
        }
    }
}

/// Started by `warden sweep`: end (SIGTERM, so the folders are cleaned up) when the sweep
/// ends, even by SIGKILL; and do not start at all if it is already gone.
fn die_with_the_sweep() {
    let Some(parent) = std::env::var(warden_sweep::runner::PARENT_ENV)
        .ok()
        .and_then(|p| p.parse::<i32>().ok())
    else {
        return;
    };
    let _ = nix::sys::prctl::set_pdeathsig(Some(nix::sys::signal::Signal::SIGTERM));
    if nix::unistd::getppid().as_raw() != parent {
        eprintln!("warden detonate: the sweep that started it is gone");
        std::process::exit(130);
    }
}

/// Set when a termination signal is being handled: the run's own result no longer counts.
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// On SIGINT, SIGTERM or SIGHUP: remove the fetched package's folder and exit with 128 + the
/// signal (the jailed trees die with their lifelines when this process goes).
fn clean_up_on_signals() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        return;
    };
    std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
            warden_detonate::fetch::remove_workspaces();
            eprintln!("warden detonate: interrupted (signal {sig}); cleaned up");
            std::process::exit(128 + sig);
        }
    });
}

fn severity(name: &str) -> Option<Severity> {
    serde_json::from_value(serde_json::Value::String(name.to_owned())).ok()
}

fn detonate(args: &DetonateArgs) -> Result<Gate> {
    let mut command = match &args.mcp_command {
        Some(c) => {
            shlex::split(c).with_context(|| format!("--mcp-command {c:?}: unbalanced quotes"))?
        }
        None => Vec::new(),
    };
    command.extend(args.mcp_args.iter().cloned());
    let fetched = args
        .target
        .as_deref()
        .is_some_and(warden_detonate::fetch::is_remote);
    if args.target.is_some() && !fetched && !command.is_empty() {
        bail!(
            "give either a local TARGET or --mcp-command/--mcp-arg, not both (a command goes \
             with npm:, pypi: and github: targets: how to start the installed package)"
        );
    }
    if !args.server_args.is_empty() && (!fetched || !command.is_empty()) {
        bail!(
            "--server-arg goes with an npm:, pypi: or github: TARGET started by its own command \
             (with --mcp-command, put the arguments there)"
        );
    }
    let duration = |t: &str, flag: &str| {
        parse_duration(t).with_context(|| format!("{flag}: not a duration: {t:?}"))
    };
    let env = env_pairs(&args.env)?;
    let http = match (args.mcp_transport.as_str(), args.mcp_port) {
        ("stdio", None) if args.mcp_path.is_none() => None,
        ("stdio", _) => bail!("--mcp-port and --mcp-path go with --mcp-transport http or sse"),
        (kind @ ("http" | "sse"), Some(port)) if port > 0 => {
            let sse = kind == "sse";
            let path = args
                .mcp_path
                .clone()
                .unwrap_or_else(|| if sse { "/sse" } else { "/mcp" }.to_owned());
            if !path.starts_with('/') || path.contains(char::is_whitespace) {
                bail!("--mcp-path {path:?}: a path starting with /");
            }
            Some(warden_detonate::harness::http::HttpTarget { port, path, sse })
        }
        (kind, _) => bail!(
            "--mcp-transport {kind} needs --mcp-port PORT (where the server listens in the jail)"
        ),
    };
    let remote = match &args.mcp_url {
        None if args.headers.is_empty()
            && args.bearer_env.is_none()
            && !args.allow_payloads_remote =>
        {
            None
        }
        None => bail!("--header, --bearer-env and --allow-payloads-remote go with --mcp-url"),
        Some(_) if args.target.is_some() || !command.is_empty() || http.is_some() => {
            bail!("--mcp-url probes a remote server: give no TARGET, command or transport with it")
        }
        Some(url) => {
            let mut headers = Vec::new();
            for kv in &args.headers {
                let (k, v) = kv
                    .split_once('=')
                    .with_context(|| format!("--header {kv:?}: expected K=V"))?;
                headers.push((k.to_owned(), v.to_owned()));
            }
            let bearer = match &args.bearer_env {
                Some(name) => Some(std::env::var(name).with_context(|| {
                    format!("--bearer-env {name}: no such environment variable")
                })?),
                None => None,
            };
            let remote = warden_detonate::harness::remote::Remote {
                url: url.clone(),
                headers,
                bearer,
            };
            remote.check()?;
            Some(remote)
        }
    };
    let options = warden_detonate::Options {
        target: args.target.clone(),
        command,
        server_args: args.server_args.clone(),
        env,
        workspace: args
            .workspace
            .as_ref()
            .map(std::path::absolute)
            .transpose()
            .context("--workspace")?,
        call_timeout: duration(&args.call_timeout, "--call-timeout")?,
        budget: duration(&args.timeout, "--timeout")?,
        dwell: dwell(&args.dwell)?,
        install_budget: duration(&args.install_timeout, "--install-timeout")?,
        rules: args.rules.clone(),
        adversarial: !args.no_payloads,
        calls_per_tool: args.calls_per_tool,
        allow_host_proc: args.allow_host_proc,
        progress: std::io::stderr().is_terminal(),
        llm: llm_settings(args, &duration)?,
        osv: match (&args.osv_db, &args.osv_url) {
            (Some(dir), _) => warden_scan::OsvSource::Offline(dir.clone()),
            (None, Some(url)) => warden_scan::OsvSource::Online(url.clone()),
            (None, None) => warden_scan::OsvSource::None,
        },
        http,
        remote,
        allow_payloads_remote: args.allow_payloads_remote,
        browser: args.browser.clone(),
        pcap: args
            .pcap
            .as_deref()
            .map(crate::emit::pcap_file)
            .transpose()?,
        no_boundary: args.no_boundary,
    };
    let mut also = Vec::new();
    for spec in &args.also_output {
        match spec.split_once('=') {
            Some((f @ ("json" | "sarif" | "html"), file)) if !file.is_empty() => {
                also.push((f.to_owned(), std::path::PathBuf::from(file)));
            }
            _ => bail!("--also-output {spec:?}: expected FORMAT=FILE, FORMAT json, sarif or html"),
        }
    }
    let jail = warden_jail::Jail::current_exe()?;
    let (report, rules) = warden_detonate::detonate(&jail, &options)?;
    let render = |format: &str| -> Result<String> {
        Ok(match format {
            "json" => serde_json::to_string_pretty(&report)?,
            "sarif" => serde_json::to_string_pretty(&report.sarif(&rules))?,
            "html" => warden_detonate::html::html(&report),
            _ => report.timeline(args.out.is_none() && std::io::stdout().is_terminal()),
        })
    };
    for (format, file) in &also {
        std::fs::write(file, render(format)?.as_bytes())
            .with_context(|| format!("--also-output {}", file.display()))?;
    }
    let text = render(&args.output)?;
    crate::emit::emit(&text, args.out.as_deref())?;
    let gate = args.fail_on.as_deref().and_then(severity);
    let tripped = gate.is_some_and(|g| report.findings.iter().any(|f| f.severity >= g));
    if let Some(why) = &report.why {
        // Said on stderr too: a report written to a file or piped away must not hide it.
        eprintln!(
            "warden detonate: {} ({}): {}",
            if report.verdict == warden_events::Verdict::Inconclusive {
                "INCONCLUSIVE"
            } else {
                "the detonation stopped short"
            },
            warden_detonate::report::name_of(why.stage),
            why.reason
        );
        // An INCONCLUSIVE verdict exits 3 whatever --fail-on says; a serious one observed
        // before the run stopped trips the gate as any other.
        let inconclusive = report.verdict == warden_events::Verdict::Inconclusive;
        if !args.allow_inconclusive && (inconclusive || !tripped) {
            return Ok(Gate::Inconclusive);
        }
    }
    Ok(if tripped { Gate::Tripped } else { Gate::Passed })
}

/// `--dwell`: a duration, or 0 for none; at most a week of the server's time.
fn dwell(text: &str) -> Result<std::time::Duration> {
    let t = text.trim();
    if t.trim_end_matches(|c: char| c.is_ascii_alphabetic())
        .parse::<f64>()
        == Ok(0.0)
    {
        return Ok(std::time::Duration::ZERO);
    }
    let d = parse_duration(t).with_context(|| format!("--dwell: not a duration: {t:?}"))?;
    if d > warden_detonate::harness::dwell::MAX {
        bail!("--dwell: at most a week ({t:?})");
    }
    Ok(d)
}

/// Full mode's model from the flags: `None` in fast mode; an error for a full mode without a
/// usable `--llm`, or an `--llm` without full mode.
fn llm_settings(
    args: &DetonateArgs,
    duration: &dyn Fn(&str, &str) -> Result<std::time::Duration>,
) -> Result<Option<warden_detonate::llm::Settings>> {
    use warden_detonate::llm::{Provider, Settings};
    let spec = match (args.mode.as_str(), &args.llm) {
        ("fast", None) => return Ok(None),
        ("fast", Some(_)) => anyhow::bail!("--llm needs --mode full"),
        (_, None) => anyhow::bail!("--mode full needs --llm PROVIDER:MODEL"),
        (_, Some(spec)) => spec,
    };
    let (provider, model) = spec
        .split_once(':')
        .filter(|(_, m)| !m.is_empty())
        .with_context(|| format!("--llm {spec:?}: expected PROVIDER:MODEL"))?;
    let provider = Provider::parse(provider).with_context(|| {
        format!("--llm {spec:?}: the provider is one of openai, anthropic, ollama")
    })?;
    let url = args
        .llm_url
        .clone()
        .unwrap_or_else(|| provider.default_url().to_owned());
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        anyhow::bail!("--llm-url: expected an http:// or https:// URL");
    }
    // The provider's own key goes to the provider's own URL; anywhere else only the key the
    // operator names with --llm-key-env does.
    let key_env = match &args.llm_key_env {
        Some(name) => Some(name.as_str()),
        None if url == provider.default_url() => provider.key_env(),
        None => None,
    };
    let key = key_env
        .and_then(|name| std::env::var(name).ok())
        .filter(|k| !k.is_empty());
    if key.is_none() && args.llm_key_env.is_some() {
        anyhow::bail!("--llm-key-env: {} is not set", key_env.unwrap_or(""));
    }
    if key.is_some() && url.starts_with("http://") && !warden_detonate::llm::is_loopback(&url) {
        anyhow::bail!(
            "--llm-url: a key is never sent over plain http beyond this machine; use https"
        );
    }
    if args.llm_budget == 0 {
        anyhow::bail!("--llm-budget: at least one call");
    }
    Ok(Some(Settings {
        provider,
        model: model.to_owned(),
        url,
        key,
        max_calls: args.llm_budget,
        max_tokens: args.llm_tokens,
        max_time: duration(&args.llm_timeout, "--llm-timeout")?,
        request_timeout: std::time::Duration::from_secs(120),
    }))
}

/// `--env K=V` values as pairs.
pub fn env_pairs(list: &[String]) -> Result<Vec<(String, String)>> {
    list.iter()
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .with_context(|| format!("--env {kv:?}: expected K=V"))
        })
        .collect()
}
