//! `warden run`: one command in the jail, in this (single-threaded) process.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use warden_jail::policy::parse_size;
use warden_jail::{Bind, IoMode, JailError, Outcome, Policy, Request, Tmpfs};

use crate::cli::RunArgs;

/// Parse `30`, `2.5`, `500ms`, `90s`, `5m`, `1h`.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let t = text.trim();
    let (num, unit) = match t.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => (&t[..i], &t[i..]),
        None => (t, "s"),
    };
    let v: f64 = num.trim().parse().ok()?;
    let secs = match unit {
        "ms" => v / 1000.0,
        "s" => v,
        "m" => v * 60.0,
        "h" => v * 3600.0,
        _ => return None,
    };
    (secs.is_finite() && secs > 0.0).then(|| Duration::from_secs_f64(secs))
}

fn ms(text: &str, flag: &str) -> Result<u64> {
    let d = parse_duration(text).with_context(|| format!("{flag}: not a duration: {text:?}"))?;
    Ok(u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1))
}

fn size(text: &str, flag: &str) -> Result<u64> {
    parse_size(text).with_context(|| format!("{flag}: not a size: {text:?}"))
}

fn bind(spec: &str, writable: bool) -> Result<Bind> {
    let (src, dst) = match spec.split_once(':') {
        Some((s, d)) => (s, Some(PathBuf::from(d))),
        None => (spec, None),
    };
    // Made absolute but not resolved: the jail opens the path itself and refuses symlinks in it,
    // so a link planted in a workspace by an earlier run cannot redirect a bind.
    let source = std::path::absolute(src).with_context(|| format!("bind source {src:?}"))?;
    Ok(Bind {
        source,
        target: dst,
        writable,
    })
}

/// `--cpus`: a number of CPUs with at most three decimals (`0.5`, `2`), in thousandths.
fn cpus_milli(text: &str) -> Result<u64> {
    let bad = || anyhow::anyhow!("--cpus {text:?}: expected a number of CPUs such as 0.5 or 2");
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() && frac.is_empty() || !digits(whole) || !digits(frac) || frac.len() > 3 {
        return Err(bad());
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| bad())?
    };
    let frac: u64 = format!("{frac:0<3}").parse().map_err(|_| bad())?;
    let milli = whole
        .checked_mul(1000)
        .and_then(|w| w.checked_add(frac))
        .ok_or_else(bad)?;
    anyhow::ensure!(
        (10..=4_096_000).contains(&milli),
        "--cpus {text}: from 0.01 to 4096 CPUs"
    );
    Ok(milli)
}

/// Build the policy from the file and the flags.
fn policy(args: &RunArgs) -> Result<Policy> {
    let mut p = match &args.policy {
        Some(f) => Policy::from_toml_file(f)?,
        None => Policy::default(),
    };
    let l = &mut p.limits;
    if let Some(t) = &args.timeout {
        l.wall_time_ms = ms(t, "--timeout")?;
    }
    if let Some(t) = &args.cpu {
        l.cpu_time_ms = ms(t, "--cpu")?;
    }
    if let Some(c) = &args.cpus {
        l.cpu_rate_milli = cpus_milli(c)?;
    }
    if let Some(s) = &args.memory {
        l.memory_bytes = size(s, "--memory")?;
    }
    if let Some(n) = args.pids {
        l.pids = n;
    }
    if let Some(n) = args.nofile {
        l.open_files = n;
    }
    if let Some(s) = &args.fsize {
        l.file_size_bytes = size(s, "--fsize")?;
    }
    if let Some(s) = &args.output_limit {
        l.output_bytes = size(s, "--output-limit")?;
    }
    if let Some(s) = &args.tmp_size {
        l.tmp_bytes = size(s, "--tmp-size")?;
    }
    for kv in &args.env {
        let (k, v) = kv
            .split_once('=')
            .with_context(|| format!("--env {kv:?}: expected K=V"))?;
        p.env.insert(k.to_owned(), v.to_owned());
    }
    for b in &args.ro_bind {
        p.binds.push(bind(b, false)?);
    }
    for b in &args.rw_bind {
        p.binds.push(bind(b, true)?);
    }
    p.allow_protected
        .extend(args.allow_protected.iter().cloned());
    p.allow_host_proc |= args.allow_host_proc;
    for t in &args.tmpfs {
        let (target, size_bytes) = match t.split_once(':') {
            Some((d, s)) => (d, size(s, "--tmpfs")?),
            None => (t.as_str(), 64 << 20),
        };
        p.tmpfs.push(Tmpfs {
            target: target.into(),
            size_bytes,
        });
    }
    p.egress.extend(args.egress.iter().cloned());
    p.targets.extend(args.target.iter().cloned());
    p.target_connect_ms = args.target_connect_ms;
    p.decoys |= args.decoys;
    p.open_tls |= args.open_tls;
    if let Some(file) = &args.pcap {
        p.pcap = Some(crate::emit::pcap_file(file)?);
    }
    p.trace |= args.trace.is_some() || p.traced();
    if args.dns == "nxdomain" {
        p.dns = warden_jail::DnsMode::Nxdomain;
    }
    if args.net != "none" {
        bail!("--net {:?}: only `none` is supported", args.net);
    }
    if let Some(ws) = &args.workspace {
        p.workspace = Some(std::path::absolute(ws).with_context(|| format!("--workspace {ws:?}"))?);
    }
    p.validate()?;
    Ok(p)
}

fn json_report(o: &Outcome) -> serde_json::Value {
    let mut v = serde_json::to_value(o).unwrap_or_default();
    if let Some(map) = v.as_object_mut() {
        map.insert(
            "stdout".into(),
            String::from_utf8_lossy(&o.stdout).into_owned().into(),
        );
        map.insert(
            "stderr".into(),
            String::from_utf8_lossy(&o.stderr).into_owned().into(),
        );
    }
    v
}

/// Where the events go: a file (created or truncated) or stderr, one JSON line each, written
/// as they happen (buffered; the supervisor flushes at least every 50 ms).
fn trace_sink(dest: &str) -> Result<warden_jail::Sink> {
    if dest == "-" {
        return Ok(Box::new(std::io::BufWriter::new(std::io::stderr())));
    }
    let f = std::fs::File::create(dest).with_context(|| format!("--trace {dest:?}"))?;
    Ok(Box::new(std::io::BufWriter::new(f)))
}

fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code.clamp(0, 255)).unwrap_or(1))
}

/// Run the command; returns the command's status (or 125/126/127 when it could not start).
pub fn main(args: RunArgs) -> ExitCode {
    match run(&args) {
        Ok(code) => exit_code(code),
        Err(e) => {
            let code = match e.downcast_ref::<JailError>() {
                Some(JailError::NotFound(_)) => 127,
                Some(JailError::NotExecutable { .. }) => 126,
                _ => 125,
            };
            eprintln!("warden: {e:#}");
            if let Some(hint) = e.downcast_ref::<JailError>().and_then(JailError::hint) {
                eprintln!("warden: hint: {hint}");
            }
            exit_code(code)
        }
    }
}

fn run(args: &RunArgs) -> Result<i32> {
    // Without --workspace the jail gets a private tmpfs workspace: fresh, removed with the run,
    // and bounded by the tmpfs size, so a disk-filling command cannot reach the host's disk.
    let policy = policy(args)?;
    let req = Request {
        policy,
        argv: args.command.clone(),
        io: if args.json {
            IoMode::Capture
        } else {
            IoMode::Stream
        },
        stdin: Vec::new(),
        proc_warned: false,
        deferred: false,
        cgroup_why: None,
    };
    let observer = if req.policy.trace {
        let dest = args.trace.as_deref().unwrap_or("-");
        warden_jail::Observer {
            sink: Some(trace_sink(dest)?),
            control: None,
        }
    } else {
        warden_jail::Observer::default()
    };
    let outcome = warden_jail::supervise_with(&req, None, observer)?;
    if outcome.events_dropped > 0 {
        eprintln!(
            "warden: {} trace events dropped at the cap",
            outcome.events_dropped
        );
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&json_report(&outcome))?);
    } else if let Some(kind) = outcome.limit_hit {
        eprintln!(
            "warden: limit hit: {}",
            serde_json::to_value(kind)?.as_str().unwrap_or("?")
        );
    }
    Ok(outcome.shell_status())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpus_are_read_in_thousandths_and_nonsense_is_refused() {
        assert_eq!(cpus_milli("0.5").unwrap(), 500);
        assert_eq!(cpus_milli("2").unwrap(), 2000);
        assert_eq!(cpus_milli(".25").unwrap(), 250);
        for bad in ["", ".", "-1", "0.0001", "1e3", "0", "5000", "x", "1.2.3"] {
            assert!(cpus_milli(bad).is_err(), "{bad}");
        }
    }
}
