//! Dangerous sinks reached from a tool's handler, found in the project's own Python and
//! JavaScript/TypeScript source with a real parser (tree-sitter): evaluators (`eval`, `exec`,
//! `compile`, `new Function`, `vm.runIn*`), shells (`os.system`, `subprocess(…, shell=True)`,
//! `child_process.exec`), template engines rendering what they were given (Jinja2, Mako,
//! `render_template_string`, EJS, Handlebars, lodash, Nunjucks, Pug), unsafe deserializers
//! (`yaml.load` without a safe loader, `yaml.unsafe_load`, `pickle.loads`, `node-serialize`)
//! and fetches of a URL (`requests`, `httpx`, `urlopen`, `fetch`, `axios`).
//!
//! A sink counts only when one of the handler's parameters (or, one call deeper, the callee's)
//! appears among its arguments: a fixed `eval("1+1")` or a fetch of a constant URL is not the
//! caller's to aim. Handlers are found by how the SDKs register tools: FastMCP's
//! `@mcp.tool()` (its `name=` or the function's name), the low-level `@server.call_tool()`
//! dispatcher and `setRequestHandler(CallToolRequestSchema, …)` (the tool named by the
//! enclosing `if name == "…"` or `case "…":`, else `*`), and `server.tool("name", …)` /
//! `registerTool("name", …)`. Functions of the same file that a handler calls are followed
//! three deep.
//!
//! These are static findings: what a tool *may* do. The detonation aims the matching payloads
//! at the tool first, and a payload that works confirms the sink. Bounded like the source hints
//! (files, bytes, entries); a file that does not parse is skipped.

mod javascript;
mod python;

use std::collections::HashMap;
use std::path::Path;

use serde::Serialize;
use tree_sitter::Node;

/// What kind of sink, and so which payloads prove it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// Code evaluated: `eval`, `exec`, `new Function`, `vm`.
    Evaluator,
    /// A template built from input.
    Template,
    /// An unsafe deserializer.
    Deserializer,
    /// A command run by a shell.
    Shell,
    /// A URL fetched.
    Fetch,
}

impl Family {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Family::Evaluator => "evaluator",
            Family::Template => "template",
            Family::Deserializer => "deserializer",
            Family::Shell => "shell",
            Family::Fetch => "fetch",
        }
    }
}

/// One sink reached from a tool's handler.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Sink {
    /// The tool (`*`: a dispatcher's, tool not told).
    pub tool: String,
    /// Its family.
    pub family: Family,
    /// The call as written (cut to 80 characters).
    pub call: String,
    /// The file, relative to the project.
    pub file: String,
    /// The line (1-based).
    pub line: usize,
}

impl Sink {
    /// The static finding for this sink: low context (`dangerous-sink`), tied to its tool; the
    /// detonation's payloads are what prove it.
    pub fn finding(&self) -> warden_events::Finding {
        use warden_events::{Category, Severity};
        let category = match self.family {
            Family::Evaluator | Family::Template | Family::Deserializer => Category::CodeInjection,
            Family::Shell => Category::CommandInjection,
            Family::Fetch => Category::Ssrf,
        };
        let who = if self.tool == "*" {
            "the tool dispatcher".to_owned()
        } else {
            format!("the tool {}", self.tool)
        };
        let mut f = crate::capabilities::finding(
            category,
            "dangerous-sink",
            Severity::Low,
            &self.file,
            format!(
                "{who} passes its arguments to {} ({}) at {}:{}",
                self.call,
                self.family.name(),
                self.file,
                self.line
            ),
            "Static context: the detonation aims this sink's payloads at the tool first; a payload that works proves it.",
        );
        if self.tool != "*" {
            f.tool = Some(self.tool.clone());
        }
        f
    }
}

/// Time one file's parse may take.
const PARSE_TIME: std::time::Duration = std::time::Duration::from_secs(2);

/// Nodes one file's walks may visit, in all (a hostile file of nested calls or thousands of
/// handlers sharing one large function is cut short, not followed for hours).
const WALK_BUDGET: usize = 2_000_000;

/// Sinks reported at most.
pub const MAX_SINKS: usize = 500;

/// The sinks in one source file's `text` (`python` or JavaScript/TypeScript, `typescript`
/// for `.ts`), its path `file` as reported.
pub fn in_file(text: &str, file: &str, python: bool, typescript: bool) -> Vec<Sink> {
    let mut parser = tree_sitter::Parser::new();
    let language: tree_sitter::Language = if python {
        tree_sitter_python::LANGUAGE.into()
    } else if typescript {
        tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into()
    } else {
        tree_sitter_javascript::LANGUAGE.into()
    };
    if parser.set_language(&language).is_err() {
        return Vec::new();
    }
    // A parse that runs past its time is stopped (the file is then skipped).
    let src = text.as_bytes();
    let started = std::time::Instant::now();
    let mut progress = |_: &tree_sitter::ParseState| {
        if started.elapsed() > PARSE_TIME {
            std::ops::ControlFlow::Break(())
        } else {
            std::ops::ControlFlow::Continue(())
        }
    };
    let options = tree_sitter::ParseOptions::new().progress_callback(&mut progress);
    let Some(tree) =
        parser.parse_with_options(&mut |i, _| &src[i.min(src.len())..], None, Some(options))
    else {
        return Vec::new();
    };
    let found = if python {
        python::sinks(tree.root_node(), src)
    } else {
        javascript::sinks(tree.root_node(), src)
    };
    let mut out: Vec<Sink> = found
        .into_iter()
        .map(|(tool, family, node)| Sink {
            tool,
            family,
            call: shown(node, src),
            file: file.to_owned(),
            line: node.start_position().row + 1,
        })
        .collect();
    out.sort_by(|a, b| (a.line, &a.tool, a.family).cmp(&(b.line, &b.tool, b.family)));
    out.dedup();
    out
}

/// The sinks of the project under `root`, and whether the walk stopped at a limit.
pub fn find(root: &Path) -> (Vec<Sink>, bool) {
    let mut out = Vec::new();
    let capped = crate::capabilities::source::walk(root, &mut |rel, python, text| {
        let typescript = [".ts", ".mts", ".cts"].iter().any(|x| rel.ends_with(x));
        out.extend(in_file(text, rel, python, typescript));
    });
    let over = out.len() > MAX_SINKS;
    out.truncate(MAX_SINKS);
    (out, capped || over)
}

/// A node's text, on one line, cut to 80 characters.
fn shown(node: Node<'_>, src: &[u8]) -> String {
    let text = text(node, src);
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() > 80 {
        format!("{}…", line.chars().take(79).collect::<String>())
    } else {
        line
    }
}

/// A node's source text ("" when it is not UTF-8).
fn text<'a>(node: Node<'_>, src: &'a [u8]) -> &'a str {
    node.utf8_text(src).unwrap_or("")
}

/// Every node below `node` (itself included), depth first, in source order.
fn descendants(node: Node<'_>) -> Vec<Node<'_>> {
    let mut out = Vec::new();
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        out.push(n);
        let mut cursor = n.walk();
        let children: Vec<Node<'_>> = n.children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
    out
}

/// Whether `n` is a name (`shorthand_property_identifier_pattern`: `({ expression }) =>`).
fn is_identifier(n: Node<'_>) -> bool {
    matches!(
        n.kind(),
        "identifier" | "shorthand_property_identifier_pattern"
    )
}

/// The identifiers below `node`.
fn identifiers<'a>(node: Node<'_>, src: &'a [u8]) -> Vec<&'a str> {
    descendants(node)
        .into_iter()
        .filter(|n| is_identifier(*n))
        .map(|n| text(n, src))
        .collect()
}

/// How a handler is registered: as one tool (its name), or as the dispatcher of them all.
pub(super) enum Role {
    Tool(String),
    Dispatcher,
}

/// What differs between the languages on the walk from a handler to its sinks.
pub(super) trait Grammar {
    /// Whether `n` is a call (or a construction).
    fn is_call(&self, n: Node<'_>) -> bool;
    /// What a call calls.
    fn callee<'t>(&self, call: Node<'t>) -> Option<Node<'t>>;
    /// The family of a call of `name` (as written) with arguments `args` (as written).
    fn family(&self, name: &str, args: &str) -> Option<Family>;
    /// The names a function's parameters bind.
    fn params<'a>(&self, function: Node<'_>, src: &'a [u8]) -> Vec<&'a str>;
    /// The tool of the dispatcher's branch that holds `at` (below `top`, the handler): the
    /// string an enclosing branch compares for equality (`if name == "…"`, `case "…":`).
    fn branch_tool(&self, at: Node<'_>, top: Node<'_>, src: &[u8]) -> Option<String>;
}

/// One handler's walk: from its parameters to the sinks they reach, into the file's own
/// functions it calls ([`DEPTH`] deep), within the file's [`WALK_BUDGET`].
pub(super) struct Walk<'c, 't> {
    pub grammar: &'c dyn Grammar,
    pub role: Role,
    pub handler: Node<'t>,
    pub defs: &'c HashMap<&'c str, Node<'t>>,
    pub src: &'c [u8],
    /// Nodes the file's walks may still visit ([`WALK_BUDGET`] per file).
    pub budget: &'c std::cell::Cell<usize>,
}

/// Functions of a file a handler's calls are followed into, at most this deep.
const DEPTH: usize = 3;

impl<'t> Walk<'_, 't> {
    /// The sinks the handler reaches: (tool, family, the call).
    pub fn sinks(&self, out: &mut Vec<(String, Family, Node<'t>)>) {
        self.visit(self.handler, None, 0, &mut Vec::new(), out);
    }

    fn visit(
        &self,
        function: Node<'t>,
        site: Option<Node<'t>>,
        depth: usize,
        seen: &mut Vec<usize>,
        out: &mut Vec<(String, Family, Node<'t>)>,
    ) {
        if seen.contains(&function.id()) {
            return;
        }
        seen.push(function.id());
        let (g, src) = (self.grammar, self.src);
        let Some(body) = function.child_by_field_name("body") else {
            return;
        };
        // Counted before the walk (the tree knows its sizes): a budget spent costs nothing.
        let Some(left) = self.budget.get().checked_sub(body.descendant_count() * 3) else {
            self.budget.set(0);
            return;
        };
        self.budget.set(left);
        let nodes = descendants(body);
        let tainted = spread(&nodes, src, g.params(function, src));
        // Where the tainted names are used, in order: a call is reached when one lies within
        // its arguments (a binary search, not a walk of each call's arguments).
        let marks: Vec<usize> = nodes
            .iter()
            .filter(|n| is_identifier(**n) && tainted.contains(text(**n, src)))
            .map(Node::start_byte)
            .collect();
        for call in nodes.iter().copied().filter(|n| g.is_call(*n)) {
            let Some(callee) = g.callee(call) else {
                continue;
            };
            let name = text(callee, src);
            let args = call.child_by_field_name("arguments");
            let reached = args.is_some_and(|a| {
                let first = marks.partition_point(|m| *m < a.start_byte());
                marks.get(first).is_some_and(|m| *m < a.end_byte())
            });
            if !reached {
                continue;
            }
            // Where the call sits in the handler (for a dispatcher's branch): a callee's sink
            // sits where the handler called it.
            let at = site.unwrap_or(call);
            if let Some(f) = g.family(name, args.map_or("", |a| text(a, src))) {
                let tool = match &self.role {
                    Role::Tool(t) => t.clone(),
                    Role::Dispatcher => g
                        .branch_tool(at, self.handler, src)
                        .unwrap_or_else(|| "*".into()),
                };
                out.push((tool, f, call));
            }
            if depth < DEPTH
                && let Some(next) = self.defs.get(name)
            {
                self.visit(*next, Some(at), depth + 1, seen, out);
            }
        }
    }
}

/// `params` (a function's parameters) with the names assigned, among `nodes` (the function
/// body's), from expressions that hold a tainted name (`t = request.params.arguments.template`),
/// followed three rounds.
fn spread<'a>(
    nodes: &[Node<'_>],
    src: &'a [u8],
    params: Vec<&'a str>,
) -> std::collections::HashSet<&'a str> {
    let mut tainted: std::collections::HashSet<&'a str> = params.into_iter().collect();
    let assignments: Vec<(Node<'_>, Node<'_>)> = nodes
        .iter()
        .filter_map(|n| {
            let (l, r) = match n.kind() {
                "assignment" | "assignment_expression" | "augmented_assignment" => {
                    ("left", "right")
                }
                "variable_declarator" => ("name", "value"),
                _ => return None,
            };
            Some((n.child_by_field_name(l)?, n.child_by_field_name(r)?))
        })
        .take(10_000)
        .collect();
    for _ in 0..3 {
        let before = tainted.len();
        for (left, right) in &assignments {
            if identifiers(*right, src).iter().any(|i| tainted.contains(i)) {
                tainted.extend(identifiers(*left, src));
            }
        }
        if tainted.len() == before {
            break;
        }
    }
    tainted
}

/// The string literal compared for equality in `cond` (`name == "calc"`, `"calc" === name`):
/// the comparison with a name (`name`, `request.params.name`, `tool_name`) first, else the
/// first; never the operand of `!=`, `<` or `in`.
fn equal_to(cond: Node<'_>, src: &[u8]) -> Option<String> {
    let found: Vec<(bool, String)> = descendants(cond)
        .into_iter()
        .filter_map(|n| {
            let equality = match n.kind() {
                // Python: `a == b` (the operator is an unnamed child).
                "comparison_operator" => {
                    let mut cursor = n.walk();
                    let ops: Vec<&str> = n
                        .children(&mut cursor)
                        .filter(|c| !c.is_named())
                        .map(|c| c.kind())
                        .collect();
                    ops == ["=="]
                }
                // JavaScript: `a === b`.
                "binary_expression" => n
                    .child_by_field_name("operator")
                    .is_some_and(|o| matches!(text(o, src), "==" | "===")),
                _ => false,
            };
            if !equality {
                return None;
            }
            let mut cursor = n.walk();
            let operands: Vec<Node<'_>> = n.named_children(&mut cursor).collect();
            let lit = operands.iter().find_map(|c| literal(*c, src))?;
            let of_name = operands.iter().any(|c| {
                literal(*c, src).is_none() && text(*c, src).to_ascii_lowercase().ends_with("name")
            });
            Some((of_name, lit))
        })
        .collect();
    found
        .iter()
        .find(|(of_name, _)| *of_name)
        .or(found.first())
        .map(|(_, lit)| lit.clone())
}

/// The content of a string literal node (quotes and prefixes removed), when nothing is
/// interpolated in it.
fn literal(node: Node<'_>, src: &[u8]) -> Option<String> {
    if node.kind() != "string" {
        return None;
    }
    if descendants(node)
        .iter()
        .any(|n| matches!(n.kind(), "interpolation" | "template_substitution"))
    {
        return None;
    }
    let raw = text(node, src);
    let body = raw.trim_start_matches(|c: char| c.is_ascii_alphabetic());
    let q = body.chars().next().filter(|q| matches!(q, '"' | '\''))?;
    Some(body.trim_matches(q).to_owned())
}

#[cfg(test)]
mod tests;
