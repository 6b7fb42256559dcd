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
# that user.  The checkout is only read: the build and the tests work on a
# copy in /tmp.
#
# TAP files run in a prove each (test/prove-each.sh), PGSANDBOX_TEST_JOBS at
# a time (default 2): a file that bails out ends only itself.
#
# PG_VERSIONS picks the PostgreSQL majors to test: "15" (the default) is
# Debian 12's own; 17 and 18 run in Debian chroots that test/pg/provision.sh
# makes and keeps (as root only).  With several, for example
# PG_VERSIONS="15 17 18" (what CI runs), the majors' suites run side by
# side, each loading the machine for the others, beside them the demo
# (demo/demo.sh, when 15 is among them) and the Debian packages of those
# majors built and tried on plain Debian systems (packaging/build-debs.sh,
# packaging/test-debs.sh, with the upgrade from the package of 0.7); each
# part's output is printed whole when it ends, then a summary of every
# part's time, and the run fails if any part failed.  A run longer than
# PGSANDBOX_CI_WARN_MINUTES (default 60) says so in the summary: CI's limit
# is 90 minutes.
#
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
versions=${PG_VERSIONS:-15}
. "$src/test/pg/common.sh"

if [ "$versions" != 15 ]; then
	[ "$(id -u)" = 0 ] || { echo "$0: PG_VERSIONS other than 15 needs root (chroots)" >&2; exit 1; }
	run_start=$SECONDS
	# a failing test of the TAP library waits this long, not 180 s; but
	# pg_ctl, which waits 60 s by default, gets longer for a start or stop
	# on a machine this run keeps busy (a crash recovery of 700 MB in 046)
	export PG_TEST_TIMEOUT_DEFAULT=${PG_TEST_TIMEOUT_DEFAULT:-60}
	export PGCTLTIMEOUT=${PGCTLTIMEOUT:-180}
	# the majors side by side already fill both cores: one file at a time each
	export PGSANDBOX_TEST_JOBS=${PGSANDBOX_TEST_JOBS:-1}
	logs=$(mktemp -d /tmp/pgsandbox-ci.XXXXXX)
	chmod 755 "$logs"
	foreign=
	cleanup()
	{
		[ -n "$foreign" ] && bash "$src/test/pg/foreign.sh" stop "$foreign"
		rm -rf "$logs"
	}
	trap cleanup EXIT
	declare -A took result
	order=()
	status=0

	# What a part printed, whole, and how it ended.
	report()
	{
		local part=$1 rc=$2
		echo "=== $part: $([ "$rc" = 0 ] && echo PASS || echo FAIL) in ${took[$part]} s"
		cat "$logs/$part.log"
		result[$part]=$([ "$rc" = 0 ] && echo PASS || echo FAIL)
		[ "$rc" = 0 ] || status=1
	}

	# 1. the packages of the host, and a chroot for each other major, made
	# side by side
	start=$SECONDS
	bash "$src/test/install-deps.sh"
	declare -A prov
	for v in $versions; do
		bash "$src/test/pg/provision.sh" "$v" >"$logs/provision $v.log" 2>&1 &
		prov[$v]=$!
	done
	for v in $versions; do
		rc=0
		wait "${prov[$v]}" || rc=$?
		took["provision $v"]=$((SECONDS - start))
		[ $rc = 0 ] || { report "provision $v" $rc; exit 1; }
	done
	took[provisioning]=$((SECONDS - start))
	order+=(provisioning)
	result[provisioning]=PASS

	# 2. a plain server of each major for the cross-version tests, which
	# each major's run clones from (test/pg/foreign.sh)
	foreign=$(mktemp -d /tmp/pgsandbox-foreign.XXXXXX)
	PGSANDBOX_FOREIGN=$(bash "$src/test/pg/foreign.sh" start "$foreign" $versions)
	export PGSANDBOX_FOREIGN
	echo "=== servers for cross-version tests: $PGSANDBOX_FOREIGN"

	# 3. the host's build first (-Werror), so that the demo can use it
	# while 15's suite runs; every other major builds in its own run
	export PG_TEST_PORT_DIR=$logs/ports
	mkdir "$PG_TEST_PORT_DIR"
	chmod 1777 "$PG_TEST_PORT_DIR"
	declare -A lane
	lanes=()
	if [[ " $versions " == *" 15 "* ]] && pgsbx_on_host 15; then
		start=$SECONDS
		rc=0
		PG_VERSIONS=15 PGSANDBOX_BUILD_ONLY=1 bash "$src/test/run-tests.sh" >"$logs/build 15.log" 2>&1 || rc=$?
		took["build 15"]=$((SECONDS - start))
		order+=("build 15")
		report "build 15" $rc
		[ $rc = 0 ] || exit 1
	fi

	# 4. every part side by side: each major's suites, the demo, the
	# packages
	start_part()
	{
		local part=$1
		shift
		(
			t=$SECONDS
			rc=0
			"$@" >"$logs/$part.log" 2>&1 </dev/null || rc=$?
			echo $((SECONDS - t)) >"$logs/$part.time"
			exit $rc
		) &
		lane[$!]=$part
		lanes+=("$part")
	}
	# the files test/major-independent lists run on the first and the last
	# major only
	first=${versions%% *}
	last=${versions##* }
	# the upgrade from every earlier version on one major, from the last on
	# the others (test/t/040_upgrade.pl): on a major between the first and
	# the last, whose part runs fewer files, or else on the first
	chain_on=$first
	for v in $versions; do
		if [ "$v" != "$first" ] && [ "$v" != "$last" ]; then
			chain_on=$v
			break
		fi
	done
	chain_on=${PGSANDBOX_UPGRADE_CHAIN_ON:-$chain_on}
	middle_files=$(cd "$src" && ls test/t/*.pl | grep -vxFf <(sed -e 's/#.*//' -e '/^ *$/d' \
		-e 's/^\([^ ]*\).*/test\/t\/\1/' test/major-independent) | tr '\n' ' ')
	for v in $versions; do
		from=last
		[ "$v" = "$chain_on" ] && from=all
		files=()
		if [ "$v" != "$first" ] && [ "$v" != "$last" ]; then
			files=(PROVE_TESTS="$middle_files")
		fi
		if pgsbx_on_host "$v"; then
			start_part "PostgreSQL $v" env "${files[@]}" PG_VERSIONS=15 PGSANDBOX_SKIP_BUILD=1 \
				PGSANDBOX_UPGRADE_FROM=$from bash "$src/test/run-tests.sh"
		else
			start_part "PostgreSQL $v" env "${files[@]}" PGSANDBOX_UPGRADE_FROM=$from \
				bash "$src/test/pg/check.sh" "$v"
		fi
	done
	if [[ " $versions " == *" 15 "* ]] && pgsbx_on_host 15; then
		start_part demo env DEMO_SKIP_BUILD=1 PORT=5599 bash "$src/demo/demo.sh"
	fi
	# the Debian packages of those majors, built with Debian's tools and
	# tried on plain Debian systems; the upgrade from the package of 0.7.
	# Their builds leave out pg_regress, which each major's part runs
	packages()
	{
		local debs old07
		debs=$(mktemp -d /tmp/pgsandbox-debs-out.XXXXXX)
		# sed reads all that git writes: head would leave it to die of
		# SIGPIPE between two commits it flushes, which pipefail and set -e
		# then made end the whole run without a word
		old07=$(git -C "$src" log --reverse --format=%H -S"default_version = '0.8'" -- pgsandbox.control 2>/dev/null | sed -n 1p)
		[ -n "$old07" ] || echo "no history: the upgrade from 0.7 was not tried"
		PGSANDBOX_DEB_NOCHECK=1 PG_VERSIONS="$versions" bash "$src/packaging/build-debs.sh" "$debs/new" &&
			{ [ -z "$old07" ] || PGSANDBOX_REF="$old07^" PG_VERSIONS=15 bash "$src/packaging/build-debs.sh" "$debs/0.7"; } &&
			PG_VERSIONS="$versions" bash "$src/packaging/test-debs.sh" "$debs/new" ${old07:+"$debs/0.7"}
		local rc=$?
		rm -rf "$debs"
		return $rc
	}
	start_part "Debian packages" packages
	while [ ${#lane[@]} -gt 0 ]; do
		done_pid=
		rc=0
		wait -n -p done_pid "${!lane[@]}" || rc=$?
		[ -n "$done_pid" ] || continue
		part=${lane[$done_pid]}
		unset "lane[$done_pid]"
		took[$part]=$(cat "$logs/$part.time" 2>/dev/null || echo '?')
		report "$part" $rc
	done
	order+=("${lanes[@]}")

	echo "=== summary"
	for part in "${order[@]}"; do
		printf '%-16s %s in %s s\n' "$part:" "${result[$part]}" "${took[$part]}"
		if [[ $part == PostgreSQL* ]]; then
			grep -E '^ *[0-9]+ s  ' "$logs/$part.log" | head -n 10 | sed 's/^/    /' || true
		fi
	done
	total=$((SECONDS - run_start))
	printf 'the whole run: %d s (%d min %02d s)\n' "$total" $((total / 60)) $((total % 60))
	if [ "$total" -gt $((${PGSANDBOX_CI_WARN_MINUTES:-60} * 60)) ]; then
		echo "WARNING: this run took more than ${PGSANDBOX_CI_WARN_MINUTES:-60} minutes; CI stops a run at 90 (docs/tests.md, the time budget)"
	fi
	# every major's TAP files, counted together
	passed=0 failed=0
	for part in "${lanes[@]}"; do
		line=$(grep -E '^tap: [0-9]+ passed, [0-9]+ failed$' "$logs/$part.log" | tail -n 1 || true)
		[ -n "$line" ] || continue
		set -- $line
		passed=$((passed + $2))
		failed=$((failed + $4))
	done
	echo "files: $passed passed, $failed failed"
	exit $status
fi

if [ "$(id -u)" = 0 ] && [ "${PGSANDBOX_SKIP_BUILD:-0}" != 1 ]; then
	bash "$src/test/install-deps.sh"
fi

# The build and the tests write into their tree (objects, results,
# tmp_check): give them a copy that the test user owns, wherever the
# checkout sits.
work=$(mktemp -d /tmp/pgsandbox-test.XXXXXX)
small=""
trap '[ -z "$small" ] || bash "$src/test/pg/cow.sh" stop "$work-small"; rm -rf "$work"' EXIT
tar -C "$src" --exclude=.git --exclude=node_modules --exclude='tmp_check*' \
	--exclude=results --exclude='*.o' --exclude='*.so' --exclude='*.bc' -cf - . | tar -C "$work" -xf -

if [ "${PGSANDBOX_SKIP_BUILD:-0}" != 1 ]; then
	make -C "$work" -s -j"$(nproc)" WERROR=1
	if [ "$(id -u)" = 0 ]; then
		make -C "$work" -s install
	else
		sudo make -C "$work" -s install
	fi
fi
[ "${PGSANDBOX_BUILD_ONLY:-0}" = 1 ] && exit 0

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

# A small filesystem of its own, for the test of a disk that fills during
# a clone (057_full_disk.pl); mounting it needs root, and without it that
# test says why it skips.
if [ "$(id -u)" = 0 ] && [ "${TAP:-1}" != 0 ]; then
	if small=$(bash "$src/test/pg/cow.sh" start "$work-small" 400M); then
		export PGSANDBOX_SMALL_DISK_DIR=$small
	else
		small=""
	fi
fi

if [ "$(id -u)" = 0 ]; then
	chown -R postgres: "$work"
	pgsbx_run_suites "$work" runuser -u postgres --
else
	pgsbx_run_suites "$work" env
fi
