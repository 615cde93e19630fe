//! `nmap_scan`: a TCP connect scan (`-sT`, optionally with light version detection) of one
//! allowed address, parsed from nmap's XML. Never `--script`, never a raw-socket scan: the
//! argv is fixed but for the address and the validated port list.

use serde::Deserialize;
use serde_json::{Value, json};

use super::target::Allowed;
use super::toolbox::{Program, Toolbox};
use super::{Job, checked_string};
use crate::tools::{ToolError, parse};

/// The pattern of a port list: `80`, `1-1024`, `22,80,443`, `22,8000-8100`.
const PORTS: &str = "^[0-9]{1,5}(-[0-9]{1,5})?(,[0-9]{1,5}(-[0-9]{1,5})?){0,99}$";

pub(super) fn spec(toolbox: &Toolbox) -> (&'static str, String, Value, Value) {
    let max = toolbox.settings.max_ports;
    let input = json!({
        "type": "object",
        "properties": {
            "target": checked_string("^[0-9A-Fa-f:.]{2,45}$", 45,
                "The IPv4 or IPv6 address to scan (one of the configured targets)."),
            "ports": checked_string(PORTS, 600,
                &format!("Ports: `80`, `1-1024` or `22,80,443` (at most {max} ports).")),
            "scan": { "enum": ["connect", "version"], "default": "connect",
                      "description": "`connect`: open/closed/filtered; `version`: also probe \
                                      the services (nmap -sV --version-light)." }
        },
        "required": ["target", "ports"]
    });
    let finding = json!({
        "type": "object",
        "properties": {
            "address": { "type": "string" },
            "port": { "type": "integer" },
            "protocol": { "type": "string" },
            "state": { "type": "string" },
            "reason": { "type": ["string", "null"] },
            "service": { "type": ["string", "null"] },
            "product": { "type": ["string", "null"] },
            "version": { "type": ["string", "null"] },
            "extrainfo": { "type": ["string", "null"] }
        },
        "required": ["address", "port", "protocol", "state"]
    });
    (
        "Port scan (nmap)",
        "Scan TCP ports of one target with nmap's connect scan (`nmap -Pn -n -sT`, with \
         `-sV --version-light` for `scan: version`) and return each port's state and service."
            .to_owned(),
        input,
        finding,
    )
}

#[derive(Deserialize)]
struct Args {
    target: String,
    ports: String,
    #[serde(default)]
    scan: Option<String>,
    timeout_s: Option<f64>,
}

/// A port list, checked (each port 1–65535, each range ascending) and counted.
pub(super) fn check_ports(text: &str, max: u32) -> Result<String, String> {
    let mut count: u32 = 0;
    let mut parts = Vec::new();
    for part in text.split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) else {
            return Err(format!("{part:?} is not a port or a range"));
        };
        if a == 0 || b > 65_535 || a > b {
            return Err(format!(
                "{part:?}: ports go from 1 to 65535, ranges upwards"
            ));
        }
        count = count.saturating_add(b - a + 1);
        parts.push(if a == b {
            a.to_string()
        } else {
            format!("{a}-{b}")
        });
    }
    if count > max {
        return Err(format!("{count} ports; at most {max} per scan"));
    }
    Ok(parts.join(","))
}

pub(super) fn job(
    args: Value,
    allowed: &Allowed,
    toolbox: &Toolbox,
    program: &Program,
) -> Result<Job, ToolError> {
    let a: Args = parse(args)?;
    let ip = allowed.address(&a.target)?;
    let ports = check_ports(&a.ports, toolbox.settings.max_ports)
        .map_err(|m| crate::tools::invalid("/ports", m))?;
    let mut argv: Vec<String> = [program.path.display().to_string()]
        .into_iter()
        .chain(["-Pn", "-n", "-sT"].map(str::to_owned))
        .collect();
    if a.scan.as_deref() == Some("version") {
        argv.extend(["-sV", "--version-light"].map(str::to_owned));
    }
    argv.extend(["-p".to_owned(), ports, "-oX".to_owned(), "-".to_owned()]);
    if ip.is_ipv6() {
        argv.push("-6".to_owned());
    }
    argv.push(ip.to_string());
    Ok(Job {
        tool: "nmap_scan",
        target: ip.to_string(),
        argv,
        binds: Vec::new(),
        out_file: None,
        timeout_s: a.timeout_s,
        parse: parse_with_summary,
    })
}

/// The first child element of `n` named `tag`.
fn child<'a, 'i>(n: roxmltree::Node<'a, 'i>, tag: &str) -> Option<roxmltree::Node<'a, 'i>> {
    n.children()
        .find(|c| c.is_element() && c.tag_name().name() == tag)
}

/// The ports of nmap's XML report, with the ports it reported in bulk (`<extraports>`: "1,022
/// closed ports") as the summary; `None` when it is not a report (cut short, or not XML).
fn parse_with_summary(bytes: &[u8]) -> Option<super::Parsed> {
    let text = std::str::from_utf8(bytes).ok()?;
    let opts = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..roxmltree::ParsingOptions::default()
    };
    let doc = roxmltree::Document::parse_with_options(text, opts).ok()?;
    let root = doc.root_element();
    if root.tag_name().name() != "nmaprun" {
        return None;
    }
    // nmap that gave up says so in its run statistics: not a report of ports.
    let failed = child(root, "runstats")
        .and_then(|r| child(r, "finished"))
        .is_some_and(|f| f.attribute("exit") == Some("error"));
    if failed {
        return None;
    }
    let (mut out, mut bulk) = (Vec::new(), Vec::new());
    for host in root.children().filter(|n| n.has_tag_name("host")) {
        let address = host
            .children()
            .find(|n| n.has_tag_name("address") && n.attribute("addrtype") != Some("mac"))
            .and_then(|n| n.attribute("addr"))
            .unwrap_or_default();
        let Some(ports) = child(host, "ports") else {
            continue;
        };
        for port in ports.children().filter(|n| n.has_tag_name("port")) {
            if let Some(f) = finding(address, port) {
                out.push(f);
            }
        }
        for extra in ports.children().filter(|n| n.has_tag_name("extraports")) {
            let listed: Vec<&str> = extra
                .children()
                .filter(|n| n.has_tag_name("extrareasons"))
                .filter_map(|n| n.attribute("ports"))
                .collect();
            bulk.push(json!({
                "address": address,
                "state": extra.attribute("state").unwrap_or("unknown"),
                "count": extra.attribute("count").and_then(|c| c.parse::<u64>().ok()),
                "ports": (!listed.is_empty()).then(|| listed.join(",")),
            }));
        }
    }
    Some((out, json!({ "collapsed": bulk })))
}

/// One `<port>` of `address`.
fn finding(address: &str, port: roxmltree::Node<'_, '_>) -> Option<Value> {
    let number = port
        .attribute("portid")
        .and_then(|p| p.parse::<u16>().ok())?;
    let state = child(port, "state");
    let service = child(port, "service");
    let attr = |n: Option<roxmltree::Node<'_, '_>>, a: &str| {
        n.and_then(|n| n.attribute(a)).map(str::to_owned)
    };
    Some(json!({
        "address": address,
        "port": number,
        "protocol": port.attribute("protocol").unwrap_or("tcp"),
        "state": attr(state, "state").unwrap_or_else(|| "unknown".into()),
        "reason": attr(state, "reason"),
        "service": attr(service, "name"),
        "product": attr(service, "product"),
        "version": attr(service, "version"),
        "extrainfo": attr(service, "extrainfo"),
    }))
}

/// The ports of nmap's XML report, one by one.
#[cfg(test)]
fn parse_xml(bytes: &[u8]) -> Option<Vec<Value>> {
    parse_with_summary(bytes).map(|(f, _)| f)
}

#[cfg(test)]
mod tests {
    use super::*;

    const XML: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE nmaprun>
<nmaprun scanner="nmap" args="nmap -Pn -n -sT -sV" version="7.93">
<host><status state="up" reason="user-set"/>
<address addr="192.0.2.2" addrtype="ipv4"/>
<ports>
<extraports state="closed" count="3"><extrareasons reason="conn-refused" count="3" proto="tcp" ports="1-3"/></extraports>
<port protocol="tcp" portid="22"><state state="closed" reason="conn-refused" reason_ttl="0"/><service name="ssh" method="table" conf="3"/></port>
<port protocol="tcp" portid="2222"><state state="open" reason="syn-ack" reason_ttl="0"/><service name="ssh" product="OpenSSH" version="9.2p1 Debian 2+deb12u3" extrainfo="protocol 2.0" method="probed" conf="10"/></port>
</ports></host>
<runstats><finished time="1" exit="success"/></runstats>
</nmaprun>"#;

    #[test]
    fn ports_and_services_are_read_from_the_xml() {
        let f = parse_xml(XML.as_bytes()).unwrap();
        assert_eq!(f.len(), 2);
        assert_eq!(f[0]["port"], 22);
        assert_eq!(f[0]["state"], "closed");
        assert_eq!(f[1]["state"], "open");
        assert_eq!(f[1]["product"], "OpenSSH");
        assert_eq!(f[1]["version"], "9.2p1 Debian 2+deb12u3");
        assert_eq!(f[1]["address"], "192.0.2.2");
        let (_, summary) = parse_with_summary(XML.as_bytes()).unwrap();
        assert_eq!(
            summary["collapsed"],
            json!([{"address": "192.0.2.2", "state": "closed", "count": 3, "ports": "1-3"}])
        );
    }

    #[test]
    fn malformed_output_gives_no_findings_and_no_panic() {
        for bad in [
            &XML.as_bytes()[..XML.len() / 2],
            b"".as_slice(),
            b"\xff\xfe garbage",
            b"<other/>",
            b"<!DOCTYPE x [<!ENTITY a \"aaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;\"><!ENTITY c \"&b;&b;&b;&b;&b;&b;&b;&b;&b;\"><!ENTITY d \"&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;\">]><nmaprun>&d;&d;&d;&d;&d;&d;&d;</nmaprun>",
        ] {
            let f = parse_xml(bad);
            assert!(f.is_none_or(|f| f.is_empty()));
        }
        let gave_up = r#"<nmaprun><runstats><finished exit="error" errormsg="no route"/></runstats></nmaprun>"#;
        assert!(
            parse_xml(gave_up.as_bytes()).is_none(),
            "an error run is not a report"
        );
        let odd = r#"<nmaprun><host><ports><port portid="x"/><port portid="80"/></ports></host></nmaprun>"#;
        let f = parse_xml(odd.as_bytes()).unwrap();
        assert_eq!(f.len(), 1);
        assert_eq!(f[0]["state"], "unknown");
    }

    #[test]
    fn port_lists_are_checked_and_counted() {
        assert_eq!(check_ports("80", 10).unwrap(), "80");
        assert_eq!(check_ports("22,80-81,0443", 10).unwrap(), "22,80-81,443");
        assert!(
            check_ports("1-1024", 1000)
                .unwrap_err()
                .contains("1024 ports")
        );
        for bad in ["0", "65536", "90-80", "a", "1-", "-5", "1,,2"] {
            assert!(check_ports(bad, 100_000).is_err(), "{bad}");
        }
    }
}
