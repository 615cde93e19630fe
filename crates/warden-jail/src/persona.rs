//! Who the jail's user is: a name, its home and its machine's host name.
//!
//! `warden run` and `warden serve` name their user `sandbox`, plainly. The detonation chamber
//! must not be recognisable from inside, so it draws a developer-like persona from a small
//! built-in pool per run ([`draw`]): user `alex` on `mbp-alex` with the decoy home
//! `/home/alex`. One process serves one run (each `sweep` target is its own process, and the
//! jail's helper serves one jail), so the persona is process-wide: the caller adopts the one it
//! drew, and the helper adopts the policy's ([`adopt`]). Until a persona is adopted, the
//! process's is `sandbox`'s.
//!
//! Guarantees: [`user`], [`home`] and [`hostname`] never change once read after adoption
//! within a process; a second, different adoption is refused (the first stands).

use std::sync::OnceLock;

/// The user of `warden run` and `warden serve`, and of a process that adopted no persona.
pub const DEFAULT_USER: &str = "sandbox";

/// A developer's machine: the login name and the host name that go together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Persona {
    /// The login name (`USER`, `LOGNAME`, `/etc/passwd`, the home's last component).
    pub user: &'static str,
    /// The machine's name (`uname -n`, `/etc/hostname`, `/etc/hosts`).
    pub hostname: &'static str,
}

/// The pool the chamber draws from: names and machines as developers have them.
pub const POOL: &[Persona] = &[
    Persona {
        user: "alex",
        hostname: "mbp-alex",
    },
    Persona {
        user: "jsmith",
        hostname: "jsmith-thinkpad",
    },
    Persona {
        user: "mchen",
        hostname: "ws-4471",
    },
    Persona {
        user: "priya",
        hostname: "framework-13",
    },
    Persona {
        user: "dev",
        hostname: "devbox-02",
    },
    Persona {
        user: "tom",
        hostname: "lin-ws-17",
    },
    Persona {
        user: "sam",
        hostname: "ubuntu-desktop",
    },
    Persona {
        user: "kfischer",
        hostname: "kf-xps15",
    },
];

struct Adopted {
    user: String,
    home: String,
}

static ADOPTED: OnceLock<Adopted> = OnceLock::new();

/// One persona of the pool, at random (the kernel's random bytes).
pub fn draw() -> Persona {
    let pick = warden_trace::canary::random_string(b"0123456789", 4);
    POOL[pick.parse::<usize>().unwrap_or(0) % POOL.len()]
}

/// Make `user` this process's user (its home `/home/USER`). The first adoption stands; a
/// later one with another name is refused and returns `false`. A name that is not a plain
/// login name (`[a-z_][a-z0-9_-]*`, at most 32 characters) is refused too.
pub fn adopt(user: &str) -> bool {
    if !valid(user) {
        return false;
    }
    let adopted = ADOPTED.get_or_init(|| Adopted {
        user: user.to_owned(),
        home: format!("/home/{user}"),
    });
    adopted.user == user
}

/// Whether `name` is a plain login name (what `useradd` accepts by default).
pub fn valid(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 32
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// This process's user: the adopted persona's, else [`DEFAULT_USER`].
pub fn user() -> &'static str {
    ADOPTED.get().map_or(DEFAULT_USER, |a| a.user.as_str())
}

/// This process's decoy home: `/home/USER`.
pub fn home() -> &'static str {
    ADOPTED.get().map_or("/home/sandbox", |a| a.home.as_str())
}

/// The host name that goes with `user` in the pool (`None` for a user not in it).
pub fn hostname(user: &str) -> Option<&'static str> {
    POOL.iter().find(|p| p.user == user).map(|p| p.hostname)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_is_plain_names_and_never_the_sandbox() {
        for p in POOL {
            assert!(valid(p.user), "{p:?}");
            assert_ne!(p.user, DEFAULT_USER);
            assert!(!p.hostname.contains("warden") && !p.hostname.contains("sandbox"));
        }
        assert!(!valid("a/b") && !valid("") && !valid("Root") && !valid(&"a".repeat(33)));
        assert!(POOL.contains(&draw()));
        assert_eq!(hostname("alex"), Some("mbp-alex"));
    }
}
