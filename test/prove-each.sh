#!/usr/bin/env bash
#
# prove-each.sh: run TAP files the way PGXS's "make installcheck" runs prove,
# but each file in a prove of its own, several at a time.
#
# PGXS calls it in place of prove (make installcheck PROVE=.../prove-each.sh),
# with prove's options first and the test files last, in the environment it
# sets up for prove (PATH, PG_REGRESS, TESTDIR or TESTLOGDIR...).  So:
#
#   - a file that bails out (BAIL_OUT, e.g. "pg_ctl stop failed") ends only
#     its own prove: every other file still runs and reports;
#   - PGSANDBOX_TEST_JOBS files run at once (default 2).  Each file's
#     clusters have ports of their own (PostgreSQL::Test::Cluster reserves
#     them in PG_TEST_PORT_DIR, which this script sets when the caller did
#     not, shared by every file of the run) and directories of their own
#     (tmp_check/t_<file>_<node>_data);
#   - the longest files start first, by the durations in test/tap-durations
#     (seconds and file, a line each; a file not listed counts as long), so
#     that the run does not end waiting for one slow file;
#   - each file's output is printed whole when it ends, never interleaved
#     with another's;
#   - at the end: the ten slowest files, the failed ones with the last lines
#     of their regress_log, and a closing line "tap: N passed, N failed".
#     PGSANDBOX_TAP_TIMES, if set, names a file that receives each file's
#     duration in test/tap-durations' format.
#
# Exits 0 when every file passed, 1 otherwise.
#
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
jobs=${PGSANDBOX_TEST_JOBS:-2}
case $jobs in '' | *[!0-9]* | 0) echo "prove-each.sh: PGSANDBOX_TEST_JOBS must be a positive number" >&2; exit 2 ;; esac

opts=()
files=()
for a in "$@"; do
	case $a in
		*.pl | *.t) files+=("$a") ;;
		*) opts+=("$a") ;;
	esac
done
[ ${#files[@]} -gt 0 ] || { echo "prove-each.sh: no test file given" >&2; exit 2; }

# Where PGXS's prove would write its logs: tmp_check under TESTLOGDIR's
# parent (17 and later) or under TESTDIR (15).
if [ -n "${TESTLOGDIR:-}" ]; then
	logdir=$TESTLOGDIR
else
	logdir=${TESTDIR:-$PWD}/tmp_check/log
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/prove-each.XXXXXX")
trap 'rm -rf "$out"' EXIT
export PG_TEST_PORT_DIR=${PG_TEST_PORT_DIR:-$(dirname "$logdir")/portlock}
mkdir -p "$PG_TEST_PORT_DIR"

# One data directory made by initdb for the whole run, which every node
# copies rather than run initdb again (about a second of CPU for each of a
# major's seventy-odd nodes, which CI pays three times): the test library
# of 17 and later copies INITDB_TEMPLATE itself; for 15's, an initdb first
# in PATH copies it when called as that library calls it (-D dir -A trust
# -N, with nothing more) and runs the real one otherwise.  A node given
# initdb options of its own gets a real initdb either way.
if [ -z "${INITDB_TEMPLATE:-}" ] && real_initdb=$(command -v initdb) &&
	"$real_initdb" -D "$out/initdb-template" -A trust -N >"$out/initdb-template.log" 2>&1; then
	export INITDB_TEMPLATE=$out/initdb-template
	mkdir "$out/bin"
	cat >"$out/bin/initdb" <<EOF
#!/bin/sh
# test/prove-each.sh: the run's initdb template, copied
if [ \$# = 5 ] && [ "\$1" = -D ] && [ "\$3" = -A ] && [ "\$4" = trust ] && [ "\$5" = -N ] && [ ! -e "\$2" ]; then
	exec cp -RPp "$INITDB_TEMPLATE" "\$2"
fi
exec "$real_initdb" "\$@"
EOF
	chmod 755 "$out/bin/initdb"
	export PATH="$out/bin:$PATH"
fi

# longest first: the known durations, unknown files before all of them
declare -A known=()
if [ -r "$here/tap-durations" ]; then
	while read -r secs name; do
		case $secs in '' | '#'*) continue ;; esac
		known[$name]=$secs
	done <"$here/tap-durations"
fi
mapfile -t order < <(for f in "${files[@]}"; do
	printf '%s %s\n' "${known[$(basename "$f")]:-100000}" "$f"
done | sort -k1,1nr -k2 | cut -d' ' -f2-)

declare -A started_at=() pid_file=()
declare -A took=() result=()
passed=0 failed=0
run_start=$SECONDS

# Print a finished file's output and record how it ended.
finish()
{
	local pid=$1 rc=$2 f=${pid_file[$1]} name
	name=$(basename "$f")
	took[$f]=$((SECONDS - started_at[$f]))
	if [ "$rc" = 0 ]; then
		# prove's closing lines for one file say nothing more
		grep -vE '^\[[0-9:]+\]$|^All tests successful\.$|^Files=|^Result: PASS$' "$out/$name.out"
	else
		cat "$out/$name.out"
	fi
	if [ "$rc" = 0 ]; then
		result[$f]=ok
		passed=$((passed + 1))
	else
		result[$f]="FAILED (exit $rc)"
		failed=$((failed + 1))
	fi
	unset "pid_file[$pid]"
}

next=0
while [ $next -lt ${#order[@]} ] || [ ${#pid_file[@]} -gt 0 ]; do
	while [ $next -lt ${#order[@]} ] && [ ${#pid_file[@]} -lt "$jobs" ]; do
		f=${order[$next]}
		next=$((next + 1))
		started_at[$f]=$SECONDS
		prove "${opts[@]}" "$f" >"$out/$(basename "$f").out" 2>&1 </dev/null &
		pid_file[$!]=$f
	done
	done_pid=
	wait -n -p done_pid "${!pid_file[@]}"
	rc=$?
	if [ -n "$done_pid" ] && [ -n "${pid_file[$done_pid]+x}" ]; then
		finish "$done_pid" "$rc"
	fi
done

echo "=== TAP: ${#files[@]} files in $((SECONDS - run_start)) s, $jobs at a time"
echo "the ten slowest:"
for f in "${files[@]}"; do
	printf '%6d s  %s\n' "${took[$f]}" "$(basename "$f")"
done | sort -k1,1nr | head -n 10
if [ -n "${PGSANDBOX_TAP_TIMES:-}" ]; then
	for f in "${files[@]}"; do
		printf '%d %s\n' "${took[$f]}" "$(basename "$f")"
	done | sort -k1,1nr >"$PGSANDBOX_TAP_TIMES"
fi
for f in "${files[@]}"; do
	[ "${result[$f]}" = ok ] && continue
	name=$(basename "$f" .pl)
	echo "=== $name: ${result[$f]}; the last 60 lines of its log"
	tail -n 60 "$logdir/regress_log_$name" 2>/dev/null || echo "(no log in $logdir)"
done
echo "tap: $passed passed, $failed failed"
[ "$failed" = 0 ]
