//! `pypi:` packages: all wheels downloaded on the host (`pip download --only-binary=:all:`) and
//! installed in the jail from those files; anything else fetched and built inside the jail,
//! where pip reaches the configured index through the egress allowlist and nothing else.

use std::path::Path;
use std::process::Command;

use anyhow::Result;

use super::host::{run, workspace};
use super::{Entry, Fetched, checked, sh_quote};

pub(super) fn fetch(spec: &str) -> Result<Fetched> {
    let spec = checked(spec, false)?;
    let (name, requirement) = match spec.split_once('@') {
        Some((n, v)) => (n, format!("{n}=={v}")),
        None => (spec, spec.to_owned()),
    };
    let ws = workspace()?;
    // A pip of our own (the system's may be absent), used only to download wheels.
    let tool = ws.path().join(".fetch");
    run(
        Command::new("/usr/bin/python3")
            .args(["-m", "venv"])
            .arg(&tool),
        "python3 -m venv",
    )?;
    let pip = tool.join("bin/pip");
    let wheels = run(
        Command::new(&pip)
            .args([
                "download",
                "--quiet",
                "--disable-pip-version-check",
                "--only-binary=:all:",
                "--dest",
            ])
            .arg(ws.path().join("dist"))
            .arg(&requirement),
        "pip download (wheels only: building an sdist would run its code)",
    );
    let venv = "python3 -m venv /workspace/venv && /workspace/venv/bin/pip install --quiet \
                --disable-pip-version-check";
    let quoted = sh_quote(&requirement);
    let (install, egress) = match wheels {
        Ok(()) => (
            format!("{venv} --no-index --find-links /workspace/dist {quoted}"),
            Vec::new(),
        ),
        Err(e) => {
            tracing::info!(error = %e, "not all wheels: fetching and building inside the jail");
            let _ = std::fs::remove_dir_all(ws.path().join("dist"));
            // The index is asked for only here (each pip start costs a few hundred ms).
            let index = PipIndex::configured(&pip);
            (
                format!("{venv} {} {quoted}", index.options()),
                index.hosts(),
            )
        }
    };
    let _ = std::fs::remove_dir_all(&tool);
    Ok(Fetched {
        workspace: ws,
        install: Some(vec!["sh".into(), "-c".into(), install]),
        hooks: Vec::new(),
        entry: Entry::PythonScript {
            name: name.to_owned(),
            fallback: None,
        },
        location: None,
        egress,
    })
}

/// The package index the host's pip is configured for, handed to the pip inside the jail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PipIndex {
    url: String,
    /// A CA bundle the jail can see (under `/etc/ssl`), if the host's pip uses one.
    cert: Option<String>,
}

/// The value of `key` in `pip config list` output (`global.cert='/etc/ssl/…'`).
fn config_value(listed: &str, key: &str) -> Option<String> {
    listed.lines().find_map(|line| {
        let value = line.strip_prefix(key)?.strip_prefix('=')?;
        let value = value.trim().trim_matches(['\'', '"']).to_owned();
        (!value.is_empty()).then_some(value)
    })
}

/// `url` without a `user:password@` part.
fn without_credentials(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

/// PyPI's simple index; its files come from another host.
const PYPI: &str = "https://pypi.org/simple";
const PYPI_FILES: &str = "files.pythonhosted.org";

impl PipIndex {
    /// PyPI itself, with no CA bundle of its own.
    #[cfg(test)]
    pub(super) fn pypi() -> PipIndex {
        PipIndex {
            url: PYPI.to_owned(),
            cert: None,
        }
    }

    /// `PIP_INDEX_URL`, else `pip config get global.index-url`, else PyPI, without any
    /// credentials it carries (package code in the jail could read its own command line); the
    /// CA bundle from `PIP_CERT` or pip's configuration when it lies under `/etc/ssl` (bound
    /// into the jail).
    pub(super) fn configured(pip: &Path) -> PipIndex {
        // One `pip config list` (each pip start costs a few hundred milliseconds).
        let listed = Command::new(pip)
            .args(["config", "list"])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let config = |key: &str| config_value(&listed, key);
        let from_env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let configured = from_env("PIP_INDEX_URL")
            .or_else(|| config("global.index-url"))
            .unwrap_or_else(|| PYPI.to_owned());
        let url = without_credentials(&configured);
        if url != configured {
            tracing::warn!(
                "the package index URL's credentials are not handed to package code in the \
                 sandbox; an index that needs them will refuse the install there"
            );
        }
        let cert = from_env("PIP_CERT")
            .or_else(|| config("global.cert"))
            .filter(|c| c.starts_with("/etc/ssl/") && !c.contains(".."));
        PipIndex { url, cert }
    }

    /// The index's host, and PyPI's file host when the index is PyPI.
    pub(super) fn hosts(&self) -> Vec<String> {
        let Some((scheme, rest)) = self.url.split_once("://") else {
            return Vec::new();
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        let hostport = authority.rsplit('@').next().unwrap_or(authority);
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) => (h, p.parse::<u16>().ok()),
            None => (hostport, None),
        };
        let port = match (scheme.to_ascii_lowercase().as_str(), port) {
            (_, Some(p)) => p,
            ("http", None) => 80,
            _ => warden_trace::hosts::DEFAULT_PORT,
        };
        let host = host.to_ascii_lowercase();
        let entry = if port == warden_trace::hosts::DEFAULT_PORT {
            host.clone()
        } else {
            format!("{host}:{port}")
        };
        if !warden_trace::hosts::valid_pattern(&entry) {
            return Vec::new();
        }
        let mut out = vec![entry];
        if host == "pypi.org" {
            out.push(PYPI_FILES.to_owned());
        }
        out
    }

    /// pip's options for this index (single-quoted for `sh -c`).
    pub(super) fn options(&self) -> String {
        let mut o = format!("--index-url {}", sh_quote(&self.url));
        if let Some(c) = &self.cert {
            o.push_str(&format!(" --cert {}", sh_quote(c)));
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_decides_the_egress() {
        let index = |url: &str| PipIndex {
            url: url.into(),
            cert: None,
        };
        assert_eq!(index(PYPI).hosts(), ["pypi.org", PYPI_FILES]);
        assert_eq!(
            index("https://Mirror.example.test:8443/simple/").hosts(),
            ["mirror.example.test:8443"]
        );
        assert_eq!(
            index("http://mirror.example.test/simple/").hosts(),
            ["mirror.example.test:80"]
        );
        assert_eq!(
            without_credentials("https://user:p@ss@mirror.test:8443/simple/?a=b@c"),
            "https://mirror.test:8443/simple/?a=b@c"
        );
        assert_eq!(without_credentials(PYPI), PYPI);
        let listed = ":env:.cert='/x'\nglobal.cert='/etc/ssl/certs/ca.crt'\nglobal.index-url='https://m.test/simple'\n";
        assert_eq!(
            config_value(listed, "global.cert").as_deref(),
            Some("/etc/ssl/certs/ca.crt")
        );
        assert_eq!(
            config_value(listed, "global.index-url").as_deref(),
            Some("https://m.test/simple")
        );
        assert_eq!(config_value(listed, "global.index"), None);
        assert!(index("file:///srv/wheels").hosts().is_empty());
        assert!(
            index("https://10.0.0.1/simple").hosts().is_empty(),
            "names only"
        );
        let o = PipIndex {
            url: "https://x.test/s'imple".into(),
            cert: Some("/etc/ssl/certs/ca.crt".into()),
        }
        .options();
        assert_eq!(
            o,
            "--index-url 'https://x.test/s'\\''imple' --cert '/etc/ssl/certs/ca.crt'"
        );
    }
}
