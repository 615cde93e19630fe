//! Finding the configuration files: every [`PLACES`](crate::clients::PLACES) entry under the home
//! and the project folder, or the files given (`--config`), each read into its entries.
//!
//! Guarantees: a file that is absent is skipped; one that cannot be read or parsed is kept as a
//! [`Found`] with its error (the audit says so); a file reached twice (the project is the home)
//! is read once.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::clients::{PLACES, Place, Scope, place_of};
use crate::config::{self, Entry};

/// One configuration file looked at.
#[derive(Debug, Clone, Serialize)]
pub struct Found {
    /// The client.
    pub client: String,
    /// The file.
    pub path: PathBuf,
    /// How many servers it lists.
    pub servers: usize,
    /// Why it could not be read, if it could not.
    pub error: Option<String>,
}

/// The files under `home` and `project` (or exactly `given`, when not empty) and their entries.
pub fn discover(
    home: &Path,
    project: Option<&Path>,
    given: &[PathBuf],
) -> (Vec<Found>, Vec<Entry>) {
    let mut files: Vec<(PathBuf, Place)> = Vec::new();
    if given.is_empty() {
        for place in PLACES {
            let base = match place.scope {
                Scope::Home => Some(home),
                Scope::Project => project,
            };
            if let Some(base) = base {
                files.push((base.join(place.path), *place));
            }
        }
    } else {
        files.extend(given.iter().map(|f| (f.clone(), place_of(f))));
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut found = Vec::new();
    let mut entries = Vec::new();
    for (path, place) in files {
        if !path.is_file() && given.is_empty() {
            continue;
        }
        let key = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        if !seen.insert(key) {
            continue;
        }
        match config::read(&path, &place) {
            Ok(list) => {
                found.push(Found {
                    client: place.client.into(),
                    path,
                    servers: list.len(),
                    error: None,
                });
                entries.extend(list);
            }
            Err(e) => found.push(Found {
                client: place.client.into(),
                path,
                servers: 0,
                error: Some(e.to_string()),
            }),
        }
    }
    (found, entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn home_and_project_files_are_found_once_each() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path();
        std::fs::create_dir_all(home.join(".cursor")).unwrap();
        std::fs::write(
            home.join(".cursor/mcp.json"),
            r#"{"mcpServers": {"a": {"command": "npx", "args": ["-y", "a"]}}}"#,
        )
        .unwrap();
        std::fs::write(home.join(".mcp.json"), "not json").unwrap();
        // The project is the home: Cursor's file is the same file in both scopes.
        let (found, entries) = discover(home, Some(home), &[]);
        assert_eq!(entries.len(), 1);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found.iter().any(|f| f.error.is_some()));
        let (found, _) = discover(home, None, &[home.join("missing.json")]);
        assert!(
            found[0].error.is_some(),
            "a file given that is absent is said"
        );
    }
}
