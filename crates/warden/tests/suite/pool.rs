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
