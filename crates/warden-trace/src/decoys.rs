//! The decoy home and the canary environment: what a credential thief looks for, filled with
//! fresh canary values for every run.
//!
//! Files are given relative to the home directory; every secret in them is a [`Canary`] named
//! after where it was planted (`file:~/.aws/credentials`, `env:GITHUB_TOKEN`), so a hit says
//! which secret leaked and from where.

use crate::canary::{ALNUM, Canaries, Canary, random_string};

/// Upper-case letters and digits 2–7 (the alphabet of AWS access key ids).
const UPPER32: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/// The planted name of the argument canary: the marker in the text the harness gives tools as
/// the user's (not a secret; found leaving, it is the user's data that left).
pub const ARGUMENT: &str = "arg:user";

/// How the planted name of a credential the operator configured begins
/// (`arg:cfg:Z_AI_API_KEY`): watched, not planted, only to see which host the user's data goes
/// to with it. Like the argument canary it is not one of the chamber's secrets (its sightings
/// are no theft), and its value is the operator's own: never written to a report.
pub const CONFIGURED: &str = "arg:cfg:";

/// Whether a planted name is an argument canary or a configured credential rather than a
/// secret of the chamber's.
pub fn is_argument(planted: &str) -> bool {
    planted.starts_with("arg:")
}

/// Whether a planted name is a credential the operator configured ([`CONFIGURED`]).
pub fn is_configured(planted: &str) -> bool {
    planted.starts_with(CONFIGURED)
}

/// Whether the variable `name` set to `value` is a credential: a name that says so (`…KEY`,
/// `…TOKEN`, `…SECRET`, `…PASSWORD`, `…_PAT`, `…AUTH…`, `…CREDENTIAL…`) and a value of eight
/// characters or more that is no URL or path.
fn credential(name: &str, value: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    let named = ["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "_PAT"]
        .iter()
        .any(|w| upper.ends_with(w))
        || upper.contains("AUTH")
        || upper.contains("CREDENTIAL");
    named && value.len() >= 8 && !value.contains("://") && !value.starts_with('/')
}

/// One decoy file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecoyFile {
    /// Path relative to the home directory.
    pub path: &'static str,
    /// Contents.
    pub contents: String,
    /// Permission bits.
    pub mode: u32,
}

/// The canaries, the environment and the files of one run's decoys.
#[derive(Debug, Clone)]
pub struct Decoys {
    /// Every planted secret, with its matchers.
    pub canaries: Canaries,
    /// Canary environment variables.
    pub env: Vec<(String, String)>,
    /// Files of the decoy home.
    pub files: Vec<DecoyFile>,
}

fn aws_key_id() -> String {
    format!("AKIA{}", random_string(UPPER32, 16))
}

/// A fake OpenSSH private key whose body carries `marker`.
fn ssh_key(marker: &str) -> String {
    let body = format!(
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW{}{}",
        marker,
        random_string(ALNUM, 120)
    );
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(70)
        .filter_map(|c| std::str::from_utf8(c).ok())
        .collect();
    format!(
        "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----\n",
        lines.join("\n")
    )
}

impl Decoys {
    /// Fresh decoys for one run.
    pub fn generate() -> Decoys {
        let mut list = Vec::new();
        let mut plant = |planted: &str, value: String| {
            list.push(Canary {
                planted: planted.to_owned(),
                value: value.clone(),
            });
            value
        };
        let env: Vec<(String, String)> = [
            ("AWS_ACCESS_KEY_ID", aws_key_id()),
            ("AWS_SECRET_ACCESS_KEY", random_string(ALNUM, 40)),
            ("GITHUB_TOKEN", format!("ghp_{}", random_string(ALNUM, 36))),
            (
                "OPENAI_API_KEY",
                format!("sk-proj-{}", random_string(ALNUM, 48)),
            ),
            (
                "ANTHROPIC_API_KEY",
                format!("sk-ant-api03-{}", random_string(ALNUM, 48)),
            ),
            ("NPM_TOKEN", format!("npm_{}", random_string(ALNUM, 36))),
            (
                "DATABASE_URL",
                format!(
                    "postgres://app:{}@db.prod.internal:5432/prod",
                    random_string(ALNUM, 24)
                ),
            ),
        ]
        .into_iter()
        .map(|(k, v)| {
            // The database URL's canary is its password, which is what a thief would use.
            let secret = match k {
                "DATABASE_URL" => v
                    .split_once(':')
                    .and_then(|(_, r)| r.split_once(':'))
                    .and_then(|(_, r)| r.split_once('@'))
                    .map_or(v.clone(), |(pw, _)| pw.to_owned()),
                _ => v.clone(),
            };
            plant(&format!("env:{k}"), secret);
            (k.to_owned(), v)
        })
        .collect();

        // Not a secret: the marker the harness puts in the user's text it sends to tools, so
        // that the user's own data is followed out like a secret is.
        plant(ARGUMENT, random_string(ALNUM, 20));
        // The host's own cloud credentials, as its instance metadata service hands them out
        // (crate::imds answers with them).
        plant("imds:aws#id", format!("ASIA{}", random_string(UPPER32, 16)));
        plant("imds:aws", random_string(ALNUM, 40));
        plant(
            "imds:aws#token",
            format!("IQoJb3JpZ2luX2Vj{}", random_string(ALNUM, 64)),
        );
        plant("imds:gcp", format!("ya29.c.{}", random_string(ALNUM, 64)));
        plant(
            "imds:azure",
            format!("eyJ0eXAiOiJKV1Qi{}", random_string(ALNUM, 64)),
        );
        let ssh_marker = plant("file:~/.ssh/id_rsa", random_string(ALNUM, 32));
        let aws_id = plant("file:~/.aws/credentials#id", aws_key_id());
        let aws_secret = plant("file:~/.aws/credentials", random_string(ALNUM, 40));
        let npmrc = plant("file:~/.npmrc", format!("npm_{}", random_string(ALNUM, 36)));
        let dotenv = plant(
            "file:~/.env",
            format!("sk-live-{}", random_string(ALNUM, 32)),
        );
        let gh = plant(
            "file:~/.config/gh/hosts.yml",
            format!("gho_{}", random_string(ALNUM, 36)),
        );
        let docker_pw = plant("file:~/.docker/config.json", random_string(ALNUM, 32));
        let git_cred = plant(
            "file:~/.git-credentials",
            format!("ghp_{}", random_string(ALNUM, 36)),
        );
        let kube = plant("file:~/.kube/config", random_string(ALNUM, 48));
        let browser = plant(
            "file:~/.mozilla/firefox/default/logins.json",
            random_string(ALNUM, 32),
        );
        let docker_auth = data_encoding::BASE64.encode(format!("deploy:{docker_pw}").as_bytes());
        let files = vec![
            DecoyFile {
                path: ".ssh/id_rsa",
                contents: ssh_key(&ssh_marker),
                mode: 0o600,
            },
            DecoyFile {
                path: ".ssh/config",
                contents: "Host build\n  HostName build.corp.internal\n  User deploy\n".into(),
                mode: 0o644,
            },
            DecoyFile {
                path: ".aws/credentials",
                contents: format!(
                    "[default]\naws_access_key_id = {aws_id}\naws_secret_access_key = {aws_secret}\n"
                ),
                mode: 0o600,
            },
            DecoyFile {
                path: ".npmrc",
                contents: format!("//registry.npmjs.org/:_authToken={npmrc}\n"),
                mode: 0o600,
            },
            DecoyFile {
                path: ".env",
                contents: format!("STRIPE_SECRET_KEY={dotenv}\nDEBUG=false\n"),
                mode: 0o600,
            },
            DecoyFile {
                path: ".config/gh/hosts.yml",
                contents: format!(
                    "github.com:\n    oauth_token: {gh}\n    user: deploy\n    git_protocol: https\n"
                ),
                mode: 0o600,
            },
            DecoyFile {
                path: ".docker/config.json",
                contents: format!(
                    "{{\"auths\": {{\"registry.corp.internal\": {{\"auth\": \"{docker_auth}\"}}}}}}\n"
                ),
                mode: 0o600,
            },
            DecoyFile {
                path: ".git-credentials",
                contents: format!("https://deploy:{git_cred}@github.com\n"),
                mode: 0o600,
            },
            DecoyFile {
                path: ".kube/config",
                contents: format!(
                    "apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n    token: {kube}\n"
                ),
                mode: 0o600,
            },
            DecoyFile {
                path: ".mozilla/firefox/default/logins.json",
                contents: format!(
                    "{{\"logins\": [{{\"hostname\": \"https://mail.corp.internal\", \"username\": \"deploy\", \"password\": \"{browser}\"}}]}}\n"
                ),
                mode: 0o600,
            },
        ];
        // The agent clients' MCP configurations, each with its own keys.
        let mut files = files;
        for client in crate::agents::CLIENTS {
            let github = format!("ghp_{}", random_string(ALNUM, 36));
            let db = random_string(ALNUM, 24);
            let slack = format!("xoxb-{}", random_string(ALNUM, 40));
            list.push(Canary {
                planted: format!("file:~/{}", client.path),
                value: github.clone(),
            });
            list.push(Canary {
                planted: format!("file:~/{}#db", client.path),
                value: db.clone(),
            });
            list.push(Canary {
                planted: format!("file:~/{}#slack", client.path),
                value: slack.clone(),
            });
            files.push(DecoyFile {
                path: client.path,
                contents: crate::agents::decoy(client, &github, &db, &slack),
                mode: 0o600,
            });
        }
        Decoys {
            canaries: Canaries::new(list),
            env,
            files,
        }
    }
}

impl Decoys {
    /// Also watch the credentials among `env` (the operator's configuration: `--env`), each as
    /// [`CONFIGURED`]`NAME`, the chamber's own canaries left as they are.
    pub fn watch_configured<'a>(&mut self, env: impl IntoIterator<Item = (&'a str, &'a str)>) {
        let mut list = self.canaries.list().to_vec();
        let before = list.len();
        for (name, value) in env {
            let planted = format!("{CONFIGURED}{name}");
            if credential(name, value) && !list.iter().any(|c| c.planted == planted) {
                list.push(Canary {
                    planted,
                    value: value.to_owned(),
                });
            }
        }
        if list.len() > before {
            self.canaries = Canaries::new(list);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_credentials_are_watched_and_nothing_else() {
        let mut d = Decoys::generate();
        let n = d.canaries.list().len();
        d.watch_configured([
            ("Z_AI_API_KEY", "zk-0123456789abcdef"),
            ("API_BASE_URL", "https://api.invalid"),
            ("GITLAB_PERSONAL_ACCESS_TOKEN", "glpat-abcdefgh"),
            ("SHORT_TOKEN", "abc"),
            ("AWS_REGION", "us-east-1"),
            ("SERVICENOW_PASSWORD", "hunter2hunter2"),
        ]);
        let planted: Vec<&str> = d.canaries.list()[n..]
            .iter()
            .map(|c| c.planted.as_str())
            .collect();
        assert_eq!(
            planted,
            [
                "arg:cfg:Z_AI_API_KEY",
                "arg:cfg:GITLAB_PERSONAL_ACCESS_TOKEN",
                "arg:cfg:SERVICENOW_PASSWORD"
            ]
        );
        assert!(planted.iter().all(|p| is_argument(p) && is_configured(p)));
        let hits = d
            .canaries
            .find(b"Authorization: Bearer zk-0123456789abcdef");
        assert_eq!(hits[0].planted, "arg:cfg:Z_AI_API_KEY");
        assert!(!is_configured(ARGUMENT));
    }

    #[test]
    fn every_file_secret_is_a_canary_and_runs_differ() {
        let d = Decoys::generate();
        for f in &d.files {
            let hits = d.canaries.find(f.contents.as_bytes());
            assert!(
                f.path == ".ssh/config" || !hits.is_empty(),
                "{} carries no canary",
                f.path
            );
        }
        for (k, v) in &d.env {
            assert!(!d.canaries.find(v.as_bytes()).is_empty(), "{k}");
        }
        let again = Decoys::generate();
        assert_ne!(d.env, again.env);
        assert!(again.canaries.find(d.env[0].1.as_bytes()).is_empty());
    }
}

/// The services a planted credential is *for*: the domains (and the names below them) a
/// program given that credential sends it to when it uses it — the GitHub token to GitHub, an
/// npm token to the npm registry. Empty for a secret that is never sent as it is (an SSH key
/// signs, an AWS secret access key signs; only the key id travels), or that has no service of
/// its own (`~/.env`, a browser's saved passwords).
pub fn audience(planted: &str) -> &'static [&'static str] {
    match planted {
        "env:AWS_ACCESS_KEY_ID"
        | "file:~/.aws/credentials#id"
        | "imds:aws#id"
        | "imds:aws#token" => &[
            "amazonaws.com",
            "amazonaws.com.cn",
            "aws.amazon.com",
            // AWS's newer endpoints (dual-stack, Free Tier: freetier.us-east-1.api.aws).
            "api.aws",
        ],
        "env:GITHUB_TOKEN" | "file:~/.config/gh/hosts.yml" | "file:~/.git-credentials" => {
            &["github.com", "githubusercontent.com"]
        }
        "env:OPENAI_API_KEY" => &["openai.com"],
        "env:ANTHROPIC_API_KEY" => &["anthropic.com"],
        "env:NPM_TOKEN" | "file:~/.npmrc" => &["npmjs.org", "npmjs.com"],
        "env:DATABASE_URL" => &["db.prod.internal"],
        "file:~/.docker/config.json" => &["docker.io", "docker.com"],
        "imds:gcp" => &["googleapis.com"],
        p if p.ends_with("#slack") => &["slack.com"],
        p if p
            .strip_prefix("file:~/")
            .and_then(crate::agents::client_of)
            .is_some() =>
        {
            &["github.com", "githubusercontent.com"]
        }
        "imds:azure" => &[
            "azure.com",
            "microsoftonline.com",
            "windows.net",
            "azure.net",
        ],
        _ => &[],
    }
}

/// Whether `host` (a TLS server name, an HTTP Host or the name an address stood for) is one of
/// the services `planted` is for: the domain itself or a name below it (by whole labels, so
/// `github.com.evil.test` is not GitHub).
pub fn is_audience(planted: &str, host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let host = host.rsplit_once(':').map_or(host.as_str(), |(h, port)| {
        if port.chars().all(|c| c.is_ascii_digit()) {
            h
        } else {
            host.as_str()
        }
    });
    audience(planted)
        .iter()
        .any(|d| host == *d || host.ends_with(&format!(".{d}")))
}

#[cfg(test)]
mod audience_tests {
    use super::*;

    #[test]
    fn a_credential_is_for_its_own_service_only() {
        assert!(is_audience("env:GITHUB_TOKEN", "api.github.com"));
        assert!(is_audience("env:GITHUB_TOKEN", "API.GitHub.com:443"));
        assert!(!is_audience("env:GITHUB_TOKEN", "github.com.evil.test"));
        assert!(!is_audience("env:GITHUB_TOKEN", "notgithub.com"));
        assert!(!is_audience("env:GITHUB_TOKEN", "api.openai.com"));
        assert!(is_audience(
            "env:AWS_ACCESS_KEY_ID",
            "freetier.us-east-1.api.aws"
        ));
        assert!(!is_audience("env:AWS_ACCESS_KEY_ID", "api.aws.evil.test"));
        assert!(is_audience(
            "file:~/.aws/credentials#id",
            "sts.amazonaws.com"
        ));
        assert!(
            !is_audience("file:~/.aws/credentials", "sts.amazonaws.com"),
            "a secret key signs, never travels"
        );
        assert!(!is_audience("file:~/.ssh/id_rsa", "github.com"));
    }
}
