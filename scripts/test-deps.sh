#!/bin/sh
# Install what the tests need on a fresh Debian machine with Go: the Debian
# tools the package, user and group, and man page tests drive (dpkg, apt,
# the shadow tools useradd and its kin), the shells the completion tests
# load (bash, zsh, fish), the FUSE drivers and mkfs/fsck
# of FAT and exFAT the USB stick tests mount images with, the browser the
# report page tests load the page in (headless Chromium), the S3 server
# the object store tests run against, and what the lab (internal/lab) boots
# its Debian hosts with: mmdebstrap and systemd-nspawn. Run by `make test`
# (and so by CI) before the tests.
set -eu
# have CMD: CMD is installed, also in an sbin directory not on PATH.
have() { command -v "$1" >/dev/null || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ]; }
need=""
command -v dpkg-deb >/dev/null || need="$need dpkg"
command -v dpkg-scanpackages >/dev/null || need="$need dpkg-dev"
command -v apt-get >/dev/null || need="$need apt"
command -v systemctl >/dev/null || need="$need systemd"
command -v mandoc >/dev/null || need="$need mandoc"
command -v rsync >/dev/null || need="$need rsync"
have useradd || need="$need passwd"
command -v zsh >/dev/null || need="$need zsh"
command -v fish >/dev/null || need="$need fish"
command -v chromium >/dev/null || need="$need chromium"
have fusefat || need="$need fusefat"
have mount.exfat-fuse || need="$need exfat-fuse"
have mkfs.vfat || need="$need dosfstools"
have mkfs.exfat || need="$need exfatprogs"
command -v mmdebstrap >/dev/null || need="$need mmdebstrap"
command -v systemd-nspawn >/dev/null || need="$need systemd-container"
if [ -n "$need" ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "test-deps: missing Debian packages:$need; install them as root (apt-get install$need)" >&2
		exit 1
	fi
	echo "test-deps: installing$need" >&2
	DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $need >/dev/null
fi
gobin=$(go env GOPATH)/bin
if ! command -v versitygw >/dev/null && [ ! -x "$gobin/versitygw" ]; then
	echo "test-deps: installing versitygw (the S3 server the spool tests use)" >&2
	go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
fi
# staticcheck at the version `make check` is held to: a newer one may find
# new things, which is a change to make on purpose.
staticcheck_version=v0.8.2
if ! "$gobin/staticcheck" -version 2>/dev/null | grep -q "(${staticcheck_version#v})"; then
	echo "test-deps: installing staticcheck $staticcheck_version" >&2
	go install honnef.co/go/tools/cmd/staticcheck@$staticcheck_version
fi
