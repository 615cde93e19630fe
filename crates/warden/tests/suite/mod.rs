mod common;
mod escape;
mod jail_api;
mod limits;
mod run_cli;
mod serve;
mod trace;
