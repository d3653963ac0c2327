#!/usr/bin/env bash
# muster apply measured side by side with the peers (CFEngine's cf-agent and
# the Go floor) on the same workloads, in one run, on this machine.
#
# usage: bench/apply/run.sh [--install] [CASE ...]
#   --install   first time on a fresh machine: the peers' harness apt-gets
#               cf-agent, hyperfine and GNU time (it installs the other
#               peers too)
#   CASE        muster:1000 muster:10000 muster:pkgs peers; none = all four
#
# The peers' harness is not copied here: PEERS names it (default
# ../shared/bench/peers beside this repository; see its README.md). It
# generates the workloads (gen.py), prepares each run (lib/prep.sh), wraps
# each run to capture its output and peak RSS (lib/wrap.sh), and checks the
# tree independently after each batch (lib/verify.sh); this script uses all
# four for muster, so muster gets exactly the peers' files and checks.
#
# Workloads (W1/W2/W3 of the peers' README):
#   muster:N     a directory (0755 root:root) and N files of 200 bytes, mode
#                0644 root:root; phases first (tree deleted before each run),
#                noop, drift (10 files edited by hand before each run)
#   muster:pkgs  the same 20 installed Debian packages declared present,
#                against this machine's own dpkg database: read-only, a no-op
#   peers        the peers' run.sh for floor:1000 floor:10000 cfengine:1000
#                pkgs:floor pkgs:dpkgq pkgs:cfengine (Puppet and Ansible are
#                left out: minutes per run)
# Every muster run is the whole process: start-up, config and keys, listing
# commits, the declaration, observing, the report written to the spool.
# muster runs as a real enrolled host with --root /, one host per workload,
# its mesh, spool and state under $MBENCH/muster.
#
# Environment: MBENCH (default /tmp/mbench, shared with the peers), RUNS
# (default 5; RUNS_muster_10000 defaults to 3), RESULTS (default
# $MBENCH/apply-results: results.tsv holds muster's and the peers' rows),
# MUSTER (a muster binary to measure; default: built from this tree).
# Output: the tables, and each target of the README with its verdict.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
PEERS=${PEERS:-$TOP/../shared/bench/peers}
B=${MBENCH:-/tmp/mbench}
RESULTS=${RESULTS:-$B/apply-results}
M=$B/muster
: "${RUNS_muster_10000:=3}"

install=
if [ "${1:-}" = --install ]; then install=--install; shift; fi
cases=${*:-muster:1000 muster:10000 muster:pkgs peers}
[ -x "$PEERS/run.sh" ] || { echo "run.sh: the peers' harness is not at $PEERS: set PEERS" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "run.sh: run as root (the workload is root-owned files)" >&2; exit 2; }
if [ -n "$install" ]; then
	# The peers' installer runs before its cases; give it the cheapest.
	MBENCH=$B OUT=$RESULTS/peers "$PEERS/run.sh" --install floor:3:noop >/dev/null
fi
for t in hyperfine /usr/bin/time python3; do
	command -v "$t" >/dev/null || { echo "run.sh: $t not found: run with --install" >&2; exit 2; }
done
mkdir -p "$M/bin" "$M/raw" "$RESULTS"
RAW=$M/raw

if [ -z "${MUSTER:-}" ]; then
	(cd "$TOP" && CGO_ENABLED=0 go build -trimpath -o "$M/bin/muster" ./cmd/muster) # static, as shipped
	MUSTER=$M/bin/muster
fi
echo "muster: $("$MUSTER" version)" >"$RESULTS/muster-version.txt"

# --- one mesh, one spool, one enrolled host per workload ------------------
export MUSTER_MESH=$M/mesh MUSTER_SPOOL=$M/spool
hostargs() { echo "--config $M/hosts/$1/muster.toml --state $M/hosts/$1/state --root /"; }
setup() {
	[ -d "$M/mesh" ] && return
	rm -rf "$M/spool" "$M/hosts"
	mkdir -p "$M/spool"
	"$MUSTER" init >/dev/null
	for h in bench-1000 bench-10000 bench-pkgs; do
		"$MUSTER" enrol issue "$h" 2>/dev/null >"$M/$h.token"
		# shellcheck disable=SC2046
		"$MUSTER" enrol join $(hostargs "$h") <"$M/$h.token" >/dev/null
		rm -f "$M/$h.token"
	done
}

# gendir N: the peers' generated workload for N files in muster's own tree.
gendir() {
	local g=$M/gen/$1
	[ -f "$g/spec.tsv" ] || python3 "$PEERS/gen.py" "$1" "$g" "$M/root$1" >/dev/null
	echo "$g"
}

# declare: one generation, each host's workload in its own node section,
# made from the peers' spec.tsv (path, mode, uid, gid, content).
declare_all() {
	python3 - "$(gendir 1000)" "$(gendir 10000)" >"$M/site.toml" <<'PY'
import sys
out = []
for node, g in (("bench-1000", sys.argv[1]), ("bench-10000", sys.argv[2])):
    for line in open(f"{g}/spec.tsv"):
        path, mode, uid, gid, content = line.rstrip("\n").split("\t", 4)
        kind = "directory" if content == "-" else "file"
        out.append(f'[node."{node}".{kind}."{path}"]')
        if kind == "file":
            out.append(f'content = "{content}\\n"')
        names = {"0": "root"}
        out.append(f'mode = "{mode}"\nowner = "{names.get(uid, uid)}"\ngroup = "{names.get(gid, gid)}"\n')
for p in open(f"{sys.argv[1]}/pkgs.txt").read().split():
    out.append(f'[node."bench-pkgs".package.{p}]\nversion = "present"\n')
print("\n".join(out))
PY
	"$MUSTER" declare "$M/site.toml" 2>/dev/null
}

# changes: what each run's own output says it changed (0 for "no change").
changes() {
	awk -v d="$RAW/$1.split" '/^=== run$/{i++; next} {print > (d "." i)}' "$RAW/$1.log"
	for i in $(seq 1 "$2"); do
		touch "$RAW/$1.split.$i"
		sed -n 's/^generation [0-9]* applied: \([0-9]*\) changed.*/\1/p; s/^generation [0-9]* applied: no change.*/0/p' "$RAW/$1.split.$i" | tail -1
		rm -f "$RAW/$1.split.$i"
	done | paste -sd/
}

# batch HOST N PHASE RUNS: hyperfine around muster apply, the peers' way.
batch() {
	local h=$1 n=$2 ph=$3 r=$4 g id st=ok v
	if [ "$n" = pkgs ]; then g=$(gendir 1000); else g=$(gendir "$n"); fi
	id=muster-$n-$ph
	rm -f "$RAW/$id.log" "$RAW/$id.rss" "$RAW/$id.json"
	echo ">>> $id: $r run(s)" >&2
	# shellcheck disable=SC2046
	hyperfine -N --runs "$r" --prepare "$PEERS/lib/prep.sh $ph $g $M/root$n" --export-json "$RAW/$id.json" \
		"$PEERS/lib/wrap.sh $RAW/$id.log $RAW/$id.rss $MUSTER apply $(hostargs "$h")" >"$RAW/$id.hyperfine.txt" 2>&1 || st=FAILED
	if [ "$n" = pkgs ]; then
		v=$(dpkg-query -W -f '${Status}\n' $(cat "$g/pkgs.txt") | grep -vc '^install ok installed$' | sed 's/^/not-installed=/') || true
	else
		v=$("$PEERS/lib/verify.sh" "$g" "$M/root$n" 2>&1 | tail -1) || st=FAILED
	fi
	local kind=files N=$n
	[ "$n" = pkgs ] && kind=pkgs N=20
	python3 - "$RAW/$id.json" "$RAW/$id.rss" muster "$kind" "$N" "$ph" "$r" "$(changes "$id" "$r")" "$st" "$v" >>"$RESULTS/results.tsv" <<'PY'
import json, os, statistics, sys
js, rss, t, k, n, ph, r, changes, st, v = sys.argv[1:]
try:
    times = [x * 1000 for x in json.load(open(js))["results"][0]["times"]]
except Exception:
    times = []
kb = [int(l) for l in open(rss) if l.strip().isdigit()] if os.path.exists(rss) else []
f = lambda x: f"{x:.1f}"
print("\t".join([t, k, n, ph, str(len(times)),
                 f(statistics.median(times)) if times else "-", f(min(times)) if times else "-",
                 f(max(times)) if times else "-", f(statistics.median(kb) / 1024) if kb else "-",
                 f(max(kb) / 1024) if kb else "-", changes, st, v]))
PY
	tail -1 "$RESULTS/results.tsv" >&2
}

files_case() { # files_case N
	local n=$1 h=bench-$1 r=${RUNS:-5} v="RUNS_muster_$1" g
	r=${!v:-$r}
	g=$(gendir "$n")
	# Untimed warm-up from empty, as the peers get.
	"$PEERS/lib/prep.sh" first "$g" "$M/root$n"
	# shellcheck disable=SC2046
	"$MUSTER" apply $(hostargs "$h") >/dev/null || true
	for ph in first noop drift; do batch "$h" "$n" "$ph" "$r"; done
}

[ -s "$RESULTS/results.tsv" ] || printf 'tool\tkind\tN\tphase\truns\twall_med_ms\twall_min_ms\twall_max_ms\trss_med_MB\trss_max_MB\tchanges_per_run\tstatus\tverify\n' >"$RESULTS/results.tsv"
setup
declare_all
for c in $cases; do
	case $c in
	muster:pkgs)
		# shellcheck disable=SC2046
		"$MUSTER" apply $(hostargs bench-pkgs) >/dev/null || true
		batch bench-pkgs pkgs noop "${RUNS:-5}"
		;;
	muster:1000 | muster:10000) files_case "${c#muster:}" ;;
	peers)
		MBENCH=$B OUT=$RESULTS/peers "$PEERS/run.sh" floor:1000 floor:10000 cfengine:1000 pkgs:floor pkgs:dpkgq pkgs:cfengine
		tail -n +2 "$RESULTS/peers/results.tsv" >>"$RESULTS/results.tsv"
		;;
	*) echo "run.sh: unknown case $c" >&2; exit 2 ;;
	esac
done
python3 "$HERE/targets.py" "$RESULTS/results.tsv" "$RAW" "$RESULTS/peers/raw"
