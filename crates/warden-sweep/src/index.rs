//! `index.html`: one self-contained page with a table of every target (verdict, score,
//! categories, time, why) linking each report, sortable by clicking a column. Everything a
//! server or a list chose is escaped; the one script sorts rows and reads nothing else.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use crate::results::Outcome;
use crate::summary::Summary;

/// `s` escaped for HTML text and attributes.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

const SORT: &str = "document.querySelectorAll('th').forEach((th,i)=>th.onclick=()=>{\
const t=th.closest('table'),rows=[...t.tBodies[0].rows],d=th.dataset.d=th.dataset.d==='1'?'-1':'1';\
rows.sort((a,b)=>{const x=a.cells[i].dataset.k??a.cells[i].textContent,y=b.cells[i].dataset.k??b.cells[i].textContent;\
const n=parseFloat(x)-parseFloat(y);return (isNaN(n)?x.localeCompare(y):n)*d;});rows.forEach(r=>t.tBodies[0].appendChild(r));});";

/// The page; `reports` is the folder the links point into (to see which formats exist).
pub fn html(summary: &Summary, outcomes: &BTreeMap<String, Outcome>, reports: &Path) -> String {
    let mut o = String::from(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>warden sweep</title>\
         <style>body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse;width:100%}\
         th,td{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top;overflow-wrap:anywhere}\
         th{cursor:pointer;background:#f4f4f4}.PASS{color:#176}.LOW{color:#06c}.MEDIUM{color:#b60}\
         .HIGH,.CRITICAL{color:#b00;font-weight:bold}.INCONCLUSIVE,.ERROR{color:#666;font-style:italic}</style></head><body>\n",
    );
    let counts: Vec<String> = crate::summary::VERDICTS
        .iter()
        .filter_map(|v| summary.verdicts.get(*v).map(|n| format!("{v} {n}")))
        .collect();
    let _ = writeln!(
        o,
        "<h1>warden sweep</h1>\n<p>{} targets · {}</p>",
        summary.targets,
        esc(&counts.join(" · "))
    );
    o.push_str(
        "<table><thead><tr><th>target</th><th>version</th><th>verdict</th><th>score</th>\
         <th>categories</th><th>ms</th><th>why</th><th>reports</th></tr></thead><tbody>\n",
    );
    for x in outcomes.values() {
        let rank = crate::summary::VERDICTS
            .iter()
            .position(|v| *v == x.verdict)
            .unwrap_or(9);
        let links: Vec<String> = ["json", "html", "sarif"]
            .iter()
            .filter(|f| reports.join(format!("{}.{f}", x.slug)).is_file())
            .map(|f| format!("<a href=\"reports/{}.{f}\">{f}</a>", esc(&x.slug)))
            .collect();
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td class=\"{v}\" data-k=\"{rank}\">{v}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&x.target),
            esc(&x.version),
            x.score,
            esc(&x.categories.join(", ")),
            x.duration_ms,
            esc(x.error.as_deref().or(x.why.as_deref()).unwrap_or("")),
            links.join(" "),
            v = esc(&x.verdict),
        );
    }
    let _ = write!(
        o,
        "</tbody></table>\n<script>{SORT}</script>\n</body></html>\n"
    );
    o
}
