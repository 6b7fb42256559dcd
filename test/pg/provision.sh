#!/usr/bin/env bash
#
# provision.sh: make a PostgreSQL of one major version usable for building and
# testing pgsandbox on a Debian 12 machine.  Run as root.  Idempotent: a
# second run with nothing to do returns at once.
#
#   test/pg/provision.sh 15   Debian 12's own packages (test/install-deps.sh)
#   test/pg/provision.sh 17   a Debian 13 (trixie) chroot with postgresql-17
#   test/pg/provision.sh 18   a Debian unstable (sid) chroot with postgresql-18
#
# With PGSANDBOX_CHROOT_15=1, 15 gets a Debian 12 (bookworm) chroot too,
# which leaves the host's own PostgreSQL alone.
#
# The chroots live under $PGSANDBOX_CACHE (default /var/cache/pgsandbox), one
# per suite: chroot-trixie, chroot-sid.  A chroot is built in a ".partial"
# directory and renamed when complete, and a stamp file records the package
# list it was made with, so an interrupted run starts over and a finished one
# is not redone.  Delete the directory to rebuild it.
#
# In the chroot no service is started (policy-rc.d exits 101), /proc is
# mounted only while apt runs (in a private mount namespace, so it cannot be
# left behind), and the "postgres" user has the host's uid and gid, so files
# are shared without a chown.  test/pg/run-in.sh runs commands in it.
#
# The mirror is the one the host's apt already uses (its debian.sources).
#
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"

[ $# -eq 1 ] || { echo "usage: $0 15|17|18" >&2; exit 2; }
version=$1
[ "$(id -u)" = 0 ] || { echo "$0: run as root" >&2; exit 1; }

if pgsbx_on_host "$version"; then
	exec bash "$here/../install-deps.sh"
fi

suite=$(pgsbx_suite "$version")
root=$(pgsbx_root "$version")
pkgs=(postgresql-$version postgresql-server-dev-$version
	  libicu-dev libkrb5-dev make gcc libipc-run-perl locales
	  postgresql-$version-postgis-3 postgresql-$version-partman
	  postgresql-$version-orafce nodejs procps prometheus-postgres-exporter curl)
stamp_text="suite=$suite packages=${pkgs[*]}"

if [ -f "$root/.pgsandbox-stamp" ] && [ "$(cat "$root/.pgsandbox-stamp")" = "$stamp_text" ]; then
	echo "provision: PostgreSQL $version ready in $root"
	exit 0
fi

# apt in the chroot, with /proc mounted only while it runs (in a private
# mount namespace, so that it cannot be left mounted).
chroot_apt()
{
	local dir=$1 log=$2
	shift 2
	unshare --mount --propagation private -- bash -euc '
		dir=$1; shift
		mount -t proc proc "$dir/proc"
		chroot "$dir" env DEBIAN_FRONTEND=noninteractive LC_ALL=C apt-get update -q
		chroot "$dir" env DEBIAN_FRONTEND=noninteractive LC_ALL=C \
			apt-get install -y -q --no-install-recommends "$@"
		chroot "$dir" apt-get clean
	' chroot_apt "$dir" "$@" >"$log" 2>&1 || {
		echo "provision: apt failed, last lines of $log:" >&2
		tail -n 30 "$log" >&2
		return 1
	}
	rm -f "$log"
}

# A finished chroot made with another package list: install what is new.
if [ -f "$root/.pgsandbox-stamp" ]; then
	echo "provision: updating $root: ${pkgs[*]}"
	chroot_apt "$root" "$root.apt.log" "${pkgs[@]}"
	echo "$stamp_text" > "$root/.pgsandbox-stamp"
	echo "provision: PostgreSQL $version ready in $root"
	exit 0
fi

# The host needs debootstrap (and the keyring that signs trixie and sid).
missing=()
for p in debootstrap debian-archive-keyring; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

mirror=$(pgsbx_mirror)
[ -n "$mirror" ] || { echo "provision: no URIs: line in /etc/apt/sources.list.d/debian.sources" >&2; exit 1; }

partial=$root.partial
rm -rf "$partial" "$root"
mkdir -p "$(dirname "$root")"

echo "provision: debootstrap $suite into $partial"
debootstrap --variant=minbase "$suite" "$partial" "$mirror" >"$partial.log" 2>&1 || {
	echo "provision: debootstrap failed, last lines of $partial.log:" >&2
	tail -n 30 "$partial.log" >&2
	exit 1
}
rm -f "$partial.log"

# The bare system, kept for packaging/debian-system.sh, whose plain systems
# of the same suite start from a copy of it rather than from a second
# debootstrap.
minbase=$PGSANDBOX_CACHE/minbase-$suite
rm -rf "$minbase" "$minbase.partial"
cp -a "$partial" "$minbase.partial"
mv "$minbase.partial" "$minbase"

# No service may start inside the chroot.
printf '#!/bin/sh\nexit 101\n' > "$partial/usr/sbin/policy-rc.d"
chmod 755 "$partial/usr/sbin/policy-rc.d"

# The chroot's postgres user gets the host's uid and gid (made before the
# postgresql packages, whose postinst then finds it).
uid=$(id -u postgres)
gid=$(id -g postgres)
chroot "$partial" groupadd --system --gid "$gid" postgres
chroot "$partial" useradd --system --uid "$uid" --gid "$gid" \
	--home-dir /var/lib/postgresql --shell /bin/bash --no-create-home postgres

# Debian's postgresql-common would make a "main" cluster: it is not needed.
mkdir -p "$partial/etc/postgresql-common/createcluster.d"
echo 'create_main_cluster = false' > "$partial/etc/postgresql-common/createcluster.d/pgsandbox.conf"

# The mirror may serve a frozen copy of the archive whose Release files have
# passed their Valid-Until date (sid's lasts a week): accept them.
echo 'Acquire::Check-Valid-Until "false";' > "$partial/etc/apt/apt.conf.d/99pgsandbox"

# C.UTF-8 is in libc; en_US.UTF-8 as on the host, for tests that name it.
echo 'en_US.UTF-8 UTF-8' > "$partial/etc/locale.gen"

echo "provision: installing ${pkgs[*]}"
chroot_apt "$partial" "$partial.apt.log" "${pkgs[@]}"

[ -x "$partial/usr/lib/postgresql/$version/bin/pg_config" ] || {
	echo "provision: no pg_config for $version in the chroot" >&2; exit 1; }

echo "$stamp_text" > "$partial/.pgsandbox-stamp"
mv "$partial" "$root"
echo "provision: PostgreSQL $version ready in $root ($(chroot "$root" /usr/lib/postgresql/$version/bin/pg_config --version 2>/dev/null || echo '?'))"
