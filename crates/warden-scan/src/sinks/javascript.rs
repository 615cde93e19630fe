//! JavaScript and TypeScript: `server.tool("name", …, handler)` / `registerTool("name", …,
//! handler)` and the `setRequestHandler(CallToolRequestSchema, …)` dispatcher, and the sinks
//! their arguments reach.

use std::collections::HashMap;

use tree_sitter::Node;

use super::{Family, Grammar, Role, Walk, descendants, identifiers, literal, text};

/// Objects whose `exec`/`execSync` is the shell's (a `RegExp`'s `exec` is not).
const PROCESS_MODULES: &[&str] = &["child_process", "cp", "childProcess", "proc"];

fn is_function(n: Node<'_>) -> bool {
    matches!(
        n.kind(),
        "arrow_function" | "function_expression" | "function" | "function_declaration"
    )
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
    let grammar = JavaScript { uses_process };
    let budget = std::cell::Cell::new(super::WALK_BUDGET);
    let mut out = Vec::new();
    for call in all.iter().filter(|n| n.kind() == "call_expression") {
        let Some((role, handler)) = registration(*call, &defs, src) else {
            continue;
        };
        Walk {
            grammar: &grammar,
            role,
            handler,
            defs: &defs,
            src,
            budget: &budget,
        }
        .sinks(&mut out);
    }
    out
}

/// JavaScript's side of the walk; `uses_process` tells `child_process`'s bare `exec` from
/// another.
struct JavaScript {
    uses_process: bool,
}

impl Grammar for JavaScript {
    fn is_call(&self, n: Node<'_>) -> bool {
        matches!(n.kind(), "call_expression" | "new_expression")
    }

    fn callee<'t>(&self, call: Node<'t>) -> Option<Node<'t>> {
        call.child_by_field_name("function")
            .or_else(|| call.child_by_field_name("constructor"))
    }

    /// The family of a call (or construction) of `name` (its function as written) with arguments
    /// text `args`, given whether the file uses `child_process`.
    fn family(&self, name: &str, args: &str) -> Option<Family> {
        let uses_process = self.uses_process;
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
    fn params<'a>(&self, function: Node<'_>, src: &'a [u8]) -> Vec<&'a str> {
        function
            .child_by_field_name("parameters")
            .or_else(|| function.child_by_field_name("parameter"))
            .map(|p| identifiers(p, src))
            .unwrap_or_default()
    }

    /// The tool a dispatcher's branch is for: `case "…":` or an enclosing `if` comparing with a
    /// string.
    fn branch_tool(&self, node: Node<'_>, top: Node<'_>, src: &[u8]) -> Option<String> {
        let mut n = node.parent();
        while let Some(p) = n {
            if p.id() == top.id() {
                break;
            }
            let found = match p.kind() {
                "switch_case" => p.child_by_field_name("value").and_then(|v| literal(v, src)),
                "if_statement" => p
                    .child_by_field_name("consequence")
                    .filter(|b| {
                        b.start_byte() <= node.start_byte() && node.end_byte() <= b.end_byte()
                    })
                    .and(p.child_by_field_name("condition"))
                    .and_then(|c| super::equal_to(c, src)),
                _ => None,
            };
            if let Some(name) = found {
                return Some(name);
            }
            n = p.parent();
        }
        None
    }
}
