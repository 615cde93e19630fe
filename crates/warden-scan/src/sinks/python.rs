//! Python: FastMCP's `@….tool()` handlers and the low-level `@….call_tool()` dispatcher, and
//! the sinks their arguments reach.

use std::collections::HashMap;

use tree_sitter::Node;

use super::{Family, descendants, identifiers, literal, text};

/// Functions of a file a handler's calls are followed into, at most this deep.
const DEPTH: usize = 3;

/// The family of a call `name` (its function as written), given the call node's arguments
/// text and the file's imports.
fn family(name: &str, args: &str, imports: &str) -> Option<Family> {
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
        "yaml.unsafe_load" | "pickle.loads" | "pickle.load" | "cPickle.loads" | "dill.loads"
        | "marshal.loads" | "jsonpickle.decode" | "shelve.open" => Family::Deserializer,
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
fn params<'a>(def: Node<'_>, src: &'a [u8]) -> Vec<&'a str> {
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

/// How a decorated function is registered: a tool (with its name), the dispatcher, or not.
enum Role {
    Tool(String),
    Dispatcher,
}

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

/// The tool a dispatcher's branch is for: the string an enclosing `if` compares with, or a
/// `case "…":`.
fn branch_tool(node: Node<'_>, top: Node<'_>, src: &[u8]) -> Option<String> {
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
        if let Some(c) = cond.filter(|_| inside_body || p.kind() == "case_clause")
            && let Some(name) = descendants(c).into_iter().find_map(|s| literal(s, src))
        {
            return Some(name);
        }
        n = p.parent();
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
        let mut seen = Vec::new();
        let ctx = Ctx {
            role: &role,
            handler: def,
            defs: &defs,
            imports: &imports,
            src,
        };
        visit(&ctx, def, None, 0, &mut seen, &mut out);
    }
    out
}

struct Ctx<'c, 't> {
    role: &'c Role,
    handler: Node<'t>,
    defs: &'c HashMap<&'c str, Node<'t>>,
    imports: &'c str,
    src: &'c [u8],
}

fn visit<'t>(
    ctx: &Ctx<'_, 't>,
    def: Node<'t>,
    site: Option<Node<'t>>,
    depth: usize,
    seen: &mut Vec<usize>,
    out: &mut Vec<(String, Family, Node<'t>)>,
) {
    if seen.contains(&def.id()) {
        return;
    }
    seen.push(def.id());
    let src = ctx.src;
    let Some(body) = def.child_by_field_name("body") else {
        return;
    };
    let tainted = super::spread(body, src, params(def, src));
    for call in descendants(body).into_iter().filter(|n| n.kind() == "call") {
        let Some(function) = call.child_by_field_name("function") else {
            continue;
        };
        let name = text(function, src);
        let args = call.child_by_field_name("arguments");
        let reached = args.is_some_and(|a| identifiers(a, src).iter().any(|i| tainted.contains(i)));
        if !reached {
            continue;
        }
        // Where the call sits in the handler (for a dispatcher's branch): a callee's sink sits
        // where the handler called it.
        let at = site.unwrap_or(call);
        if let Some(f) = family(name, args.map_or("", |a| text(a, src)), ctx.imports) {
            let tool = match ctx.role {
                Role::Tool(t) => t.clone(),
                Role::Dispatcher => branch_tool(at, ctx.handler, src).unwrap_or_else(|| "*".into()),
            };
            out.push((tool, f, call));
        }
        if depth < DEPTH
            && let Some(callee) = ctx.defs.get(name)
        {
            visit(ctx, *callee, Some(at), depth + 1, seen, out);
        }
    }
}
