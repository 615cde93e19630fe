//! The browser phase (`--browser`): offers the machine's own Chromium to a server that drives a
//! browser (`@playwright/mcp`, `@modelcontextprotocol/server-puppeteer`, anything built on
//! Playwright, Puppeteer or chrome-launcher). Such servers download their own browser when
//! installed or first used, which fails offline and in the sandbox; given this one, they run.
//!
//! What it does, at each point of the pipeline:
//! - before the install: the packages' browser downloads are switched off
//!   ([`Offered::quiet_downloads`]);
//! - on the start's policy ([`Offered::equip`]): each convention's variable names the browser
//!   (`PLAYWRIGHT_MCP_EXECUTABLE_PATH` with headless and no-sandbox, Playwright's and
//!   Puppeteer's own, `CHROME_PATH`), unless `--env` already set it; the jail gets room for a
//!   browser (memory, processes, `/tmp`), and the browser's folder is bound read-only when it is
//!   outside the system folders. Warden is the sandbox, so the browser's own is off
//!   (`--no-sandbox`);
//! - after the session ([`Offered::annotate`]): two checks Chromium makes on every start are
//!   marked `browser_probe` when the process making them is the offered browser itself (by the
//!   path the kernel executed): whether it may create a user namespace (a bare
//!   `clone(CLONE_NEWUSER | SIGCHLD)`, which the jail refuses) and whether IPv6 reaches the
//!   internet (a UDP socket connected to `[2001:4860:4860::8888]:443`, which sends nothing).
//!   So the `sandbox-violation` and `outbound-network` rules do not call every browser server
//!   an escape attempt or a beacon. The same calls from any other program still are.
//!
//! Navigation is not special: the browser's DNS lookups and connections are the server's, go to
//! the capture sink like any other, and are attributed to the tool call that caused them.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::json;
use warden_events::{Event, EventKind};
use warden_jail::{Bind, Policy};

use crate::Options;

/// Browsers looked for by `--browser` without a path (`auto`), in order.
pub const KNOWN: &[&str] = &[
    "/usr/lib/chromium/chromium-headless-shell",
    "/usr/lib/chromium/chromium",
    "/usr/bin/chromium-headless-shell",
    "/usr/bin/chromium",
    "/opt/google/chrome/chrome",
    "/usr/bin/google-chrome",
];
/// The room a browser's jail gets, at least.
const MEMORY: u64 = 2 << 30;
const PIDS: u64 = 1024;
const TMP: u64 = 512 << 20;
/// `CLONE_NEWUSER | SIGCHLD`: Chromium's check for user namespaces.
const USERNS_PROBE: u64 = 0x1000_0000 | 0x11;
/// Where Chromium connects a UDP socket to learn whether IPv6 reaches the internet.
const IPV6_PROBE: (&str, u64) = ("2001:4860:4860::8888", 443);

/// The browser offered to the server.
#[derive(Debug, Clone)]
pub struct Offered {
    /// The browser's executable (a wrapper script resolved to the program it starts).
    pub executable: PathBuf,
}

/// The browser asked for with `--browser`, checked; `None` when none was asked for.
pub fn offer(options: &Options) -> Result<Option<Offered>> {
    let Some(asked) = &options.browser else {
        return Ok(None);
    };
    let path = if asked.as_os_str() == "auto" {
        KNOWN
            .iter()
            .map(PathBuf::from)
            .find(|p| executable(p))
            .with_context(|| {
                format!(
                    "--browser: no Chromium found (looked for {}); install Debian's \
                     chromium-headless-shell or name one",
                    KNOWN.join(", ")
                )
            })?
    } else {
        asked.clone()
    };
    if !path.is_absolute() || !executable(&path) {
        bail!(
            "--browser {}: not an executable file (give its absolute path)",
            path.display()
        );
    }
    let executable = resolve_wrapper(&path).unwrap_or(path);
    super::progress(
        options,
        &format!("offering the browser {}", executable.display()),
    );
    Ok(Some(Offered { executable }))
}

fn executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The program a wrapper script (Debian's `/usr/bin/chromium`) starts: the first absolute path
/// in it that is an executable ELF file. `None` for a program that is no script.
fn resolve_wrapper(path: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(16 << 10)
        .read_to_end(&mut head)
        .ok()?;
    if !head.starts_with(b"#!") {
        return None;
    }
    let text = String::from_utf8_lossy(&head);
    text.lines()
        .skip(1)
        .filter(|l| !l.trim_start().starts_with('#'))
        .flat_map(|l| l.split(|c: char| c.is_whitespace() || c == '"' || c == '\''))
        .filter(|t| t.starts_with('/'))
        .map(PathBuf::from)
        .find(|p| executable(p) && elf(p))
}

fn elf(p: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(p)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && magic == *b"\x7fELF"
}

impl Offered {
    fn path(&self) -> String {
        self.executable.to_string_lossy().into_owned()
    }

    /// The variables that switch off a package's own browser download at install.
    pub fn quiet_downloads(&self, policy: &mut Policy) {
        for (k, v) in [
            ("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1"),
            ("PUPPETEER_SKIP_DOWNLOAD", "1"),
            ("PUPPETEER_SKIP_CHROMIUM_DOWNLOAD", "1"),
        ] {
            policy.env.insert(k.into(), v.into());
        }
    }

    /// Name the browser to the server in each convention's way (the operator's `--env` wins),
    /// and give its jail the room a browser needs.
    pub fn equip(&self, policy: &mut Policy) {
        let path = self.path();
        let launch = json!({ "headless": true, "executablePath": path, "args": ["--no-sandbox"] });
        let vars = [
            // @playwright/mcp
            ("PLAYWRIGHT_MCP_EXECUTABLE_PATH", path.clone()),
            ("PLAYWRIGHT_MCP_HEADLESS", "true".into()),
            // (newer releases read PLAYWRIGHT_MCP_SANDBOX, older ones the NO_ form)
            ("PLAYWRIGHT_MCP_SANDBOX", "false".into()),
            ("PLAYWRIGHT_MCP_NO_SANDBOX", "true".into()),
            // Playwright itself, and what builds on it
            ("PLAYWRIGHT_CHROMIUM_EXECUTABLE_PATH", path.clone()),
            ("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1".into()),
            // Puppeteer, and @modelcontextprotocol/server-puppeteer (which takes launch options
            // as JSON, and `--no-sandbox` only with ALLOW_DANGEROUS)
            ("PUPPETEER_EXECUTABLE_PATH", path.clone()),
            ("PUPPETEER_SKIP_DOWNLOAD", "1".into()),
            ("PUPPETEER_LAUNCH_OPTIONS", launch.to_string()),
            ("ALLOW_DANGEROUS", "true".into()),
            // chrome-launcher, Karma
            ("CHROME_PATH", path.clone()),
            ("CHROME_BIN", path),
        ];
        for (k, v) in vars {
            policy.env.entry(k.into()).or_insert(v);
        }
        let l = &mut policy.limits;
        l.memory_bytes = l.memory_bytes.max(MEMORY);
        l.pids = l.pids.max(PIDS);
        l.tmp_bytes = l.tmp_bytes.max(TMP);
        let shown = policy
            .system_paths
            .iter()
            .any(|s| self.executable.starts_with(s));
        if !shown && let Some(dir) = self.executable.parent() {
            policy.binds.push(Bind {
                source: dir.to_path_buf(),
                target: None,
                writable: false,
            });
        }
    }

    /// Mark the browser's own start-up checks (`data.browser_probe`).
    pub fn annotate(&self, events: &mut [Event]) {
        let path = self.path();
        // The IPv6 check sends nothing: were anything ever sent there (a navigation to the
        // address itself), none of the connections to it is a check.
        let sent_to_probe = events.iter().any(|e| {
            e.kind == EventKind::NetSend
                && e.data["address"] == IPV6_PROBE.0
                && e.data["port"].as_u64() == Some(IPV6_PROBE.1)
        });
        let mut browser_pids = std::collections::HashMap::new();
        for e in events.iter_mut() {
            let Some(pid) = e.pid else { continue };
            match e.kind {
                EventKind::ProcessSpawn => {
                    // The browser, or a helper it re-executed from itself (`/proc/self/exe`
                    // started by a browser process).
                    let exe = e.data["path"].as_str();
                    let from_browser = e.data["ppid"]
                        .as_i64()
                        .and_then(|p| i32::try_from(p).ok())
                        .and_then(|p| browser_pids.get(&p).copied())
                        .unwrap_or(false);
                    let is = exe == Some(path.as_str())
                        || (exe == Some("/proc/self/exe") && from_browser);
                    browser_pids.insert(pid, is);
                }
                EventKind::SandboxDenied
                    if e.data["syscall"] == "clone"
                        && e.data["args"][0].as_u64() == Some(USERNS_PROBE)
                        && browser_pids.get(&pid).copied().unwrap_or(false) =>
                {
                    e.data["browser_probe"] = json!(true);
                }
                EventKind::NetConnect
                    if !sent_to_probe
                        && e.data["address"] == IPV6_PROBE.0
                        && e.data["port"].as_u64() == Some(IPV6_PROBE.1)
                        && browser_pids.get(&pid).copied().unwrap_or(false) =>
                {
                    e.data["browser_probe"] = json!(true);
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(pid: i32, kind: EventKind, data: serde_json::Value) -> Event {
        Event {
            id: 1,
            t_ms: 0,
            kind,
            pid: Some(pid),
            triggered_by: Some("tool_call:3".into()),
            data,
        }
    }

    #[test]
    fn only_the_browsers_own_probe_is_marked() {
        let b = Offered {
            executable: "/usr/lib/chromium/chromium".into(),
        };
        let probe = json!({ "syscall": "clone", "args": [USERNS_PROBE, 0, 0] });
        let mut events = vec![
            ev(
                5,
                EventKind::ProcessSpawn,
                json!({ "path": "/usr/lib/chromium/chromium" }),
            ),
            ev(5, EventKind::SandboxDenied, probe.clone()),
            // The browser asking for more than the probe, another program probing: not marked.
            ev(
                5,
                EventKind::SandboxDenied,
                json!({ "syscall": "clone", "args": [0x7000_0011u64] }),
            ),
            ev(6, EventKind::ProcessSpawn, json!({ "path": "/tmp/evil" })),
            ev(6, EventKind::SandboxDenied, probe.clone()),
            ev(
                5,
                EventKind::NetConnect,
                json!({ "address": "2001:4860:4860::8888", "port": 443 }),
            ),
            ev(
                5,
                EventKind::NetConnect,
                json!({ "address": "2001:4860:4860::8888", "port": 80 }),
            ),
            ev(
                6,
                EventKind::NetConnect,
                json!({ "address": "2001:4860:4860::8888", "port": 443 }),
            ),
            // A browser process that later became something else.
            ev(5, EventKind::ProcessSpawn, json!({ "path": "/bin/sh" })),
            ev(5, EventKind::SandboxDenied, probe),
        ];
        b.annotate(&mut events);
        let marked: Vec<bool> = events
            .iter()
            .map(|e| e.data.get("browser_probe").is_some())
            .collect();
        let expected = [
            false, true, false, false, false, true, false, false, false, false,
        ];
        assert_eq!(marked, expected);
    }

    #[test]
    fn a_navigation_to_the_ipv6_checks_address_is_never_a_check() {
        let b = Offered {
            executable: "/usr/lib/chromium/chromium".into(),
        };
        let to = json!({ "address": "2001:4860:4860::8888", "port": 443 });
        let mut events = vec![
            ev(
                5,
                EventKind::ProcessSpawn,
                json!({ "path": "/usr/lib/chromium/chromium" }),
            ),
            ev(5, EventKind::NetConnect, to.clone()),
            ev(5, EventKind::NetConnect, to.clone()),
            ev(5, EventKind::NetSend, to),
        ];
        b.annotate(&mut events);
        assert!(events.iter().all(|e| e.data.get("browser_probe").is_none()));
    }

    #[test]
    fn a_wrapper_script_is_resolved_to_its_program() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("chromium");
        let real = std::env::current_exe().unwrap();
        std::fs::write(
            &script,
            format!("#!/bin/sh -e\n# {0}\n\"{0}\" \"$@\"\n", real.display()),
        )
        .unwrap();
        assert_eq!(resolve_wrapper(&script), Some(real.clone()));
        assert_eq!(resolve_wrapper(&real), None);
    }

    #[test]
    fn the_operators_env_wins_and_the_jail_grows() {
        let b = Offered {
            executable: "/opt/chrome/chrome".into(),
        };
        let mut p = Policy::default();
        p.env
            .insert("PLAYWRIGHT_MCP_HEADLESS".into(), "false".into());
        b.equip(&mut p);
        assert_eq!(p.env["PLAYWRIGHT_MCP_HEADLESS"], "false");
        assert_eq!(
            p.env["PLAYWRIGHT_MCP_EXECUTABLE_PATH"],
            "/opt/chrome/chrome"
        );
        assert!(p.env["PUPPETEER_LAUNCH_OPTIONS"].contains("--no-sandbox"));
        assert!(p.limits.memory_bytes >= MEMORY && p.limits.pids >= PIDS);
        assert_eq!(p.binds[0].source, PathBuf::from("/opt/chrome"));
        assert!(!p.binds[0].writable);
    }
}
