#!/bin/sh
# The whole loop on the embedded default, in a temp dir: a directory spool,
# a mesh, two hosts applying under --root. Run by `make demo`.
#
# Every command is shown exactly as it runs (run, or runsh for one with a
# redirection), from the demo's directory, with the muster being demonstrated
# first in PATH: what is printed can be pasted there and does the same.
set -eu
muster=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
demo=$(mktemp -d "${TMPDIR:-/tmp}/muster-demo.XXXXXX")
cd "$demo"
mkdir bin
ln -s "$muster" bin/muster
PATH="$demo/bin:$PATH"
export PATH

bold='' plain=''
if [ -t 1 ]; then bold=$(printf '\033[1m') plain=$(printf '\033[0m'); fi
say() { printf '\n%s%s%s\n' "$bold" "$*" "$plain"; }
# run shows a command and runs it; runsh does the same for a shell line.
run() { printf '\n%s$ %s%s\n' "$bold" "$*" "$plain"; "$@"; }
runsh() { printf '\n%s$ %s%s\n' "$bold" "$1" "$plain"; sh -c "$1"; }

run export MUSTER_MESH="$demo/mesh"
run mkdir spool

# Two hosts, each a directory tree standing in for a machine.
for h in web-1 web-2; do
	mkdir -p "$h/root/etc" "$h/root/var/lib/dpkg"
	: > "$h/root/var/lib/dpkg/status"
	cp /etc/os-release "$h/root/etc/" 2>/dev/null || echo 'PRETTY_NAME="demo"' > "$h/root/etc/os-release"
done

run muster init --spool "$demo/spool"
runsh 'muster enrol issue web-1 --label env=prod > web-1.token'
runsh 'muster enrol issue web-2 --label env=prod > web-2.token'

say "# on web-1 (a host's files are under web-1/root)"
runsh "muster enrol join --spool $demo/spool --config web-1/muster.toml --state web-1/state --root web-1/root < web-1.token"

# web-2 demands more free space than any disk has: its briefing fails, so
# it is enrolled but ineligible.
say "# on web-2"
runsh "muster enrol join --spool $demo/spool --config web-2/muster.toml --state web-2/state --root web-2/root < web-2.token"
runsh "sed -i 's/^ *min_free_root_mb = .*/  min_free_root_mb = 999999999/' web-2/muster.toml"
run muster brief --send --config web-2/muster.toml --state web-2/state --root web-2/root

say "# on the mesh"
run muster enrol admit
run muster enrol list --table

cat > site.toml <<'TOML'
[role.web]
nodes = ["web-*"]

[role.web.file."/etc/motd"]
content = "managed by muster\n"
mode = "0644"

[role.web.directory."/srv/www"]
mode = "0755"
TOML
run cat site.toml
run muster declare site.toml

say "# on web-1"
run muster apply --config web-1/muster.toml --state web-1/state --root web-1/root
say "# again: nothing to do"
run muster apply --config web-1/muster.toml --state web-1/state --root web-1/root

cat >> site.toml <<'TOML'

[role.web.file."/srv/www/index.html"]
content = "<h1>hello</h1>\n"
TOML
say "# on the mesh"
run muster declare --dry-run site.toml
run muster declare site.toml
run muster report --table

say "# on web-1"
run muster apply --config web-1/muster.toml --state web-1/state --root web-1/root
say "# on the mesh"
run muster report --table

# A package version no repository has: the line fails with apt's own words.
cat >> site.toml <<'TOML'

[role.web.package.muster-demo-tool]
version = "9.9-1"
TOML
run muster declare site.toml
say "# on web-1"
run muster apply --config web-1/muster.toml --state web-1/state --root web-1/root || echo "(apply exited with status $?)"
say "# on the mesh: report exits 5 when a node failed"
run muster report --table || echo "(report exited with status $?)"
run muster report web-1 --fail-on none

# Last, the rollout as a page to open in a browser: no network needed.
run muster report --html "$demo/rollout.html" --fail-on none
printf '\nthe demo is in %s\nthe rollout page is %s\n' "$demo" "$demo/rollout.html"
