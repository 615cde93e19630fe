use super::*;

fn found(text: &str, file: &str) -> Vec<(String, Family, usize)> {
    let python = file.ends_with(".py");
    in_file(text, file, python, file.ends_with(".ts"))
        .into_iter()
        .map(|s| (s.tool, s.family, s.line))
        .collect()
}

#[test]
fn fastmcp_tools_and_the_sinks_their_arguments_reach() {
    let src = r#"
import subprocess, yaml, pickle, requests
from mcp.server.fastmcp import FastMCP
from jinja2 import Template

mcp = FastMCP("x")

def _run(expr):
    return eval(expr)

@mcp.tool()
def calculate(expression: str) -> str:
    return str(_run(expression))

@mcp.tool(name="render")
def greet(name: str) -> str:
    return Template("Hello " + name).render()

@mcp.tool()
def load(text: str, blob: str):
    a = yaml.load(text, Loader=yaml.SafeLoader)
    b = yaml.load(text)
    return pickle.loads(blob)

@mcp.tool()
def shell(cmd: str):
    subprocess.run(["ls", cmd])
    return subprocess.run(cmd, shell=True)

@mcp.tool()
def fixed() -> str:
    return str(eval("1+1")) + requests.get("https://example.test/").text

def not_a_tool(x):
    return eval(x)
"#;
    let f = found(src, "server.py");
    assert!(
        f.contains(&("calculate".into(), Family::Evaluator, 9)),
        "{f:?}"
    );
    assert!(
        f.contains(&("render".into(), Family::Template, 17)),
        "{f:?}"
    );
    assert!(
        f.contains(&("load".into(), Family::Deserializer, 22)),
        "{f:?}"
    );
    assert!(
        f.contains(&("load".into(), Family::Deserializer, 23)),
        "{f:?}"
    );
    assert!(
        !f.iter().any(|(_, _, l)| *l == 21),
        "a safe loader is no sink: {f:?}"
    );
    assert!(f.contains(&("shell".into(), Family::Shell, 28)), "{f:?}");
    assert!(
        !f.iter().any(|(_, _, l)| *l == 27),
        "an argv list is no shell: {f:?}"
    );
    assert!(
        !f.iter().any(|(t, _, _)| t == "fixed"),
        "constants are not the caller's to aim: {f:?}"
    );
    assert!(
        !f.iter().any(|(_, _, l)| *l == 35),
        "not reached from a tool: {f:?}"
    );
}

#[test]
fn a_dispatchers_branches_name_their_tools() {
    let src = r#"
import os
@server.call_tool()
async def handle(name: str, arguments: dict):
    if name == "run":
        os.system(arguments["command"])
    elif name == "calc":
        return eval(arguments["expr"])
    return exec(arguments["code"])
"#;
    let f = found(src, "s.py");
    assert!(f.contains(&("run".into(), Family::Shell, 6)), "{f:?}");
    // Found by review: only an equality names the branch, the one with the name first.
    let src2 = r#"
import os
@server.call_tool()
async def handle(name, arguments):
    if name != "safe":
        os.system(arguments["c"])
    if arguments.get("mode") == "x" and name == "calc":
        return eval(arguments["e"])
"#;
    let g = found(src2, "t.py");
    assert!(g.contains(&("*".into(), Family::Shell, 6)), "{g:?}");
    assert!(g.contains(&("calc".into(), Family::Evaluator, 8)), "{g:?}");
    assert!(f.contains(&("calc".into(), Family::Evaluator, 8)), "{f:?}");
    assert!(f.contains(&("*".into(), Family::Evaluator, 9)), "{f:?}");
}

#[test]
fn javascript_and_typescript_registrations() {
    let js = r#"
const { exec } = require("child_process");
const vm = require("vm");
function evaluate(code) { return vm.runInNewContext(code); }
server.tool("calc", "Calculate", { expression: z.string() }, async ({ expression }) => {
  return { content: [{ type: "text", text: String(eval(expression)) }] };
});
server.registerTool("run", { inputSchema: {} }, async (args) => {
  exec(args.command);
  const re = /x/;
  re.exec(args.command);
  return evaluate(args.script);
});
server.tool("fetcher", "Fetch", {}, async ({ url }) => fetch(url));
server.tool("fixed", "Fixed", {}, async () => eval("1"));
"#;
    let f = found(js, "index.js");
    assert!(f.contains(&("calc".into(), Family::Evaluator, 6)), "{f:?}");
    assert!(f.contains(&("run".into(), Family::Shell, 9)), "{f:?}");
    assert!(
        !f.iter().any(|(_, _, l)| *l == 11),
        "a RegExp's exec: {f:?}"
    );
    assert!(f.contains(&("run".into(), Family::Evaluator, 4)), "{f:?}");
    assert!(f.contains(&("fetcher".into(), Family::Fetch, 14)), "{f:?}");
    assert!(!f.iter().any(|(t, _, _)| t == "fixed"), "{f:?}");

    let ts = r#"
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
server.setRequestHandler(CallToolRequestSchema, async (request: CallToolRequest) => {
  switch (request.params.name) {
    case "render": {
      const t: string = request.params.arguments.template as string;
      return ejs.render(t, {});
    }
    default:
      return new Function(request.params.arguments.body as string)();
  }
});
"#;
    let f = found(ts, "src/index.ts");
    assert!(f.contains(&("render".into(), Family::Template, 7)), "{f:?}");
    assert!(f.contains(&("*".into(), Family::Evaluator, 10)), "{f:?}");
}

#[test]
fn garbage_and_huge_input_are_bounded() {
    assert!(found("def (((:\n  eval(", "x.py").is_empty());
    assert!(found("server.tool(\"a\", async (x) => { eval(x", "x.js").len() <= 1);
    let deep = format!("{}{}", "(".repeat(10_000), ")".repeat(10_000));
    let _ = found(&deep, "d.py");
    let _ = found(&deep, "d.js");
    // Found by review: nested calls in a handler, and many handlers sharing one function,
    // stay within the walk's budget.
    let nested = format!(
        "server.tool(\"a\", async (x) => {}x{});",
        "f(".repeat(10_000),
        ")".repeat(10_000)
    );
    let _ = found(&nested, "n.js");
    let mut many = String::from("function g(x) { eval(x); ");
    many.push_str(&"h(x); ".repeat(10_000));
    many.push_str("}\n");
    for i in 0..1_000 {
        many.push_str(&format!("server.tool(\"t{i}\", async (y) => g(y));\n"));
    }
    // 1,000 handlers share one function of 10,000 calls: found from the first few, and the
    // rest cut short by the budget.
    let f = found(&many, "m.js");
    assert!(
        f.iter()
            .any(|(t, fam, _)| t == "t0" && *fam == Family::Evaluator),
        "{f:?}"
    );
}
