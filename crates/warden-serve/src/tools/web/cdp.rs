//! A minimal Chrome DevTools Protocol client over `--remote-debugging-pipe` (inside the web
//! worker): the browser reads commands on its fd 3 and writes answers and events on its fd 4,
//! each a JSON document ended by a NUL byte. No TCP port is opened, so nothing else in the
//! sandbox (or outside it) can drive the browser, and the few methods used are stable ones.
//!
//! Guarantees: a message larger than [`MAX_MESSAGE`] ends the session (the browser cannot make
//! the worker buffer without bound); the browser is killed and reaped when the [`Browser`] is
//! dropped, whatever happened.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::OwnedFd;
use std::process::{Child, Stdio};

use command_fds::{CommandFdExt, FdMapping};

use serde_json::{Value, json};
use tokio::sync::mpsc;

/// Largest message read from the browser (a screenshot of a tall page is the largest).
pub const MAX_MESSAGE: u64 = 64 << 20;
/// Bytes of the browser's stderr kept for error messages.
const MAX_STDERR: usize = 8 << 10;

/// A running browser and its DevTools pipe.
#[derive(Debug)]
pub struct Browser {
    child: Child,
    to: std::io::PipeWriter,
    from: mpsc::UnboundedReceiver<Value>,
    stderr: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    next_id: u64,
    /// Events read while waiting for an answer, in order.
    events: VecDeque<Value>,
}

/// A failed DevTools exchange.
#[derive(Debug, thiserror::Error)]
pub enum CdpError {
    /// The browser could not be started.
    #[error("starting the browser: {0}")]
    Start(std::io::Error),
    /// The pipe closed (the browser exited or crashed).
    #[error("the browser closed its DevTools pipe{0}")]
    Closed(String),
    /// The browser answered a command with an error.
    #[error("{method}: {message}")]
    Command {
        /// The method.
        method: String,
        /// The browser's message.
        message: String,
    },
}

impl Browser {
    /// Start `program` with `args` and `--remote-debugging-pipe`.
    pub fn start(program: &str, args: &[String]) -> Result<Browser, CdpError> {
        let (cmd_r, cmd_w) = std::io::pipe().map_err(CdpError::Start)?;
        let (ans_r, ans_w) = std::io::pipe().map_err(CdpError::Start)?;
        let mut command = std::process::Command::new(program);
        command
            .args(args)
            .arg("--remote-debugging-pipe")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        command
            .fd_mappings(vec![
                FdMapping {
                    parent_fd: OwnedFd::from(cmd_r),
                    child_fd: 3,
                },
                FdMapping {
                    parent_fd: OwnedFd::from(ans_w),
                    child_fd: 4,
                },
            ])
            .map_err(|e| CdpError::Start(std::io::Error::other(e.to_string())))?;
        let mut child = command.spawn().map_err(CdpError::Start)?;
        // The child's ends go with the command (the parent must not hold them, or the pipe
        // never reports the browser's exit).
        drop(command);
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        if let Some(mut err) = child.stderr.take() {
            let keep = stderr.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = err.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    if let Ok(mut k) = keep.lock() {
                        let room = MAX_STDERR.saturating_sub(k.len());
                        k.extend_from_slice(&buf[..n.min(room)]);
                    }
                }
            });
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let reader = ans_r;
        std::thread::spawn(move || read_messages(reader, &tx));
        Ok(Browser {
            child,
            to: cmd_w,
            from: rx,
            stderr,
            next_id: 1,
            events: VecDeque::new(),
        })
    }

    /// Send a command without waiting for its answer (the answer is dropped when it comes).
    pub fn send(
        &mut self,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<u64, CdpError> {
        let id = self.next_id;
        self.next_id += 1;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap_or_default();
        bytes.push(0);
        self.to
            .write_all(&bytes)
            .map_err(|e| self.closed(&format!(" ({e})")))?;
        Ok(id)
    }

    /// Send a command and wait for its answer; events that arrive meanwhile are kept for
    /// [`Browser::event`], except those `on_event` handles at once (it returns `true`).
    pub async fn call(
        &mut self,
        session: Option<&str>,
        method: &str,
        params: Value,
        on_event: &mut dyn FnMut(&mut Browser, &Value) -> bool,
    ) -> Result<Value, CdpError> {
        let id = self.send(session, method, params)?;
        loop {
            let msg = self.from.recv().await.ok_or_else(|| self.closed(""))?;
            if msg["id"].as_u64() == Some(id) {
                if let Some(e) = msg.get("error") {
                    return Err(CdpError::Command {
                        method: method.to_owned(),
                        message: e["message"].as_str().unwrap_or("error").to_owned(),
                    });
                }
                return Ok(msg["result"].clone());
            }
            if msg.get("method").is_some() && !on_event(self, &msg) {
                self.events.push_back(msg);
            }
        }
    }

    /// The next event (answers to fire-and-forget commands are skipped).
    pub async fn event(&mut self) -> Result<Value, CdpError> {
        if let Some(e) = self.events.pop_front() {
            return Ok(e);
        }
        loop {
            let msg = self.from.recv().await.ok_or_else(|| self.closed(""))?;
            if msg.get("method").is_some() {
                return Ok(msg);
            }
        }
    }

    fn closed(&self, detail: &str) -> CdpError {
        let err = self.stderr.lock().map(|e| e.clone()).unwrap_or_default();
        let tail = String::from_utf8_lossy(&err);
        let last: Vec<&str> = tail.lines().rev().take(3).collect();
        let why = if last.is_empty() {
            String::new()
        } else {
            format!(
                "; its last words: {}",
                last.into_iter().rev().collect::<Vec<_>>().join(" | ")
            )
        };
        CdpError::Closed(format!("{detail}{why}"))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Read NUL-ended JSON messages until the pipe closes, a message is too large or the receiver
/// is gone.
fn read_messages(from: std::io::PipeReader, tx: &mpsc::UnboundedSender<Value>) {
    let mut r = BufReader::new(from);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match (&mut r).take(MAX_MESSAGE).read_until(0, &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) if buf.last() != Some(&0) => return,
            Ok(_) => {}
        }
        buf.pop();
        let Ok(v) = serde_json::from_slice::<Value>(&buf) else {
            continue;
        };
        if tx.send(v).is_err() {
            return;
        }
    }
}
