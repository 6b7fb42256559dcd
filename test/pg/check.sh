#!/usr/bin/env bash
#
# check.sh: build pgsandbox with -Werror against PostgreSQL VERSION, install
# it there and run the whole suite (pg_regress and TAP) as the postgres OS
# user.  Run as root.  For 17 and 18 everything happens in the chroot that
# test/pg/provision.sh makes (and this script provisions first); for 15 it is
# test/run-tests.sh on the host.
#
#   test/pg/check.sh VERSION
#
# PG_TEST_TIMEOUT_DEFAULT (default 60 here, PostgreSQL's is 180) bounds each
# wait of the TAP library, so a failing test does not wait out 3 minutes.
# PGSANDBOX_TEST_FILE_TIMEOUT (default 900 s, test/t/SandboxTest.pm) bounds
# each TAP file: one that runs longer fails, printing what its servers were
# doing.
# PROVE_TESTS picks TAP files (e.g. PROVE_TESTS=test/t/011_login_check.pl);
# REGRESS picks pg_regress tests (empty: none); TAP=0 runs no TAP test.
# PGSANDBOX_TEST_JOBS is how many TAP files run at once (test/prove-each.sh).
# PG_TEST_PORT_DIR, a directory every run of the machine shares, keeps two
# majors tested side by side from taking the same port.  KEEP=1 keeps the
# work directory (its path is printed) for the logs.
#
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)

[ $# -eq 1 ] || { echo "usage: $0 15|17|18" >&2; exit 2; }
version=$1
[ "$(id -u)" = 0 ] || { echo "$0: run as root" >&2; exit 1; }
export PG_TEST_TIMEOUT_DEFAULT=${PG_TEST_TIMEOUT_DEFAULT:-60}

. "$here/common.sh"
if pgsbx_on_host "$version"; then
	PG_VERSIONS=15 exec bash "$src/test/run-tests.sh"
fi

bash "$here/provision.sh" "$version"

# The tests write into their tree: give them a copy, on the host, that the
# chroot sees at the same path.
work=$(mktemp -d "/tmp/pgsandbox-test-$version.XXXXXX")
cow=""
small=""
cleanup() {
	[ -n "$cow" ] && bash "$here/cow.sh" stop "$work-cow"
	[ -n "$small" ] && bash "$here/cow.sh" stop "$work-small"
	[ "${KEEP:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT
[ "${KEEP:-0}" = 1 ] && echo "check: work directory $work (kept)"
tar -C "$src" --exclude=.git --exclude=node_modules --exclude='tmp_check*' \
	--exclude=results --exclude='*.o' --exclude='*.so' --exclude='*.bc' -cf - . | tar -C "$work" -xf -

pagila=$src/../shared/data/pagila
if [ -r "$pagila/pagila-schema.sql" ] && [ -r "$pagila/pagila-data.sql" ]; then
	mkdir "$work/pagila"
	cp "$pagila/pagila-schema.sql" "$pagila/pagila-data.sql" "$work/pagila/"
	export PGSANDBOX_PAGILA_DIR=$work/pagila
fi

# The MCP end-to-end test's packages, fetched on the host (whose npm is set
# up); the chroot's node runs them.
if command -v npm >/dev/null 2>&1; then
	(cd "$work/test/mcp" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi

run=("$here/run-in.sh" -b "$work")
[ -n "${PG_TEST_PORT_DIR:-}" ] && run+=(-b "$PG_TEST_PORT_DIR")

# From 18, a small XFS filesystem with reflink for the thin-clone test
# (028_thin_clones.pl), which says why it skips without one.
if [ "$version" -ge 18 ]; then
	if cow=$(bash "$here/cow.sh" start "$work-cow" 2G); then
		export PGSANDBOX_COW_DIR=$cow
		run+=(-b "$cow")
	else
		cow=""
		echo "check: no copy-on-write filesystem; the thin-clone tests will be skipped"
	fi
fi
# A small filesystem of its own, for the test of a disk that fills during
# a clone (057_full_disk.pl), which says why it skips without one.
if small=$(bash "$here/cow.sh" start "$work-small" 400M); then
	export PGSANDBOX_SMALL_DISK_DIR=$small
	run+=(-b "$small")
else
	small=""
	echo "check: no small filesystem; the full-disk test will be skipped"
fi
"${run[@]}" "$version" make -C "$work" -s clean
"${run[@]}" "$version" make -C "$work" -s WERROR=1
"${run[@]}" "$version" make -C "$work" -s install

chown -R postgres: "$work"
pgsbx_run_suites "$work" "${run[@]}" -u postgres "$version"
