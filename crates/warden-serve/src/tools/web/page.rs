//! Reading a fetched page (inside the worker): its title, the content of the elements a CSS
//! selector picks (or the whole body) as readable text, Markdown or HTML, and its links,
//! resolved against the final URL and marked with whether the allowlist admits them. Scripts,
//! styles and other invisible parts never reach the text or the Markdown. Everything is
//! bounded: content by `max_chars` (and says so), links by [`MAX_LINKS`].

use std::collections::HashSet;

use scraper::{ElementRef, Html, Node, Selector};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::fetch::Fetched;

/// Links returned, at most.
pub const MAX_LINKS: usize = 200;
/// Characters of one link's text, at most.
const MAX_LINK_TEXT: usize = 200;
/// Elements whose content is never text.
const INVISIBLE: &[&str] = &[
    "script", "style", "noscript", "template", "svg", "iframe", "object", "head",
];
/// Elements after which text breaks onto a new line.
const BLOCKS: &[&str] = &[
    "p",
    "div",
    "br",
    "li",
    "ul",
    "ol",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "tr",
    "table",
    "section",
    "article",
    "header",
    "footer",
    "nav",
    "main",
    "aside",
    "pre",
    "blockquote",
    "dt",
    "dd",
    "figure",
    "figcaption",
    "form",
    "hr",
];

/// How `web_scrape` returns content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Readable text.
    Text,
    /// Markdown.
    Markdown,
    /// The selected elements' HTML.
    Html,
}

/// Whether `selector` is a CSS selector this reader understands (the server checks before a
/// sandbox starts).
pub fn selector_error(selector: &str) -> Option<String> {
    Selector::parse(selector).err().map(|e| e.to_string())
}

/// `web_scrape`'s result for a fetched page.
pub fn scrape(
    f: &Fetched,
    selector: Option<&str>,
    format: Format,
    max_chars: usize,
    allow: &[String],
) -> Value {
    let doc = Html::parse_document(&f.text());
    let title = first_text(&doc, "title");
    let scopes: Vec<ElementRef> = match selector.map(Selector::parse) {
        Some(Ok(sel)) => doc.select(&sel).collect(),
        // Checked by the server already; nothing matches a selector that does not parse.
        Some(Err(_)) => Vec::new(),
        None => body(&doc).into_iter().collect(),
    };
    let content = match format {
        Format::Html => scopes
            .iter()
            .map(ElementRef::html)
            .collect::<Vec<_>>()
            .join("\n"),
        Format::Text => scopes
            .iter()
            .map(|e| text(*e))
            .collect::<Vec<_>>()
            .join("\n\n"),
        Format::Markdown => {
            let html: String = scopes.iter().map(ElementRef::html).collect();
            markdown(&html)
        }
    };
    let (content, content_truncated) = cut_chars(content.trim(), max_chars);
    let (links, links_truncated) = links(&scopes, &f.final_url, allow);
    json!({
        "url": f.url,
        "final_url": f.final_url.as_str(),
        "status": f.status,
        "content_type": f.content_type,
        "title": title,
        "format": format,
        "matched": scopes.len(),
        "content": content,
        "content_truncated": content_truncated,
        "body_truncated": f.truncated,
        "links": links,
        "links_truncated": links_truncated,
        "redirects": f.redirects,
    })
}

/// The page's `<body>`, or its root when it has none.
fn body(doc: &Html) -> Option<ElementRef<'_>> {
    Selector::parse("body")
        .ok()
        .and_then(|s| doc.select(&s).next())
        .or_else(|| Some(doc.root_element()))
}

/// Characters of a title, at most.
pub const MAX_TITLE: usize = 1024;

fn first_text(doc: &Html, css: &str) -> Option<String> {
    let sel = Selector::parse(css).ok()?;
    let t = doc.select(&sel).next()?.text().collect::<String>();
    let t = cut_chars(&collapse(&t), MAX_TITLE).0;
    (!t.is_empty()).then_some(t)
}

/// Readable text of `el`: visible text only, blocks on lines of their own, runs of blank
/// space collapsed.
pub fn text(el: ElementRef) -> String {
    let mut out = String::new();
    walk(el, &mut out);
    out.lines()
        .map(collapse)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

fn walk(el: ElementRef, out: &mut String) {
    let name = el.value().name();
    if INVISIBLE.contains(&name) {
        return;
    }
    let block = BLOCKS.contains(&name);
    if block {
        out.push('\n');
    }
    for child in el.children() {
        match child.value() {
            Node::Text(t) => out.push_str(t),
            Node::Element(_) => {
                if let Some(e) = ElementRef::wrap(child) {
                    walk(e, out);
                }
            }
            _ => {}
        }
    }
    if block {
        out.push('\n');
    }
}

/// `s` with runs of blank space as one space, trimmed.
pub fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `html` as Markdown, invisible elements dropped.
pub fn markdown(html: &str) -> String {
    htmd::HtmlToMarkdown::builder()
        .skip_tags(INVISIBLE.to_vec())
        .build()
        .convert(html)
        .unwrap_or_default()
}

/// `s` cut to `max` characters; whether it was cut.
pub fn cut_chars(s: &str, max: usize) -> (String, bool) {
    match s.char_indices().nth(max) {
        Some((end, _)) => (s[..end].to_owned(), true),
        None => (s.to_owned(), false),
    }
}

/// The `http(s)` links under `scopes`, resolved, each once, at most [`MAX_LINKS`].
fn links(scopes: &[ElementRef], base: &url::Url, allow: &[String]) -> (Vec<Value>, bool) {
    let Ok(a) = Selector::parse("a[href]") else {
        return (Vec::new(), false);
    };
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for scope in scopes {
        let anchors = scope.select(&a).chain(
            // A selected `<a>` is its own link.
            (scope.value().name() == "a").then_some(*scope),
        );
        for el in anchors {
            let Some(href) = el.value().attr("href") else {
                continue;
            };
            let Ok(url) = base.join(href.trim()) else {
                continue;
            };
            if !matches!(url.scheme(), "http" | "https") || !seen.insert(url.to_string()) {
                continue;
            }
            if out.len() == MAX_LINKS {
                return (out, true);
            }
            let (text, _) = cut_chars(&collapse(&el.text().collect::<String>()), MAX_LINK_TEXT);
            out.push(json!({
                "url": url.as_str(),
                "text": text,
                "allowed": super::allow::check(&url, allow).is_ok(),
            }));
        }
    }
    (out, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"<html><head><title> The  Title </title><style>p{}</style></head>
        <body><nav><a href="/home">Home</a></nav>
        <main id="m"><h1>Heading</h1><p>First <b>bold</b> para.</p>
        <script>var secret = "not text";</script>
        <p>Second <a href="https://other.test/x">out</a> and <a href="/home">again</a>
        <a href="javascript:alert(1)">js</a></p></main></body></html>"#;

    fn fetched(body: &str) -> Fetched {
        Fetched {
            url: "http://svc.test:8080/p".into(),
            final_url: url::Url::parse("http://svc.test:8080/p").unwrap(),
            status: 200,
            headers: Vec::new(),
            content_type: Some("text/html".into()),
            body: body.as_bytes().to_vec(),
            truncated: false,
            redirects: Vec::new(),
        }
    }

    fn allow() -> Vec<String> {
        vec!["svc.test:8080".into()]
    }

    #[test]
    fn text_has_the_visible_words_in_blocks_and_no_script() {
        let v = scrape(&fetched(PAGE), None, Format::Text, 10_000, &allow());
        assert_eq!(v["title"], "The Title");
        let c = v["content"].as_str().unwrap();
        assert!(c.contains("Heading\nFirst bold para."), "{c}");
        assert!(!c.contains("secret") && !c.contains("p{}"), "{c}");
        let links = v["links"].as_array().unwrap();
        assert_eq!(links.len(), 2, "{links:?}");
        assert_eq!(links[0]["url"], "http://svc.test:8080/home");
        assert_eq!(links[0]["allowed"], true);
        assert_eq!(links[1]["url"], "https://other.test/x");
        assert_eq!(links[1]["allowed"], false);
    }

    #[test]
    fn a_selector_narrows_content_and_links() {
        let v = scrape(
            &fetched(PAGE),
            Some("main p"),
            Format::Markdown,
            10_000,
            &allow(),
        );
        assert_eq!(v["matched"], 2);
        let c = v["content"].as_str().unwrap();
        assert!(c.contains("First **bold** para."), "{c}");
        assert!(c.contains("[out](https://other.test/x)"), "{c}");
        assert!(!c.contains("Heading"), "{c}");
        let html = scrape(&fetched(PAGE), Some("h1"), Format::Html, 10_000, &allow());
        assert_eq!(html["content"], "<h1>Heading</h1>");
        let none = scrape(
            &fetched(PAGE),
            Some("table"),
            Format::Text,
            10_000,
            &allow(),
        );
        assert_eq!(
            (none["matched"].as_u64(), none["content"].as_str()),
            (Some(0), Some(""))
        );
    }

    #[test]
    fn content_and_links_are_bounded() {
        let v = scrape(&fetched(PAGE), None, Format::Text, 7, &allow());
        assert_eq!(v["content"], "Home\nHe");
        assert_eq!(v["content_truncated"], true);
        let many: String = (0..500).map(|i| format!("<a href='/l{i}'>l</a>")).collect();
        let v = scrape(&fetched(&many), None, Format::Text, 10, &allow());
        assert_eq!(v["links"].as_array().unwrap().len(), MAX_LINKS);
        assert_eq!(v["links_truncated"], true);
    }

    #[test]
    fn bad_selectors_are_named() {
        assert!(selector_error("main > p.x").is_none());
        assert!(selector_error("p[").is_some());
        assert!(selector_error("").is_some());
    }
}
