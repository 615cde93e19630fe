//! The fixed vocabulary of events and findings.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What happened. Serialised as the dotted names used in reports and rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum EventKind {
    /// The sandbox started.
    #[serde(rename = "sandbox.started")]
    SandboxStarted,
    /// The sandbox's tree ended.
    #[serde(rename = "sandbox.exited")]
    SandboxExited,
    /// A limit was hit.
    #[serde(rename = "sandbox.limit_hit")]
    SandboxLimitHit,
    /// The sandbox refused something (seccomp, Landlock).
    #[serde(rename = "sandbox.denied")]
    SandboxDenied,
    /// A process was started (exec).
    #[serde(rename = "process.spawn")]
    ProcessSpawn,
    /// A process ended.
    #[serde(rename = "process.exit")]
    ProcessExit,
    /// A file was opened.
    #[serde(rename = "file.open")]
    FileOpen,
    /// A file was written.
    #[serde(rename = "file.write")]
    FileWrite,
    /// A file was deleted.
    #[serde(rename = "file.delete")]
    FileDelete,
    /// A file was renamed.
    #[serde(rename = "file.rename")]
    FileRename,
    /// A connection was attempted.
    #[serde(rename = "net.connect")]
    NetConnect,
    /// A DNS query was made.
    #[serde(rename = "net.dns")]
    NetDns,
    /// Bytes were sent.
    #[serde(rename = "net.send")]
    NetSend,
    /// A flow seen at the network boundary (any protocol, whatever syscall sent it): its
    /// endpoints, packets and bytes each way.
    #[serde(rename = "net.flow")]
    NetFlow,
    /// A TLS client would not go on with the chamber's certificate (it pins, or trusts only
    /// its own store).
    #[serde(rename = "tls.refused")]
    TlsRefused,
    /// A link was made (`link`, `linkat`, `symlink`, `symlinkat`).
    #[serde(rename = "file.link")]
    FileLink,
    /// An environment variable was read (in-process observation).
    #[serde(rename = "env.read")]
    EnvRead,
    /// A canary showed up where it should not.
    #[serde(rename = "canary.seen")]
    CanarySeen,
    /// An install script ran.
    #[serde(rename = "install.script")]
    InstallScript,
    /// The MCP initialize exchange.
    #[serde(rename = "mcp.initialize")]
    McpInitialize,
    /// A tools/list result.
    #[serde(rename = "mcp.tool_list")]
    McpToolList,
    /// A tool call.
    #[serde(rename = "mcp.tool_call")]
    McpToolCall,
    /// Tool metadata changed during the session.
    #[serde(rename = "mcp.metadata_changed")]
    McpMetadataChanged,
    /// Protocol timing.
    #[serde(rename = "mcp.timing")]
    McpTiming,
    /// Text the model will read (a tool result, an error message, a resource's content, a
    /// prompt) in which the harness found orders to the model or credentials.
    #[serde(rename = "mcp.content")]
    McpContent,
    /// A tool's result or side effects changed in kind between repeats of the same call.
    #[serde(rename = "mcp.behaviour_changed")]
    McpBehaviourChanged,
    /// What an HTTP server shows of itself: the addresses it listens on, whether it
    /// accepts a foreign `Origin`/`Host`, whether it asked for credentials.
    #[serde(rename = "mcp.http_surface")]
    McpHttpSurface,
    /// An adversarial payload was sent.
    #[serde(rename = "harness.payload")]
    HarnessPayload,
}

/// One observation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Sequential id within the run, from 1.
    pub id: u64,
    /// Milliseconds since the run began.
    pub t_ms: u64,
    /// What happened.
    pub kind: EventKind,
    /// The process concerned, if any (pid inside the sandbox).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    /// The window it happened in (`install`, `startup`, `tool_call:<id>`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triggered_by: Option<String>,
    /// Kind-specific details.
    pub data: Value,
}

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// For the record.
    Info,
    /// Worth knowing.
    Low,
    /// Worth acting on.
    Medium,
    /// Dangerous.
    High,
    /// Do not run this.
    Critical,
}

/// The fixed categories of findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// A process was started by the server outside its start-up.
    ShellExec,
    /// A secret-bearing path was opened.
    SensitiveFileRead,
    /// A credential was read or used.
    CredentialAccess,
    /// A connection or datagram to anything but loopback was attempted.
    OutboundNetwork,
    /// A DNS query that looks like exfiltration or command and control.
    SuspiciousDns,
    /// Canary or decoy content was seen leaving.
    DataExfiltration,
    /// A write, delete or rename outside the server's own working area.
    FileWriteOutsideWorkdir,
    /// The server exposes tools that mutate or destroy.
    DestructiveTool,
    /// Hidden or manipulative instructions in metadata.
    ToolPoisoning,
    /// Tool metadata changed during the session.
    RugPull,
    /// An adversarial argument made the server run an injected command.
    CommandInjection,
    /// An adversarial argument broke out of a query.
    SqlInjection,
    /// An adversarial argument made an evaluator, a template engine or a deserializer run
    /// code, proven by an oracle (a computed answer, a canary process).
    CodeInjection,
    /// An adversarial path argument reached outside the intended directory.
    PathTraversal,
    /// An adversarial URL made the server connect to the payload's target.
    Ssrf,
    /// A limit was hit.
    ResourceAbuse,
    /// The server was slow to answer initialize or tools/list.
    DelayedInit,
    /// A tool call was slow or timed out.
    SlowTool,
    /// Installing the package ran code.
    InstallScript,
    /// The server attempted something the sandbox denies.
    SandboxViolation,
    /// A dependency matches a known vulnerability.
    VulnerableDependency,
    /// What the model will read gives it orders or hides content from the user.
    PromptInjection,
    /// A tool, resource or error message hands credentials to the model.
    CredentialExposure,
    /// An HTTP server reachable beyond loopback, or unchecked while it offers mutating tools.
    ExposedServer,
    /// A manifest asks for a capability worth knowing before running the package: native
    /// code, programs on `PATH`, dependencies from git or URLs, bundled dependencies, process
    /// or network modules in its source (static: what it may do, not what it did).
    ManifestCapability,
    /// The package's name is one edit away from a popular MCP package's.
    Typosquat,
}

/// What a rule's match proves (DESIGN, *severity by consequence*). A **consequence** is harm
/// shown with its evidence (a planted secret that left, code run by an oracle, persistence
/// written, harmful orders to the model); a **shape** is behaviour that harm often looks like
/// and honest software also shows (a shell at start-up, a read of a listed file, a phrase).
/// Only consequences reach high or critical: the rule loader refuses a shape above medium.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// The match shows harm.
    Consequence,
    /// The match shows a shape that honest servers also have.
    Shape,
}

/// A conclusion drawn from events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The category.
    pub category: Category,
    /// The rule that drew it.
    pub rule: String,
    /// How bad.
    pub severity: Severity,
    /// What was found.
    pub message: String,
    /// What the operator should do about it.
    pub recommendation: String,
    /// The tool it concerns, if any (the first, when it concerns several).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Every tool it concerns, when the same finding came from several.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Ids of the events it rests on.
    pub evidence: Vec<u64>,
    /// Only the LLM phase of a full-mode detonation triggered it: every event it rests on
    /// happened in a tool call the model made.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub llm_only: bool,
    /// Where in the source it was found (static findings: a manifest, a lock file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<Location>,
    /// Whether the rule that drew it matches a consequence or a shape (behavioural findings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basis: Option<Basis>,
    /// For a shape: why it is not higher (the honest software that shows the same).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capped: Option<String>,
}

/// Where a static finding was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Location {
    /// The file, relative to the scanned folder.
    pub file: String,
    /// The component it concerns (its package URL), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<String>,
}

/// The overall judgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    /// Score 0–19.
    Pass,
    /// Score 20–39.
    Low,
    /// Score 40–59.
    Medium,
    /// Score 60–79.
    High,
    /// Score 80–100.
    Critical,
    /// The detonation did not happen (the sandbox, the install, the start-up, `initialize` or
    /// `tools/list` failed, or no tool was exercised): no score can stand for it.
    Inconclusive,
}

impl Verdict {
    /// The verdict for a score (0–100; higher scores are clamped to 100).
    pub fn from_score(score: u32) -> Verdict {
        match score.min(100) {
            0..=19 => Verdict::Pass,
            20..=39 => Verdict::Low,
            40..=59 => Verdict::Medium,
            60..=79 => Verdict::High,
            _ => Verdict::Critical,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_names_match_the_design_vocabulary() {
        assert_eq!(
            serde_json::to_value(EventKind::SandboxLimitHit).unwrap(),
            "sandbox.limit_hit"
        );
        assert_eq!(
            serde_json::to_value(EventKind::McpMetadataChanged).unwrap(),
            "mcp.metadata_changed"
        );
        assert_eq!(
            serde_json::to_value(Category::FileWriteOutsideWorkdir).unwrap(),
            "file_write_outside_workdir"
        );
        assert_eq!(serde_json::to_value(Category::Ssrf).unwrap(), "ssrf");
        assert_eq!(serde_json::to_value(Verdict::Pass).unwrap(), "PASS");
        assert_eq!(
            serde_json::to_value(Verdict::Inconclusive).unwrap(),
            "INCONCLUSIVE"
        );
        assert_eq!(
            serde_json::to_value(Severity::Critical).unwrap(),
            "critical"
        );
        let e: Event = serde_json::from_value(json!({
            "id": 3, "t_ms": 12, "kind": "net.dns", "data": { "name": "x.invalid" }
        }))
        .unwrap();
        assert_eq!(e.kind, EventKind::NetDns);
        assert_eq!(e.triggered_by, None);
        assert!(serde_json::from_value::<EventKind>(json!("net.teleport")).is_err());
    }

    #[test]
    fn verdict_bands() {
        for (score, v) in [
            (0, Verdict::Pass),
            (19, Verdict::Pass),
            (20, Verdict::Low),
            (39, Verdict::Low),
            (40, Verdict::Medium),
            (60, Verdict::High),
            (79, Verdict::High),
            (80, Verdict::Critical),
            (100, Verdict::Critical),
            (1000, Verdict::Critical),
        ] {
            assert_eq!(Verdict::from_score(score), v, "{score}");
        }
        assert!(Severity::Low < Severity::High);
    }
}
