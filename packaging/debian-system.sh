#!/usr/bin/env bash
#
# debian-system.sh: make, once, a plain Debian system with nothing but
# Debian's PostgreSQL server of one major, for packaging/test-debs.sh to
# install the built package into.  Run as root on a Debian 12 machine.
#
#   bash packaging/debian-system.sh 15|17|18
#
# It prints the system's directory: $PGSANDBOX_CACHE/system-<suite>
# (bookworm for 15, trixie for 17, sid for 18, with trixie's 17 beside its
# 18), a debootstrap "minbase" (a copy of the one test/pg/provision.sh
# kept of the suite, when it made a chroot of it: the same bare system)
# with postgresql-<major> installed from the host apt's mirror (with the
# suite's updates and security updates, for a stable one), whose
# postgresql-common is told not to make a cluster (the test makes its own,
# with pg_createcluster) and whose services never start (policy-rc.d).  A
# stamp file records what it was made with; a finished system is not made
# again (delete the directory to remake it).  The test works on a copy.
#
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
. "$here/../test/pg/common.sh"

[ $# -eq 1 ] || { echo "usage: $0 15|17|18" >&2; exit 2; }
version=$1
[ "$(id -u)" = 0 ] || { echo "$0: run as root" >&2; exit 1; }

case "$version" in
	15) suite=bookworm ;;
	*) suite=$(pgsbx_suite "$version") ;;
esac
root=$PGSANDBOX_CACHE/system-$suite
pkgs=(postgresql-$version postgresql-client-$version locales)
# unstable has one major, 18: the server of 17 comes from Debian 13, beside
# it, as on a host that runs two majors side by side
if [ "$suite" = sid ]; then
	pkgs+=(postgresql-17 postgresql-client-17)
fi
mirror=$(pgsbx_mirror)
[ -n "$mirror" ] || { echo "$0: no URIs: line in /etc/apt/sources.list.d/debian.sources" >&2; exit 1; }
# a stable suite's security updates, from the host's own security mirror: a
# package built on the host depends on the server's minor version there
security=$(awk '/^URIs:/ && /security/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources)
sources="deb $mirror $suite main"
if [ "$suite" != sid ]; then
	sources+=$'\n'"deb $mirror $suite-updates main"
	[ -n "$security" ] && sources+=$'\n'"deb $security $suite-security main"
else
	sources+=$'\n'"deb $mirror trixie main"
fi
stamp_text="suite=$suite packages=${pkgs[*]} sources=$(echo "$sources" | tr '\n' ';')"
if [ -f "$root/.pgsandbox-stamp" ] && [ "$(cat "$root/.pgsandbox-stamp")" = "$stamp_text" ]; then
	echo "$root"
	exit 0
fi

missing=()
for p in debootstrap debian-archive-keyring; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
fi
partial=$root.partial
rm -rf "$partial" "$root"
mkdir -p "$(dirname "$root")"
log=$partial.log
# the bare system test/pg/provision.sh kept of the same suite, if it made
# one, saves a second debootstrap
if [ -d "$PGSANDBOX_CACHE/minbase-$suite" ]; then
	cp -a "$PGSANDBOX_CACHE/minbase-$suite" "$partial"
	: >"$log"
else
	debootstrap --variant=minbase "$suite" "$partial" "$mirror" >"$log" 2>&1 || {
		echo "$0: debootstrap failed, last lines of $log:" >&2
		tail -n 30 "$log" >&2
		exit 1
	}
fi
echo "$sources" > "$partial/etc/apt/sources.list"
printf '#!/bin/sh\nexit 101\n' > "$partial/usr/sbin/policy-rc.d"
chmod 755 "$partial/usr/sbin/policy-rc.d"
mkdir -p "$partial/etc/postgresql-common/createcluster.d"
echo 'create_main_cluster = false' > "$partial/etc/postgresql-common/createcluster.d/pgsandbox.conf"
echo 'Acquire::Check-Valid-Until "false";' > "$partial/etc/apt/apt.conf.d/99pgsandbox"
echo 'en_US.UTF-8 UTF-8' > "$partial/etc/locale.gen"
unshare --mount --propagation private -- bash -euc '
	dir=$1; shift
	mount -t proc proc "$dir/proc"
	chroot "$dir" env DEBIAN_FRONTEND=noninteractive LC_ALL=C apt-get update -q
	chroot "$dir" env DEBIAN_FRONTEND=noninteractive LC_ALL=C \
		apt-get install -y -q --no-install-recommends "$@"
	chroot "$dir" apt-get clean
' debian-system "$partial" "${pkgs[@]}" >>"$log" 2>&1 || {
	echo "$0: apt failed, last lines of $log:" >&2
	tail -n 30 "$log" >&2
	exit 1
}
rm -f "$log"
echo "$stamp_text" > "$partial/.pgsandbox-stamp"
mv "$partial" "$root"
echo "$root"
