//! Python: FastMCP's `@….tool()` handlers and the low-level `@….call_tool()` dispatcher, and
//! the sinks their arguments reach.

use std::collections::HashMap;

use tree_sitter::Node;

use super::{Family, Grammar, Role, Walk, descendants, literal, text};

fn role(decorated: Node<'_>, def: Node<'_>, src: &[u8]) -> Option<Role> {
    let mut cursor = decorated.walk();
    for d in decorated.named_children(&mut cursor) {
        if d.kind() != "decorator" {
            continue;
        }
        let Some(expr) = d.named_child(0) else {
            continue;
        };
        let (callee, call) = match expr.kind() {
            "call" => (expr.child_by_field_name("function"), Some(expr)),
            _ => (Some(expr), None),
        };
        let name = callee.map(|c| text(c, src)).unwrap_or("");
        let last = name.rsplit('.').next().unwrap_or(name);
        if last == "call_tool" {
            return Some(Role::Dispatcher);
        }
        if last == "tool" {
            // `@mcp.tool(name="x")`, else the function's own name.
            let named = call
                .and_then(|c| c.child_by_field_name("arguments"))
                .and_then(|args| {
                    let mut cur = args.walk();
                    args.named_children(&mut cur)
                        .filter(|a| a.kind() == "keyword_argument")
                        .find(|a| {
                            a.child_by_field_name("name")
                                .is_some_and(|n| text(n, src) == "name")
                        })
                        .and_then(|a| a.child_by_field_name("value"))
                        .and_then(|v| literal(v, src))
                });
            let own = def
                .child_by_field_name("name")
                .map(|n| text(n, src).to_owned())?;
            return Some(Role::Tool(named.unwrap_or(own)));
        }
    }
    None
}

/// The sinks of a Python module: (tool, family, the call).
pub(super) fn sinks<'t>(root: Node<'t>, src: &[u8]) -> Vec<(String, Family, Node<'t>)> {
    let all = descendants(root);
    let imports: String = all
        .iter()
        .filter(|n| matches!(n.kind(), "import_statement" | "import_from_statement"))
        .map(|n| text(*n, src))
        .collect::<Vec<_>>()
        .join("\n");
    let defs: HashMap<&str, Node<'t>> = all
        .iter()
        .filter(|n| n.kind() == "function_definition")
        .filter_map(|n| Some((text(n.child_by_field_name("name")?, src), *n)))
        .collect();
    let grammar = Python { imports };
    let budget = std::cell::Cell::new(super::WALK_BUDGET);
    let mut out = Vec::new();
    for d in all.iter().filter(|n| n.kind() == "decorated_definition") {
        let Some(def) = d.child_by_field_name("definition") else {
            continue;
        };
        if def.kind() != "function_definition" {
            continue;
        }
        let Some(role) = role(*d, def, src) else {
            continue;
        };
        Walk {
            grammar: &grammar,
            role,
            handler: def,
            defs: &defs,
            src,
            budget: &budget,
        }
        .sinks(&mut out);
    }
    out
}

/// Python's side of the walk; `imports` tells a Jinja2 `Template` from `string.Template`.
struct Python {
    imports: String,
}

impl Grammar for Python {
    fn is_call(&self, n: Node<'_>) -> bool {
        n.kind() == "call"
    }

    fn callee<'t>(&self, call: Node<'t>) -> Option<Node<'t>> {
        call.child_by_field_name("function")
    }

    /// The family of a call `name` (its function as written), given the call node's arguments
    /// text and the file's imports.
    fn family(&self, name: &str, args: &str) -> Option<Family> {
        let imports = self.imports.as_str();
        let last = name.rsplit('.').next().unwrap_or(name);
        Some(match name {
            "eval" | "exec" | "compile" | "builtins.eval" | "builtins.exec" => Family::Evaluator,
            "os.system"
            | "os.popen"
            | "subprocess.getoutput"
            | "subprocess.getstatusoutput"
            | "commands.getoutput" => Family::Shell,
            "subprocess.run"
            | "subprocess.call"
            | "subprocess.Popen"
            | "subprocess.check_output"
            | "subprocess.check_call"
                if args.replace(' ', "").contains("shell=True") =>
            {
                Family::Shell
            }
            "yaml.unsafe_load" | "pickle.loads" | "pickle.load" | "cPickle.loads"
            | "dill.loads" | "marshal.loads" | "jsonpickle.decode" | "shelve.open" => {
                Family::Deserializer
            }
            "yaml.load" if !args.contains("SafeLoader") && !args.contains("CLoader") => {
                Family::Deserializer
            }
            "render_template_string"
            | "flask.render_template_string"
            | "jinja2.Template"
            | "mako.template.Template"
            | "tornado.template.Template" => Family::Template,
            "Template"
                if ["jinja2", "mako", "tornado.template"]
                    .iter()
                    .any(|m| imports.contains(m)) =>
            {
                Family::Template
            }
            _ if last == "from_string" && imports.contains("jinja2") => Family::Template,
            "requests.get"
            | "requests.post"
            | "requests.put"
            | "requests.delete"
            | "requests.head"
            | "requests.request"
            | "httpx.get"
            | "httpx.post"
            | "httpx.request"
            | "urlopen"
            | "urllib.request.urlopen"
            | "urllib.request.Request" => Family::Fetch,
            _ => return None,
        })
    }

    /// A function definition's parameter names.
    fn params<'a>(&self, def: Node<'_>, src: &'a [u8]) -> Vec<&'a str> {
        let Some(ps) = def.child_by_field_name("parameters") else {
            return Vec::new();
        };
        let mut cursor = ps.walk();
        ps.named_children(&mut cursor)
            .filter_map(|p| match p.kind() {
                "identifier" => Some(text(p, src)),
                _ => p
                    .child_by_field_name("name")
                    .or_else(|| p.named_child(0))
                    .filter(|n| n.kind() == "identifier")
                    .map(|n| text(n, src)),
            })
            .filter(|n| !matches!(*n, "self" | "cls" | "ctx" | "context"))
            .collect()
    }

    /// The tool a dispatcher's branch is for: the string an enclosing `if` compares with, or a
    /// `case "…":`.
    fn branch_tool(&self, node: Node<'_>, top: Node<'_>, src: &[u8]) -> Option<String> {
        let mut n = node.parent();
        while let Some(p) = n {
            if p.id() == top.id() {
                break;
            }
            let cond = match p.kind() {
                "if_statement" | "elif_clause" => p.child_by_field_name("condition"),
                "case_clause" => p.named_child(0),
                _ => None,
            };
            let inside_body = p
                .child_by_field_name("consequence")
                .or_else(|| p.child_by_field_name("body"))
                .is_some_and(|b| {
                    b.start_byte() <= node.start_byte() && node.end_byte() <= b.end_byte()
                });
            let found = cond
                .filter(|_| inside_body || p.kind() == "case_clause")
                .and_then(|c| {
                    if p.kind() == "case_clause" {
                        descendants(c).into_iter().find_map(|s| literal(s, src))
                    } else {
                        super::equal_to(c, src)
                    }
                });
            if let Some(name) = found {
                return Some(name);
            }
            n = p.parent();
        }
        None
    }
}
