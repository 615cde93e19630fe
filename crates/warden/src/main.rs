//! `warden`: a sandbox for AI agents and MCP servers.
//!
//! The binary stays thin: argument parsing, configuration and exit codes live here; the work is
//! in the library crates. Stdout belongs to the command or the report; logs go to stderr.

#![forbid(unsafe_code)]

mod audit;
mod cli;
mod detonate;
mod emit;
mod rules;
mod run;
mod scan;
mod serve;
mod sweep;
mod wrap;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // The jail helper must stay single-threaded and touch nothing else: check it first.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == warden_jail::HELPER_ARG)
    {
        let code = warden_jail::helper_main();
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == warden_serve::tools::validate_worker::WORKER_ARG)
    {
        let code = warden_serve::tools::validate_worker::worker_main();
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == warden_serve::tools::web::worker::WORKER_ARG)
    {
        let code = warden_serve::tools::web::worker::worker_main();
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    let cli = cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("WARDEN_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .without_time()
        .init();
    // Before any thread or jail: where this process's jails get their cgroup v2 groups (it may
    // move into a leaf of its group or a delegated systemd scope).
    if matches!(
        cli.command,
        cli::Command::Run(_)
            | cli::Command::Serve(_)
            | cli::Command::Detonate(_)
            | cli::Command::Sweep(_)
            | cli::Command::Audit(_)
            | cli::Command::Wrap(_)
    ) {
        let how = &warden_jail::arrange_cgroups().how;
        tracing::debug!(cgroup_v2 = %how, "cgroup delegation");
    }
    match cli.command {
        cli::Command::Run(args) => run::main(*args),
        cli::Command::Serve(args) => serve::main(args),
        cli::Command::Detonate(args) => detonate::main(*args),
        cli::Command::Rules(args) => rules::main(args),
        cli::Command::Scan(args) => scan::main(args),
        cli::Command::Sweep(args) => sweep::main(args),
        cli::Command::Audit(args) => audit::main(args),
        cli::Command::Wrap(args) => wrap::main(args),
    }
}
