#!/usr/bin/env bash
#
# soak.sh: load and soak figures of the pgsandbox worker on a throwaway
# PostgreSQL 15 cluster.  See bench/README.md.
#
#   1. CONCURRENT clones (default 30) asked for at once, with
#      pgsandbox.max_concurrent_clones = 2: how many succeed, and how long
#      the last one waits.
#   2. CYCLES clone/drop cycles (default 300): the lifecycle worker's
#      resident memory (VmRSS) and open file descriptors, sampled every
#      SAMPLE cycles; then CYCLES / 3 hand-out/drop cycles from a pool of 2,
#      each refilled from the source's snapshot, sampled the same way.
#   3. Faults in the middle of a data clone: kill -9 of a clone worker, kill
#      -9 of the lifecycle worker, the source connection of pg_dump
#      terminated.  After each: no database, role, archive or child process
#      is left that the catalog does not account for, and the next clone
#      succeeds.
#
# Run as root on a Debian 12 machine, it installs the packages it needs,
# builds and installs pgsandbox (unless SKIP_BUILD=1), and runs the server
# as the "postgres" OS user.  Exits non-zero if any check fails.
#
# Settings, from the environment:
#   CONCURRENT=30  CYCLES=300  SAMPLE=50  SOAK_PORT=5511  SKIP_BUILD=0
#   PGBIN=/usr/lib/postgresql/15/bin  OUTDIR=bench/out (soak.txt goes there)
#
set -Eeuo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
CONCURRENT=${CONCURRENT:-30}
CYCLES=${CYCLES:-300}
SAMPLE=${SAMPLE:-50}
SOAK_PORT=${SOAK_PORT:-5511}
SKIP_BUILD=${SKIP_BUILD:-0}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
OUTDIR=${OUTDIR:-$repo/bench/out}

die() {
	echo "soak.sh: $*" >&2
	exit 1
}
for v in CONCURRENT CYCLES SAMPLE SOAK_PORT; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, not \"${!v}\""
done
trap 'echo "soak.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR

CLUSTER_NAME=soak
CLUSTER_PORT=$SOAK_PORT
. "$repo/bench/throwaway_cluster.sh"
out=$OUTDIR/soak.txt
failures=0

say() {
	echo "$*" | tee -a "$out"
}
check() {
	local what=$1 got=$2 want=$3
	if [ "$got" = "$want" ]; then
		say "  ok: $what ($got)"
	else
		say "  FAILED: $what: got \"$got\", want \"$want\""
		failures=$((failures + 1))
	fi
}

cluster_start <<EOF
max_connections = 100
max_worker_processes = 16
pgsandbox.max_concurrent_clones = 2
pgsandbox.max_sandboxes = 200
pgsandbox.max_sandboxes_per_owner = 200
pgsandbox.gc_interval = 3600
restart_after_crash = on
EOF
q "CREATE DATABASE shop" >/dev/null
as_pg psql -X -q -d shop -c "CREATE TABLE item (id int PRIMARY KEY, name text);
	INSERT INTO item SELECT g, md5(g::text) FROM generate_series(1, 10000) g" >/dev/null
# a slow source: each row restored into a sandbox sleeps 1 ms
q "CREATE DATABASE slow" >/dev/null
as_pg psql -X -q -d slow -c "
CREATE FUNCTION slow_ok(text) RETURNS boolean LANGUAGE plpgsql AS \$f\$
BEGIN
	IF current_database() LIKE 'sbx\\_%' THEN PERFORM pg_sleep(0.001); END IF;
	RETURN true;
END \$f\$;
CREATE TABLE slow (id int PRIMARY KEY, payload text CHECK (slow_ok(payload)));
INSERT INTO slow SELECT g, repeat(md5(g::text), 3) FROM generate_series(1, 20000) g" >/dev/null
q "SELECT pgsandbox.add_source('shop', 'dbname=shop', allow_data => true);
   SELECT pgsandbox.add_source('slow', 'dbname=slow', allow_data => true)" >/dev/null

: >"$out"
say "pgsandbox soak, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(as_pg postgres --version)"

worker_pid() {
	q "SELECT pid FROM pg_stat_activity WHERE backend_type = 'pgsandbox worker'"
}
wait_worker() {
	for _ in $(seq 1 300); do
		[ -n "$(worker_pid 2>/dev/null)" ] && return 0
		sleep 0.2
	done
	return 1
}

# Nothing the catalog does not account for: databases and roles of sandboxes
# that are not live, archives, pg_dump or pg_restore processes.
leftovers() {
	local dbs roles tmpdir kids
	dbs=$(q "SELECT count(*) FROM pg_database d WHERE datname LIKE 'sbx\\_%'
	          AND NOT EXISTS (SELECT 1 FROM pgsandbox.sandbox s
	                           WHERE s.name = d.datname AND s.status IN ('cloning', 'ready'))")
	roles=$(q "SELECT count(*) FROM pg_roles r WHERE rolname LIKE 'sbx\\_%'
	            AND NOT EXISTS (SELECT 1 FROM pgsandbox.sandbox s
	                             WHERE s.name = r.rolname AND s.status IN ('cloning', 'ready'))")
	tmpdir=0
	if [ -d "$data/pgsandbox_tmp" ]; then
		tmpdir=$(find "$data/pgsandbox_tmp" -mindepth 1 -maxdepth 1 | wc -l)
	fi
	kids=$(pgrep -c -f "$PGBIN/pg_(dump|restore)" || true)
	echo "$dbs databases, $roles roles, $tmpdir archives, $kids children"
}

# --- 1. concurrent clones ---------------------------------------------------

say ""
say "1. $CONCURRENT clones asked for at once, max_concurrent_clones = 2"
t0=$(date +%s.%N)
pids=()
for i in $(seq 1 "$CONCURRENT"); do
	q "SELECT name FROM pgsandbox.clone('shop', schema_only => false)" >"$tmp/c$i.out" 2>"$tmp/c$i.err" &
	pids+=($!)
done
ok=0
for p in "${pids[@]}"; do
	if wait "$p"; then ok=$((ok + 1)); fi
done
t1=$(date +%s.%N)
check "clones that succeeded" "$ok" "$CONCURRENT"
say "  all $CONCURRENT answered in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"
check "ready sandboxes with all 10000 rows" \
	"$(for i in $(seq 1 "$CONCURRENT"); do
		n=$(cat "$tmp/c$i.out")
		[ -n "$n" ] && as_pg psql -X -A -t -d "$n" -c "SELECT count(*) FROM item" 2>/dev/null
	done | grep -c '^10000$')" "$CONCURRENT"
q "SELECT pgsandbox.drop(name) FROM pgsandbox.sandbox WHERE status = 'ready'" >/dev/null
check "leftovers after dropping them" "$(leftovers)" "0 databases, 0 roles, 0 archives, 0 children"

# --- 2. clone/drop cycles ------------------------------------------------------

say ""
say "2. $CYCLES clone/drop cycles (schema and data of 10000 rows)"
wpid=$(worker_pid)
# RssAnon is the worker's own memory; VmRSS adds the shared buffers it touched
say "  cycle   RssAnon (kB)   VmRSS (kB)   open fds"
sample() {
	local anon rss fds
	anon=$(awk '/^RssAnon:/ {print $2}' "/proc/$wpid/status")
	rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$wpid/status")
	fds=$(ls "/proc/$wpid/fd" | wc -l)
	printf '  %5d   %12s   %10s   %8s\n' "$1" "$anon" "$rss" "$fds" | tee -a "$out"
	echo "$anon $fds" >>"$tmp/samples"
}
sample 0
for i in $(seq 1 "$CYCLES"); do
	n=$(q "SELECT name FROM pgsandbox.clone('shop', schema_only => false)")
	q "SELECT pgsandbox.drop('$n')" >/dev/null
	if [ $((i % SAMPLE)) = 0 ]; then sample "$i"; fi
done
check "the worker is the same process" "$(worker_pid)" "$wpid"
# flat: the last sample within 10% (own memory) and equal (fds) to the one
# after the first SAMPLE cycles
read -r rss1 fds1 < <(sed -n 2p "$tmp/samples")
read -r rssN fdsN < <(tail -n 1 "$tmp/samples")
check "own memory flat after warm-up (last within 10% of cycle $SAMPLE)" \
	"$([ $((rssN * 10)) -le $((rss1 * 11)) ] && echo yes || echo "no: $rss1 -> $rssN kB")" "yes"
check "open fds flat after warm-up" "$fdsN" "$fds1"
check "leftovers after the cycles" "$(leftovers)" "0 databases, 0 roles, 0 archives, 0 children"

# --- 2b. pool hand-out cycles -----------------------------------------------

# The same with a pool of 2: each clone is a hand-out, each drop makes the
# upkeep timer fill the pool again from the snapshot (two clone workers per
# fill), so the worker's snapshot and pool code runs CYCLES / 3 times.
pool_cycles=$((CYCLES / 3))
say ""
say "2b. $pool_cycles hand-out/drop cycles from a pool of 2 (the same source, with data)"
q "SELECT pgsandbox.set_pool('shop', 2, schema_only => false)" >/dev/null
wait_pool() {
	for _ in $(seq 1 600); do
		[ "$(q "SELECT ready FROM pgsandbox.pools WHERE source = 'shop' AND NOT schema_only")" = 2 ] &&
			[ "$(q "SELECT count(*) FROM pgsandbox.progress")" = 0 ] && return 0
		sleep 0.2
	done
	return 1
}
wait_pool || die "the pool did not fill"
: >"$tmp/samples"
say "  cycle   RssAnon (kB)   VmRSS (kB)   open fds"
sample 0
handouts=0
for i in $(seq 1 "$pool_cycles"); do
	n=$(q "SELECT name FROM pgsandbox.clone('shop', schema_only => false)")
	[ "$(q "SELECT method FROM pgsandbox.sandboxes WHERE name = '$n'")" = pool ] && handouts=$((handouts + 1))
	q "SELECT pgsandbox.drop('$n')" >/dev/null
	wait_pool || die "the pool did not fill again"
	if [ $((i % SAMPLE)) = 0 ]; then sample "$i"; fi
done
check "every clone was handed out from the pool" "$handouts" "$pool_cycles"
check "the worker is the same process" "$(worker_pid)" "$wpid"
read -r rss1 fds1 < <(sed -n 2p "$tmp/samples")
read -r rssN fdsN < <(tail -n 1 "$tmp/samples")
check "own memory flat after warm-up (last within 10% of cycle $SAMPLE)" \
	"$([ $((rssN * 10)) -le $((rss1 * 11)) ] && echo yes || echo "no: $rss1 -> $rssN kB")" "yes"
check "open fds flat after warm-up" "$fdsN" "$fds1"
q "SELECT pgsandbox.set_pool('shop', 0, schema_only => false)" >/dev/null
q "SELECT pgsandbox.drop_snapshot('shop')" >/dev/null
for _ in $(seq 1 300); do
	[ "$(q "SELECT count(*) FROM pgsandbox.sandbox WHERE kind <> 'sandbox' AND status IN ('cloning', 'ready')")" = 0 ] && break
	sleep 0.2
done
check "pool and snapshot dropped" \
	"$(q "SELECT count(*) FROM pgsandbox.sandbox WHERE kind <> 'sandbox' AND status IN ('cloning', 'ready')")" "0"
check "leftovers after the pool cycles" "$(leftovers)" "0 databases, 0 roles, 0 archives, 0 children"

# --- 3. faults in the middle of a data clone ----------------------------------

say ""
say "3. faults in the middle of a data clone of 20000 slow rows"

# start a slow clone; wait until pg_dump and pg_restore run
start_slow() {
	q "SELECT name FROM pgsandbox.clone('slow', schema_only => false)" >"$tmp/slow.out" 2>"$tmp/slow.err" &
	slow_pid=$!
	for _ in $(seq 1 300); do
		[ "$(pgrep -c -f "$PGBIN/pg_restore" || true)" -gt 0 ] && return 0
		sleep 0.1
	done
	return 1
}
after_fault() {
	local what=$1
	wait "$slow_pid" && say "  FAILED: $what: the clone did not fail" && failures=$((failures + 1))
	wait_worker || die "the worker did not come back"
	# the worker reconciles at start; give it a moment
	for _ in $(seq 1 100); do
		[ "$(q "SELECT count(*) FROM pgsandbox.sandbox WHERE status = 'cloning'")" = 0 ] && break
		sleep 0.2
	done
	check "$what: leftovers" "$(leftovers)" "0 databases, 0 roles, 0 archives, 0 children"
	check "$what: the interrupted clone is marked failed" \
		"$(q "SELECT status FROM pgsandbox.sandbox WHERE source = 'slow' ORDER BY id DESC LIMIT 1")" "failed"
	n=$(q "SELECT name FROM pgsandbox.clone('shop', schema_only => false)")
	check "$what: the next clone succeeds" "$(as_pg psql -X -A -t -d "$n" -c 'SELECT count(*) FROM item')" "10000"
	q "SELECT pgsandbox.drop('$n')" >/dev/null
}

start_slow || die "the slow clone did not start"
kill -9 "$(q "SELECT pid FROM pg_stat_activity WHERE backend_type = 'pgsandbox clone'")"
after_fault "kill -9 of the clone worker"

start_slow || die "the slow clone did not start"
kill -9 "$(worker_pid)"
after_fault "kill -9 of the lifecycle worker"

start_slow || die "the slow clone did not start"
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'slow' AND application_name = 'pg_dump'" >/dev/null
after_fault "the source connection of pg_dump terminated"

say ""
if [ $failures = 0 ]; then
	say "all checks passed"
else
	say "$failures checks FAILED"
	exit 1
fi
