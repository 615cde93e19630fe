mod common;
mod escape;
mod jail_api;
mod limits;
mod observe;
mod run_cli;
mod serve;
mod trace;
