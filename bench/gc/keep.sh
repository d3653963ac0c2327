#!/usr/bin/env bash
# muster spool gc --keep K on a directory spool of N enrolled nodes and G
# generations, the day after a gc: one generation has grown old since, and
# gc removes its bundles (a node's and the run's settings). This tree against the build of REV, in turn
# (this, REV, this, REV, ...); the ratios are taken pair by pair.
#
# usage: bench/gc/keep.sh N G RUNS REV [K [straggler]]      (K default 10)
#
# With "straggler", one more node is enrolled and only the first
# generation assigns it a bundle (no role selects it after): gc must keep
# that generation, and find out again on each run that no newer one
# assigned the node.
#
# The fleet is made once: N tokens issued, N hosts joined and admitted,
# G declares of one file for every node, a first gc --keep K, and one more
# declare. Before each timed run the spool is laid out again from a copy
# (hard links, not timed). Each run is timed with GNU time. Scratch goes
# to $MBENCH/keep (default /tmp/mbench/keep).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
usage="usage: keep.sh N G RUNS REV [K]"
n=${1:?$usage}
gens=${2:?$usage}
runs=${3:?$usage}
rev=${4:?$usage}
keep=${5:-10}
straggler=${6:-}
B=${MBENCH:-/tmp/mbench}/keep
rm -rf "$B"
mkdir -p "$B/bin" "$B/old" "$B/spool" "$B/hosts" "$B/root/etc" "$B/root/var/lib/dpkg"
trap 'rm -rf "$B/spool" "$B/template" "$B/hosts"' EXIT
(cd "$TOP" && CGO_ENABLED=0 go build -trimpath -o "$B/bin/muster" ./cmd/muster)
git -C "$TOP" archive "$rev" | tar -x -C "$B/old"
(cd "$B/old" && CGO_ENABLED=0 go build -trimpath -o "$B/bin/muster-$rev" ./cmd/muster)
M=$B/bin/muster
export MUSTER_MESH=$B/mesh MUSTER_SPOOL=$B/spool
: >"$B/root/var/lib/dpkg/status"
echo 'PRETTY_NAME="bench"' >"$B/root/etc/os-release"
"$M" init >/dev/null
first=1
[ -n "$straggler" ] && first=0
for i in $(seq "$first" "$n"); do
	"$M" enrol issue "node-$i" 2>/dev/null >"$B/hosts/$i.token"
done
for i in $(seq "$first" "$n"); do
	"$M" enrol join --config "$B/hosts/$i.toml" --state "$B/hosts/$i" --root "$B/root" <"$B/hosts/$i.token" >/dev/null
done
"$M" enrol admit >/dev/null
for g in $(seq 1 "$gens"); do
	nodes='node-[1-9]*'
	[ "$g" -eq 1 ] && nodes='node-*'
	printf '[role.all]\nnodes = ["%s"]\n[role.all.file."/etc/motd"]\ncontent = "generation %s\\n"\n' "$nodes" "$g" >"$B/site.toml"
	"$M" declare "$B/site.toml" >/dev/null
done
"$M" spool gc --keep "$keep" --summary >/dev/null
printf '[role.all]\nnodes = ["node-[1-9]*"]\n[role.all.file."/etc/motd"]\ncontent = "one more\\n"\n' >"$B/site.toml"
"$M" declare "$B/site.toml" >/dev/null
cp -al "$B/spool" "$B/template"
once() {
	rm -rf "$B/spool"
	cp -al "$B/template" "$B/spool"
	/usr/bin/time -f '%U %S %e %M' -o "$B/time" "$1" spool gc --keep "$keep" --summary >"$B/out" ||
		{ echo "keep.sh: $1 spool gc failed" >&2; exit 1; }
	grep -q "^removed $((n + 1)) objects (superseded)" "$B/out" || { echo "keep.sh: $1 removed: $(cat "$B/out")" >&2; exit 1; }
	cat "$B/time"
}
once "$M" >/dev/null
once "$B/bin/muster-$rev" >/dev/null
uptime
printf 'round\tcpu\tcpu_%s\tcpu_x\twall\twall_%s\twall_x\tMiB\tMiB_%s\n' "$rev" "$rev" "$rev"
for i in $(seq 1 "$runs"); do
	echo "$i $(once "$M") $(once "$B/bin/muster-$rev")"
done | awk '{ ac=$2+$3; bc=$6+$7; printf "%d\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.1f\t%.1f\n", $1, ac, bc, ac/bc, $4, $8, $4/$8, $5/1024, $9/1024 }' | tee "$B/rounds.tsv"
python3 "$TOP/bench/medians.py" "$B/rounds.tsv" 3 "cpu s" "cpu s, $rev" "cpu ratio" "wall s" "wall s, $rev" "wall ratio" "peak MiB" "peak MiB, $rev"
uptime
