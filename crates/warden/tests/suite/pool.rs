//! The warm sandbox pool of `warden serve`, through the official MCP Python SDK: a call's
//! leftovers never reach the next call, a prepared sandbox serves only its own session's
//! policy, the call's limits and programs travel with it, and the pool can be turned off.

use std::net::TcpStream;
use std::process::{Command, Stdio};

use super::common::*;

/// Run `fixtures/mcp/pool_client.py`; it must pass at least `min` checks and fail none.
fn assert_client(args: &[&str], min: usize) {
    assert_sdk_script("pool_client.py", args, min);
}

fn config(text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, text).unwrap();
    let p = path.display().to_string();
    (dir, p)
}

#[test]
fn a_pooled_call_sees_nothing_a_previous_call_left() {
    let (_dir, cfg) = config("[pool]\nsize = 2\n");
    assert_client(&["--warden", warden_bin(), "--config", &cfg], 10);
}

#[test]
fn the_pool_can_be_turned_off() {
    let (_dir, cfg) = config("[pool]\nsize = 0\n");
    assert_client(&["--warden", warden_bin(), "--config", &cfg, "--off"], 3);
}

#[test]
fn a_sessions_prepared_sandboxes_never_serve_another_session() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut server = Command::new(warden_bin())
        .args(["serve", "--http", &addr])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(eventually(10, || TcpStream::connect(&addr).is_ok()));
    let helper = server.id();
    assert_client(&["--url", &format!("http://{addr}/mcp")], 4);
    // The sessions are over: their prepared sandboxes are gone with them (none is left
    // waiting under the server).
    let children = || {
        std::fs::read_to_string(format!("/proc/{helper}/task/{helper}/children"))
            .unwrap_or_default()
            .split_whitespace()
            .count()
    };
    assert!(
        eventually(10, || children() == 0),
        "{} processes still under the server",
        children()
    );
    let _ = server.kill();
    let _ = server.wait();
}

/// A command that brings no time limits of its own runs under its call's policy, not under the
/// limits the sandbox was prepared with (the previous call's: the pool's key leaves them out).
#[test]
fn a_prepared_sandbox_takes_the_calls_own_limits() {
    use warden_jail::warm::Command as JailCommand;
    use warden_jail::{Jail, Policy};
    use warden_serve::pool::Pool;
    let pool = Pool::new(
        Jail::with_helper(warden_bin()),
        warden_serve::config::PoolFile::default(),
    );
    let cmd = |argv: &[&str]| JailCommand {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        ..JailCommand::default()
    };
    let mut p = Policy::default();
    p.limits.wall_time_ms = 300;
    let (run, refill) = pool.start(&p, &cmd(&["true"]), Some("s"));
    run.unwrap().wait().unwrap();
    drop(refill);
    // The replacement, prepared with this call's 300 ms.
    let t = std::time::Instant::now();
    while pool.report()["waiting"] != 1 {
        assert!(t.elapsed().as_secs() < 20, "{}", pool.report());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    p.limits.wall_time_ms = 10_000;
    let (run, _refill) = pool.start(&p, &cmd(&["sleep", "1"]), Some("s"));
    let o = run.unwrap().wait().unwrap();
    assert_eq!(pool.report()["hits"], 1, "{}", pool.report());
    assert_eq!(o.limit_hit, None, "{o:?}");
    assert_eq!(o.exit_code, Some(0));
}
