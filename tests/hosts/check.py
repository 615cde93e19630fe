#!/usr/bin/env python3
"""The host matrix's checks, run inside one guest (or container) as root.

Usage: check.py CELL DIR, where DIR holds `warden`, `fixtures/` and `attacks/` (static attack
programs). Each check prints one line `CHECK <cell> <name> <status> <detail>`:
  pass      the guarantee holds, by the mechanism the outcome names;
  degraded  it holds by a weaker mechanism, and the outcome says which;
  refused   Warden refused, naming why (exit 125 or INCONCLUSIVE);
  LOSS      a silent loss: a limit claimed but not held, or a PASS where a finding is due;
  FAIL      the check itself could not run as expected.
The last line is `CELL <cell> checks=N pass=P degraded=D refused=R loss=L fail=F`.
"""

import json
import os
import re
import subprocess
import sys
import time

CELL, DIR = sys.argv[1], sys.argv[2]
WARDEN = os.path.join(DIR, "warden")
counts = {"pass": 0, "degraded": 0, "refused": 0, "LOSS": 0, "FAIL": 0}


def say(name, status, detail=""):
    counts[status] += 1
    detail = " ".join(str(detail).split())[:300]
    print(f"CHECK {CELL} {name} {status} {detail}", flush=True)


def run_json(*args, timeout=120):
    """`warden run --json ARGS`: (outcome or None, exit status, stderr tail)."""
    p = subprocess.run(
        [WARDEN, "run", "--json", *args],
        capture_output=True,
        timeout=timeout,
    )
    try:
        return json.loads(p.stdout), p.returncode, p.stderr.decode(errors="replace")[-400:]
    except ValueError:
        return None, p.returncode, p.stderr.decode(errors="replace")[-400:]


def by_cgroup(mechanisms):
    return [m for m in mechanisms if m.startswith("cgroup")]


def info():
    o, rc, err = run_json("--", "true")
    if o is None:
        reason = err.strip().splitlines()[-1] if err.strip() else f"exit {rc}"
        say("sandbox", "refused" if rc == 125 else "FAIL", reason)
        return None
    e = o["enforcement"]
    say(
        "sandbox",
        "pass",
        f"kernel={os.uname().release} cgroup_v2=[{e.get('cgroup_v2', '')}] "
        f"join={e.get('cgroup_join')} usage={o['usage']} "
        f"memory={e['memory']} pids={e['pids']} cpu_time={e['cpu_time']} "
        f"cpu_rate={e.get('cpu_rate', [])} landlock={e['landlock']} proc={e['proc']}",
    )
    return e


def limit_check(name, args, argv, want, mechanisms):
    """A run that must end at limit `want`; `mechanisms` is what the outcome claims for it."""
    o, rc, err = run_json(*args, "--", *argv)
    if o is None:
        say(name, "FAIL", f"exit {rc}: {err}")
        return
    hit = o.get("limit_hit")
    detail = f"limit_hit={hit} by={mechanisms} duration_ms={o['duration_ms']} usage={o['usage']}"
    if hit == want and by_cgroup(mechanisms):
        say(name, "pass", detail)
    elif hit == want:
        say(name, "degraded", detail)
    elif by_cgroup(mechanisms):
        say(name, "LOSS", "claimed by cgroup but not held: " + detail)
    else:
        say(name, "LOSS", "not held and not reported: " + detail)


PY = "/usr/bin/python3"
MEMORY_TREE = (
    "import os,time\n"
    "for _ in range(8):\n"
    "    if os.fork() == 0:\n"
    "        b = bytearray(100 << 20)\n"
    "        for i in range(0, len(b), 4096): b[i] = 1\n"
    "        time.sleep(8); os._exit(0)\n"
    "for _ in range(8): os.wait()\n"
)
PIDS = (
    "import os,time\n"
    "n = 0\n"
    "try:\n"
    "    for _ in range(200):\n"
    "        if os.fork() == 0: time.sleep(5); os._exit(0)\n"
    "        n += 1\n"
    "except OSError: pass\n"
    "print(n)\n"
)
BUSY = (
    "import os\n"
    "for _ in range(3): os.fork()\n"  # eight busy processes
    "while True: pass\n"
)


def limits(e):
    if e is None:
        return
    limit_check("memory", ["--memory", "256M", "--timeout", "60"], [PY, "-c", MEMORY_TREE],
                "memory", e["memory"])
    limit_check("pids", ["--pids", "64", "--timeout", "60"], [PY, "-c", PIDS], "pids", e["pids"])
    limit_check("cpu_time", ["--cpu", "2", "--timeout", "40"], [PY, "-c", BUSY], "cpu_time",
                e["cpu_time"])
    # Throttling: half a CPU for 4 s of wall time is at most about 2 s of CPU.
    o, rc, err = run_json("--cpus", "0.5", "--timeout", "4", "--", PY, "-c", BUSY)
    if o is None:
        say("cpu_rate", "FAIL", f"exit {rc}: {err}")
        return
    used = o["usage"].get("cpu_time_ms")
    claimed = o["enforcement"].get("cpu_rate", [])
    detail = f"cpu_time_ms={used} wall_ms={o['duration_ms']} by={claimed}"
    if claimed and used is not None and used <= 0.5 * o["duration_ms"] * 1.25 + 200:
        say("cpu_rate", "pass", detail)
    elif claimed:
        say("cpu_rate", "LOSS", "claimed but not held: " + detail)
    else:
        say("cpu_rate", "degraded", "no throttling, and the outcome says so: " + detail)


def join(e):
    """The init starts inside its cgroup v2 group (CLONE_INTO_CGROUP, Linux 5.7+) rather than
    being moved there; then `warden run -- true` timed both ways, interleaved, side by side
    (WARDEN_CGROUP_JOIN=migrate forces the move)."""
    if e is None or not by_cgroup(e["memory"]):
        return
    how = e.get("cgroup_join")
    if how == "clone_into_cgroup":
        say("cgroup_join", "pass", how)
    elif "cgroup_v2" in e["memory"]:
        say("cgroup_join", "degraded", f"cgroup v2 groups joined by {how}")
    else:
        say("cgroup_join", "degraded", f"cgroup v1: {how}")
    # Wall time of the whole command, and the set-up until the command is released (the
    # supervisor's own phase log, WARDEN_LOG=debug): the part the join changes.
    times = {"clone_into_cgroup": [], "migration": []}
    setup = {"clone_into_cgroup": [], "migration": []}
    joins = {"clone_into_cgroup": set(), "migration": set()}
    for i in range(2 * BENCH_RUNS):
        mode = "migration" if i % 2 else "clone_into_cgroup"
        env = dict(os.environ, WARDEN_LOG="debug", NO_COLOR="1")
        if mode == "migration":
            env["WARDEN_CGROUP_JOIN"] = "migrate"
        t = time.perf_counter()
        p = subprocess.run([WARDEN, "run", "--json", "--", "true"], capture_output=True,
                           env=env, timeout=120)
        times[mode].append((time.perf_counter() - t) * 1000)
        log = re.sub(r"\x1b\[[0-9;]*m", "", p.stderr.decode(errors="replace"))
        released = re.findall(r'phase="cgroup joined, init released" us=(\d+)', log)
        if released:
            setup[mode].append(int(released[-1]) / 1000)
        try:
            joins[mode].add(json.loads(p.stdout)["enforcement"].get("cgroup_join"))
        except (ValueError, KeyError):
            joins[mode].add(f"exit {p.returncode}")

    def med(v):
        return sorted(v)[len(v) // 2] if v else float("nan")

    a, b = "clone_into_cgroup", "migration"
    print(f"NOTE {CELL} bench warden run -- true, {BENCH_RUNS} runs each way, interleaved, "
          f"medians: set-up until the command is released {a}={med(setup[a]):.1f} ms "
          f"{b}={med(setup[b]):.1f} ms ratio={med(setup[a]) / med(setup[b]):.3f}; whole run "
          f"{a}={med(times[a]):.1f} ms {b}={med(times[b]):.1f} ms "
          f"ratio={med(times[a]) / med(times[b]):.3f} "
          f"(joined by {sorted(joins[a])} / {sorted(joins[b])})", flush=True)


BENCH_RUNS = 15


def unit():
    """The cgroup unit tests (warden-jail's own, against a cgroup2 mount of their own) on this
    guest's kernel, where the root offers memory, pids and cpu: the delegation paths for real."""
    binary = os.path.join(DIR, "jail-unit")
    if not os.path.exists(binary):
        say("cgroup_unit", "FAIL", "no unit test binary in the payload")
        return
    p = subprocess.run([binary, "cgroup::", "--test-threads=1"], capture_output=True,
                       timeout=300)
    out = p.stdout.decode(errors="replace")
    result = [line for line in out.splitlines() if line.startswith("test result")]
    if p.returncode == 0:
        say("cgroup_unit", "pass", " ".join(result))
    else:
        failed = [line for line in out.splitlines() if line.endswith("FAILED")]
        say("cgroup_unit", "FAIL", "; ".join(failed) + out[-300:])


def serve():
    """`warden serve` over stdio: initialize, then run_command echoes through the sandbox."""
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "hosts", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "run_command", "arguments": {"argv": ["echo", "hosts-ok"]}}},
    ]
    p = subprocess.Popen([WARDEN, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    for m in msgs:
        p.stdin.write((json.dumps(m) + "\n").encode())
        p.stdin.flush()
        if m.get("id") == 1:
            p.stdout.readline()
    line = p.stdout.readline().decode(errors="replace")
    p.stdin.close()
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
    if "hosts-ok" in line:
        say("serve_stdio", "pass", "run_command answered through the sandbox")
    else:
        say("serve_stdio", "FAIL", line[:200] + p.stderr.read().decode(errors="replace")[-200:])


def detonate(name, fixture, due):
    p = subprocess.run(
        [WARDEN, "detonate", os.path.join(DIR, "fixtures", "mcp", "servers", fixture),
         "--output", "json", "--timeout", "300s"],
        capture_output=True, timeout=600,
    )
    try:
        report = json.loads(p.stdout)
    except ValueError:
        say(name, "FAIL", f"exit {p.returncode}: {p.stderr.decode(errors='replace')[-300:]}")
        return
    verdict = report["verdict"]
    rules = sorted({f.get("rule") for f in report["findings"]})
    detail = (f"verdict={verdict} rules={rules} why={report.get('why')} "
              f"limits_unenforced={report.get('limits_unenforced')}")
    if verdict == "INCONCLUSIVE":
        say(name, "refused", detail)
    elif verdict in due:
        say(name, "pass", detail)
    else:
        say(name, "LOSS", f"wanted {due}: " + detail)


def boundary():
    """The network boundary (issue #32): a server that sends the decoys by sendmmsg, XOR over
    TCP segments and inside HTTPS must end CRITICAL with a sighting at the boundary; where
    the host refuses the packet tap, the run says so (capture.error) and it is degraded."""
    p = subprocess.run(
        [WARDEN, "detonate", os.path.join(DIR, "fixtures", "mcp", "servers", "boundary.py"),
         "--output", "json", "--no-payloads", "--timeout", "300s"],
        capture_output=True, timeout=600,
    )
    try:
        report = json.loads(p.stdout)
    except ValueError:
        say("boundary", "FAIL", f"exit {p.returncode}: {p.stderr.decode(errors='replace')[-300:]}")
        return
    events = report.get("events", [])
    places = sorted({e["data"].get("where") for e in events if e["kind"] == "canary.seen"})
    captures = [e["data"].get("capture") for e in events if e["kind"] == "sandbox.exited"]
    errors = [c.get("error") for c in captures if isinstance(c, dict) and c.get("error")]
    detail = f"verdict={report['verdict']} where={places} capture={captures[-1:] }"
    if report["verdict"] not in ("HIGH", "CRITICAL"):
        say("boundary", "LOSS", detail)
    elif errors:
        say("boundary", "degraded", detail)
    elif "boundary" in places and "tls" in places:
        say("boundary", "pass", detail)
    elif CELL == "gvisor":
        # gVisor's own network stack decides what a packet socket sees.
        say("boundary", "degraded", "no sighting at the boundary or inside TLS: " + detail)
    else:
        say("boundary", "FAIL", "no sighting at the boundary or inside TLS: " + detail)


# The escape battery's quick subset: (program, number of "ok" lines it must print).
ESCAPES = [("ptrace", 6), ("mounts", 13), ("namespaces", 9), ("kernel", 31)]


def escapes():
    for prog, want in ESCAPES:
        ws = f"/tmp/hosts-ws-{prog}"
        os.makedirs(ws, exist_ok=True)
        subprocess.run(["cp", os.path.join(DIR, "attacks", prog), ws], check=True)
        p = subprocess.run([WARDEN, "run", "--workspace", ws, "--timeout", "60", "--", f"./{prog}"],
                           capture_output=True, timeout=120)
        out = p.stdout.decode(errors="replace")
        oks = sum(1 for line in out.splitlines() if line.startswith("ok "))
        bad = [line for line in out.splitlines() if not line.startswith("ok ")]
        if "ESCAPE" in out:
            say(f"escape_{prog}", "LOSS", "; ".join(bad))
        elif p.returncode == 0 and oks >= want:
            say(f"escape_{prog}", "pass", f"{oks} attacks stopped")
        elif p.returncode == 125:
            say(f"escape_{prog}", "refused", p.stderr.decode(errors="replace")[-200:])
        else:
            say(f"escape_{prog}", "FAIL", f"exit {p.returncode} ok={oks}: " + "; ".join(bad))


def main():
    started = time.time()
    e = info()
    if e is not None:
        limits(e)
        join(e)
        if CELL in ("6.1", "6.12"):
            unit()
        serve()
        detonate("detonate_thief", "thief.py", {"HIGH", "CRITICAL"})
        detonate("detonate_hog", "hog.py", {"MEDIUM", "HIGH", "CRITICAL"})
        boundary()
        escapes()
    total = sum(counts.values())
    print(
        f"CELL {CELL} checks={total} pass={counts['pass']} degraded={counts['degraded']} "
        f"refused={counts['refused']} loss={counts['LOSS']} fail={counts['FAIL']} "
        f"seconds={time.time() - started:.0f}",
        flush=True,
    )


main()
