//! The HTTP/1.x requests a client sends on one plaintext connection, found by their framing:
//! each request head (up to its blank line), then its body by `Content-Length` or chunked
//! transfer coding, then the next head. The egress forwarder feeds it every byte the program
//! sends, so a request kept alive behind an allowed one (`Host: other.example`) is refused
//! before the bytes that complete its head are forwarded.
//!
//! Guarantees: pure and bounded (a head longer than [`MAX_HEAD`] or a chunk-size line longer
//! than [`MAX_LINE`] is an error, never buffered further); never panics on any input
//! (property-tested); what it cannot frame is an error, so the caller can close instead of
//! guessing where the next request starts.

use std::fmt;

/// Bytes of one request head, at most (the longest URL the web tools accept, 4 KiB, and
/// headers, with room to spare).
pub const MAX_HEAD: usize = 64 << 10;
/// Bytes of one chunk-size line (and of one trailer line), at most.
pub const MAX_LINE: usize = 1024;

/// Why the stream could not be framed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// A head without its blank line within [`MAX_HEAD`].
    HeadTooLong,
    /// A chunk-size line that is not hex, or too long.
    BadChunk,
    /// A `Content-Length` that is not a number, or two that disagree.
    BadLength,
    /// Bytes that do not start like a request line.
    NotHttp,
    /// A line that does not end in CRLF (a bare LF or CR), an obs-fold line, a header name
    /// with white space, a second Host, or a transfer coding other than `chunked`: shapes on
    /// which servers disagree about where a request ends, refused rather than guessed.
    Ambiguous,
    /// A request line that asks for another host through its target (`GET http://other/`,
    /// `CONNECT`).
    Target,
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FrameError::HeadTooLong => "a request head longer than 64 KiB",
            FrameError::BadChunk => "a chunk size that is not hex",
            FrameError::BadLength => "a Content-Length that is not one number",
            FrameError::NotHttp => "bytes after a request that do not start a request",
            FrameError::Ambiguous => {
                "a request framed ambiguously (bare LF or CR, a folded or spaced header, two Hosts, a transfer coding other than chunked)"
            }
            FrameError::Target => "a request line that names its own host (absolute form or CONNECT)",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Reading a head (what is buffered so far is in `head`).
    Head,
    /// This many body bytes left.
    Body(u64),
    /// Reading a chunk-size line.
    ChunkSize,
    /// This many chunk bytes left.
    Chunk(u64),
    /// The CRLF after a chunk's data (how much of it is read: 0 or 1).
    ChunkEnd(u8),
    /// Reading trailer lines until an empty one.
    Trailer,
}

/// The framing state of one connection's client side.
#[derive(Debug, Clone)]
pub struct Requests {
    state: State,
    /// The head or line being read.
    line: Vec<u8>,
}

impl Default for Requests {
    fn default() -> Self {
        Requests::new()
    }
}

/// The host a head asks for: its request target's authority when the target is in absolute
/// form (servers use that over `Host`), else its `Host` header (the port dropped), else `None`.
/// Strict: every line of the head ends in CRLF, header names are tokens followed at once by
/// `:`, no obs-fold, at most one Host, values trimmed of spaces and tabs only.
fn parse_head(head: &[u8]) -> Result<(Option<String>, State), FrameError> {
    // Every LF is preceded by CR, and every CR followed by LF.
    for (i, b) in head.iter().enumerate() {
        let bad = match b {
            b'\n' => i == 0 || head[i - 1] != b'\r',
            b'\r' => head.get(i + 1) != Some(&b'\n'),
            _ => false,
        };
        if bad {
            return Err(FrameError::Ambiguous);
        }
    }
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n");
    let request_line = lines.next().unwrap_or("");
    let mut parts = request_line.split(' ');
    let method = parts.next().unwrap_or("");
    let target = parts.next().unwrap_or("");
    if method.eq_ignore_ascii_case("CONNECT") {
        return Err(FrameError::Target);
    }
    let authority = target
        .split_once("://")
        .map(|(_, rest)| rest.split(['/', '?', '#']).next().unwrap_or(""))
        .map(|a| a.rsplit_once('@').map_or(a, |(_, h)| h));
    let sp_tab = |c: char| c == ' ' || c == '\t';
    let mut host: Option<String> = None;
    let mut length: Option<u64> = None;
    let mut chunked = false;
    for l in lines.take_while(|l| !l.is_empty()) {
        if l.starts_with(sp_tab) {
            return Err(FrameError::Ambiguous);
        }
        let (k, v) = l.split_once(':').ok_or(FrameError::Ambiguous)?;
        let token = !k.is_empty()
            && k.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !token {
            return Err(FrameError::Ambiguous);
        }
        let v = v.trim_matches(sp_tab);
        if k.eq_ignore_ascii_case("host") {
            if host.is_some() {
                return Err(FrameError::Ambiguous);
            }
            host = Some(strip_port(v).to_owned());
        } else if k.eq_ignore_ascii_case("transfer-encoding") {
            if !v.eq_ignore_ascii_case("chunked") {
                return Err(FrameError::Ambiguous);
            }
            chunked = true;
        } else if k.eq_ignore_ascii_case("content-length") {
            if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
                return Err(FrameError::BadLength);
            }
            let n: u64 = v.parse().map_err(|_| FrameError::BadLength)?;
            if length.is_some_and(|m| m != n) {
                return Err(FrameError::BadLength);
            }
            length = Some(n);
        }
    }
    let state = match (chunked, length) {
        (true, Some(_)) => return Err(FrameError::Ambiguous),
        (true, None) => State::ChunkSize,
        (false, Some(n)) if n > 0 => State::Body(n),
        _ => State::Head,
    };
    let asked = match authority {
        Some(a) => Some(strip_port(a).to_owned()),
        None => host,
    };
    Ok((asked, state))
}

/// `host[:port]` without its port (an IPv6 literal keeps its brackets).
fn strip_port(v: &str) -> &str {
    match v.rsplit_once(':') {
        Some((name, port)) if !name.ends_with(':') && port.chars().all(|c| c.is_ascii_digit()) => {
            name
        }
        _ => v,
    }
}

impl Requests {
    /// A connection that has sent nothing yet.
    pub fn new() -> Requests {
        Requests {
            state: State::Head,
            line: Vec::new(),
        }
    }

    /// Feed the next bytes the client sent: the `Host` of every request head completed in
    /// them, in order (`None` for a head without one).
    pub fn feed(&mut self, mut bytes: &[u8]) -> Result<Vec<Option<String>>, FrameError> {
        let mut heads = Vec::new();
        while !bytes.is_empty() {
            match self.state.clone() {
                State::Head => {
                    let (b, rest) = (bytes[0], &bytes[1..]);
                    bytes = rest;
                    // Blank lines between requests are tolerated (RFC 9112, 2.2).
                    if self.line.is_empty() && (b == b'\r' || b == b'\n') {
                        continue;
                    }
                    if self.line.is_empty() && !b.is_ascii_uppercase() {
                        return Err(FrameError::NotHttp);
                    }
                    self.line.push(b);
                    if self.line.ends_with(b"\r\n\r\n") {
                        let head = std::mem::take(&mut self.line);
                        let (host, state) = parse_head(&head)?;
                        heads.push(host);
                        self.state = state;
                    } else if self.line.ends_with(b"\n\n") || self.line.ends_with(b"\r\r") {
                        // A head ended by bare LFs (or CRs): a server may take it as whole.
                        return Err(FrameError::Ambiguous);
                    } else if self.line.len() > MAX_HEAD {
                        return Err(FrameError::HeadTooLong);
                    }
                }
                State::Body(n) => {
                    let take = usize::try_from(n).unwrap_or(usize::MAX).min(bytes.len());
                    bytes = &bytes[take..];
                    let left = n - take as u64;
                    self.state = if left == 0 {
                        State::Head
                    } else {
                        State::Body(left)
                    };
                }
                State::ChunkSize | State::Trailer => {
                    let (b, rest) = (bytes[0], &bytes[1..]);
                    bytes = rest;
                    self.line.push(b);
                    if self.line.len() > MAX_LINE {
                        return Err(FrameError::BadChunk);
                    }
                    let n = self.line.len();
                    let lone_lf = b == b'\n' && (n < 2 || self.line[n - 2] != b'\r');
                    let lone_cr = n >= 2 && self.line[n - 2] == b'\r' && b != b'\n';
                    if lone_lf || lone_cr {
                        return Err(FrameError::Ambiguous);
                    }
                    if !self.line.ends_with(b"\r\n") {
                        continue;
                    }
                    let line = std::mem::take(&mut self.line);
                    let text = String::from_utf8_lossy(&line[..line.len() - 2]).into_owned();
                    if self.state == State::Trailer {
                        if text.is_empty() {
                            self.state = State::Head;
                        }
                        continue;
                    }
                    // Chunk extensions follow a `;`.
                    let size = text
                        .split(';')
                        .next()
                        .unwrap_or("")
                        .trim_matches([' ', '\t']);
                    if size.is_empty() || !size.bytes().all(|b| b.is_ascii_hexdigit()) {
                        return Err(FrameError::BadChunk);
                    }
                    let n = u64::from_str_radix(size, 16).map_err(|_| FrameError::BadChunk)?;
                    self.state = if n == 0 {
                        State::Trailer
                    } else {
                        State::Chunk(n)
                    };
                }
                State::Chunk(n) => {
                    let take = usize::try_from(n).unwrap_or(usize::MAX).min(bytes.len());
                    bytes = &bytes[take..];
                    let left = n - take as u64;
                    self.state = if left == 0 {
                        State::ChunkEnd(0)
                    } else {
                        State::Chunk(left)
                    };
                }
                State::ChunkEnd(seen) => {
                    let (b, rest) = (bytes[0], &bytes[1..]);
                    bytes = rest;
                    self.state = match (seen, b) {
                        (0, b'\r') => State::ChunkEnd(1),
                        (1, b'\n') => State::ChunkSize,
                        _ => return Err(FrameError::Ambiguous),
                    };
                }
            }
        }
        Ok(heads)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(parts: &[&[u8]]) -> Result<Vec<Option<String>>, FrameError> {
        let mut r = Requests::new();
        let mut all = Vec::new();
        for p in parts {
            all.extend(r.feed(p)?);
        }
        Ok(all)
    }

    fn some(h: &str) -> Option<String> {
        Some(h.to_owned())
    }

    #[test]
    fn every_request_on_a_connection_is_found_by_its_framing() {
        let two = b"GET / HTTP/1.1\r\nHost: ok.test\r\n\r\nGET /x HTTP/1.1\r\nHost: other.test:80\r\n\r\n";
        assert_eq!(
            hosts(&[two]).unwrap(),
            vec![some("ok.test"), some("other.test")]
        );
        // Split anywhere, one byte at a time.
        let bytes: Vec<&[u8]> = two.chunks(1).collect();
        assert_eq!(
            hosts(&bytes).unwrap(),
            vec![some("ok.test"), some("other.test")]
        );
        // A body that looks like a request is body, not a request.
        let body = b"POST / HTTP/1.1\r\nHost: ok.test\r\nContent-Length: 35\r\n\r\nGET / HTTP/1.1\r\nHost: evil.test\r\n\r\nGET / HTTP/1.1\r\nHost: evil.test\r\n\r\n";
        assert_eq!(
            hosts(&[body]).unwrap(),
            vec![some("ok.test"), some("evil.test")]
        );
        // Chunked, with an extension and a trailer, then the next request.
        let chunked = b"POST / HTTP/1.1\r\nHost: ok.test\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nGET /\r\n0\r\nT: 1\r\n\r\nGET / HTTP/1.1\r\nHost: evil.test\r\n\r\n";
        assert_eq!(
            hosts(&[chunked]).unwrap(),
            vec![some("ok.test"), some("evil.test")]
        );
        assert_eq!(
            hosts(&[b"GET / HTTP/1.1\r\nX: y\r\n\r\n"]).unwrap(),
            vec![None]
        );
    }

    #[test]
    fn what_cannot_be_framed_is_an_error() {
        assert_eq!(
            hosts(&[b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"]),
            Err(FrameError::BadLength)
        );
        assert_eq!(
            hosts(&[b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"]),
            Err(FrameError::BadChunk)
        );
        assert_eq!(
            hosts(&[b"GET / HTTP/1.1\r\nHost: a\r\n\r\n\x16\x03\x01"]),
            Err(FrameError::NotHttp)
        );
        let long = [b'A'; MAX_HEAD + 2];
        assert_eq!(hosts(&[&long]), Err(FrameError::HeadTooLong));
        // A head as long as the longest URL the tools accept is fine.
        let url = format!(
            "GET /{} HTTP/1.1\r\nHost: ok.test\r\n\r\n",
            "a".repeat(4096)
        );
        assert_eq!(hosts(&[url.as_bytes()]).unwrap(), vec![some("ok.test")]);
    }

    /// An outside review's desyncs: shapes on which a server may see another request than the
    /// framer does are refused, and a target in absolute form is the host asked for.
    #[test]
    fn ambiguous_framing_is_refused() {
        let refused = |bytes: &[u8], e: FrameError| {
            assert_eq!(
                hosts(&[bytes]),
                Err(e.clone()),
                "{:?}",
                String::from_utf8_lossy(bytes)
            );
        };
        // Bare LFs ending a head, or inside one.
        refused(
            b"GET / HTTP/1.1\r\nHost: ok.test\r\n\r\nGET /x HTTP/1.1\nHost: evil.test\n\n",
            FrameError::Ambiguous,
        );
        refused(
            b"GET / HTTP/1.1\r\nHost: ok.test\r\nX: y\n\nGET / HTTP/1.1\r\nHost: evil.test\r\n\r\n",
            FrameError::Ambiguous,
        );
        // Obs-fold, a spaced header name, two Hosts, a coding other than chunked, CL with TE.
        refused(
            b"POST / HTTP/1.1\r\nHost: ok.test\r\nX: a\r\n Content-Length: 38\r\n\r\n",
            FrameError::Ambiguous,
        );
        refused(
            b"GET / HTTP/1.1\r\nHost : ok.test\r\n\r\n",
            FrameError::Ambiguous,
        );
        refused(
            b"GET / HTTP/1.1\r\nHost: ok.test\r\nHost: evil.test\r\n\r\n",
            FrameError::Ambiguous,
        );
        refused(
            b"POST / HTTP/1.1\r\nHost: ok.test\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            FrameError::Ambiguous,
        );
        refused(b"POST / HTTP/1.1\r\nHost: ok.test\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", FrameError::Ambiguous);
        refused(
            b"POST / HTTP/1.1\r\nHost: ok.test\r\nContent-Length: +3\r\n\r\n",
            FrameError::BadLength,
        );
        // The CRLF after chunk data is checked; a chunk size is hex digits only.
        refused(
            b"POST / HTTP/1.1\r\nHost: ok.test\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nA\n40\r\n",
            FrameError::Ambiguous,
        );
        refused(
            b"POST / HTTP/1.1\r\nHost: ok.test\r\nTransfer-Encoding: chunked\r\n\r\n+5\r\n",
            FrameError::BadChunk,
        );
        refused(
            b"CONNECT evil.test:443 HTTP/1.1\r\nHost: ok.test\r\n\r\n",
            FrameError::Target,
        );
        // An absolute-form target names the host the server will use.
        assert_eq!(
            hosts(&[b"GET http://evil.test/ HTTP/1.1\r\nHost: ok.test\r\n\r\n"]).unwrap(),
            vec![some("evil.test")]
        );
        assert_eq!(
            hosts(&[b"GET http://u@ok.test:8080/x?y HTTP/1.1\r\nHost: ok.test\r\n\r\n"]).unwrap(),
            vec![some("ok.test")]
        );
    }

    proptest::proptest! {
        #[test]
        fn framing_never_panics(chunks in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..300), 0..8)) {
            let mut r = Requests::new();
            for c in &chunks {
                if r.feed(c).is_err() {
                    break;
                }
            }
        }
    }
}
