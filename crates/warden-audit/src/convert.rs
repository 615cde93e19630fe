//! A configured server turned into what `warden detonate` judges, the way its client would
//! start it: `npx -y PKG@V ARGS` → `npm:PKG@V` with ARGS after the package's own command,
//! `uvx PKG ARGS` and `pipx run PKG ARGS` → `pypi:`, any other program (a script run by `node`
//! or `python`, an installed server) → its command line, run inside the chamber. A remote URL
//! or a container image is not judged, and says why.
//!
//! Guarantees: pure; every entry gets a plan (a target or a reason); environment values are
//! made here, never read: each variable the entry names gets a fresh random value of the same
//! kind of shape a key has, which the chamber then watches as a canary.

use crate::config::Entry;

/// What the audit does with one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Detonate this; `shown` is how the report names it (credentials in the arguments as
    /// `<redacted>`: the target itself carries values of the chamber's own in their place).
    Judge {
        /// The detonation.
        target: warden_sweep::Target,
        /// Its name in the report and the pins.
        shown: String,
    },
    /// Not judged, and why.
    Skip(String),
}

/// Variables the chamber sets itself: an entry cannot replace them (it would only keep its
/// server from starting, or point the interpreter elsewhere).
const CHAMBER_OWNED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TMPDIR",
    "PWD",
    "NODE_OPTIONS",
    "NODE_PATH",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
];

/// Whether an entry may name the variable `k` for its server: a plain name the chamber does
/// not set itself.
fn passable(k: &str) -> bool {
    let plain = k.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    plain
        && !CHAMBER_OWNED.contains(&k)
        && !["LD_", "PYTHON", "SSL_"].iter().any(|p| k.starts_with(p))
}

/// Whether an argument's flag names a credential (`--api-key`, `--token=…`, `-password`).
fn secret_flag(flag: &str) -> bool {
    let f = flag.trim_start_matches('-').to_ascii_lowercase();
    flag.starts_with('-')
        && [
            "key",
            "token",
            "secret",
            "password",
            "passwd",
            "auth",
            "credential",
        ]
        .iter()
        .any(|w| f.contains(w))
}

/// `args` with credentials replaced: a URL's password, a credential flag's value. Returns the
/// arguments for the chamber (values of its own) and for the report (`<redacted>`).
fn redact(args: &[String]) -> (Vec<String>, Vec<String>) {
    let mut real = Vec::new();
    let mut shown = Vec::new();
    let mut next_secret = false;
    for a in args {
        if next_secret {
            next_secret = false;
            real.push(placeholder());
            shown.push("<redacted>".into());
            continue;
        }
        if let Some((flag, _)) = a.split_once('=')
            && secret_flag(flag)
        {
            real.push(format!("{flag}={}", placeholder()));
            shown.push(format!("{flag}=<redacted>"));
            continue;
        }
        if secret_flag(a) {
            next_secret = true;
        }
        // scheme://user:password@host…
        if let Some(i) = a.find("://")
            && let Some(at) = a[i + 3..].find('@').map(|j| i + 3 + j)
            && let Some(colon) = a[i + 3..at].find(':').map(|j| i + 3 + j)
        {
            real.push(format!("{}{}{}", &a[..=colon], placeholder(), &a[at..]));
            shown.push(format!("{}<redacted>{}", &a[..=colon], &a[at..]));
            continue;
        }
        real.push(a.clone());
        shown.push(a.clone());
    }
    (real, shown)
}

/// The plan for `e`.
pub fn plan(e: &Entry) -> Plan {
    if let Some(url) = &e.url
        && e.command.is_none()
    {
        return Plan::Skip(format!(
            "a remote server ({url}): nothing of it runs on this machine; `warden detonate \
             --mcp-url {url}` probes it, which contacts it"
        ));
    }
    let Some(program) = e.command.as_deref().filter(|c| !c.trim().is_empty()) else {
        return Plan::Skip("the entry names no command and no URL".into());
    };
    // A client that takes the whole line in `command` ("npx -y pkg"): split it as a shell would.
    let argv: Vec<String> = if e.args.is_empty() && program.contains(' ') {
        shlex::split(program).unwrap_or_else(|| vec![program.to_owned()])
    } else {
        std::iter::once(program.to_owned())
            .chain(e.args.iter().cloned())
            .collect()
    };
    if argv.is_empty() {
        return Plan::Skip("the entry's command is empty".into());
    }
    let (mut argv, shown_argv) = redact(&argv);
    let base = argv[0].rsplit('/').next().unwrap_or_default().to_owned();
    let rest: Vec<String> = argv.split_off(1);
    let target = match base.as_str() {
        "npx" | "bunx" => registry("npm:", &rest, &["-p", "--package"]),
        "pnpm" | "yarn" if rest.first().is_some_and(|a| a == "dlx") => {
            registry("npm:", &rest[1..], &["-p", "--package"])
        }
        "uvx" => registry("pypi:", &rest, &["--from"]),
        "uv" if rest.len() > 2 && rest[0] == "tool" && rest[1] == "run" => {
            registry("pypi:", &rest[2..], &["--from"])
        }
        "pipx" if rest.first().is_some_and(|a| a == "run") => {
            registry("pypi:", &rest[1..], &["--spec"])
        }
        "docker" | "podman" | "nerdctl" => {
            return Plan::Skip(format!(
                "a container image ({base} {}): Warden judges a server in its own sandbox, not \
                 an image; judge the image's server from its source or package",
                rest.join(" ")
            ));
        }
        _ => None,
    };
    let env = e
        .env_names
        .iter()
        .filter(|k| passable(k))
        .map(|k| (k.clone(), placeholder()))
        .collect();
    let t = match target {
        Some(Registry::Package { spec, args }) => warden_sweep::Target {
            target: Some(spec),
            command: None,
            transport: None,
            env,
            args,
        },
        Some(Registry::Program { spec, command }) => warden_sweep::Target {
            target: Some(spec),
            command: Some(command),
            transport: None,
            env,
            args: Vec::new(),
        },
        None => warden_sweep::Target {
            target: None,
            command: Some(
                std::iter::once(argv[0].as_str())
                    .chain(rest.iter().map(String::as_str))
                    .map(quote)
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            transport: None,
            env,
            args: Vec::new(),
        },
    };
    let shown = match (&t.target, &t.command) {
        (Some(spec), None) => std::iter::once(spec.clone())
            .chain(
                shown_argv
                    .iter()
                    .skip(shown_argv.len() - t.args.len())
                    .map(|a| quote(a)),
            )
            .collect::<Vec<_>>()
            .join(" "),
        (Some(spec), Some(_)) => format!(
            "{spec} :: {}",
            shown_argv[shown_argv.len() - rest_len(&t)..]
                .iter()
                .map(|a| quote(a))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        _ => shown_argv
            .iter()
            .map(|a| quote(a))
            .collect::<Vec<_>>()
            .join(" "),
    };
    Plan::Judge { target: t, shown }
}

/// How many words the start command of a `--from` target has.
fn rest_len(t: &warden_sweep::Target) -> usize {
    t.command
        .as_deref()
        .and_then(shlex::split)
        .map_or(0, |w| w.len())
}

/// What a package runner's arguments name.
enum Registry {
    /// The package, started by its own command with these arguments.
    Package { spec: String, args: Vec<String> },
    /// The package given by a flag (`--from`, `-p`), started by this command line.
    Program { spec: String, command: String },
}

/// The package of a runner's arguments (`-y`, `--yes`, `--quiet`… skipped; `from_flags` name
/// the package explicitly, and then the first word is the program).
fn registry(scheme: &str, args: &[String], from_flags: &[&str]) -> Option<Registry> {
    let mut from = None;
    let mut i = 0;
    while i < args.len() && args[i].starts_with('-') {
        let a = &args[i];
        if let Some((flag, value)) = a.split_once('=')
            && from_flags.contains(&flag)
        {
            from = Some(value.to_owned());
        } else if from_flags.contains(&a.as_str()) {
            from = args.get(i + 1).cloned();
            i += 1;
        }
        i += 1;
    }
    let first = args.get(i)?;
    match from {
        Some(pkg) => Some(Registry::Program {
            spec: spec(scheme, &pkg)?,
            command: args[i..]
                .iter()
                .map(|a| quote(a))
                .collect::<Vec<_>>()
                .join(" "),
        }),
        None => Some(Registry::Package {
            spec: spec(scheme, first)?,
            args: args[i + 1..].to_vec(),
        }),
    }
}

/// `npm:NAME[@V]` or `pypi:NAME[@V]` for a runner's package word; `None` for a path (a
/// local package is run as a command instead).
fn spec(scheme: &str, word: &str) -> Option<String> {
    if word.starts_with(['.', '/', '~']) || word.contains("://") {
        return None;
    }
    if scheme == "pypi:" {
        // `pkg==1.2`, `pkg@1.2`, `pkg[extra]`.
        let (name, version) = match word.split_once("==").or_else(|| word.split_once('@')) {
            Some((n, v)) => (n, Some(v)),
            None => (word, None),
        };
        let name = name.split('[').next().unwrap_or(name);
        return Some(match version {
            Some(v) => format!("pypi:{name}@{v}"),
            None => format!("pypi:{name}"),
        });
    }
    Some(format!("{scheme}{word}"))
}

/// `s` as one shell word.
fn quote(s: &str) -> String {
    shlex::try_quote(s).map_or_else(|_| s.to_owned(), |q| q.into_owned())
}

/// A fresh value for a variable the configuration sets: 40 random letters and digits (the
/// chamber watches it like any configured credential; the user's own value is never read).
fn placeholder() -> String {
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut bytes = [0u8; 40];
    if getrandom::fill(&mut bytes).is_err() {
        // No randomness: a fixed value still keeps the user's own out.
        return "x".repeat(40);
    }
    bytes
        .iter()
        .map(|b| ALNUM[usize::from(*b) % ALNUM.len()] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(command: &str, args: &[&str]) -> Entry {
        Entry {
            client: "Cursor".into(),
            config: "/h/.cursor/mcp.json".into(),
            name: "s".into(),
            command: Some(command.into()),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env_names: vec!["API_KEY".into()],
            url: None,
            disabled: false,
        }
    }

    fn judged(command: &str, args: &[&str]) -> warden_sweep::Target {
        match plan(&entry(command, args)) {
            Plan::Judge { target, .. } => target,
            Plan::Skip(why) => panic!("{why}"),
        }
    }

    #[test]
    fn each_runner_becomes_the_target_its_client_would_start() {
        let t = judged(
            "npx",
            &[
                "-y",
                "@modelcontextprotocol/server-filesystem@2025.8.21",
                "/tmp",
            ],
        );
        assert_eq!(
            t.target.as_deref(),
            Some("npm:@modelcontextprotocol/server-filesystem@2025.8.21")
        );
        assert_eq!(t.args, ["/tmp"]);
        assert!(t.command.is_none());
        let t = judged(
            "uvx",
            &["mcp-server-time==2025.9.25", "--local-timezone", "UTC"],
        );
        assert_eq!(t.target.as_deref(), Some("pypi:mcp-server-time@2025.9.25"));
        assert_eq!(t.args, ["--local-timezone", "UTC"]);
        let t = judged(
            "uvx",
            &[
                "--from",
                "mcp-server-git",
                "mcp-server-git",
                "--repository",
                "/r",
            ],
        );
        assert_eq!(t.target.as_deref(), Some("pypi:mcp-server-git"));
        assert_eq!(t.command.as_deref(), Some("mcp-server-git --repository /r"));
        let t = judged("pipx", &["run", "mcp-server-fetch"]);
        assert_eq!(t.target.as_deref(), Some("pypi:mcp-server-fetch"));
        let t = judged("/usr/bin/python3", &["/opt/srv/server.py", "--name", "a b"]);
        assert_eq!(
            (t.target, t.command.as_deref()),
            (
                None,
                Some("/usr/bin/python3 /opt/srv/server.py --name 'a b'")
            )
        );
        let t = judged("npx -y left-pad-mcp", &[]);
        assert_eq!(t.target.as_deref(), Some("npm:left-pad-mcp"));
        // A local package given to npx runs as a command.
        let t = judged("npx", &["./srv"]);
        assert_eq!(t.command.as_deref(), Some("npx ./srv"));
        // The variable is named with a value of the chamber's own.
        assert_eq!(t.env.keys().collect::<Vec<_>>(), ["API_KEY"]);
        assert_eq!(t.env["API_KEY"].len(), 40);
    }

    #[test]
    fn credentials_in_arguments_and_owned_variables_never_reach_the_chamber() {
        let mut e = entry(
            "npx",
            &[
                "-y",
                "@x/pg",
                "postgresql://app:hunter2@db:5432/x",
                "--api-key",
                "sk-live-1",
                "--token=t0k",
            ],
        );
        e.env_names = vec![
            "PATH".into(),
            "LD_PRELOAD".into(),
            "-x".into(),
            "GH_TOKEN".into(),
        ];
        let Plan::Judge { target, shown } = plan(&e) else {
            panic!()
        };
        let all = format!("{target:?} {shown}");
        for secret in ["hunter2", "sk-live-1", "t0k"] {
            assert!(!all.contains(secret), "{all}");
        }
        assert_eq!(
            shown,
            "npm:@x/pg 'postgresql://app:<redacted>@db:5432/x' --api-key '<redacted>' '--token=<redacted>'"
        );
        assert_eq!(target.env.keys().collect::<Vec<_>>(), ["GH_TOKEN"]);
    }

    #[test]
    fn remote_servers_and_images_are_not_judged_and_say_why() {
        let mut e = entry("x", &[]);
        e.command = None;
        e.url = Some("https://mcp.example.test/mcp".into());
        assert!(matches!(plan(&e), Plan::Skip(w) if w.contains("--mcp-url")));
        assert!(
            matches!(plan(&entry("docker", &["run", "-i", "img"])), Plan::Skip(w) if w.contains("image"))
        );
        e.url = None;
        assert!(matches!(plan(&e), Plan::Skip(_)));
    }
}
