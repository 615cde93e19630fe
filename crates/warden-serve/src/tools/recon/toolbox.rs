//! The recon toolbox: which scanners are installed (found once, at start), their versions,
//! the folders each needs shown in the sandbox, the wordlists behind the closed list of
//! aliases, and the targets from the configuration.
//!
//! Guarantees: a program is only ever run from the path found here, with its installation
//! bound read-only; a tool whose program is missing (or, for arjun, too old to work) is not
//! listed, and [`Toolbox::status`] says why. Versions are read by running the program inside
//! the sandbox, never on the host.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use warden_jail::{Bind, Jail, Policy};

use crate::config::ReconFile;

/// Where the wordlist of an `ffuf_discover` call is shown in the sandbox.
pub const WORDLIST_MOUNT: &str = "/run/warden-recon/wordlist.txt";
/// Where nuclei's templates are shown in the sandbox.
pub const TEMPLATES_MOUNT: &str = "/run/warden-recon/nuclei-templates";
/// arjun's default home: a virtual environment of Warden's own (`setup.sh` makes it).
pub const ARJUN_VENV: &str = "/opt/warden/recon";
/// The oldest arjun that works (Debian's 2.2.1 reports every target as misbehaving).
const ARJUN_MIN: (u32, u32, u32) = (2, 2, 7);

/// The small wordlist shipped with Warden (common paths of web applications and APIs).
const WARDEN_SMALL: &str = include_str!("wordlist-small.txt");

/// The closed list of wordlist aliases: the one shipped with Warden, and Debian's dirb and
/// wfuzz lists when those packages are installed.
const ALIASES: &[(&str, &str)] = &[
    ("dirb-common", "/usr/share/dirb/wordlists/common.txt"),
    ("dirb-small", "/usr/share/dirb/wordlists/small.txt"),
    ("dirb-big", "/usr/share/dirb/wordlists/big.txt"),
    (
        "wfuzz-common",
        "/usr/share/wfuzz/wordlist/general/common.txt",
    ),
    ("wfuzz-big", "/usr/share/wfuzz/wordlist/general/big.txt"),
];

/// An installed scanner.
#[derive(Debug, Clone)]
pub struct Program {
    /// Its path (the same on the host and in the sandbox).
    pub path: PathBuf,
    /// Its version, as it reports it.
    pub version: String,
    /// Folders outside the sandbox's system view that it needs (bound read-only).
    pub binds: Vec<PathBuf>,
}

impl Program {
    /// The read-only binds that show its installation (none for a system program), found
    /// once, at start.
    pub fn binds(&self) -> Vec<Bind> {
        self.binds
            .iter()
            .map(|d| Bind {
                source: d.clone(),
                target: Some(d.clone()),
                writable: false,
            })
            .collect()
    }
}

/// The toolbox.
#[derive(Debug)]
pub struct Toolbox {
    /// The configured targets, as written.
    pub targets: Vec<String>,
    /// The settings (connect time, port count, raw output cap).
    pub settings: ReconFile,
    /// nmap, or why it is missing.
    pub nmap: Result<Program, String>,
    /// ffuf, or why it is missing.
    pub ffuf: Result<Program, String>,
    /// arjun, or why it is missing.
    pub arjun: Result<Program, String>,
    /// nuclei (with its templates), or why it is missing.
    pub nuclei: Result<Program, String>,
    /// The nuclei templates folder, when nuclei is ready.
    pub templates: Option<PathBuf>,
    /// Wordlist aliases present on this machine, with their files.
    pub wordlists: Vec<(String, PathBuf)>,
}

impl Toolbox {
    /// Find the programs of `settings` (`wanted` says whether any recon tool is offered: if
    /// none is, nothing is run), using `state` for the shipped wordlist.
    pub fn discover(
        settings: &ReconFile,
        wanted: bool,
        jail: &Jail,
        base: &Policy,
        state: &Path,
    ) -> Toolbox {
        let off = || Err("no recon tool is offered by this profile".to_owned());
        let mut t = Toolbox {
            targets: settings.targets.clone(),
            settings: settings.clone(),
            nmap: off(),
            ffuf: off(),
            arjun: off(),
            nuclei: off(),
            templates: None,
            wordlists: Vec::new(),
        };
        if !wanted {
            return t;
        }
        let probe = |p: &Program, args: &[&str]| probe(jail, base, p, args);
        t.nmap = find(settings.nmap.as_deref(), "nmap", "apt-get install nmap").and_then(|p| {
            let out = probe(&p, &["--version"])?;
            with_version(p, first_match(&out, "Nmap version "))
        });
        t.ffuf = find(settings.ffuf.as_deref(), "ffuf", "apt-get install ffuf").and_then(|p| {
            let out = probe(&p, &["-V"])?;
            with_version(p, first_match(&out, "ffuf version: "))
        });
        let arjun_default = Path::new(ARJUN_VENV).join("bin/arjun");
        let arjun_path = settings
            .arjun
            .clone()
            .or_else(|| arjun_default.exists().then_some(arjun_default));
        t.arjun = find(
            arjun_path.as_deref(),
            "arjun",
            "pip install arjun==2.2.7 into a venv (setup.sh makes /opt/warden/recon)",
        )
        .and_then(|p| {
            let version = arjun_version(&p.path)
                .ok_or_else(|| format!("{}: cannot tell arjun's version", p.path.display()))?;
            if parse_version(&version).is_none_or(|v| v < ARJUN_MIN) {
                return Err(format!(
                    "{} is arjun {version}; 2.2.7 or later is needed (2.2.1, Debian's, reports \
                     every target as misbehaving): pip install arjun==2.2.7",
                    p.path.display()
                ));
            }
            Ok(Program { version, ..p })
        });
        let templates = settings.nuclei_templates.clone().or_else(|| {
            ["/usr/share/nuclei-templates", "/opt/nuclei-templates"]
                .iter()
                .map(PathBuf::from)
                .find(|p| p.is_dir())
        });
        t.nuclei = find(
            settings.nuclei.as_deref(),
            "nuclei",
            "install nuclei and its templates (no Debian package ships them)",
        )
        .and_then(|p| match &templates {
            Some(dir) if dir.is_dir() => Ok(p),
            _ => Err(
                "nuclei is installed but no templates folder was found (set `[recon] \
                      nuclei_templates`)"
                    .to_owned(),
            ),
        })
        .and_then(|p| {
            let out = probe(&p, &["-version", "-disable-update-check"])?;
            with_version(p, first_match(&out, "Nuclei Engine Version: "))
        });
        if t.nuclei.is_ok() {
            t.templates = templates;
        }
        let small = state.join("wordlist-warden-small.txt");
        if std::fs::write(&small, WARDEN_SMALL).is_ok() {
            t.wordlists.push(("warden-small".into(), small));
        }
        for (alias, path) in ALIASES {
            if Path::new(path).is_file() {
                t.wordlists.push(((*alias).into(), PathBuf::from(path)));
            }
        }
        t
    }

    /// The program behind `tool`, or why there is none.
    pub fn program(&self, tool: &str) -> Result<&Program, &str> {
        let p = match tool {
            "nmap_scan" => &self.nmap,
            "ffuf_discover" => &self.ffuf,
            "arjun_params" => &self.arjun,
            "nuclei_scan" => &self.nuclei,
            _ => return Err("not a recon tool"),
        };
        p.as_ref().map_err(String::as_str)
    }

    /// The file behind a wordlist alias.
    pub fn wordlist(&self, alias: &str) -> Option<&Path> {
        self.wordlists
            .iter()
            .find(|(a, _)| a == alias)
            .map(|(_, p)| p.as_path())
    }

    /// What `warden://status` shows: each tool's program and version, or why it is missing.
    pub fn status(&self) -> Value {
        let one = |p: &Result<Program, String>| match p {
            Ok(p) => json!({ "available": true, "path": p.path, "version": p.version }),
            Err(why) => json!({ "available": false, "why": why }),
        };
        json!({
            "targets": self.targets,
            "tools": {
                "nmap_scan": one(&self.nmap),
                "ffuf_discover": one(&self.ffuf),
                "arjun_params": one(&self.arjun),
                "nuclei_scan": one(&self.nuclei),
            },
            "wordlists": self.wordlists.iter().map(|(a, _)| a).collect::<Vec<_>>(),
            "connect_timeout_ms": self.settings.connect_timeout_ms,
            "max_ports": self.settings.max_ports,
        })
    }
}

/// The `'static` name of recon tool `name`.
pub fn static_name(name: &str) -> Option<&'static str> {
    crate::tools::RECON_TOOLS
        .iter()
        .find(|t| **t == name)
        .copied()
}

/// The program `name`: the configured path, else the first in the sandbox's own `PATH`
/// directories; with the folders it needs that the sandbox does not show.
fn find(configured: Option<&Path>, name: &str, install: &str) -> Result<Program, String> {
    let path = match configured {
        Some(p) if p.is_file() => p.to_path_buf(),
        Some(p) => return Err(format!("{} (configured) does not exist", p.display())),
        None => ["/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"]
            .iter()
            .map(|d| Path::new(d).join(name))
            .find(|p| p.is_file())
            .ok_or_else(|| format!("{name} is not installed ({install})"))?,
    };
    let path = std::path::absolute(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let system = Policy::default().system_paths;
    let visible = |p: &Path| system.iter().any(|s| p.starts_with(s));
    let binds = warden_jail::runtime::installations(&path, &visible)?;
    Ok(Program {
        path,
        version: String::new(),
        binds,
    })
}

fn with_version(p: Program, version: Option<String>) -> Result<Program, String> {
    let version =
        version.ok_or_else(|| format!("{}: cannot tell its version", p.path.display()))?;
    Ok(Program { version, ..p })
}

/// Run `program args` in the sandbox (10 s at most) and return what it printed.
fn probe(jail: &Jail, base: &Policy, program: &Program, args: &[&str]) -> Result<String, String> {
    let path = &program.path;
    let mut policy = base.clone();
    policy.workspace = None;
    policy.limits.wall_time_ms = 10_000;
    policy.binds.extend(program.binds());
    let mut argv = vec![path.display().to_string()];
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    let o = jail
        .run(&policy, &argv, &[])
        .map_err(|e| format!("{}: {}", path.display(), e.explain()))?;
    let mut text = String::from_utf8_lossy(&o.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&o.stderr));
    Ok(text)
}

/// The first word after `prefix` on the first line that has it.
fn first_match(text: &str, prefix: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.find(prefix).map(|at| &l[at + prefix.len()..]))
        .and_then(|rest| rest.split_whitespace().next())
        .map(|v| v.trim_start_matches('v').to_owned())
}

/// arjun's version, from its package's `__init__.py` next to the program (a venv's
/// `site-packages`, or the system's `dist-packages`).
fn arjun_version(program: &Path) -> Option<String> {
    let real = std::fs::canonicalize(program).ok()?;
    let prefix = real.parent()?.parent()?;
    let lib = prefix.join("lib");
    let mut candidates: Vec<PathBuf> = std::fs::read_dir(&lib)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("site-packages/arjun/__init__.py"))
        .collect();
    candidates.push(PathBuf::from(
        "/usr/lib/python3/dist-packages/arjun/__init__.py",
    ));
    let text = candidates
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())?;
    text.lines().find_map(|l| {
        let v = l.trim().strip_prefix("__version__")?;
        let v = v.trim_start().strip_prefix('=')?.trim();
        Some(v.trim_matches(|c| c == '\'' || c == '"').to_owned())
    })
}

fn parse_version(v: &str) -> Option<(u32, u32, u32)> {
    let mut it = v.split('.').map(|p| p.trim().parse::<u32>().ok());
    Some((
        it.next()??,
        it.next().flatten().unwrap_or(0),
        it.next().flatten().unwrap_or(0),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_what_the_programs_print() {
        assert_eq!(
            first_match(
                "Nmap version 7.93 ( https://nmap.org )\nPlatform",
                "Nmap version "
            ),
            Some("7.93".into())
        );
        assert_eq!(
            first_match("ffuf version: 1.1.0\n", "ffuf version: "),
            Some("1.1.0".into())
        );
        assert_eq!(
            first_match(
                "[INF] Nuclei Engine Version: v3.4.10\n",
                "Nuclei Engine Version: "
            ),
            Some("3.4.10".into())
        );
        assert_eq!(first_match("nothing here\n", "ffuf version: "), None);
        assert!(parse_version("2.2.1").unwrap() < ARJUN_MIN);
        assert!(parse_version("2.2.7").unwrap() >= ARJUN_MIN);
        assert!(parse_version("2.10").unwrap() >= ARJUN_MIN);
        assert!(parse_version("x").is_none());
    }

    #[test]
    fn the_shipped_wordlist_is_plain_and_small() {
        let words: Vec<&str> = WARDEN_SMALL.lines().collect();
        assert!(words.len() >= 40 && words.len() <= 400, "{}", words.len());
        assert!(
            words
                .iter()
                .all(|w| !w.is_empty() && !w.contains(' ') && !w.contains("FUZZ"))
        );
        for planted in ["admin", "backup", "api"] {
            assert!(words.contains(&planted), "{planted}");
        }
    }
}
