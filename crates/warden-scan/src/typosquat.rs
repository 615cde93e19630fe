//! Typosquat hints: a package (the project itself, or any of its components) whose name is one
//! edit (an insertion, a deletion, a substitution or a swap of neighbours) away from a popular
//! MCP-related package's name, without being that package. A low finding: a hint to look
//! twice at where the package came from, not proof.

use warden_events::{Category, Finding, Severity};

use crate::component::Ecosystem;

/// Popular MCP-related packages, by ecosystem (names in normal form). Names with many honest
/// one-edit neighbours (`openai`/`openapi`) are left out.
pub const POPULAR: &[(Ecosystem, &str)] = &[
    (Ecosystem::Npm, "@modelcontextprotocol/sdk"),
    (Ecosystem::Npm, "@modelcontextprotocol/server-everything"),
    (Ecosystem::Npm, "@modelcontextprotocol/server-filesystem"),
    (Ecosystem::Npm, "@modelcontextprotocol/server-memory"),
    (Ecosystem::Npm, "@modelcontextprotocol/server-github"),
    (Ecosystem::Npm, "@modelcontextprotocol/server-puppeteer"),
    (Ecosystem::Npm, "@modelcontextprotocol/server-brave-search"),
    (Ecosystem::Npm, "@modelcontextprotocol/server-slack"),
    (Ecosystem::Npm, "@modelcontextprotocol/server-postgres"),
    (
        Ecosystem::Npm,
        "@modelcontextprotocol/server-sequential-thinking",
    ),
    (Ecosystem::Npm, "@modelcontextprotocol/server-google-maps"),
    (Ecosystem::Npm, "@modelcontextprotocol/inspector"),
    (Ecosystem::Npm, "@playwright/mcp"),
    (Ecosystem::Npm, "@notionhq/notion-mcp-server"),
    (Ecosystem::Npm, "@upstash/context7-mcp"),
    (Ecosystem::Npm, "firecrawl-mcp"),
    (Ecosystem::Npm, "mcp-remote"),
    (Ecosystem::Npm, "fastmcp"),
    (Ecosystem::Npm, "@anthropic-ai/sdk"),
    (Ecosystem::PyPI, "mcp"),
    (Ecosystem::PyPI, "fastmcp"),
    (Ecosystem::PyPI, "mcp-server-fetch"),
    (Ecosystem::PyPI, "mcp-server-git"),
    (Ecosystem::PyPI, "mcp-server-time"),
    (Ecosystem::PyPI, "mcp-server-sqlite"),
    (Ecosystem::PyPI, "mcp-proxy"),
    (Ecosystem::PyPI, "anthropic"),
    (Ecosystem::PyPI, "langchain-mcp-adapters"),
];

/// Whether `a` and `b` are exactly one edit apart (optimal string alignment distance 1).
pub fn one_edit(a: &str, b: &str) -> bool {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if a == b || a.len().abs_diff(b.len()) > 1 {
        return false;
    }
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let (ra, rb) = (&a[prefix..], &b[prefix..]);
    // Substitution, insertion, deletion, or a swap of neighbours.
    ra.get(1..) == rb.get(1..)
        || ra.get(1..) == Some(rb)
        || Some(ra) == rb.get(1..)
        || (ra.len() >= 2
            && rb.len() >= 2
            && ra[0] == rb[1]
            && ra[1] == rb[0]
            && ra[2..] == rb[2..])
}

/// The popular package `name` imitates, if any.
pub fn imitates(eco: Ecosystem, name: &str) -> Option<&'static str> {
    let name = eco.normal(name);
    POPULAR
        .iter()
        .filter(|(e, _)| *e == eco)
        .map(|(_, p)| *p)
        // Short names (`mcp`) have too many honest neighbours.
        .find(|p| p.len() >= 6 && one_edit(&name, p))
}

/// The finding for `name` (found in `file`) imitating `popular`.
pub fn finding(name: &str, popular: &str, file: &str) -> Finding {
    crate::capabilities::finding(
        Category::Typosquat,
        "typosquat",
        Severity::Low,
        file,
        format!(
            "the name {} is one edit away from the popular package {popular}",
            crate::report::clip(name, 100)
        ),
        "Check that this is the package you meant to use, and where it was published from.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_edit_means_one() {
        assert!(one_edit("server-filesytem", "server-filesystem"));
        assert!(one_edit("mcp-server-fetchh", "mcp-server-fetch"));
        assert!(one_edit("mcp-sevrer-git", "mcp-server-git"));
        assert!(one_edit("mcp-server-tine", "mcp-server-time"));
        assert!(!one_edit("mcp-server-time", "mcp-server-time"));
        assert!(!one_edit("mcp-server-timer2", "mcp-server-time"));
        assert!(!one_edit("abc", "cab"));
    }

    #[test]
    fn popular_names_are_not_their_own_squatters() {
        for (eco, p) in POPULAR {
            assert_eq!(imitates(*eco, p), None, "{p}");
        }
        assert_eq!(
            imitates(Ecosystem::Npm, "@modelcontextprotocol/server-filesytem"),
            Some("@modelcontextprotocol/server-filesystem")
        );
        assert_eq!(
            imitates(Ecosystem::PyPI, "MCP_Server_Fetchh"),
            Some("mcp-server-fetch")
        );
    }
}
