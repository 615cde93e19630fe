//! Warden's detection rules: YAML files with a schema ([`rule`]), validated at load with the
//! file and line of every mistake ([`load`]), and the engine that turns events into findings
//! ([`engine`]). A set of built-in rules is embedded in the binary; a user's rule directory can
//! add rules, replace a built-in rule by id, or switch one off (`disabled: true`).

pub mod engine;
pub mod load;
pub mod rule;

pub use engine::{Compiled, evaluate, render};
pub use load::{BUILTIN, RuleError, builtin, load_dir, parse, ruleset};
pub use rule::{Condition, Correlate, Match, Part, Rule, WindowFilter, Within};
