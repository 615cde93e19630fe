//! TLS opened in the chamber: a certificate authority made for one run, trusted inside the jail,
//! and a server side that completes the handshake for whatever name a client asks for, then
//! reads what the client sends inside.
//!
//! Guarantees: the authority's key never leaves this process (only its certificate is written
//! for the jail to trust) and is different for every run; each leaf certificate names exactly
//! the server name the client sent (or the address it connected to) and is valid for a few
//! days around now; a handshake and the read after it are bounded in time and bytes. A client
//! that will not go on with the chamber's certificate (it pins, or trusts its own store) is a
//! [`Outcome::Refused`], with what it said, never a silent close.

use std::collections::HashMap;
use std::io::Read;
use std::net::{IpAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{Acceptor, ServerConfig};

/// Leaf certificates kept per run, at most (one per name asked for).
const MAX_LEAVES: usize = 256;

/// A run's certificate authority.
pub struct Authority {
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
    leaves: Mutex<HashMap<String, Arc<ServerConfig>>>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority").finish_non_exhaustive()
    }
}

/// How an interception went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The handshake completed: what the client sent inside, up to the limit.
    Opened {
        /// The server name the client asked for.
        sni: Option<String>,
        /// The protocol agreed by ALPN.
        alpn: Option<String>,
        /// What the client sent after the handshake.
        plaintext: Vec<u8>,
    },
    /// The client would not go on with the chamber's certificate.
    Refused {
        /// The server name the client asked for.
        sni: Option<String>,
        /// What it said (a TLS alert) or did (closed).
        reason: String,
    },
    /// Not TLS the chamber could speak (a malformed hello, no common version or cipher).
    Failed {
        /// The server name, when the hello got that far.
        sni: Option<String>,
        /// Why.
        reason: String,
    },
}

/// The year `now` falls in (UTC), and the next.
fn years_around_now() -> (i32, i32) {
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let year = 1970 + i32::try_from(secs / 31_556_952).unwrap_or(0);
    (year, year + 1)
}

impl Authority {
    /// A fresh authority (an ECDSA P-256 key made now).
    pub fn new() -> Result<Authority, String> {
        let key = KeyPair::generate().map_err(|e| format!("authority key: {e}"))?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(|e| e.to_string())?;
        let mut dn = DistinguishedName::new();
        // Named as a company's TLS-inspection root on a developer's laptop is: a program that
        // reads its trust store finds nothing of Warden's there.
        dn.push(DnType::CommonName, "Corporate Root CA G2");
        dn.push(DnType::OrganizationName, "IT Security");
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let (this, next) = years_around_now();
        params.not_before = rcgen::date_time_ymd(this - 1, 1, 1);
        params.not_after = rcgen::date_time_ymd(next, 12, 31);
        let cert = params
            .self_signed(&key)
            .map_err(|e| format!("authority certificate: {e}"))?;
        Ok(Authority {
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
            leaves: Mutex::new(HashMap::new()),
            provider: Arc::new(rustls::crypto::ring::default_provider()),
        })
    }

    /// The authority's certificate (PEM), for the jail's trust stores.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The server configuration presenting a certificate for `name`.
    fn config_for(&self, name: &str) -> Result<Arc<ServerConfig>, String> {
        if let Some(c) = self.leaves.lock().ok().and_then(|l| l.get(name).cloned()) {
            return Ok(c);
        }
        let key = KeyPair::generate().map_err(|e| format!("leaf key: {e}"))?;
        let mut params =
            CertificateParams::new(vec![name.to_owned()]).map_err(|e| format!("{name}: {e}"))?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name);
        params.distinguished_name = dn;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let (this, next) = years_around_now();
        params.not_before = rcgen::date_time_ymd(this - 1, 1, 1);
        params.not_after = rcgen::date_time_ymd(next, 1, 1);
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| format!("leaf certificate: {e}"))?;
        let chain = vec![CertificateDer::from(cert.der().to_vec())];
        let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut config = ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(chain, private)
            .map_err(|e| e.to_string())?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        if let Ok(mut l) = self.leaves.lock() {
            if l.len() >= MAX_LEAVES {
                l.clear();
            }
            l.insert(name.to_owned(), config.clone());
        }
        Ok(config)
    }

    /// Complete the handshake on `stream` (whose first bytes, already read, are `first`) as
    /// the server for any name, and read what the client sends until `whole` says it is a
    /// whole message, `max` bytes, the end of the stream or `time` since the start.
    /// `address` names the certificate when the client sent no server name.
    pub fn intercept(
        &self,
        mut stream: TcpStream,
        first: &[u8],
        address: IpAddr,
        time: Duration,
        max: usize,
        whole: &dyn Fn(&[u8]) -> bool,
    ) -> Outcome {
        let deadline = Instant::now() + time;
        let timeouts = |s: &TcpStream| {
            let left = deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1));
            let _ = s.set_read_timeout(Some(left));
            let _ = s.set_write_timeout(Some(left));
        };
        let _ = stream.set_nonblocking(false);
        timeouts(&stream);
        let mut acceptor = Acceptor::default();
        let mut pending: &[u8] = first;
        let accepted = loop {
            if Instant::now() >= deadline {
                return failed(None, "the hello did not come in time");
            }
            timeouts(&stream);
            let read = if pending.is_empty() {
                acceptor.read_tls(&mut stream)
            } else {
                acceptor.read_tls(&mut pending)
            };
            match read {
                Ok(0) => return failed(None, "the client closed before its hello was whole"),
                Ok(_) => {}
                Err(e) => return failed(None, &format!("reading the hello: {e}")),
            }
            match acceptor.accept() {
                Ok(Some(a)) => break a,
                Ok(None) => {}
                Err((e, alert)) => {
                    let mut alert = alert;
                    let _ = alert.write_all(&mut stream);
                    return failed(None, &format!("the hello: {e}"));
                }
            }
        };
        let sni = accepted.client_hello().server_name().map(str::to_owned);
        let name = sni.clone().unwrap_or_else(|| address.to_string());
        let config = match self.config_for(&name) {
            Ok(c) => c,
            Err(e) => return failed(sni, &e),
        };
        let mut conn = match accepted.into_connection(config) {
            Ok(c) => c,
            Err((e, mut alert)) => {
                let _ = alert.write_all(&mut stream);
                return failed(sni, &e.to_string());
            }
        };
        // The handshake.
        while conn.is_handshaking() {
            if Instant::now() >= deadline {
                return Outcome::Refused {
                    sni,
                    reason: "the client went silent during the handshake".into(),
                };
            }
            timeouts(&stream);
            if let Err(e) = conn.complete_io(&mut stream) {
                let reason = match e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
                    Some(rustls::Error::AlertReceived(a)) => {
                        format!("the client sent the alert {a:?}")
                    }
                    Some(other) => other.to_string(),
                    None if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                        "the client closed the connection during the handshake".into()
                    }
                    None if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                    {
                        "the client went silent during the handshake".into()
                    }
                    None => e.to_string(),
                };
                return Outcome::Refused { sni, reason };
            }
        }
        let alpn = conn
            .alpn_protocol()
            .map(|p| String::from_utf8_lossy(p).into_owned());
        // What the client sends inside.
        let mut plaintext = Vec::new();
        let mut buf = [0u8; 8192];
        while plaintext.len() < max && !whole(&plaintext) && Instant::now() < deadline {
            timeouts(&stream);
            match conn.reader().read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let take = n.min(max - plaintext.len());
                    plaintext.extend_from_slice(&buf[..take]);
                    continue;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => break,
            }
            match conn.read_tls(&mut stream) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if conn.process_new_packets().is_err() {
                        break;
                    }
                }
            }
        }
        conn.send_close_notify();
        let _ = conn.complete_io(&mut stream);
        Outcome::Opened {
            sni,
            alpn,
            plaintext,
        }
    }
}

fn failed(sni: Option<String>, reason: &str) -> Outcome {
    Outcome::Failed {
        sni,
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;

    fn client_config(trust: Option<&str>) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        if let Some(pem) = trust {
            use rustls::pki_types::pem::PemObject;
            roots
                .add(CertificateDer::from_pem_slice(pem.as_bytes()).unwrap())
                .unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        Arc::new(
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth(),
        )
    }

    /// Run a client with `trust` against an interception; the outcome and what the client got.
    fn exchange(
        trust: Option<&str>,
        authority: &Authority,
        send: &'static [u8],
    ) -> (Outcome, bool) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let config = client_config(trust);
        let client = std::thread::spawn(move || {
            let name = rustls::pki_types::ServerName::try_from("drop.invalid").unwrap();
            let mut conn = rustls::ClientConnection::new(config, name).unwrap();
            let mut sock = TcpStream::connect(addr).unwrap();
            let mut tls = rustls::Stream::new(&mut conn, &mut sock);
            tls.write_all(send).is_ok()
        });
        let (s, _) = l.accept().unwrap();
        let whole = |b: &[u8]| b.ends_with(b"\r\n\r\n");
        let out = authority.intercept(s, &[], addr.ip(), Duration::from_secs(5), 65536, &whole);
        (out, client.join().unwrap())
    }

    #[test]
    fn a_client_that_trusts_the_run_is_read_and_one_that_does_not_is_refused() {
        let a = Authority::new().unwrap();
        let pem = a.cert_pem().to_owned();
        let (out, sent) = exchange(
            Some(&pem),
            &a,
            b"POST /x HTTP/1.1\r\nHost: drop.invalid\r\n\r\n",
        );
        assert!(sent);
        match out {
            Outcome::Opened { sni, plaintext, .. } => {
                assert_eq!(sni.as_deref(), Some("drop.invalid"));
                assert!(plaintext.starts_with(b"POST /x HTTP/1.1"), "{plaintext:?}");
            }
            other => panic!("{other:?}"),
        }
        // Another run's authority is not trusted: a refusal, with the alert.
        let other = Authority::new().unwrap();
        let (out, sent) = exchange(Some(other.cert_pem()), &a, b"GET / HTTP/1.1\r\n\r\n");
        assert!(!sent);
        match out {
            Outcome::Refused { sni, reason } => {
                assert_eq!(sni.as_deref(), Some("drop.invalid"));
                assert!(reason.contains("alert"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn what_is_not_tls_fails_clearly() {
        let a = Authority::new().unwrap();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let c = std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            let _ = s.write_all(b"GET / HTTP/1.1\r\n\r\n");
        });
        let (s, _) = l.accept().unwrap();
        let out = a.intercept(s, &[], addr.ip(), Duration::from_secs(2), 100, &|_| false);
        c.join().unwrap();
        assert!(matches!(out, Outcome::Failed { .. }), "{out:?}");
    }
}
