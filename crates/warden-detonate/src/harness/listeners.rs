//! Which TCP ports the *server's own processes* listen on inside the jail: the evidence that a
//! stdio start speaks HTTP instead.
//!
//! A listening socket in the jail's network namespace is not enough: the capture sink answers
//! a server that dials out by listening on the port it dialled, in that same namespace (an
//! update check or beacon at start-up then looked like the server's HTTP port, and the
//! harness let go of a server that was about to answer on stdio). So a port counts only when
//! a process of the server's tree — the jail's init and its descendants — holds the listening
//! socket (its inode among the process's descriptors).
//!
//! Guarantees: reads `/proc` only; bounded (at most [`MAX_PROCESSES`] processes and
//! [`MAX_FDS`] descriptors in all are looked at); a process that exits meanwhile is skipped.

use std::collections::HashMap;

/// Processes of the server's tree looked at, at most.
const MAX_PROCESSES: usize = 4096;
/// Descriptors looked at per scan, over every process, at most (the scan repeats every
/// 250 ms while stdio is unanswered).
const MAX_FDS: usize = 65_536;

/// A port the server's tree listens on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    /// The port, inside the jail's network namespace.
    pub port: u16,
    /// The process holding the socket (the host's pid).
    pub pid: u32,
    /// Its name (`comm`).
    pub program: String,
}

/// Every `(port, inode)` of a LISTEN socket in a `/proc/net/tcp` or `tcp6` table.
pub fn listen_inodes(table: &str) -> Vec<(u16, u64)> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            // sl local rem st tx:rx tr:when retrnsmt uid timeout inode; state 0A is LISTEN.
            if cols.get(3) != Some(&"0A") {
                return None;
            }
            let port = cols
                .get(1)
                .and_then(|l| l.rsplit_once(':'))
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok())?;
            let inode = cols.get(9)?.parse::<u64>().ok().filter(|i| *i != 0)?;
            Some((port, inode))
        })
        .collect()
}

/// `init` and its descendants (host pids), breadth first, at most [`MAX_PROCESSES`].
fn tree(init: u32) -> Vec<u32> {
    let mut out = vec![init];
    let mut i = 0;
    while i < out.len() && out.len() < MAX_PROCESSES {
        let pid = out[i];
        i += 1;
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Ok(children) = std::fs::read_to_string(t.path().join("children")) else {
                continue;
            };
            for c in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                if out.len() < MAX_PROCESSES && !out.contains(&c) {
                    out.push(c);
                }
            }
        }
    }
    out
}

/// The socket inode a descriptor link names (`socket:[12345]`).
fn socket_inode(link: &std::path::Path) -> Option<u64> {
    let s = link.to_str()?;
    s.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
}

/// The ports the server's tree (the jail's `init` and its descendants) listens on, each with
/// the process that holds it, in port order; sockets held only by others (the capture sink's)
/// are left out.
pub fn of_server(init: u32) -> Vec<Listener> {
    let mut ports: HashMap<u64, u16> = HashMap::new();
    for file in ["tcp", "tcp6"] {
        if let Ok(text) = std::fs::read_to_string(format!("/proc/{init}/net/{file}")) {
            ports.extend(listen_inodes(&text).into_iter().map(|(p, i)| (i, p)));
        }
    }
    if ports.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<Listener> = Vec::new();
    let mut looked = 0usize;
    for pid in tree(init) {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            looked += 1;
            if looked > MAX_FDS {
                break;
            }
            let Some(port) = std::fs::read_link(fd.path())
                .ok()
                .and_then(|l| socket_inode(&l))
                .and_then(|i| ports.get(&i).copied())
            else {
                continue;
            };
            if !out.iter().any(|l| l.port == port) {
                let program = std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .map(|c| c.trim().to_owned())
                    .unwrap_or_default();
                out.push(Listener { port, pid, program });
            }
        }
    }
    out.sort_by_key(|l| l.port);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listening_sockets_and_their_inodes_are_read() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
           0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0\n\
           1: 0100007F:D2F0 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0000000000000000 20 4 30 10 -1\n\
           2: 00000000:01BB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 0 1 0000000000000000 100 0 0 10 0\n";
        // Established connections are not listeners; a socket without an inode is skipped.
        assert_eq!(listen_inodes(table), vec![(8080, 4242)]);
        let v6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
           0: 00000000000000000000000000000000:0BB8 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 777 1 0000000000000000 100 0 0 10 0\n";
        assert_eq!(listen_inodes(v6), vec![(3000, 777)]);
        assert_eq!(
            socket_inode(std::path::Path::new("socket:[4242]")),
            Some(4242)
        );
        assert_eq!(socket_inode(std::path::Path::new("pipe:[4242]")), None);
    }

    /// A listener of this test's own process is found when the tree is this process's, and
    /// not when the tree is another's (the sink's listener, held by the supervisor, is not the
    /// server's).
    #[test]
    fn only_the_trees_own_sockets_count() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let me = std::process::id();
        assert!(
            of_server(me).iter().any(|x| x.port == port && x.pid == me),
            "{:?}",
            of_server(me)
        );
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let other = child.id();
        assert!(
            !of_server(other).iter().any(|x| x.port == port),
            "another tree does not hold it"
        );
        let _ = child.kill();
        let _ = child.wait();
    }
}
