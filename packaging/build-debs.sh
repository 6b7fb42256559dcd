#!/usr/bin/env bash
#
# build-debs.sh: build the Debian packages postgresql-<major>-pgsandbox, one
# per PostgreSQL major, with Debian's own tools (dpkg-buildpackage, dh with
# pg_buildext), and write the .deb files to one folder.  Run as root on a
# Debian 12 machine:
#
#   bash packaging/build-debs.sh [OUTDIR]     (default: packaging/out)
#
# PG_VERSIONS (default "15 17 18") picks the majors: 15 is built on the host
# (Debian 12's postgresql-server-dev-15), 17 in the Debian 13 chroot and 18
# in the unstable chroot that test/pg/provision.sh makes, each against the
# PostgreSQL its system ships.  Each build also runs the regression suite
# against a server of its major that preloads the library from the package
# being built (pg_buildext installcheck, in debian/rules), and lintian on
# the result; lintian's tags are printed, and a tag of severity error fails
# the build.
#
# Each build's log is written beside the packages
# (postgresql-<major>-pgsandbox.build.log).
#
# The build reads a copy of the committed tree (git archive HEAD) or, outside
# a git checkout, of the working tree; the checkout is not written to.
#
# PGSANDBOX_REF=<commit> builds an earlier release instead, for the upgrade
# test (packaging/test-debs.sh): that commit's tree with this debian/
# folder, its changelog's version set to that tree's default version, and
# its tests left to its own day (DEB_BUILD_OPTIONS=nocheck).
#
# PGSANDBOX_DEB_NOCHECK=1 leaves out the build's regression suite as well:
# test/run-tests.sh sets it when it runs each major's own suites beside the
# packages, where pg_regress already runs the same files on every major
# (the packages are then tried installed, by packaging/test-debs.sh).
#
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
outdir=${1:-$top/packaging/out}
versions=${PG_VERSIONS:-15 17 18}
[ "$(id -u)" = 0 ] || { echo "$0: run as root (the chroots, apt)" >&2; exit 1; }

. "$top/test/pg/common.sh"

ref=${PGSANDBOX_REF:-}
nocheck=
if [ -n "$ref" ] || [ "${PGSANDBOX_DEB_NOCHECK:-}" = 1 ]; then
	nocheck=nocheck
fi

# the version the packages carry is the extension's default version
if [ -n "$ref" ]; then
	version=$(git -C "$top" show "$ref:pgsandbox.control" | sed -n "s/^default_version = '\(.*\)'$/\1/p")
else
	version=$(sed -n "s/^default_version = '\(.*\)'$/\1/p" "$top/pgsandbox.control")
	changelog=$(sed -n '1s/^pgsandbox (\([^)]*\)).*/\1/p' "$top/debian/changelog")
	[ "$changelog" = "$version.0" ] || {
		echo "$0: debian/changelog says $changelog, pgsandbox.control $version: add a changelog entry" >&2
		exit 1
	}
fi

# what the build needs besides PostgreSQL's server headers
build_pkgs=(build-essential debhelper dpkg-dev fakeroot lintian libpq-dev postgresql-server-dev-all)

mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
work=$(mktemp -d /tmp/pgsandbox-debs.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"

status=0
for v in $versions; do
	start=$SECONDS
	echo "=== postgresql-$v-pgsandbox"
	bash "$top/test/pg/provision.sh" "$v" >/dev/null
	if pgsbx_on_host "$v"; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
			"${build_pkgs[@]}" >/dev/null
	else
		bash "$top/test/pg/run-in.sh" "$v" env DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -q --no-install-recommends "${build_pkgs[@]}" >/dev/null
	fi

	# a clean copy of the tree for this major
	src=$work/$v/pgsandbox-$version.0
	mkdir -p "$src"
	if [ -n "$ref" ]; then
		git -C "$top" archive "$ref" | tar -C "$src" -xf -
		rm -rf "$src/debian"
		cp -a "$top/debian" "$src/debian"
		sed -i "1s/^pgsandbox ([^)]*)/pgsandbox ($version.0)/" "$src/debian/changelog"
		# the examples and documents that tree has
		for list in examples docs; do
			(cd "$src" && for f in $(cat "debian/$list"); do if [ -e "$f" ]; then echo "$f"; fi; done) \
				> "$src/debian/$list.new"
			mv "$src/debian/$list.new" "$src/debian/$list"
		done
	elif git -C "$top" rev-parse --git-dir >/dev/null 2>&1; then
		git -C "$top" archive HEAD | tar -C "$src" -xf -
	else
		tar -C "$top" --exclude=.git --exclude='packaging/out' --exclude='tmp_check*' \
			--exclude='*.o' --exclude='*.bc' --exclude='*.so' -cf - . | tar -C "$src" -xf -
	fi

	# debian/control lists the majors this system supports; the build, as
	# root, runs its test server as "postgres" (pg_virtualenv)
	log=$outdir/postgresql-$v-pgsandbox.build.log
	if bash "$top/test/pg/run-in.sh" -b "$work/$v" "$v" sh -c "
			cd '$src' &&
			export DEB_BUILD_OPTIONS='$nocheck' &&
			pg_buildext updatecontrol &&
			dpkg-buildpackage -b -us -uc &&
			lintian --fail-on error --profile debian ../*.changes" >"$log" 2>&1; then
		cp "$work/$v"/*.deb "$outdir/"
		echo "built $(cd "$work/$v" && ls ./*.deb | xargs -n1 basename | tr '\n' ' ')in $((SECONDS - start)) s"
		sed -n '/^[EWIPX]: /p' "$log" | sort -u | sed 's/^/lintian: /'
	else
		status=1
		echo "build of postgresql-$v-pgsandbox failed; the end of its log ($log):" >&2
		tail -n 60 "$log" >&2
	fi
done
[ "$status" = 0 ] && echo "packages in $outdir:" && ls -1 "$outdir"/*.deb
exit $status
