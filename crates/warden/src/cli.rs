//! Command-line syntax. Values are parsed raw here and validated into a `Policy` in `run`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Warden: one native Linux sandbox for AI agents and MCP servers.
#[derive(Debug, Parser)]
#[command(name = "warden", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command inside the sandbox.
    Run(Box<RunArgs>),
    /// Serve MCP tools that run inside the sandbox (stdio by default, or Streamable HTTP).
    Serve(ServeArgs),
    /// Judge an untrusted MCP server by what it does: run it in the sandbox with decoys,
    /// exercise every tool, report the evidence.
    Detonate(Box<DetonateArgs>),
    /// List, validate and test detection rules.
    Rules(RulesArgs),
    /// Read what an MCP server is made of without running it: inventory, known
    /// vulnerabilities (OSV), manifest capabilities, typosquat hints; an SBOM on request.
    Scan(ScanArgs),
    /// Detonate every target of a list, N at once, with resume, shards and a merged summary.
    Sweep(SweepArgs),
    /// Run one MCP server for a real client inside the sandbox, for as long as the client keeps
    /// it: stdio passed through, decoys and the tracer on, findings judged live and acted on.
    Wrap(WrapArgs),
    /// Judge every MCP server this machine's agent clients are configured with (Claude,
    /// Cursor, Windsurf, VS Code, Continue, Zed, Gemini CLI, Codex), each in the chamber,
    /// never on the host; pin their tools and report what changed since.
    Audit(AuditArgs),
}

/// `warden wrap [OPTIONS] -- CMD [ARGS...]`.
#[derive(Debug, Args)]
pub struct WrapArgs {
    /// What a finding does, from a severity on: SEVERITY=ACTION, ACTION one of `block` (the
    /// call it came from is answered with an error; the server lives), `kill` (the same, then
    /// the server ends) or `alert` (reported only).
    #[arg(
        long = "on",
        value_name = "SEVERITY=ACTION",
        default_value = "high=block"
    )]
    pub on: String,
    /// The audit log, JSON lines, appended (default: $XDG_STATE_HOME/warden/wrap.jsonl, else
    /// ~/.local/state/warden/wrap.jsonl).
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// A host folder mounted read-write at /workspace, the server's working directory.
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Let the server reach this host name for real (repeatable; `api.github.com`,
    /// `*.example.org`); everything else lands on the capture sink.
    #[arg(long, value_name = "HOST[:PORT]")]
    pub egress: Vec<String>,
    /// Extra environment variable for the server (K=V, repeatable).
    #[arg(long, value_name = "K=V")]
    pub env: Vec<String>,
    /// Pass this variable of wrap's own environment to the server (repeatable): how a client's
    /// configured keys reach a wrapped server without appearing on a command line.
    #[arg(long = "pass-env", value_name = "NAME")]
    pub pass_env: Vec<String>,
    /// A directory of YAML rules that override (by id) and extend the built-in rules.
    #[arg(long, value_name = "DIR")]
    pub rules: Vec<PathBuf>,
    /// The server's start command.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `warden audit [--config FILE]... [OPTIONS] [-- DETONATE-OPTIONS...]`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Read exactly these configuration files (repeatable) instead of looking in the home and
    /// the project; each is read by its name (`.cursor/mcp.json`, `.codex/config.toml`…), else
    /// as a file of `mcpServers`.
    #[arg(long = "config", value_name = "FILE")]
    pub configs: Vec<PathBuf>,
    /// The home folder whose clients are audited (default: $HOME).
    #[arg(long, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// The project whose own configurations (.mcp.json, .vscode/mcp.json, .cursor/mcp.json…)
    /// are audited too (default: the current folder).
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// Report format: a table, JSON (warden.audit/v1, with each server's whole report),
    /// SARIF 2.1.0 (one run per server) or one HTML page.
    #[arg(long, value_name = "FORMAT", default_value = "table", value_parser = ["table", "json", "sarif", "html"])]
    pub output: String,
    /// Write the report here instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Exit with status 1 when a server's verdict reaches this severity.
    #[arg(long, value_name = "SEVERITY", value_parser = ["low", "medium", "high", "critical"])]
    pub fail_on: Option<String>,
    /// Detonations at once (default: the CPU count, as memory allows).
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// The pins file (default: $XDG_STATE_HOME/warden/pins.json, else
    /// ~/.local/state/warden/pins.json).
    #[arg(long, value_name = "FILE")]
    pub pins: Option<PathBuf>,
    /// Accept what changed: pin every server's tools as they are now.
    #[arg(long)]
    pub update_pins: bool,
    /// Keep the detonations' reports and results in this folder (a sweep's layout).
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,
    /// Kill a detonation still running after this long (its own budgets end it first).
    #[arg(long, value_name = "DURATION", default_value = "20m")]
    pub target_timeout: String,
    /// Judge nothing: write beside each JSON configuration found a copy (FILE.wrapped) whose
    /// local servers start through `warden wrap -- COMMAND`.
    #[arg(long)]
    pub wrap: bool,
    /// With --wrap: replace each configuration in place instead (the original is kept as
    /// FILE.bak; comments in it are not kept).
    #[arg(long, requires = "wrap")]
    pub write: bool,
    /// Options for every `warden detonate` (after `--`).
    #[arg(last = true, value_name = "DETONATE-OPTIONS")]
    pub detonate: Vec<String>,
}

/// `warden sweep LIST --out DIR [...] [-- DETONATE-OPTIONS...]`, or `warden sweep merge`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SweepArgs {
    #[command(subcommand)]
    pub merge: Option<SweepMerge>,
    /// The list: one target per line (`npm:…`, `pypi:…`, `github:…`, a folder), or a JSON
    /// object with `target`, `command`, `transport`, `env`; `#` comments.
    #[arg(value_name = "LIST")]
    pub list: Option<PathBuf>,
    /// The output folder: results.jsonl, reports/, summary.json, index.html.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Detonations at once (default: the number of cores).
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Only this shard of the list: I/N takes the targets whose stable hash is I modulo N
    /// (I from 0, as Kubernetes' JOB_COMPLETION_INDEX).
    #[arg(long, value_name = "I/N")]
    pub shard: Option<String>,
    /// Continue a sweep in --out: skip targets already recorded at the same version.
    #[arg(long)]
    pub resume: bool,
    /// Also write these report formats per target (json is always written).
    #[arg(long, value_name = "FORMAT", value_delimiter = ',', value_parser = ["sarif", "html"])]
    pub formats: Vec<String>,
    /// Memory for all sandboxes together (e.g. 8G; default: the memory available now); fewer
    /// detonations run at once when N would not fit.
    #[arg(long, value_name = "SIZE")]
    pub memory_total: Option<String>,
    /// Kill a detonation still running after this long (its own budgets end it first).
    #[arg(long, value_name = "DURATION", default_value = "20m")]
    pub target_timeout: String,
    /// Options for every `warden detonate` (after `--`: --timeout, --osv-db, --no-payloads…).
    #[arg(last = true, value_name = "DETONATE-OPTIONS")]
    pub detonate: Vec<String>,
}

/// `warden sweep merge DIR... --out DIR`
#[derive(Debug, Subcommand)]
pub enum SweepMerge {
    /// Merge shard outputs into one results.jsonl, summary.json and index.html.
    Merge {
        /// The shards' output folders.
        #[arg(value_name = "DIR", required = true)]
        dirs: Vec<PathBuf>,
        /// The merged output folder.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
}

/// `warden scan TARGET ...`
#[derive(Debug, Args)]
pub struct ScanArgs {
    /// A local file or folder, `npm:NAME[@VERSION]`, `pypi:NAME[@VERSION]` or
    /// `github:OWNER/REPO[@REF]` (fetched without running any of its code).
    #[arg(value_name = "TARGET")]
    pub target: String,
    /// Known vulnerabilities from this offline folder, in osv-scanner's layout
    /// (`DIR/PyPI/all.zip`, `DIR/npm/all.zip`); used instead of the API.
    #[arg(long, value_name = "DIR", env = "WARDEN_OSV_DB")]
    pub osv_db: Option<PathBuf>,
    /// Known vulnerabilities from this OSV-compatible API (`/v1/querybatch`).
    #[arg(long, value_name = "URL", default_value = "https://api.osv.dev")]
    pub osv_url: String,
    /// Report format: a terminal summary, JSON (warden.scan/v1), SARIF 2.1.0, or a
    /// CycloneDX 1.6 SBOM.
    #[arg(long, value_name = "FORMAT", default_value = "timeline", value_parser = ["timeline", "json", "sarif", "cyclonedx"])]
    pub output: String,
    /// Write the report here instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Exit with status 1 when a finding reaches this severity.
    #[arg(long, value_name = "SEVERITY", value_parser = ["info", "low", "medium", "high", "critical"])]
    pub fail_on: Option<String>,
    /// Exit 0 (or 1 under --fail-on) even when no component's vulnerabilities could be
    /// checked, or when --fail-on gates a scan that left files unread, instead of 3.
    #[arg(long)]
    pub allow_unknown: bool,
}

/// `warden detonate [TARGET] [--mcp-command CMD] ...`
#[derive(Debug, Args)]
pub struct DetonateArgs {
    /// A local file or folder (its start command is worked out from its manifest),
    /// `npm:NAME[@VERSION]`, `pypi:NAME[@VERSION]` or `github:OWNER/REPO[@REF]`.
    #[arg(value_name = "TARGET")]
    pub target: Option<String>,
    /// The server's start command, split as a shell would. With an npm:, pypi: or github:
    /// TARGET: how to start the installed package (its programs are on PATH).
    #[arg(long, value_name = "CMD")]
    pub mcp_command: Option<String>,
    /// One more argument for the start command (repeatable; without --mcp-command the first
    /// is the program).
    #[arg(long = "mcp-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub mcp_args: Vec<String>,
    /// With an npm:, pypi: or github: TARGET and no --mcp-command: one more argument after
    /// the package's own start command (repeatable), as `npx -y PACKAGE ARG…` passes it.
    #[arg(long = "server-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub server_args: Vec<String>,
    /// Report format: a terminal timeline, JSON (warden.report/v1), SARIF 2.1.0, or one
    /// self-contained HTML page.
    #[arg(long, value_name = "FORMAT", default_value = "timeline", value_parser = ["timeline", "json", "sarif", "html"])]
    pub output: String,
    /// Write the report here instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Exit with status 1 when a finding reaches this severity.
    #[arg(long, value_name = "SEVERITY", value_parser = ["low", "medium", "high", "critical"])]
    pub fail_on: Option<String>,
    /// Exit 0 (or 1 under --fail-on) even when the verdict is INCONCLUSIVE (the sandbox, the
    /// install or the server's start failed, or no tool was exercised), instead of 3.
    #[arg(long)]
    pub allow_inconclusive: bool,
    /// A directory of YAML rules that override (by id) and extend the built-in rules.
    #[arg(long, value_name = "DIR")]
    pub rules: Vec<PathBuf>,
    /// Time budget for the whole session (e.g. 120s, 5m).
    #[arg(long, value_name = "DURATION", default_value = "120s")]
    pub timeout: String,
    /// Time for one request to the server.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub call_timeout: String,
    /// Time for the install phase in the sandbox (lifecycle scripts, pip install, builds).
    #[arg(long, value_name = "DURATION", default_value = "300s")]
    pub install_timeout: String,
    /// Check the server's dependencies for known vulnerabilities in this offline folder, in
    /// osv-scanner's layout (`DIR/PyPI/all.zip`, `DIR/npm/all.zip`).
    #[arg(long, value_name = "DIR", env = "WARDEN_OSV_DB")]
    pub osv_db: Option<PathBuf>,
    /// Check them with this OSV-compatible API (e.g. https://api.osv.dev). Without this or
    /// --osv-db, a detonation asks no one and reports them as unknown.
    #[arg(long, value_name = "URL")]
    pub osv_url: Option<String>,
    /// How the harness talks to the server: stdio (its pipes), http (Streamable HTTP) or sse
    /// (legacy HTTP+SSE), both on --mcp-port inside the jail's network namespace.
    #[arg(long, value_name = "TRANSPORT", default_value = "stdio", value_parser = ["stdio", "http", "sse"])]
    pub mcp_transport: String,
    /// Probe a remote server at this URL (Streamable HTTP) instead of running one: metadata,
    /// benign calls and content checks only; never a PASS (nothing of it ran here).
    #[arg(long, value_name = "URL")]
    pub mcp_url: Option<String>,
    /// With --mcp-url: a request header (repeatable), K=V.
    #[arg(long = "header", value_name = "K=V")]
    pub headers: Vec<String>,
    /// With --mcp-url: send the bearer token in this environment variable.
    #[arg(long, value_name = "NAME")]
    pub bearer_env: Option<String>,
    /// With --mcp-url: send adversarial payloads too (off by default: never attack someone
    /// else's server by accident).
    #[arg(long)]
    pub allow_payloads_remote: bool,
    /// With --mcp-transport http or sse: the port the server listens on inside the jail.
    #[arg(long, value_name = "PORT")]
    pub mcp_port: Option<u16>,
    /// With --mcp-transport http or sse: the MCP endpoint's path (default /mcp for http, the
    /// event stream's /sse for sse).
    #[arg(long, value_name = "PATH")]
    pub mcp_path: Option<String>,
    /// Also write the report in another format (repeatable): FORMAT=FILE, FORMAT one of
    /// json, sarif, html.
    #[arg(long, value_name = "FORMAT=FILE")]
    pub also_output: Vec<String>,
    /// Extra environment variable for the server (K=V, repeatable).
    #[arg(long, value_name = "K=V")]
    pub env: Vec<String>,
    /// A host folder mounted read-write at /workspace, the server's working directory
    /// (default: an empty private one).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Only benign calls (no adversarial payloads).
    #[arg(long)]
    pub no_payloads: bool,
    /// Benign calls of each tool, the first included (1 to 50): a server that turns after N
    /// calls is seen when N is below this. Tools slower than a quarter of --call-timeout are
    /// called once.
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub calls_per_tool: u32,
    /// After the calls, keep the server and everything it started running for this much of
    /// its own time, with its clocks running fast (ten minutes pass in three seconds), so a
    /// theft that waits for a timer or a detached child is seen. 0 turns the dwell off.
    #[arg(long, value_name = "DURATION", default_value = "10m")]
    pub dwell: String,
    /// Offer this machine's Chromium to a server that drives a browser (Playwright, Puppeteer):
    /// named through each one's variables, headless, with room in the jail for it. Without a
    /// path (or `auto`): the first installed of Debian's chromium-headless-shell, chromium and
    /// Google Chrome.
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = "auto")]
    pub browser: Option<PathBuf>,
    /// Write the session's traffic to FILE as pcapng (every packet the server's network
    /// namespace sent or was answered with, raw IP; tshark and Wireshark read it). An existing
    /// regular file is replaced. At most 256 MiB: packets past that are counted, not written.
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// Judge the network by the sink's first bytes only: no packet capture at the boundary and
    /// no TLS opened (for measuring what the boundary costs, or a host whose kernel refuses a
    /// packet socket). Secrets sent by untraced syscalls, inside TLS or split over packets are
    /// then not seen.
    #[arg(long, conflicts_with = "pcap")]
    pub no_boundary: bool,
    /// Inside a container that masks /proc, when no fresh procfs can be made for the sandbox,
    /// bind the container's own /proc read-only instead of failing (weaker: the sandbox then
    /// sees the container's processes and their command lines).
    #[arg(long)]
    pub allow_host_proc: bool,
    /// `fast`: the deterministic harness alone. `full`: a language model (--llm) then drives
    /// the server like a user's agent, with benign and adversarial tasks.
    #[arg(long, value_name = "MODE", default_value = "fast", value_parser = ["fast", "full"])]
    pub mode: String,
    /// Full mode's model: `openai:MODEL` (any OpenAI-compatible /v1/chat/completions with
    /// tools), `anthropic:MODEL` or `ollama:MODEL`.
    #[arg(long, value_name = "PROVIDER:MODEL")]
    pub llm: Option<String>,
    /// The provider's base URL (default: its public API; Ollama: http://127.0.0.1:11434).
    #[arg(long, value_name = "URL")]
    pub llm_url: Option<String>,
    /// The environment variable holding the API key (default: OPENAI_API_KEY or
    /// ANTHROPIC_API_KEY). The key is never logged or written to the report.
    #[arg(long, value_name = "NAME")]
    pub llm_key_env: Option<String>,
    /// Tool calls the model may make in all.
    #[arg(long, value_name = "N", default_value_t = 30)]
    pub llm_budget: u32,
    /// Tokens (prompt and completion) the model may use in all.
    #[arg(long, value_name = "N", default_value_t = 200_000)]
    pub llm_tokens: u64,
    /// Time the model's phase may take, on top of --timeout.
    #[arg(long, value_name = "DURATION", default_value = "300s")]
    pub llm_timeout: String,
}

/// `warden rules list|validate|test`
#[derive(Debug, Args)]
pub struct RulesArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: RulesAction,
}

/// Rule actions.
#[derive(Debug, Subcommand)]
pub enum RulesAction {
    /// List the rules (built-in, and those of --rules directories).
    List {
        /// Extra rule directories.
        #[arg(long, value_name = "DIR")]
        rules: Vec<PathBuf>,
    },
    /// Check every rule file of DIR; errors name the file and line.
    Validate {
        /// The directory.
        dir: PathBuf,
    },
    /// Run one rule over a file of events (JSON lines, as `warden run --trace` writes them).
    Test {
        /// The rule's id (built-in, or from --rules) or a rule file.
        rule: String,
        /// The events.
        events: PathBuf,
        /// Extra rule directories.
        #[arg(long, value_name = "DIR")]
        rules: Vec<PathBuf>,
    },
}

/// `warden serve [--config FILE] [--profile NAME] [--http ADDR]`
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Configuration file (TOML): profiles, limits, audit log, schemas, HTTP settings.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Profile to serve (built in: code, readonly; default: the file's, else code).
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
    /// Serve Streamable HTTP at http://ADDR/mcp instead of stdio (e.g. 127.0.0.1:8787).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<std::net::SocketAddr>,
}

/// `warden run [OPTIONS] -- CMD [ARGS...]`
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Host directory mounted read-write at /workspace (default: a fresh private tmpfs of
    /// --tmp-size, gone when the run ends).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Policy file (TOML); flags override it.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Wall-clock limit, e.g. 30, 2.5, 500ms, 5m.
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// CPU-time limit of the whole tree, e.g. 10, 1m.
    #[arg(long, value_name = "DURATION")]
    pub cpu: Option<String>,
    /// CPU rate of the whole tree in CPUs, e.g. 0.5, 2 (throttled by cgroup v2 `cpu.max`;
    /// default 2).
    #[arg(long, value_name = "CPUS")]
    pub cpus: Option<String>,
    /// Memory limit of the whole tree, e.g. 512M, 2G.
    #[arg(long, value_name = "SIZE")]
    pub memory: Option<String>,
    /// Maximum number of processes and threads.
    #[arg(long, value_name = "N")]
    pub pids: Option<u64>,
    /// Maximum open files per process.
    #[arg(long, value_name = "N")]
    pub nofile: Option<u64>,
    /// Largest file the command may write, e.g. 100M.
    #[arg(long, value_name = "SIZE")]
    pub fsize: Option<String>,
    /// Output kept (or streamed) per stream before the run is ended, e.g. 1M.
    #[arg(long, value_name = "SIZE")]
    pub output_limit: Option<String>,
    /// Size of the private /tmp (and of the default workspace), e.g. 64M.
    #[arg(long, value_name = "SIZE")]
    pub tmp_size: Option<String>,
    /// Environment variable for the command (repeatable); nothing else is inherited.
    #[arg(long = "env", value_name = "K=V")]
    pub env: Vec<String>,
    /// Bind a host path read-only: SRC or SRC:DST (repeatable).
    #[arg(long = "ro-bind", value_name = "SRC[:DST]")]
    pub ro_bind: Vec<String>,
    /// Bind a host path read-write: SRC or SRC:DST (repeatable).
    #[arg(long = "rw-bind", value_name = "SRC[:DST]")]
    pub rw_bind: Vec<String>,
    /// Leave a protected path writable in the workspace and writable binds (relative to each:
    /// `.vscode`, `.git/hooks`; repeatable). Protected by default: .git (pinned; its config,
    /// hooks/, info/ read-only), .gitmodules, .mcp.json, .claude/, .cursor/, .vscode/, .idea/,
    /// .envrc, .env and .env.*, shell start-up files.
    #[arg(long = "allow-protected", value_name = "PATH")]
    pub allow_protected: Vec<String>,
    /// Inside a container that masks /proc, when no fresh procfs can be made for the sandbox,
    /// bind the container's own /proc read-only instead of failing (weaker: the sandbox then
    /// sees the container's processes and their command lines).
    #[arg(long)]
    pub allow_host_proc: bool,
    /// Mount a private tmpfs: DST or DST:SIZE (repeatable).
    #[arg(long = "tmpfs", value_name = "DST[:SIZE]")]
    pub tmpfs: Vec<String>,
    /// Network mode (only `none`: loopback only).
    #[arg(long, value_name = "MODE", default_value = "none")]
    pub net: String,
    /// Print the structured outcome as JSON on stdout (output is captured into it).
    #[arg(long)]
    pub json: bool,
    /// Trace what the command does (processes, files, connections, DNS, data sent, environment
    /// reads, denials) and write the events as JSON lines to FILE (`-`: stderr) as they happen.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<String>,
    /// Plant a decoy home (~/.ssh, ~/.aws, ~/.npmrc, …) and canary credentials in the
    /// environment; report every canary seen leaving (`canary.seen`). Implies tracing (to
    /// stderr unless --trace names a file).
    #[arg(long)]
    pub decoys: bool,
    /// With --decoys: open TLS in the capture network with an authority made for this run and
    /// trusted inside the sandbox, so what a client sends inside TLS is read and searched.
    #[arg(long, requires = "decoys")]
    pub open_tls: bool,
    /// Write every packet of the sandbox's network namespace to FILE as pcapng (implies
    /// tracing). An existing regular file is replaced.
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// How the tracer's DNS stub answers: `fake-ip` (an address that leads to the capture
    /// sink) or `nxdomain`.
    #[arg(long, value_name = "MODE", default_value = "fake-ip", value_parser = ["fake-ip", "nxdomain"])]
    pub dns: String,
    /// Let connections to this host name through for real (`pypi.org`, or `*.example.org` for
    /// the names below it; port 443 unless `:PORT` is given); repeatable. The connection must
    /// name the same host (TLS SNI or HTTP Host); everything else still lands on the capture
    /// sink, and each forwarded connection is recorded. Implies tracing (to stderr unless
    /// --trace names a file).
    #[arg(long, value_name = "HOST[:PORT]")]
    pub egress: Vec<String>,
    /// Let connections to this address or network through, any port (`192.0.2.7`,
    /// `10.20.0.0/24`, `2001:db8::/64`; private ranges allowed, never names); repeatable. A
    /// connect is answered with what the real target answers (open, refused, no answer), so
    /// a port scanner in the jail sees true port states; connects anywhere else fail with
    /// EACCES. Implies tracing.
    #[arg(long, value_name = "ADDR[/PREFIX]")]
    pub target: Vec<String>,
    /// With --target: how long a real connect may take before the port counts as filtered.
    #[arg(long, value_name = "MS", default_value_t = 1500)]
    pub target_connect_ms: u64,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}
