#!/usr/bin/env python3
"""targets.py RESULTS.TSV [JSONDIR ...] - muster beside the floor and
cf-agent, and each performance target with its verdict. The last row of each
case wins. With the directories holding hyperfine's JSON (muster's and the
peers'), each cell also shows the mean CPU time (user + system) of a run:
on a machine shared with other work, wall time swings with the load, CPU
time much less."""
import csv
import json
import os
import sys

rows = {}
for r in csv.DictReader(open(sys.argv[1]), delimiter="\t"):
    rows[(r["tool"], r["kind"], r["N"], r["phase"])] = r
NAME = {"muster": "muster apply", "floor": "floor (Go)", "dpkgq": "floor (dpkg-query)",
        "cfengine": "CFEngine cf-agent"}


def get(tool, kind, n, phase):
    return rows.get((tool, kind, str(n), phase))


def ms(r):
    return float(r["wall_med_ms"]) if r and r["wall_med_ms"] != "-" else None


def cpu(r):
    """Mean user + system ms of the case's runs, from hyperfine's JSON."""
    if r is None:
        return None
    n = "pkgs" if r["kind"] == "pkgs" and r["tool"] == "muster" else r["N"]
    names = [f'{r["tool"]}-{n}-{r["phase"]}.json', f'{r["tool"]}-{r["kind"]}-{r["N"]}-{r["phase"]}.json']
    for d in sys.argv[2:]:
        for name in names:
            path = os.path.join(d, name)
            if os.path.exists(path):
                res = json.load(open(path))["results"][0]
                return (res["user"] + res["system"]) * 1000
    return None


def cell(r):
    if r is None:
        return "-"
    ch = r["changes_per_run"].split("/")
    ch = ch[0] if len(set(ch)) == 1 else r["changes_per_run"]
    ok = r["status"] == "ok" and ("ok" in r["verify"] or r["verify"] == "not-installed=0")
    c = cpu(r)
    c = "" if c is None else f" (cpu {c:,.0f} ms)"
    return f'{float(r["wall_med_ms"]):,.1f} ms{c} / {r["rss_max_MB"]} MB / {ch} ch (n={r["runs"]})' + ("" if ok else " **FAILED**")


for n in (1000, 10000):
    print(f"\n**{n} files** (median wall (mean cpu) / peak RSS / changes reported per run)\n")
    print("| tool | first | no-op | drift (10 files) |")
    print("|---|---|---|---|")
    for t in ("muster", "floor", "cfengine"):
        cs = [get(t, "files", n, ph) for ph in ("first", "noop", "drift")]
        if any(cs):
            print(f"| {NAME[t]} | " + " | ".join(cell(c) for c in cs) + " |")
print("\n**20 installed packages declared present** (no-op)\n")
print("| tool | no-op |")
print("|---|---|")
for t in ("muster", "floor", "dpkgq", "cfengine"):
    r = get(t, "pkgs", 20, "noop")
    if r:
        print(f"| {NAME[t]} | {cell(r)} |")

print("\n**Targets**\n")
failed = 0


def target(what, got, limit, explain, gotcpu=None, limitcpu=None):
    global failed
    if got is None or limit is None:
        print(f"- {what}: not measured")
        return
    ok = got <= limit
    failed += not ok
    extra = ""
    if gotcpu is not None and limitcpu is not None:
        extra = f"; cpu {gotcpu:,.0f} ms against {limitcpu:,.0f} ms: {'within' if gotcpu <= limitcpu else 'over'}"
    print(f"- {what}: {got:,.1f} ms, limit {limit:,.1f} ms ({explain}): {'met' if ok else 'MISSED'}{extra}")


def both(tool, kind, n, ph, k=1.0):
    r = get(tool, kind, n, ph)
    w, c = ms(r), cpu(r)
    return (None if w is None else w * k), (None if c is None else c * k)


def check(what, got, limit, explain):
    target(what, got[0], limit[0], explain, got[1], limit[1])


check("no-op, 1,000 files, vs cf-agent", both("muster", "files", 1000, "noop"), both("cfengine", "files", 1000, "noop", 0.1), "a tenth of cf-agent's")
check("no-op, 1,000 files, vs the floor", both("muster", "files", 1000, "noop"), both("floor", "files", 1000, "noop", 2), "twice the floor's")
check("first apply, 1,000 files", both("muster", "files", 1000, "first"), both("cfengine", "files", 1000, "first"), "cf-agent's")
check("drift repair of 10 of 1,000 files", both("muster", "files", 1000, "drift"), both("cfengine", "files", 1000, "drift"), "cf-agent's")
check("20 packages present, no-op", both("muster", "pkgs", 20, "noop"), both("dpkgq", "pkgs", 20, "noop", 2), "twice one dpkg-query")
check("no-op, 10,000 files, vs the floor", both("muster", "files", 10000, "noop"), both("floor", "files", 10000, "noop", 2), "twice the floor's")
rss = [float(r["rss_max_MB"]) for ph in ("first", "noop", "drift") if (r := get("muster", "files", 1000, ph)) and r["rss_max_MB"] != "-"]
if rss:
    # rss_max_MB is GNU time's %M (KiB) / 1024: MiB.
    ok = max(rss) <= 32
    failed += not ok
    print(f"- peak RSS, 1,000 files: {max(rss):.1f} MiB (GNU time %M, largest of all runs), limit 32 MiB: {'met' if ok else 'MISSED'}")
sys.exit(1 if failed else 0)
