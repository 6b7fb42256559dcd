#!/usr/bin/env bash
#
# run-tests.sh: build pgsandbox, install it, and run every test: pg_regress
# for the SQL surface, then the TAP suites under test/t.
#
# Run as root on a fresh Debian 12 machine, it first installs what it needs
# (PostgreSQL 15 server and headers, libpq, IPC::Run, Node.js and npm for the
# MCP end-to-end test, whose packages come from the lockfile) and runs the tests as
# the unprivileged "postgres" OS user: the server refuses to run as root.
# Run as any other user, it expects those packages and runs the tests as
# that user.
#
# PG_VERSIONS picks the PostgreSQL majors to test, one after another:
# "15" (the default) is Debian 12's own; 17 and 18 run in Debian chroots
# that test/pg/provision.sh makes and keeps (as root only).  For example
# PG_VERSIONS="15 17 18" runs the whole suite on each, then builds the
# Debian packages of those majors and tries them on plain Debian systems
# (packaging/build-debs.sh, packaging/test-debs.sh, with the upgrade from
# the package of 0.7), and fails if any of it fails.
#
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
versions=${PG_VERSIONS:-15}

if [ "$versions" != 15 ]; then
	[ "$(id -u)" = 0 ] || { echo "$0: PG_VERSIONS other than 15 needs root (chroots)" >&2; exit 1; }
	# a failing test of the TAP library waits this long, not 180 s
	export PG_TEST_TIMEOUT_DEFAULT=${PG_TEST_TIMEOUT_DEFAULT:-60}
	# every major first, then a plain server of each for the cross-version
	# tests, which each version's run clones from (test/pg/foreign.sh)
	bash "$src/test/install-deps.sh"
	for v in $versions; do
		bash "$src/test/pg/provision.sh" "$v"
	done
	foreign=$(mktemp -d /tmp/pgsandbox-foreign.XXXXXX)
	trap 'bash "$src/test/pg/foreign.sh" stop "$foreign"' EXIT
	PGSANDBOX_FOREIGN=$(bash "$src/test/pg/foreign.sh" start "$foreign" $versions)
	export PGSANDBOX_FOREIGN
	echo "=== servers for cross-version tests: $PGSANDBOX_FOREIGN"
	declare -A result
	status=0
	for v in $versions; do
		echo "=== PostgreSQL $v"
		start=$SECONDS
		if PG_VERSIONS=15 bash "$src/test/pg/check.sh" "$v"; then
			result[$v]="PASS"
		else
			result[$v]="FAIL"
			status=1
		fi
		result[$v]+=" in $((SECONDS - start)) s"
	done
	# the Debian packages of those majors, built with Debian's tools and
	# tried on plain Debian systems; the upgrade from the package of 0.7
	echo "=== Debian packages"
	start=$SECONDS
	debs=$(mktemp -d /tmp/pgsandbox-debs-out.XXXXXX)
	# sed reads all that git writes: head would leave it to die of SIGPIPE
	# between two commits it flushes, which pipefail and set -e then made
	# end the whole run without a word
	old07=$(git -C "$src" log --reverse --format=%H -S"default_version = '0.8'" -- pgsandbox.control 2>/dev/null | sed -n 1p)
	if PG_VERSIONS="$versions" bash "$src/packaging/build-debs.sh" "$debs/new" &&
		{ [ -z "$old07" ] || PGSANDBOX_REF="$old07^" PG_VERSIONS=15 bash "$src/packaging/build-debs.sh" "$debs/0.7"; } &&
		PG_VERSIONS="$versions" bash "$src/packaging/test-debs.sh" "$debs/new" ${old07:+"$debs/0.7"}; then
		packages="PASS"
	else
		packages="FAIL"
		status=1
	fi
	[ -n "$old07" ] || packages+=" (no history: the upgrade from 0.7 was not tried)"
	rm -rf "$debs"
	echo "=== summary"
	for v in $versions; do
		echo "PostgreSQL $v: ${result[$v]}"
	done
	echo "Debian packages: $packages in $((SECONDS - start)) s"
	exit $status
fi

if [ "$(id -u)" = 0 ]; then
	bash "$src/test/install-deps.sh"
fi

make -C "$src" -s clean
make -C "$src" -s WERROR=1
if [ "$(id -u)" = 0 ]; then
	make -C "$src" -s install
else
	sudo make -C "$src" -s install
fi

# The tests write into their tree (results, tmp_check): give them a copy that
# the test user owns, wherever the checkout sits.
work=$(mktemp -d /tmp/pgsandbox-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
tar -C "$src" --exclude=.git --exclude=node_modules --exclude='tmp_check*' -cf - . | tar -C "$work" -xf -

# The pagila sample database is not part of pgsandbox; when the checkout sits
# beside it, test/t/020_pagila.pl clones it (and is skipped otherwise).
pagila=$src/../shared/data/pagila
if [ -r "$pagila/pagila-schema.sql" ] && [ -r "$pagila/pagila-data.sql" ]; then
	mkdir "$work/pagila"
	cp "$pagila/pagila-schema.sql" "$pagila/pagila-data.sql" "$work/pagila/"
	export PGSANDBOX_PAGILA_DIR=$work/pagila
fi

# The MCP end-to-end test drives a real MCP server: install the exact
# versions the lockfile names.
(cd "$work/test/mcp" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)

status=0
if [ "$(id -u)" = 0 ]; then
	chown -R postgres: "$work"
	runuser -u postgres -- make -C "$work" -s installcheck PROVE_FLAGS="--timer" || status=$?
else
	make -C "$work" -s installcheck PROVE_FLAGS="--timer" || status=$?
fi

if [ $status -ne 0 ]; then
	# the diffs, and the logs of the TAP files that failed
	for f in "$work"/regression.diffs "$work"/tmp_check/log/regress_log_*; do
		[ -f "$f" ] || continue
		case "$f" in
		*/regress_log_*) grep -qE '^\[[0-9:.]+\]\([0-9.]+s\) not ok|Looks like|BAIL OUT|died' "$f" || continue ;;
		esac
		echo "=== $f (last 60 lines)"
		tail -n 60 "$f"
	done
fi
exit $status
