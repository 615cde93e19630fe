//! The HTTP/1.x requests a client sends on one plaintext connection, found by their framing:
//! each request head (up to its blank line), then its body by `Content-Length` or chunked
//! transfer coding, then the next head. The egress forwarder feeds it every byte the program
//! sends, so a request kept alive behind an allowed one (`Host: other.example`) is seen before
//! a byte of it is forwarded.
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
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FrameError::HeadTooLong => "a request head longer than 64 KiB",
            FrameError::BadChunk => "a chunk size that is not hex",
            FrameError::BadLength => "a Content-Length that is not one number",
            FrameError::NotHttp => "bytes after a request that do not start a request",
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
    /// This many chunk bytes left, then its CRLF (`2` more bytes).
    Chunk(u64),
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

/// The `Host` of a head (its port dropped), if it has one.
fn host_of(head: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(head);
    text.split("\r\n").skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case("host").then(|| {
            let v = v.trim();
            match v.rsplit_once(':') {
                Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name.to_owned(),
                _ => v.to_owned(),
            }
        })
    })
}

/// How the body of `head` is framed.
fn body_of(head: &[u8]) -> Result<State, FrameError> {
    let text = String::from_utf8_lossy(head);
    let mut length: Option<u64> = None;
    let mut chunked = false;
    for l in text.split("\r\n").skip(1) {
        let Some((k, v)) = l.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        if k.eq_ignore_ascii_case("transfer-encoding") {
            chunked |= v
                .rsplit(',')
                .next()
                .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
        } else if k.eq_ignore_ascii_case("content-length") {
            let n: u64 = v.parse().map_err(|_| FrameError::BadLength)?;
            if length.is_some_and(|m| m != n) {
                return Err(FrameError::BadLength);
            }
            length = Some(n);
        }
    }
    Ok(match (chunked, length) {
        (true, _) => State::ChunkSize,
        (false, Some(n)) if n > 0 => State::Body(n),
        _ => State::Head,
    })
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
                        heads.push(host_of(&head));
                        self.state = body_of(&head)?;
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
                    let size = text.split(';').next().unwrap_or("").trim();
                    let n = u64::from_str_radix(size, 16).map_err(|_| FrameError::BadChunk)?;
                    self.state = if n == 0 {
                        State::Trailer
                    } else {
                        // The chunk, then its CRLF.
                        State::Chunk(n.saturating_add(2))
                    };
                }
                State::Chunk(n) => {
                    let take = usize::try_from(n).unwrap_or(usize::MAX).min(bytes.len());
                    bytes = &bytes[take..];
                    let left = n - take as u64;
                    self.state = if left == 0 {
                        State::ChunkSize
                    } else {
                        State::Chunk(left)
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
