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
    /// How the tracer's DNS stub answers: `fake-ip` (an address that leads to the capture
    /// sink) or `nxdomain`.
    #[arg(long, value_name = "MODE", default_value = "fake-ip", value_parser = ["fake-ip", "nxdomain"])]
    pub dns: String,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}
