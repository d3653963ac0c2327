#!/usr/bin/env bash
# muster spool gc on an S3 spool (versitygw on loopback) removing a lost
# declare run of N objects: this tree against the build of REV, in turn
# (this, REV, this, REV, ...) so that both meet the same machine from one
# minute to the next; the ratios are taken pair by pair.
#
# usage: bench/gc/vs.sh N RUNS REV [WON]
#
# WON (default 0) more objects are laid out once in the winning run's
# directory, as the bundles of a fleet: gc must find the lost run
# without listing them.
#
# A spool is made once (init, one enrolled host, one declare); before each
# run the lost run's N objects, dated three hours ago, are laid out again
# in versitygw's directory as hard links (not timed). Each run is timed
# with GNU time; the store's CPU time during it is read from /proc. It
# prints each round and the medians. Needs versitygw (scripts/test-deps.sh
# installs it). Scratch goes to $MBENCH/gc (default /tmp/mbench/gc).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
n=${1:?usage: vs.sh N RUNS REV}
runs=${2:?usage: vs.sh N RUNS REV}
rev=${3:?usage: vs.sh N RUNS REV}
won=${4:-0}
B=${MBENCH:-/tmp/mbench}/gc
rm -rf "$B"
mkdir -p "$B/bin" "$B/old" "$B/vgw/muster-test"
(cd "$TOP" && CGO_ENABLED=0 go build -trimpath -o "$B/bin/muster" ./cmd/muster)
git -C "$TOP" archive "$rev" | tar -x -C "$B/old"
(cd "$B/old" && CGO_ENABLED=0 go build -trimpath -o "$B/bin/muster-$rev" ./cmd/muster)
vgw=$(command -v versitygw || echo "$(go env GOPATH)/bin/versitygw")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export AWS_ACCESS_KEY_ID=musterbench AWS_SECRET_ACCESS_KEY=musterbenchsecret0123456789
export AWS_SHARED_CREDENTIALS_FILE=/nonexistent AWS_CONFIG_FILE=/nonexistent AWS_EC2_METADATA_DISABLED=true
"$vgw" --port "127.0.0.1:$port" --access "$AWS_ACCESS_KEY_ID" --secret "$AWS_SECRET_ACCESS_KEY" \
	--region us-east-1 --quiet --keep-alive posix "$B/vgw" >"$B/vgw.log" 2>&1 &
store=$!
trap 'kill $store 2>/dev/null; wait $store 2>/dev/null; rm -rf "$B/vgw" "$B/template"' EXIT
for _ in $(seq 100); do
	(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
	sleep 0.1
done
S="s3://muster-test/gc?endpoint=127.0.0.1:$port&region=us-east-1&tls=false"
M=$B/bin/muster
export MUSTER_MESH=$B/mesh
mkdir -p "$B/root/etc" "$B/root/var/lib/dpkg"
: >"$B/root/var/lib/dpkg/status"
echo 'PRETTY_NAME="bench"' >"$B/root/etc/os-release"
"$M" init --spool "$S" >/dev/null
"$M" enrol issue web-1 2>/dev/null >"$B/token"
"$M" enrol join --spool "$S" --config "$B/host.toml" --state "$B/state" --root "$B/root" <"$B/token" >/dev/null
"$M" enrol admit >/dev/null
printf '[node.web-1.file."/etc/motd"]\ncontent = "bench\\n"\n' >"$B/site.toml"
"$M" declare "$B/site.toml" >/dev/null
unset MUSTER_MESH # gc's lost-run rule needs no mesh
gen=00000000000000000001
lost=$B/template/decl/$gen/0123456789abcdef
mkdir -p "$lost"
python3 - "$lost" "$n" <<'PY'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    with open(os.path.join(d, f"{i:032x}"), "wb") as f:
        f.write(b"x" * 600)
PY
touch -d '3 hours ago' "$lost"/*
winner=$(cd "$B/vgw/muster-test/gc/decl/$gen" && ls)
python3 - "$B/vgw/muster-test/gc/decl/$gen/$winner" "$won" <<'PY'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    with open(os.path.join(d, f"{i:032x}"), "wb") as f:
        f.write(b"x" * 600)
PY
stat_cpu() { awk '{print $14 + $15}' "/proc/$store/stat"; }
once() {
	cp -al "$B/template/." "$B/vgw/muster-test/gc/"
	s0=$(stat_cpu)
	/usr/bin/time -f '%U %S %e %M' -o "$B/time" "$1" spool gc --spool "$S" >"$B/out" ||
		{ echo "vs.sh: $1 spool gc failed" >&2; exit 1; }
	s1=$(stat_cpu)
	[ "$(grep -c '^removed ' "$B/out")" -eq "$n" ] || { echo "vs.sh: $1 removed $(grep -c '^removed ' "$B/out") objects, want $n" >&2; exit 1; }
	echo "$(cat "$B/time") $(((s1 - s0)))"
}
once "$M" >/dev/null
once "$B/bin/muster-$rev" >/dev/null
uptime
printf 'round\tcpu\tcpu_%s\tcpu_x\twall\twall_%s\twall_x\tstore_cpu\tstore_cpu_%s\n' "$rev" "$rev" "$rev"
for i in $(seq 1 "$runs"); do
	echo "$i $(once "$M") $(once "$B/bin/muster-$rev")"
done | awk '{ ac=$2+$3; bc=$7+$8; printf "%d\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.2f\t%.2f\n", $1, ac, bc, ac/bc, $4, $9, $4/$9, $6/100, $11/100 }' | tee "$B/rounds.tsv"
python3 "$TOP/bench/medians.py" "$B/rounds.tsv" 3 "cpu s" "cpu s, $rev" "cpu ratio" "wall s" "wall s, $rev" "wall ratio" "store cpu s" "store cpu s, $rev"
uptime
