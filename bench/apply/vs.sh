#!/usr/bin/env bash
# muster apply's no-op against the floor program on the same N files, run
# in turn (muster, floor, muster, floor, ...) so that both meet the same
# machine from one minute to the next: the ratios are taken pair by pair.
#
# usage: bench/apply/vs.sh N [RUNS]      (default RUNS 11; run as root)
#
# N files of the peers' workload (gen.py: 200 bytes each, mode 0644
# root:root, in one directory) are declared for one enrolled host on a
# directory spool and applied once; then each of RUNS rounds times one
# no-op `muster apply` and one `floor apply` of the same tree with GNU
# time (each PER times over, for small N), after one untimed round. It prints each round and the medians:
# CPU (user+sys) seconds, wall seconds, peak RSS in MiB, and the ratios
# muster/floor. Needs the peers' harness (PEERS, default
# ../shared/bench/peers beside this repository) for gen.py and the floor
# program. Scratch goes to $MBENCH/vs (default /tmp/mbench/vs).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
PEERS=${PEERS:-$TOP/../shared/bench/peers}
n=${1:?usage: vs.sh N [RUNS]}
runs=${2:-11}
B=${MBENCH:-/tmp/mbench}/vs/$n
[ -f "$PEERS/gen.py" ] || { echo "vs.sh: the peers' harness is not at $PEERS: set PEERS" >&2; exit 2; }
mkdir -p "$B/bin"
(cd "$TOP" && CGO_ENABLED=0 go build -trimpath -o "$B/bin/muster" ./cmd/muster)
(cd "$PEERS/floor" && go build -o "$B/bin/floor" .)
M=$B/bin/muster
export MUSTER_MESH=$B/mesh MUSTER_SPOOL=$B/spool
host="--config $B/host/muster.toml --state $B/host/state --root /"
if [ ! -d "$B/mesh" ]; then
	rm -rf "$B/spool" "$B/host" "$B/gen"
	mkdir -p "$B/spool"
	python3 "$PEERS/gen.py" "$n" "$B/gen" "$B/root" >/dev/null
	"$M" init >/dev/null
	"$M" enrol issue vs 2>/dev/null >"$B/token"
	# shellcheck disable=SC2086
	"$M" enrol join $host <"$B/token" >/dev/null
	python3 - "$B/gen/spec.tsv" >"$B/site.toml" <<'PY'
import sys
for line in open(sys.argv[1]):
    path, mode, uid, gid, content = line.rstrip("\n").split("\t", 4)
    kind = "directory" if content == "-" else "file"
    print(f'[node.vs.{kind}."{path}"]')
    if kind == "file":
        print(f'content = "{content}\\n"')
    print(f'mode = "{mode}"\nowner = "root"\ngroup = "root"\n')
PY
	"$M" declare "$B/site.toml" >/dev/null 2>&1
fi
# shellcheck disable=SC2086
"$M" apply $host >/dev/null
"$B/bin/floor" apply "$B/gen/spec.tsv" >/dev/null
# GNU time counts in hundredths of a second: a round runs each command
# PER times (100000/N, 1 to 50) and the figures are per run.
per=$((100000 / n)); [ "$per" -lt 1 ] && per=1; [ "$per" -gt 50 ] && per=50
once() {
	/usr/bin/time -f '%U %S %e %M' -o "$B/time" sh -c 'i=0; while [ $i -lt '"$per"' ]; do "$@" >/dev/null 2>&1 || exit 1; i=$((i+1)); done' sh "$@" ||
		{ echo "vs.sh: $* failed" >&2; exit 1; }
	cat "$B/time"
}
# shellcheck disable=SC2086
once "$M" apply $host >/dev/null
once "$B/bin/floor" apply "$B/gen/spec.tsv" >/dev/null
printf 'round\tmuster_cpu\tfloor_cpu\tcpu_x\tmuster_wall\tfloor_wall\tmuster_MiB\tfloor_MiB\trss_x\n'
for i in $(seq 1 "$runs"); do
	# shellcheck disable=SC2086
	a=$(once "$M" apply $host)
	b=$(once "$B/bin/floor" apply "$B/gen/spec.tsv")
	echo "$i $a $b"
done | awk -v per="$per" '{ $2/=per; $3/=per; $4/=per; $6/=per; $7/=per; $8/=per; ac=$2+$3; bc=$6+$7; printf "%d\t%.4f\t%.4f\t%.2f\t%.4f\t%.4f\t%.1f\t%.1f\t%.2f\n", $1, ac, bc, ac/bc, $4, $8, $5/1024, $9/1024, $5/$9 }' | tee "$B/rounds.tsv"
python3 "$TOP/bench/medians.py" "$B/rounds.tsv" 4 "muster cpu s" "floor cpu s" "cpu muster/floor" "muster wall s" "floor wall s" "muster peak MiB" "floor peak MiB" "rss muster/floor"
uptime
