"""One row of bench/precision.sh from a detonation report, or the summary of all rows.

Row: half, target, verdict, the verdict an older warden's rules give the same events (with
--before), the HIGH and CRITICAL findings with their basis, the other findings above low, and
why a run was INCONCLUSIVE. Fields are tab-separated so that --summary can read them back.
"""
import json
import os
import subprocess
import sys
import tempfile

BAND = {"info": "PASS", "low": "LOW", "medium": "MEDIUM", "high": "HIGH", "critical": "CRITICAL"}
ORDER = ["info", "low", "medium", "high", "critical"]


def before_verdict(old, report):
    """The old rules' verdict on the report's events: the band of their worst finding."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for e in report["events"]:
            f.write(json.dumps(e) + "\n")
        events = f.name
    try:
        ids = [l.split()[0] for l in subprocess.run(
            [old, "rules", "list"], capture_output=True, text=True, check=True).stdout.splitlines() if l.strip()]
        worst = None
        for rid in ids:
            out = subprocess.run([old, "rules", "test", rid, events], capture_output=True, text=True).stdout
            for line in out.splitlines():
                sev = json.loads(line)["severity"]
                if worst is None or ORDER.index(sev) > ORDER.index(worst):
                    worst = sev
    finally:
        os.unlink(events)
    band = BAND[worst] if worst else "PASS"
    if report.get("why") and band not in ("HIGH", "CRITICAL"):
        return "INCONCLUSIVE"
    return band


def row(half, target, path, old):
    try:
        r = json.load(open(path))
    except Exception:
        print("\t".join([half, target, "(no report)", "-", "-", "-", "-"]))
        return
    high = [f"{f['severity']}:{f['rule']}({f.get('basis', '?')})" + (f"[{f['tool']}]" if f.get("tool") else "")
            for f in r["findings"] if f["severity"] in ("high", "critical")]
    above = [f"{f['severity']}:{f['rule']}" for f in r["findings"] if f["severity"] == "medium"]
    why = f"{r['why']['stage']}: {r['why']['reason'][:70]}" if r.get("why") else ""
    prior = before_verdict(old, r) if old else "-"
    print("\t".join([half, target, r["verdict"], prior, ", ".join(high) or "-",
                     ", ".join(sorted(set(above))) or "-", why]))


def summary(rows_file):
    halves = {}
    for line in open(rows_file):
        f = line.rstrip("\n").split("\t")
        if len(f) < 7:
            continue
        halves.setdefault(f[0], []).append(f)
    for half, rows in halves.items():
        n = len(rows)
        high = [r for r in rows if r[2] in ("HIGH", "CRITICAL")]
        shape_high = [r for r in high if "(consequence)" not in r[4]]
        inconclusive = [r for r in rows if r[2] in ("INCONCLUSIVE", "(no report)")]
        before_high = [r for r in rows if r[3] in ("HIGH", "CRITICAL")]
        line = (f"{half}: {n} servers, {len(high)} HIGH or CRITICAL "
                f"({len(shape_high)} without a consequence finding), {len(inconclusive)} INCONCLUSIVE")
        if any(r[3] != "-" for r in rows):
            line += f"; before: {len(before_high)} HIGH or CRITICAL"
        print(line)
        for r in inconclusive:
            print(f"  inconclusive: {r[1]}: {r[6] or r[2]}")


def times(times_file):
    """Both wardens' wall times per server and the ratio of the totals per half."""
    halves = {}
    print(f"{'half':<9} {'server':<60} {'old s':>8} {'new s':>8} {'ratio':>6}")
    for line in open(times_file):
        f = line.rstrip("\n").split("\t")
        if len(f) < 4:
            continue
        old, new = float(f[2]), float(f[3])
        halves.setdefault(f[0], []).append((old, new))
        print(f"{f[0]:<9} {f[1][:60]:<60} {old:>8.1f} {new:>8.1f} {new / old if old else 0:>6.2f}")
    for half, pairs in halves.items():
        old = sum(p[0] for p in pairs)
        new = sum(p[1] for p in pairs)
        print(f"{half}: {len(pairs)} servers, old {old:.0f} s, new {new:.0f} s, new/old {new / old if old else 0:.2f}")


if __name__ == "__main__":
    if sys.argv[1] == "--summary":
        summary(sys.argv[2])
    elif sys.argv[1] == "--times":
        times(sys.argv[2])
    else:
        row(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "")
