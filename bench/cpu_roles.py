#!/usr/bin/env python3
"""Where a sandbox start spends CPU, by role: the program the user ran, the sandbox's init,
the command (its set-up before exec, the exec and the program itself), and the kernel's own
threads that work for them (RCU, workqueues, softirqs: namespace and cgroup teardown).

Usage: cpu_roles.py RUNS NAME -- COMMAND...   (repeat `NAME -- COMMAND...` groups, ';'-separated)
Runs each command RUNS times under `perf sched record` (system-wide) and prints milliseconds
of CPU per run for each role, side by side. Needs root and perf. A profile, not a benchmark:
perf's own overhead is in every row alike.
"""

import collections
import re
import subprocess
import sys
import tempfile

KERNEL = ("rcu", "kworker", "ksoftirqd", "migration", "kcompactd", "kswapd")
ROLES = ["started program", "init", "command", "kernel threads"]


def profile(runs, argv):
    with tempfile.NamedTemporaryFile(suffix=".data") as data:
        loop = f'for i in $(seq {runs}); do "$@" >/dev/null 2>&1; done'
        subprocess.run(
            ["perf", "sched", "record", "-q", "-o", data.name, "--",
             "bash", "-c", loop, "loop", *argv],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out = subprocess.run(
            ["perf", "sched", "timehist", "-s", "-i", data.name],
            check=True, capture_output=True, text=True).stdout
    tasks = {}
    for line in out.splitlines():
        m = re.match(r"\s*(.+)\[(\d+)(?:/\d+)?\]\s+(-?\d+)\s+\d+\s+([\d.]+)", line)
        if m:
            comm, pid, parent, ms = m.group(1), int(m.group(2)), int(m.group(3)), float(m.group(4))
            tasks[pid] = (comm, parent, tasks.get(pid, (None, None, 0.0))[2] + ms)
    # The loop's shell: the bash that perf started (its parent is perf, or unseen).
    loop_pid = next((p for p, (c, parent, _) in tasks.items() if c == "bash"
                     and tasks.get(parent, ("perf",))[0] != "bash"), None)
    sums = collections.Counter()
    for pid, (comm, parent, ms) in tasks.items():
        if comm.startswith(KERNEL):
            sums["kernel threads"] += ms
            continue
        depth, p = 0, pid
        while p in tasks and p != loop_pid and depth < 8:
            p, depth = tasks[p][1], depth + 1
        if p == loop_pid and 1 <= depth <= 3 and not (depth == 1 and comm == "seq"):
            sums[ROLES[depth - 1]] += ms
    return {k: v / runs for k, v in sums.items()}


def main():
    runs = int(sys.argv[1])
    groups = [g.strip().split() for g in " ".join(sys.argv[2:]).split(";") if g.strip()]
    results = {}
    for g in groups:
        name, cmd = g[0], g[2:] if g[1] == "--" else g[1:]
        results[name] = profile(runs, cmd)
    names = list(results)
    print(f"{'CPU ms per run':18}" + "".join(f"{n:>12}" for n in names))
    for role in ROLES:
        print(f"{role:18}" + "".join(f"{results[n].get(role, 0.0):12.2f}" for n in names))
    print(f"{'total':18}" + "".join(f"{sum(results[n].values()):12.2f}" for n in names))


if __name__ == "__main__":
    main()
