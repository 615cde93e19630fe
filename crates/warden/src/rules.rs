//! `warden rules list|validate|test`.

use std::io::BufRead;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow};

use crate::cli::{RulesAction, RulesArgs};

/// Run it; 1 when validation fails or a tested rule finds nothing.
pub fn main(args: RulesArgs) -> ExitCode {
    match rules(args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("warden rules: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn rules(args: RulesArgs) -> Result<bool> {
    match args.action {
        RulesAction::List { rules } => {
            let set = warden_rules::ruleset(&rules).map_err(|e| anyhow!("{e}"))?;
            for r in &set {
                let cat = serde_json::to_value(r.rule.category)?;
                let sev = serde_json::to_value(r.rule.severity)?;
                println!(
                    "{:<26} {:<9} {:<27} {}",
                    r.rule.id,
                    sev.as_str().unwrap_or("?"),
                    cat.as_str().unwrap_or("?"),
                    r.rule.recommendation.chars().take(60).collect::<String>()
                );
            }
            Ok(true)
        }
        RulesAction::Validate { dir } => match warden_rules::load_dir(&dir) {
            Ok(set) => {
                println!("{}: {} rules, all valid", dir.display(), set.len());
                Ok(true)
            }
            Err(e) => {
                eprintln!("{e}");
                Ok(false)
            }
        },
        RulesAction::Test {
            rule,
            events,
            rules,
        } => {
            let set = warden_rules::ruleset(&rules).map_err(|e| anyhow!("{e}"))?;
            let chosen = match set.into_iter().find(|r| r.rule.id == rule) {
                Some(r) => r,
                None => {
                    let text = std::fs::read_to_string(&rule).with_context(|| {
                        format!("{rule:?} is neither a rule id nor a rule file")
                    })?;
                    warden_rules::parse(&rule, &text).map_err(|e| anyhow!("{e}"))?
                }
            };
            let file =
                std::fs::File::open(&events).with_context(|| format!("{}", events.display()))?;
            let mut list = Vec::new();
            for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
                let line = line?;
                let v: serde_json::Value = serde_json::from_str(&line)
                    .with_context(|| format!("{}:{}: not JSON", events.display(), n + 1))?;
                // Control lines (canaries, acknowledgements) are not events.
                if v.get("kind").is_some() {
                    list.push(serde_json::from_value(v).with_context(|| {
                        format!("{}:{}: not an event", events.display(), n + 1)
                    })?);
                }
            }
            let findings = warden_rules::evaluate(&[chosen], &list, &|_| None);
            for f in &findings {
                println!("{}", serde_json::to_string(f)?);
            }
            Ok(!findings.is_empty())
        }
    }
}
