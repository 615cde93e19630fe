//! What the first bytes of a captured connection say: the TLS server name (SNI) of a
//! ClientHello, or the request line and `Host` of an HTTP request. Parsing is bounded and
//! total: malformed input yields `None`, never a panic.

use serde::Serialize;

/// What the capture sink learned from the first bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Sniffed {
    /// `tls`, `http` or `unknown`.
    pub protocol: &'static str,
    /// The TLS server name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sni: Option<String>,
    /// The HTTP request line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_line: Option<String>,
    /// The HTTP `Host` header.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// Classify `bytes`, the start of a client's stream.
pub fn sniff(bytes: &[u8]) -> Sniffed {
    if let Some(sni) = tls_sni(bytes) {
        return Sniffed {
            protocol: "tls",
            sni: Some(sni),
            ..Sniffed::default()
        };
    }
    if bytes.first() == Some(&0x16) {
        return Sniffed {
            protocol: "tls",
            ..Sniffed::default()
        };
    }
    if let Some((line, host)) = http_request(bytes) {
        return Sniffed {
            protocol: "http",
            request_line: Some(line),
            host,
            ..Sniffed::default()
        };
    }
    Sniffed {
        protocol: "unknown",
        ..Sniffed::default()
    }
}

const METHODS: &[&str] = &[
    "GET ", "POST ", "PUT ", "DELETE ", "HEAD ", "OPTIONS ", "PATCH ", "CONNECT ", "TRACE ",
];

fn http_request(bytes: &[u8]) -> Option<(String, Option<String>)> {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(8192)]);
    if !METHODS.iter().any(|m| text.starts_with(m)) {
        return None;
    }
    let mut lines = text.split("\r\n");
    let line = lines.next()?.chars().take(2048).collect();
    let host = lines.take_while(|l| !l.is_empty()).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("host").then(|| v.trim().to_owned())
    });
    Some((line, host))
}

/// A bounds-checked reader over a byte slice.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<usize> {
        self.take(1).map(|b| usize::from(b[0]))
    }
    fn u16(&mut self) -> Option<usize> {
        self.take(2)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
    }
}

/// The server name of a TLS ClientHello (RFC 8446 §4.1.2, RFC 6066 §3).
fn tls_sni(bytes: &[u8]) -> Option<String> {
    let mut r = Reader(bytes);
    // Record header: handshake (22), version, length.
    if r.u8()? != 22 {
        return None;
    }
    r.take(2)?;
    let len = r.u16()?;
    let mut r = Reader(r.take(len).unwrap_or(r.0));
    // Handshake header: ClientHello (1), 24-bit length.
    if r.u8()? != 1 {
        return None;
    }
    r.take(3)?;
    r.take(2 + 32)?; // version, random
    let sid = r.u8()?;
    r.take(sid)?;
    let suites = r.u16()?;
    r.take(suites)?;
    let comp = r.u8()?;
    r.take(comp)?;
    let ext_len = r.u16()?;
    let mut ext = Reader(r.take(ext_len).unwrap_or(r.0));
    while let (Some(kind), Some(len)) = (ext.u16(), ext.u16()) {
        let body = ext.take(len)?;
        if kind != 0 {
            continue;
        }
        let mut s = Reader(body);
        s.u16()?; // list length
        while let Some(name_type) = s.u8() {
            let n = s.u16()?;
            let name = s.take(n)?;
            if name_type == 0 {
                return std::str::from_utf8(name).ok().map(str::to_owned);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A minimal ClientHello carrying `name` as its SNI.
    pub fn client_hello(name: &str) -> Vec<u8> {
        let n = name.as_bytes();
        let mut sni = Vec::new();
        sni.extend_from_slice(&u16::try_from(n.len() + 3).unwrap().to_be_bytes());
        sni.push(0);
        sni.extend_from_slice(&u16::try_from(n.len()).unwrap().to_be_bytes());
        sni.extend_from_slice(n);
        let mut ext = vec![0, 0];
        ext.extend_from_slice(&u16::try_from(sni.len()).unwrap().to_be_bytes());
        ext.extend_from_slice(&sni);
        let mut hello = vec![3, 3];
        hello.extend_from_slice(&[0u8; 32]);
        hello.push(0); // session id
        hello.extend_from_slice(&[0, 2, 0x13, 0x01]); // one suite
        hello.extend_from_slice(&[1, 0]); // null compression
        hello.extend_from_slice(&u16::try_from(ext.len()).unwrap().to_be_bytes());
        hello.extend_from_slice(&ext);
        let mut hs = vec![1, 0];
        hs.extend_from_slice(&u16::try_from(hello.len()).unwrap().to_be_bytes());
        hs.extend_from_slice(&hello);
        let mut rec = vec![22, 3, 1];
        rec.extend_from_slice(&u16::try_from(hs.len()).unwrap().to_be_bytes());
        rec.extend_from_slice(&hs);
        rec
    }

    #[test]
    fn tls_and_http() {
        let s = sniff(&client_hello("c2.example.invalid"));
        assert_eq!(s.protocol, "tls");
        assert_eq!(s.sni.as_deref(), Some("c2.example.invalid"));
        let s = sniff(b"POST /collect HTTP/1.1\r\nHost: exfil.invalid\r\n\r\nbody");
        assert_eq!(s.protocol, "http");
        assert_eq!(s.request_line.as_deref(), Some("POST /collect HTTP/1.1"));
        assert_eq!(s.host.as_deref(), Some("exfil.invalid"));
        assert_eq!(sniff(b"\x00\x01hello").protocol, "unknown");
    }

    proptest! {
        #[test]
        fn garbage_never_panics(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = sniff(&data);
            let mut tls = vec![22u8, 3, 1];
            tls.extend_from_slice(&data);
            let _ = sniff(&tls);
        }
    }
}
