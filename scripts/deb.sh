#!/bin/sh
# Build muster as a Debian package: scripts/deb.sh VERSION [OUTDIR]. Run by
# `make deb`, which passes `git describe --tags --always --dirty`.
# scripts/deb.sh --print-version VERSION prints the Debian version only.
#
# The package is built with dpkg-deb, the tool every Debian system already
# has: no extra dependency, and the result is exactly what dpkg expects,
# because dpkg itself builds it. No maintainer scripts: the package installs
# into an image or a scratch root as well as on a running host.
#
# VERSION is turned into a Debian version: a leading "v" goes; a pre-release
# suffix sorts before its release (v1.2.0-rc1 → 1.2.0~rc1); a git describe
# suffix sorts after its tag (v1.2.0-3-gabc1234 → 1.2.0+git3.gabc1234); a
# dirty tree adds ".dirty" (or "+dirty"); a bare commit hash or another
# word becomes 0.0~… so any tagged release sorts after it. The binary is
# stamped with the same version, so `muster version` and dpkg agree.
#
# Output: OUTDIR/muster_<version>_<arch>.deb (OUTDIR defaults to dist/).
# Environment:
#   GO               the go command (default go)
#   GOARCH           the architecture to build for (default: this one)
#   MUSTER_BINARY    package this binary instead of building one
#   DEB_COMPRESS     dpkg-deb compression: xz (default), gzip, zstd, none
#   DEB_MAINTAINER   the Maintainer field
set -eu

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: scripts/deb.sh VERSION [OUTDIR] | --print-version VERSION" >&2
	exit 2
fi
top=$(cd "$(dirname "$0")/.." && pwd)
out=${2:-$top/dist}
GO=${GO:-go}

# debversion VERSION: the Debian version for a git tag or describe output.
debversion() {
	v=${1#v}
	suffix=
	case $v in *-dirty)
		v=${v%-dirty}
		suffix=dirty
		;;
	esac
	if printf '%s\n' "$v" | grep -Eq -e '-[0-9]+-g[0-9a-f]+$'; then
		hash=${v##*-g}
		rest=${v%-g*}
		n=${rest##*-}
		v="$(printf '%s' "${rest%-*}" | tr '-' '~')+git$n.g$hash"
		[ -z "$suffix" ] || v="$v.$suffix"
	elif printf '%s\n' "$v" | grep -Eq '^[0-9a-f]{7,40}$'; then
		v="0.0~git.g$v"
		[ -z "$suffix" ] || v="$v.$suffix"
	else
		v=$(printf '%s' "$v" | tr '-' '~')
		[ -z "$suffix" ] || v="$v+$suffix"
	fi
	case $v in [0-9]*) ;; *) v="0.0~$v" ;; esac
	if ! printf '%s\n' "$v" | grep -Eq '^[0-9][A-Za-z0-9.+~]*$'; then
		echo "deb.sh: cannot make a Debian version of $1 (got $v)" >&2
		return 1
	fi
	printf '%s\n' "$v"
}

# debarch GOARCH: the Debian architecture name.
debarch() {
	case $1 in
	amd64 | arm64 | s390x | riscv64 | loong64) echo "$1" ;;
	386) echo i386 ;;
	arm) echo armhf ;;
	ppc64le) echo ppc64el ;;
	mips64le) echo mips64el ;;
	*)
		echo "deb.sh: no Debian architecture for GOARCH=$1" >&2
		return 1
		;;
	esac
}

if [ "$1" = --print-version ]; then
	debversion "${2:?usage: scripts/deb.sh --print-version VERSION}"
	exit
fi
version=$(debversion "$1")
goarch=${GOARCH:-$($GO env GOARCH)}
arch=$(debarch "$goarch")
for f in dist/muster-launch dist/muster-apply.service dist/muster-apply.timer; do
	[ -f "$top/$f" ] || {
		echo "deb.sh: $f is missing" >&2
		exit 1
	}
done
command -v dpkg-deb >/dev/null || {
	echo "deb.sh: dpkg-deb not found: install dpkg" >&2
	exit 1
}

tree=$(mktemp -d "${TMPDIR:-/tmp}/muster-deb.XXXXXX")
trap 'rm -rf "$tree"' EXIT INT TERM
umask 022
# The tree's own mode is the mode of / in the package.
chmod 0755 "$tree"

# SOURCE_DATE_EPOCH makes dpkg-deb's file times reproducible.
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
	SOURCE_DATE_EPOCH=$(git -C "$top" log -1 --format=%ct 2>/dev/null || date +%s)
	export SOURCE_DATE_EPOCH
fi

mkdir -p "$tree/usr/bin" "$tree/usr/lib/muster" "$tree/lib/systemd/system" \
	"$tree/etc/muster" "$tree/usr/share/doc/muster/examples" "$tree/DEBIAN"
if [ -n "${MUSTER_BINARY:-}" ]; then
	cp "$MUSTER_BINARY" "$tree/usr/bin/muster"
else
	# Static (CGO_ENABLED=0 unless set), so that a restored known-good
	# copy runs whatever the C library on the host became since.
	(cd "$top" && CGO_ENABLED=${CGO_ENABLED:-0} GOOS=linux GOARCH=$goarch $GO build -trimpath \
		-ldflags "-s -w -X github.com/muster-tool/muster/internal/cli.version=$version" \
		-o "$tree/usr/bin/muster" ./cmd/muster)
fi
chmod 0755 "$tree/usr/bin/muster"
install -m 0755 "$top/dist/muster-launch" "$tree/usr/lib/muster/muster-launch"
install -m 0644 "$top/dist/muster-apply.service" "$top/dist/muster-apply.timer" "$tree/lib/systemd/system/"
# Cron is the alternative to the timer, not an addition: shipped as an
# example, never enabled by the package.
# Under a name without a dot: cron ignores such files in /etc/cron.d.
if [ -f "$top/dist/cron.d/muster-apply" ]; then
	install -D -m 0644 "$top/dist/cron.d/muster-apply" "$tree/usr/share/doc/muster/examples/cron.d/muster-apply"
fi
for page in "$top"/man/*.[1-9]; do
	[ -f "$page" ] || continue
	s=${page##*.}
	mkdir -p "$tree/usr/share/man/man$s"
	gzip -9n <"$page" >"$tree/usr/share/man/man$s/${page##*/}.gz"
	chmod 0644 "$tree/usr/share/man/man$s/${page##*/}.gz"
done
install -m 0644 "$top/LICENSE" "$tree/usr/share/doc/muster/copyright"
# Shell completions, made by the binary from its own command table; by one
# built for this machine when the package's is for another architecture.
gen="$tree/usr/bin/muster"
if ! "$gen" version >/dev/null 2>&1; then
	gen="$tree/muster-for-completions"
	(cd "$top" && CGO_ENABLED=0 $GO build -o "$gen" ./cmd/muster)
fi
mkdir -p "$tree/usr/share/bash-completion/completions" "$tree/usr/share/zsh/vendor-completions" \
	"$tree/usr/share/fish/vendor_completions.d"
"$gen" completion bash >"$tree/usr/share/bash-completion/completions/muster"
"$gen" completion zsh >"$tree/usr/share/zsh/vendor-completions/_muster"
"$gen" completion fish >"$tree/usr/share/fish/vendor_completions.d/muster.fish"
chmod 0644 "$tree/usr/share/bash-completion/completions/muster" "$tree/usr/share/zsh/vendor-completions/_muster" \
	"$tree/usr/share/fish/vendor_completions.d/muster.fish"
[ "$gen" = "$tree/usr/bin/muster" ] || rm -f "$gen"

size=$(du -sk --exclude=DEBIAN "$tree" | cut -f 1)
cat >"$tree/DEBIAN/control" <<EOF
Package: muster
Version: $version
Architecture: $arch
Maintainer: ${DEB_MAINTAINER:-muster maintainers <maintainers@muster-tool.invalid>}
Installed-Size: $size
Section: admin
Priority: optional
Homepage: https://github.com/muster-tool/muster
Description: declare desired state once; every host applies, verifies and reports
 muster replaces push deploys with verified pull: a declaration is committed
 to a spool (a directory or an S3 bucket) in one write; each host runs
 muster apply from a timer, reconciles, reads every resource back and writes
 a signed report; muster report shows which hosts applied, failed, or are
 outstanding.
 .
 The timer runs muster through /usr/lib/muster/muster-launch, which rolls
 back to the last known-good muster if a new one fails to start (see
 muster-upgrade(7)). Enable it with: systemctl enable --now muster-apply.timer
EOF

mkdir -p "$out"
deb=$out/muster_${version}_$arch.deb
dpkg-deb --root-owner-group -Z"${DEB_COMPRESS:-xz}" --build "$tree" "$deb" >/dev/null
echo "$deb"
