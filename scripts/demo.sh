#!/bin/sh
# The whole loop on the embedded default, in a temp dir: a directory spool,
# a mesh, two hosts applying under --root. Run by `make demo`.
set -eu
muster=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
demo=$(mktemp -d "${TMPDIR:-/tmp}/muster-demo.XXXXXX")
cd "$demo"
say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
run() { say "$@"; "$@"; }

export MUSTER_MESH="$demo/mesh"
mkdir spool

# Two hosts, each a directory tree standing in for a machine.
for h in web-1 web-2; do
	mkdir -p "$h/root/etc" "$h/root/var/lib/dpkg"
	: > "$h/root/var/lib/dpkg/status"
	cp /etc/os-release "$h/root/etc/" 2>/dev/null || echo 'PRETTY_NAME="demo"' > "$h/root/etc/os-release"
done
host() { h=$1; shift; "$muster" "$@" --config "$demo/$h/muster.toml" --state "$demo/$h/state" --root "$demo/$h/root"; }

run "$muster" init --spool "$demo/spool"

say "muster enrol issue web-1 > web-1.token; muster enrol issue web-2 > web-2.token"
"$muster" enrol issue web-1 --label env=prod > web-1.token
"$muster" enrol issue web-2 --label env=prod > web-2.token

say "(on web-1) muster enrol join --spool $demo/spool < web-1.token"
host web-1 enrol join --spool "$demo/spool" < web-1.token

# web-2 demands more free space than any disk has: its briefing fails, so
# it is enrolled but ineligible.
mkdir -p web-2
say "(on web-2) muster enrol join --spool $demo/spool < web-2.token"
host web-2 enrol join --spool "$demo/spool" < web-2.token
sed -i 's/^ *min_free_root_mb = .*/  min_free_root_mb = 999999999/' web-2/muster.toml
say "(on web-2) muster brief --send   # after raising min_free_root_mb"
host web-2 brief --send

run "$muster" enrol list --table

cat > site.toml <<'TOML'
[role.web]
nodes = ["web-*"]

[role.web.file."/etc/motd"]
content = "managed by muster\n"
mode = "0644"

[role.web.directory."/srv/www"]
mode = "0755"
TOML
say "cat site.toml"; cat site.toml
run "$muster" declare site.toml

say "(on web-1) muster apply --root web-1/root"
host web-1 apply
say "(on web-1) muster apply   # again: nothing to do"
host web-1 apply

cat >> site.toml <<'TOML'

[role.web.file."/srv/www/index.html"]
content = "<h1>hello</h1>\n"
TOML
run "$muster" declare --dry-run site.toml
run "$muster" declare site.toml
if "$muster" help report >/dev/null 2>&1; then
	run "$muster" report --table || true
fi

say "(on web-1) muster apply"
host web-1 apply
if "$muster" help report >/dev/null 2>&1; then
	run "$muster" report --table || true
fi

# A package version no repository has: the line fails with apt's own words.
cat >> site.toml <<'TOML'

[role.web.package.muster-demo-tool]
version = "9.9-1"
TOML
run "$muster" declare site.toml
say "(on web-1) muster apply"
host web-1 apply || echo "(apply exited with status $?)"
if "$muster" help report >/dev/null 2>&1; then
	run "$muster" report --table || true
fi

printf '\nthe demo is in %s\n' "$demo"
