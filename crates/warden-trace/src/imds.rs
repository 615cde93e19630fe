//! The clouds' instance metadata services, as the chamber plays them: which addresses and names
//! they answer on, and the decoy answer to a request for the host's own credentials (AWS
//! IMDSv1 and v2, ECS task and EKS pod credentials, Alibaba's RAM role, Google's service
//! account token, Azure's managed identity token). The credentials in the answers are the
//! run's canaries (`imds:aws#id`, `imds:aws`, `imds:aws#token`, `imds:gcp`, `imds:azure`),
//! so a server that asks for them and takes them anywhere is caught doing it, and one whose
//! SDK only uses them on the cloud's own API is told apart (their audience).
//!
//! Guarantees: a pure function of the request's first bytes (an HTTP/1 request line) and the
//! canaries; it answers only the paths below and nothing else (`None`: the sink closes as it
//! does for any other destination); the answer is bounded (under 2 KB) and names no sandbox.

use crate::canary::Canaries;

/// Instance metadata endpoints by address (canonical form): (address, whose).
pub const ADDRESSES: &[(&str, &str)] = &[
    (
        "169.254.169.254",
        "instance metadata (AWS, Azure, Google Cloud, Oracle Cloud, DigitalOcean, OpenStack)",
    ),
    ("fd00:ec2::254", "AWS instance metadata (IPv6)"),
    ("169.254.170.2", "AWS ECS task credentials"),
    ("169.254.170.23", "AWS EKS pod identity credentials"),
    ("fd00:ec2::23", "AWS EKS pod identity credentials (IPv6)"),
    ("100.100.100.200", "Alibaba Cloud instance metadata"),
    ("192.0.0.192", "Oracle Cloud classic instance metadata"),
    ("169.254.0.23", "Tencent Cloud instance metadata"),
    ("fe80::a9fe:a9fe", "OpenStack instance metadata (IPv6)"),
    ("168.63.129.16", "Azure WireServer"),
];

/// Instance metadata endpoints by name: (name, whose).
pub const NAMES: &[(&str, &str)] = &[
    ("metadata.google.internal", "Google Cloud instance metadata"),
    ("metadata.goog", "Google Cloud instance metadata"),
    ("instance-data.ec2.internal", "AWS instance metadata"),
    ("instance-data", "AWS instance metadata"),
    ("metadata.tencentyun.com", "Tencent Cloud instance metadata"),
    // Google Compute Engine's search domain makes the bare name the metadata server.
    ("metadata", "Google Cloud instance metadata"),
];

/// Whose metadata service `address` (canonical form) is.
pub fn by_address(address: &str) -> Option<&'static str> {
    ADDRESSES
        .iter()
        .find(|(a, _)| *a == address)
        .map(|(_, whose)| *whose)
}

/// Whose metadata service the name `name` is.
pub fn by_name(name: &str) -> Option<&'static str> {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    NAMES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, whose)| *whose)
}

/// The role the decoy host's credentials belong to.
const ROLE: &str = "app-server-role";

fn response(status: &str, content_type: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The decoy answer to `request` (the first bytes a client sent to a metadata endpoint), with
/// the credentials among `canaries`; `None` for anything but an HTTP request for a path the
/// services answer with credentials or what leads to them.
pub fn answer(request: &[u8], canaries: &Canaries) -> Option<Vec<u8>> {
    let head = std::str::from_utf8(&request[..request.len().min(2048)]).ok()?;
    let mut words = head.lines().next()?.split_whitespace();
    let (method, target) = (words.next()?, words.next()?);
    let path = target
        .split('?')
        .next()
        .unwrap_or(target)
        .trim_end_matches('/');
    let value = |planted: &str| canaries.value(planted).unwrap_or("");
    let aws = || {
        format!(
            "{{\"Code\":\"Success\",\"LastUpdated\":\"2026-01-01T00:00:00Z\",\"Type\":\"AWS-HMAC\",\"AccessKeyId\":\"{}\",\"SecretAccessKey\":\"{}\",\"Token\":\"{}\",\"Expiration\":\"2030-01-01T06:00:00Z\"}}",
            value("imds:aws#id"),
            value("imds:aws"),
            value("imds:aws#token")
        )
    };
    let bearer = |token: &str| {
        format!("{{\"access_token\":\"{token}\",\"expires_in\":3599,\"token_type\":\"Bearer\"}}")
    };
    Some(match (method, path) {
        // IMDSv2's session token (not a credential).
        ("PUT", "/latest/api/token") => {
            response("200 OK", "text/plain", "AQAEAGx2c2Vzc2lvbi10b2tlbg==")
        }
        ("GET", "/latest/meta-data") => response(
            "200 OK",
            "text/plain",
            "ami-id\nhostname\niam/\ninstance-id\nlocal-ipv4\nplacement/",
        ),
        ("GET", "/latest/meta-data/iam") => {
            response("200 OK", "text/plain", "info\nsecurity-credentials/")
        }
        ("GET", "/latest/meta-data/iam/security-credentials")
        | ("GET", "/latest/meta-data/ram/security-credentials") => {
            response("200 OK", "text/plain", ROLE)
        }
        ("GET", p)
            if p == format!("/latest/meta-data/iam/security-credentials/{ROLE}")
                || p == format!("/latest/meta-data/ram/security-credentials/{ROLE}")
                || p.starts_with("/v2/credentials")
                || p.starts_with("/v1/credentials") =>
        {
            response("200 OK", "application/json", &aws())
        }
        ("GET", "/computeMetadata/v1/instance/service-accounts/default/token") => {
            response("200 OK", "application/json", &bearer(value("imds:gcp")))
        }
        ("GET", "/computeMetadata/v1/instance/service-accounts/default/email") => response(
            "200 OK",
            "text/plain",
            "app-server@prod-app.iam.gserviceaccount.com",
        ),
        ("GET", "/computeMetadata/v1/project/project-id") => {
            response("200 OK", "text/plain", "prod-app")
        }
        ("GET", "/metadata/identity/oauth2/token") => {
            response("200 OK", "application/json", &bearer(value("imds:azure")))
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Decoys;

    fn body(r: &[u8]) -> String {
        let text = String::from_utf8(r.to_vec()).unwrap();
        text.split_once("\r\n\r\n").unwrap().1.to_owned()
    }

    #[test]
    fn the_hosts_credentials_are_the_runs_canaries() {
        let d = Decoys::generate();
        let c = &d.canaries;
        let role = answer(
            b"GET /latest/meta-data/iam/security-credentials/ HTTP/1.1\r\n\r\n",
            c,
        )
        .unwrap();
        assert_eq!(body(&role), ROLE);
        let creds = answer(
            format!("GET /latest/meta-data/iam/security-credentials/{ROLE} HTTP/1.1\r\nX-aws-ec2-metadata-token: x\r\n\r\n").as_bytes(),
            c,
        )
        .unwrap();
        let creds: serde_json::Value = serde_json::from_str(&body(&creds)).unwrap();
        assert_eq!(creds["AccessKeyId"], c.value("imds:aws#id").unwrap());
        assert!(creds["AccessKeyId"].as_str().unwrap().starts_with("ASIA"));
        assert_eq!(creds["SecretAccessKey"], c.value("imds:aws").unwrap());
        let found = c.find(creds.to_string().as_bytes());
        assert!(found.iter().any(|h| h.planted == "imds:aws"), "{found:?}");
        let gcp = answer(
            b"GET /computeMetadata/v1/instance/service-accounts/default/token HTTP/1.1\r\nMetadata-Flavor: Google\r\n\r\n",
            c,
        )
        .unwrap();
        assert!(body(&gcp).contains(c.value("imds:gcp").unwrap()));
        let ecs = answer(b"GET /v2/credentials/abc HTTP/1.1\r\n\r\n", c).unwrap();
        assert!(body(&ecs).contains(c.value("imds:aws#id").unwrap()));
        assert!(answer(b"PUT /latest/api/token HTTP/1.1\r\n\r\n", c).is_some());
        assert!(answer(b"GET /etc/passwd HTTP/1.1\r\n\r\n", c).is_none());
        assert!(
            answer(b"\x16\x03\x01\x02\x00", c).is_none(),
            "TLS is not answered"
        );
        assert!(answer(b"", c).is_none());
        for r in [role, gcp, ecs] {
            assert!(r.len() < 2048);
            assert!(
                !String::from_utf8_lossy(&r)
                    .to_lowercase()
                    .contains("warden")
            );
        }
    }

    #[test]
    fn endpoints_by_address_and_name() {
        assert!(by_address("169.254.169.254").is_some());
        assert!(by_name("Metadata.Google.Internal.").is_some());
        assert!(by_name("example.test").is_none());
    }
}
