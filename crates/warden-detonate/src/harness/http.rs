//! Servers that speak Streamable HTTP (or legacy HTTP+SSE, [`super::sse`]) instead of stdio: the server still runs in the jail
//! (same policy, trace, decoys, windows); the harness reaches its port *inside the jail's
//! network namespace* through a [`Forwarder`]: a loopback listener on the host whose every
//! connection is opened from a thread that joined the jail's network namespace, then copied
//! both ways. Nothing in the jail can reach the host through it: connections only go in.
//!
//! Guarantees: the forwarder listens on 127.0.0.1 only, accepts at most [`MAX_CONNECTIONS`]
//! at once, and stops with the session; a server that never opens its port within the
//! start-up budget is a session that did not happen (`INCONCLUSIVE`), never a pass.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Most connections forwarded at once.
pub const MAX_CONNECTIONS: usize = 64;

/// Where the server listens inside the jail, and how it speaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpTarget {
    /// Its port (inside the jail's network namespace).
    pub port: u16,
    /// The MCP endpoint's path (`/mcp`; the event stream's, `/sse`, for legacy SSE).
    pub path: String,
    /// Legacy HTTP+SSE (2024-11-05) instead of Streamable HTTP.
    pub sse: bool,
}

impl HttpTarget {
    /// As the report's `harness.transport` shows it.
    pub fn describe(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": if self.sse { "sse" } else { "http" },
            "port": self.port,
            "path": self.path,
        })
    }
}

/// The jail's init: the supervisor's child that lives in another network namespace.
pub fn init_of(supervisor: u32) -> Option<u32> {
    let ours = std::fs::read_link("/proc/self/ns/net").ok()?;
    let tasks = std::fs::read_dir(format!("/proc/{supervisor}/task")).ok()?;
    for t in tasks.flatten() {
        let Ok(children) = std::fs::read_to_string(t.path().join("children")) else {
            continue;
        };
        for pid in children
            .split_whitespace()
            .filter_map(|p| p.parse::<u32>().ok())
        {
            if std::fs::read_link(format!("/proc/{pid}/ns/net")).is_ok_and(|ns| ns != ours) {
                return Some(pid);
            }
        }
    }
    None
}

/// A TCP connection to `port` on the jail's loopback, opened from a thread that joined the
/// jail's network namespace (the socket stays in that namespace for its whole life).
fn connect_inside(netns: &Arc<File>, port: u16, timeout: Duration) -> std::io::Result<TcpStream> {
    let netns = Arc::clone(netns);
    std::thread::spawn(move || {
        nix::sched::setns(&*netns, nix::sched::CloneFlags::CLONE_NEWNET)
            .map_err(std::io::Error::from)?;
        TcpStream::connect_timeout(&SocketAddr::from(([127, 0, 0, 1], port)), timeout)
    })
    .join()
    .unwrap_or_else(|_| Err(std::io::Error::other("the connecting thread panicked")))
}

/// A loopback listener on the host forwarding every connection into the jail.
#[derive(Debug)]
pub struct Forwarder {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    netns: Arc<File>,
    port: u16,
}

impl Forwarder {
    /// Forward to `port` in the network namespace of process `init`.
    pub fn start(init: u32, port: u16) -> std::io::Result<Forwarder> {
        let netns = Arc::new(File::open(format!("/proc/{init}/ns/net"))?);
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let live = Arc::new(AtomicUsize::new(0));
        let (ns, flag) = (Arc::clone(&netns), Arc::clone(&stop));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if flag.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(outside) = conn else { continue };
                if live.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
                    continue; // dropped: the client sees a reset
                }
                let Ok(inside) = connect_inside(&ns, port, Duration::from_secs(5)) else {
                    continue;
                };
                live.fetch_add(1, Ordering::Relaxed);
                let live = Arc::clone(&live);
                std::thread::spawn(move || {
                    splice(outside, inside);
                    live.fetch_sub(1, Ordering::Relaxed);
                });
            }
        });
        Ok(Forwarder {
            addr,
            stop,
            netns,
            port,
        })
    }

    /// The host address to connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Wait until the server accepts connections on its port, at most until `deadline`.
    pub fn wait_listening(&self, deadline: Instant) -> bool {
        loop {
            if connect_inside(&self.netns, self.port, Duration::from_millis(500)).is_ok() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}

/// Copy both ways until either side closes.
fn splice(a: TcpStream, b: TcpStream) {
    let (Ok(a2), Ok(b2)) = (a.try_clone(), b.try_clone()) else {
        return;
    };
    let one = std::thread::spawn(move || copy(a, b2));
    copy(b, a2);
    let _ = one.join();
}

fn copy(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = [0u8; 16 << 10];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

/// The addresses a LISTEN socket on `port` is bound to in the network namespace of `init`
/// (from its `/proc/PID/net/tcp` and `tcp6`): `0.0.0.0` or `::` means every interface.
pub fn listening(init: u32, port: u16) -> Vec<String> {
    let mut out = Vec::new();
    for (file, v6) in [("tcp", false), ("tcp6", true)] {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{init}/net/{file}")) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            // sl local_address rem_address st …; state 0A is LISTEN.
            let (Some(local), Some("0A")) = (cols.get(1), cols.get(3).copied()) else {
                continue;
            };
            let Some((addr, p)) = local.split_once(':') else {
                continue;
            };
            if u16::from_str_radix(p, 16).ok() != Some(port) {
                continue;
            }
            out.push(address(addr, v6));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// A `/proc/net/tcp` address (little-endian 32-bit words) as text.
fn address(hex: &str, v6: bool) -> String {
    let words: Vec<u32> = (0..hex.len() / 8)
        .filter_map(|i| u32::from_str_radix(&hex[i * 8..i * 8 + 8], 16).ok())
        .collect();
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    if v6 {
        let mut b = [0u8; 16];
        b.copy_from_slice(&bytes[..16.min(bytes.len())]);
        std::net::Ipv6Addr::from(b).to_string()
    } else {
        let mut b = [0u8; 4];
        b.copy_from_slice(&bytes[..4.min(bytes.len())]);
        std::net::Ipv4Addr::from(b).to_string()
    }
}

/// Whether every address is a wildcard (reachable from any interface).
pub fn wildcard(addresses: &[String]) -> bool {
    addresses.iter().any(|a| a == "0.0.0.0" || a == "::")
}

/// The status a DNS-rebinding request gets: an `initialize` POST whose `Host` and `Origin`
/// name a foreign site, as a browser tricked by a rebinding domain would send it. A 2xx means
/// the server does not check them.
pub fn foreign_origin_status(forwarder: SocketAddr, port: u16, path: &str) -> Option<u16> {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"warden-rebinding-probe","version":"0"}}}"#;
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: rebind.invalid:{port}\r\nOrigin: http://rebind.invalid\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut s = TcpStream::connect_timeout(&forwarder, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(request.as_bytes()).ok()?;
    let mut head = [0u8; 64];
    let n = s.read(&mut head).ok()?;
    let line = String::from_utf8_lossy(&head[..n]);
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_net_addresses() {
        assert_eq!(address("0100007F", false), "127.0.0.1");
        assert_eq!(address("00000000", false), "0.0.0.0");
        assert_eq!(address("00000000000000000000000001000000", true), "::1");
        assert_eq!(address("00000000000000000000000000000000", true), "::");
        assert!(wildcard(&["0.0.0.0".into()]));
        assert!(!wildcard(&["127.0.0.1".into(), "::1".into()]));
    }
}
