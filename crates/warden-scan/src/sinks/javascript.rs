//! JavaScript and TypeScript: `server.tool("name", …, handler)` / `registerTool("name", …,
//! handler)` and the `setRequestHandler(CallToolRequestSchema, …)` dispatcher, and the sinks
//! their arguments reach.

use std::collections::HashMap;

use tree_sitter::Node;

use super::{Family, descendants, identifiers, literal, text};

/// Functions of a file a handler's calls are followed into, at most this deep.
const DEPTH: usize = 3;

/// Objects whose `exec`/`execSync` is the shell's (a `RegExp`'s `exec` is not).
const PROCESS_MODULES: &[&str] = &["child_process", "cp", "childProcess", "proc"];

/// The family of a call (or construction) of `name` (its function as written) with arguments
/// text `args`, given whether the file uses `child_process`.
fn family(name: &str, args: &str, uses_process: bool) -> Option<Family> {
    let (object, last) = name.rsplit_once('.').unwrap_or(("", name));
    Some(match (object, last) {
        ("", "eval" | "Function") => Family::Evaluator,
        ("vm", "runInNewContext" | "runInThisContext" | "runInContext" | "compileFunction")
        | ("vm", "Script") => Family::Evaluator,
        ("", "exec" | "execSync") if uses_process => Family::Shell,
        (o, "exec" | "execSync") if PROCESS_MODULES.contains(&o) => Family::Shell,
        ("", "spawn" | "spawnSync" | "execFile") | (_, "spawn" | "spawnSync" | "execFile")
            if uses_process && args.replace(' ', "").contains("shell:true") =>
        {
            Family::Shell
        }
        ("ejs", "render" | "compile")
        | ("Handlebars" | "handlebars", "compile")
        | ("_" | "lodash", "template")
        | ("nunjucks", "renderString")
        | ("pug", "render" | "compile")
        | ("Mustache" | "mustache", "render") => Family::Template,
        ("serialize", "unserialize") | ("", "unserialize") => Family::Deserializer,
        ("", "fetch" | "axios" | "got")
        | ("axios" | "got", "get" | "post" | "put" | "request")
        | ("http" | "https", "get" | "request") => Family::Fetch,
        _ => return None,
    })
}

/// The names a function's parameters bind (destructured ones too).
fn params<'a>(function: Node<'_>, src: &'a [u8]) -> Vec<&'a str> {
    function
        .child_by_field_name("parameters")
        .or_else(|| function.child_by_field_name("parameter"))
        .map(|p| identifiers(p, src))
        .unwrap_or_default()
}

fn is_function(n: Node<'_>) -> bool {
    matches!(
        n.kind(),
        "arrow_function" | "function_expression" | "function" | "function_declaration"
    )
}

/// How a handler is registered.
enum Role {
    Tool(String),
    Dispatcher,
}

/// The handler a registration call hands over (its last function argument, or a function of
/// the file named there) and its role.
fn registration<'t>(
    call: Node<'t>,
    defs: &HashMap<&str, Node<'t>>,
    src: &[u8],
) -> Option<(Role, Node<'t>)> {
    let function = call.child_by_field_name("function")?;
    let name = text(function, src);
    let last = name.rsplit('.').next().unwrap_or(name);
    let args = call.child_by_field_name("arguments")?;
    let mut cursor = args.walk();
    let list: Vec<Node<'t>> = args.named_children(&mut cursor).collect();
    let handler = list.iter().rev().find_map(|a| {
        if is_function(*a) {
            Some(*a)
        } else if a.kind() == "identifier" {
            defs.get(text(*a, src)).copied()
        } else {
            None
        }
    })?;
    match last {
        "tool" | "registerTool" | "addTool" => {
            let tool = list.first().and_then(|a| literal(*a, src))?;
            Some((Role::Tool(tool), handler))
        }
        "setRequestHandler"
            if list
                .first()
                .is_some_and(|a| text(*a, src).contains("CallToolRequest")) =>
        {
            Some((Role::Dispatcher, handler))
        }
        _ => None,
    }
}

/// The tool a dispatcher's branch is for: `case "…":` or an enclosing `if` comparing with a
/// string.
fn branch_tool(node: Node<'_>, top: Node<'_>, src: &[u8]) -> Option<String> {
    let mut n = node.parent();
    while let Some(p) = n {
        if p.id() == top.id() {
            break;
        }
        let cond = match p.kind() {
            "switch_case" => p.child_by_field_name("value"),
            "if_statement" => p
                .child_by_field_name("consequence")
                .filter(|b| b.start_byte() <= node.start_byte() && node.end_byte() <= b.end_byte())
                .and(p.child_by_field_name("condition")),
            _ => None,
        };
        if let Some(name) =
            cond.and_then(|c| descendants(c).into_iter().find_map(|s| literal(s, src)))
        {
            return Some(name);
        }
        n = p.parent();
    }
    None
}

/// The sinks of a JavaScript or TypeScript module: (tool, family, the call).
pub(super) fn sinks<'t>(root: Node<'t>, src: &[u8]) -> Vec<(String, Family, Node<'t>)> {
    let all = descendants(root);
    let uses_process = text(root, src).contains("child_process");
    let mut defs: HashMap<&str, Node<'t>> = HashMap::new();
    for n in &all {
        match n.kind() {
            "function_declaration" => {
                if let Some(name) = n.child_by_field_name("name") {
                    defs.insert(text(name, src), *n);
                }
            }
            // `const f = (…) => …` / `= function (…) {…}`
            "variable_declarator" => {
                if let (Some(name), Some(value)) = (
                    n.child_by_field_name("name"),
                    n.child_by_field_name("value"),
                ) && is_function(value)
                {
                    defs.insert(text(name, src), value);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for call in all.iter().filter(|n| n.kind() == "call_expression") {
        let Some((role, handler)) = registration(*call, &defs, src) else {
            continue;
        };
        let mut seen = Vec::new();
        let ctx = Ctx {
            role: &role,
            handler,
            defs: &defs,
            uses_process,
            src,
        };
        visit(&ctx, handler, None, 0, &mut seen, &mut out);
    }
    out
}

struct Ctx<'c, 't> {
    role: &'c Role,
    handler: Node<'t>,
    defs: &'c HashMap<&'c str, Node<'t>>,
    uses_process: bool,
    src: &'c [u8],
}

fn visit<'t>(
    ctx: &Ctx<'_, 't>,
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
    let src = ctx.src;
    let Some(body) = function.child_by_field_name("body") else {
        return;
    };
    let tainted = super::spread(body, src, params(function, src));
    for call in descendants(body)
        .into_iter()
        .filter(|n| matches!(n.kind(), "call_expression" | "new_expression"))
    {
        let Some(callee) = call
            .child_by_field_name("function")
            .or_else(|| call.child_by_field_name("constructor"))
        else {
            continue;
        };
        let name = text(callee, src);
        let args = call.child_by_field_name("arguments");
        let reached = args.is_some_and(|a| identifiers(a, src).iter().any(|i| tainted.contains(i)));
        if !reached {
            continue;
        }
        let at = site.unwrap_or(call);
        if let Some(f) = family(name, args.map_or("", |a| text(a, src)), ctx.uses_process) {
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
