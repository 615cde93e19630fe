//! npm manifests: lifecycle scripts that npm runs at install (`preinstall`, `install`,
//! `postinstall`; `prepare` for the project itself), native addons (`binding.gyp`, `gypfile`,
//! prebuilt `.node` files), `bin` entries, `bundledDependencies`, and dependencies fetched from
//! git, URLs, tarballs or local paths instead of the registry.
//!
//! Every installed package's install hooks and native builds are reported (each runs at
//! install); `bin`, bundled and non-registry dependencies only for the project's own manifest
//! and the packages at the top of `node_modules`, where the project chose them.

use std::path::Path;

use serde_json::Value;
use warden_events::{Category, Finding, Severity};

use super::{finding, installed};

const HOOKS: [&str; 3] = ["preinstall", "install", "postinstall"];

/// A dependency spec that does not come from the registry, and what it is.
pub fn non_registry(spec: &str) -> Option<&'static str> {
    let s = spec.trim();
    if s.starts_with("git")
        || s.starts_with("github:")
        || s.starts_with("gitlab:")
        || s.starts_with("bitbucket:")
    {
        Some("git")
    } else if s.starts_with("http://") || s.starts_with("https://") {
        Some("URL")
    } else if s.starts_with("file:")
        || s.starts_with("link:")
        || s.starts_with('.')
        || s.starts_with('/')
    {
        Some("local path")
    } else if !s.starts_with("npm:") && s.contains('/') && !s.contains(' ') {
        Some("GitHub shorthand")
    } else {
        None
    }
}

/// Whether `rel` is the project's own manifest or a top-level installed package's.
fn chosen(rel: &str) -> bool {
    !installed(rel) || {
        let parts: Vec<&str> = rel.split('/').collect();
        parts.iter().filter(|p| **p == "node_modules").count() == 1
    }
}

/// What a `package.json` asks for.
pub fn manifest(rel: &str, path: &Path) -> Vec<Finding> {
    let Ok(text) = crate::inventory::text(path) else {
        return Vec::new();
    };
    let Ok(v) = serde_json::from_str::<Value>(&text) else {
        return Vec::new();
    };
    let is_installed = installed(rel);
    // An installed package's own manifest sits at `node_modules/[@scope/]DIR/package.json`,
    // whatever name it declares (an alias, `"helper": "npm:evil@1"`, installs `evil` as
    // `helper`): anything deeper is an inner file, not a package.
    if is_installed && crate::inventory::npm::installed_name(rel).is_none() {
        return Vec::new();
    }
    let who = v
        .get("name")
        .and_then(Value::as_str)
        .map(|n| format!("{} ", crate::report::clip(n, 100)))
        .unwrap_or_default();
    let mut out = Vec::new();
    let scripts = v.get("scripts").and_then(Value::as_object);
    let hooks: Vec<&str> = if is_installed {
        HOOKS.to_vec()
    } else {
        vec!["preinstall", "install", "postinstall", "prepare"]
    };
    for hook in hooks {
        if let Some(cmd) = scripts.and_then(|s| s.get(hook)).and_then(Value::as_str) {
            out.push(finding(
                Category::InstallScript,
                "npm-lifecycle-script",
                Severity::Low,
                rel,
                format!(
                    "{who}runs `{}` at {hook}",
                    crate::report::clip(cmd, 200)
                ),
                "Install scripts run with the installing user's rights: read the script, or install with --ignore-scripts and detonate the package to see what it does.",
            ));
        }
    }
    if v.get("gypfile").and_then(Value::as_bool) == Some(true) {
        out.push(finding(
            Category::ManifestCapability,
            "native-addon",
            Severity::Low,
            rel,
            format!("{who}builds a native addon at install (gypfile)"),
            "Native code is outside what a JavaScript review sees; check where it comes from.",
        ));
    }
    if !chosen(rel) {
        return out;
    }
    match v.get("bin") {
        Some(Value::String(b)) => out.push(bin(rel, &who, b)),
        Some(Value::Object(m)) => {
            let names: Vec<&String> = m.keys().collect();
            out.push(bin(rel, &who, &format!("{names:?}")));
        }
        _ => {}
    }
    for key in ["bundledDependencies", "bundleDependencies"] {
        if let Some(list) = v
            .get(key)
            .and_then(Value::as_array)
            .filter(|l| !l.is_empty())
        {
            out.push(finding(
                Category::ManifestCapability,
                "bundled-dependencies",
                Severity::Low,
                rel,
                format!(
                    "{who}ships {} bundled dependencies inside its tarball",
                    list.len()
                ),
                "Bundled code is not pinned by any lock file; it is whatever the author packed.",
            ));
        }
    }
    // An installed package's development dependencies were never installed.
    let sections: &[&str] = if is_installed {
        &["dependencies", "optionalDependencies"]
    } else {
        &["dependencies", "optionalDependencies", "devDependencies"]
    };
    for section in sections {
        let Some(deps) = v.get(section).and_then(Value::as_object) else {
            continue;
        };
        for (name, spec) in deps {
            let spec = spec.as_str().unwrap_or("");
            if let Some(kind) = non_registry(spec) {
                out.push(finding(
                    Category::ManifestCapability,
                    "non-registry-dependency",
                    Severity::Low,
                    rel,
                    format!(
                        "{who}depends on {} from a {kind}: {}",
                        crate::report::clip(name, 100),
                        crate::report::clip(spec, 200)
                    ),
                    "A dependency from git, a URL or a path bypasses the registry and its advisories; pin it to a registry release.",
                ));
            }
        }
    }
    out
}

fn bin(rel: &str, who: &str, names: &str) -> Finding {
    finding(
        Category::ManifestCapability,
        "bin-entry",
        Severity::Info,
        rel,
        format!(
            "{who}puts programs on PATH: {}",
            crate::report::clip(names, 200)
        ),
        "Programs on PATH can shadow others; check their names.",
    )
}

/// A `binding.gyp`: a native build at install.
pub fn gyp(rel: &str) -> Finding {
    finding(
        Category::ManifestCapability,
        "native-addon",
        Severity::Low,
        rel,
        "a native addon is built at install (binding.gyp)".into(),
        "Native code is outside what a JavaScript review sees; check where it comes from.",
    )
}

/// A prebuilt `.node` binary.
pub fn prebuilt(rel: &str) -> Finding {
    finding(
        Category::ManifestCapability,
        "native-prebuilt",
        Severity::Low,
        rel,
        "ships a prebuilt native binary (.node)".into(),
        "A prebuilt binary cannot be reviewed as source; check that it comes from the package's own release.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_specs_are_not_flagged() {
        assert_eq!(non_registry("^1.2.3"), None);
        assert_eq!(non_registry("npm:other@1"), None);
        assert_eq!(non_registry("latest"), None);
        assert_eq!(non_registry("github:a/b"), Some("git"));
        assert_eq!(non_registry("git+https://x/y.git"), Some("git"));
        assert_eq!(non_registry("https://x/y.tgz"), Some("URL"));
        assert_eq!(non_registry("file:../x"), Some("local path"));
        assert_eq!(non_registry("stevemao/left-pad"), Some("GitHub shorthand"));
    }
}
