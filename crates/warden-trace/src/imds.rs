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

/// Roles a host's credentials belong to; the run's is drawn from its canaries.
const ROLES: &[&str] = &[
    "app-server-role",
    "ec2-web-prod",
    "api-instance-profile",
    "worker-node-role",
];

fn response(status: &str, headers: &str, content_type: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Now offset by `seconds`, as the services write times (`2026-11-29T04:30:00Z`).
fn stamp(seconds: i64) -> String {
    let t = time::OffsetDateTime::now_utc() + time::Duration::seconds(seconds);
    let f = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    t.format(&f).unwrap_or_default()
}

/// A number below `n` drawn from a canary's bytes: the run's own choices (role, project,
/// times) differ from run to run.
fn drawn(canaries: &Canaries, planted: &str, n: usize) -> usize {
    canaries
        .value(planted)
        .map_or(0, |v| v.bytes().map(usize::from).sum::<usize>() % n.max(1))
}

/// Whether the request's head carries header `name` with `value` (both in any case).
fn has_header(head: &str, name: &str, value: &str) -> bool {
    head.lines().skip(1).any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case(name) && v.trim().eq_ignore_ascii_case(value)
        })
    })
}

/// The decoy answer to `request` (the first bytes a client sent to a metadata endpoint on
/// port 80), with the credentials among `canaries`; `None` for anything but an HTTP request for
/// a path the services answer with credentials or what leads to them. As the real services do,
/// Google's answers only with `Metadata-Flavor: Google` (else 403) and Azure's only with
/// `Metadata: true` (else 400); the role, the project, the session token and the times are the
/// run's own (updated minutes ago, expiring in six hours).
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
    let role = ROLES[drawn(canaries, "imds:aws#id", ROLES.len())];
    let project = ["prod-app", "web-prod-311", "platform-main"][drawn(canaries, "imds:gcp", 3)];
    let minutes = i64::try_from(10 + drawn(canaries, "imds:aws", 40)).unwrap_or(10);
    let (updated, expires) = (stamp(-60 * minutes), stamp(6 * 3600));
    let aws = format!(
        "{{\n  \"Code\" : \"Success\",\n  \"LastUpdated\" : \"{updated}\",\n  \"Type\" : \"AWS-HMAC\",\n  \"AccessKeyId\" : \"{}\",\n  \"SecretAccessKey\" : \"{}\",\n  \"Token\" : \"{}\",\n  \"Expiration\" : \"{expires}\"\n}}",
        value("imds:aws#id"),
        value("imds:aws"),
        value("imds:aws#token")
    );
    let bearer = |token: &str| {
        format!("{{\"access_token\":\"{token}\",\"expires_in\":3599,\"token_type\":\"Bearer\"}}")
    };
    let text = |body: &str| response("200 OK", "", "text/plain", body);
    let google = |body: &str| {
        let flavor = "Metadata-Flavor: Google\r\n";
        if has_header(head, "Metadata-Flavor", "Google") {
            response("200 OK", flavor, "application/text", body)
        } else {
            let no = "Missing Metadata-Flavor:Google header.";
            response("403 Forbidden", flavor, "text/html", no)
        }
    };
    let azure = |body: &str| {
        let kind = "application/json; charset=utf-8";
        if has_header(head, "Metadata", "true") {
            response("200 OK", "", kind, body)
        } else {
            let no = "{\"error\":\"invalid_request\",\"error_description\":\"Required metadata header not specified\"}";
            response("400 Bad Request", "", kind, no)
        }
    };
    // IMDSv2's session token (not a credential): the run's own.
    let session = format!(
        "AQAEA{}==",
        value("imds:aws#token").get(16..60).unwrap_or_default()
    );
    Some(match (method, path) {
        ("PUT", "/latest/api/token") => text(&session),
        ("GET", "/latest/meta-data") => {
            text("ami-id\nhostname\niam/\ninstance-id\nlocal-ipv4\nplacement/")
        }
        ("GET", "/latest/meta-data/iam") => text("info\nsecurity-credentials/"),
        ("GET", "/latest/meta-data/iam/security-credentials")
        | ("GET", "/latest/meta-data/ram/security-credentials") => text(role),
        ("GET", p)
            if p == format!("/latest/meta-data/iam/security-credentials/{role}")
                || p == format!("/latest/meta-data/ram/security-credentials/{role}")
                || p.starts_with("/v2/credentials")
                || p.starts_with("/v1/credentials") =>
        {
            text(&aws)
        }
        ("GET", "/computeMetadata/v1/instance/service-accounts/default/token") => {
            google(&bearer(value("imds:gcp")))
        }
        ("GET", "/computeMetadata/v1/instance/service-accounts/default/email") => {
            google(&format!("app-server@{project}.iam.gserviceaccount.com"))
        }
        ("GET", "/computeMetadata/v1/project/project-id") => google(project),
        ("GET", "/metadata/identity/oauth2/token") => azure(&bearer(value("imds:azure"))),
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
        let name = body(&role);
        assert!(ROLES.contains(&name.as_str()), "{name}");
        let creds = answer(
            format!("GET /latest/meta-data/iam/security-credentials/{name} HTTP/1.1\r\nX-aws-ec2-metadata-token: x\r\n\r\n").as_bytes(),
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
        // Without the header the services insist on, no token (the real ones refuse too).
        let bare = answer(
            b"GET /computeMetadata/v1/instance/service-accounts/default/token HTTP/1.1\r\n\r\n",
            c,
        )
        .unwrap();
        assert!(String::from_utf8_lossy(&bare).starts_with("HTTP/1.1 403"));
        let azure = b"GET /metadata/identity/oauth2/token?resource=x HTTP/1.1\r\n\r\n";
        let refused = answer(azure, c).unwrap();
        assert!(String::from_utf8_lossy(&refused).starts_with("HTTP/1.1 400"));
        let azure = b"GET /metadata/identity/oauth2/token HTTP/1.1\r\nMetadata: true\r\n\r\n";
        assert!(body(&answer(azure, c).unwrap()).contains(c.value("imds:azure").unwrap()));
        // Times are now's, not fixed ones.
        let year = time::OffsetDateTime::now_utc().year().to_string();
        assert!(
            creds["Expiration"].as_str().unwrap().starts_with(&year),
            "{creds}"
        );
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
