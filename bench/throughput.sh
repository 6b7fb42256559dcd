#!/usr/bin/env bash
#
# throughput.sh: how many clones a host serves when many callers ask at
# once, on a throwaway PostgreSQL 15 cluster.  See bench/README.md.
#
#   CALLERS callers (default 100) each ask, at the same moment, for a
#   schema-only clone of a small source (20 tables), with
#   pgsandbox.max_concurrent_clones = SLOTS (default 4): the time until
#   the last has its answer, and the most clone workers seen busy at once
#   (pg_stat_activity, sampled every 50 ms; a sample can miss a short
#   peak, so it is a lower bound).  Then the same for copies of the
#   source's data snapshot: clones per second.  Every sandbox is dropped
#   between the rounds.  RUNS rounds of each (default 3); medians.
#
# Run as root on a Debian 12 machine, it installs the packages it needs,
# builds and installs pgsandbox (unless SKIP_BUILD=1), and runs the server
# as the "postgres" OS user.
#
# Settings, from the environment:
#   CALLERS=100  SLOTS=4  RUNS=3  THROUGHPUT_PORT=5512  SKIP_BUILD=0
#   PGBIN=/usr/lib/postgresql/15/bin  OUTDIR=bench/out (throughput.txt)
#
set -Eeuo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
CALLERS=${CALLERS:-100}
SLOTS=${SLOTS:-4}
RUNS=${RUNS:-3}
THROUGHPUT_PORT=${THROUGHPUT_PORT:-5512}
SKIP_BUILD=${SKIP_BUILD:-0}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
OUTDIR=${OUTDIR:-$repo/bench/out}

die() {
	echo "throughput.sh: $*" >&2
	exit 1
}
for v in CALLERS SLOTS RUNS THROUGHPUT_PORT; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, not \"${!v}\""
done
trap 'echo "throughput.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR

CLUSTER_NAME=throughput
CLUSTER_PORT=$THROUGHPUT_PORT
. "$repo/bench/throwaway_cluster.sh"
out=$OUTDIR/throughput.txt

cluster_start <<EOF
max_connections = $((CALLERS + 40))
max_worker_processes = $((SLOTS * 2 + 8))
pgsandbox.max_concurrent_clones = $SLOTS
pgsandbox.max_sandboxes = $((CALLERS + 20))
pgsandbox.max_sandboxes_per_owner = $((CALLERS + 20))
pgsandbox.gc_interval = 3600
EOF
q "CREATE DATABASE small" >/dev/null
as_pg psql -X -q -d small -c "
DO \$\$
BEGIN
	FOR i IN 1..20 LOOP
		EXECUTE format('CREATE TABLE t%s (id int PRIMARY KEY, name text UNIQUE, at timestamptz DEFAULT now())', i);
		EXECUTE format('INSERT INTO t%s (id, name) SELECT g, md5(g::text) FROM generate_series(1, 100) g', i);
	END LOOP;
END
\$\$" >/dev/null
q "SELECT pgsandbox.add_source('small', 'dbname=small', allow_data => true)" >/dev/null
q "SELECT pgsandbox.snapshot('small')" >/dev/null

: >"$out"
say() {
	echo "$*" | tee -a "$out"
}
say "pgsandbox throughput, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(as_pg postgres --version), commit $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
say "$CALLERS callers at once, max_concurrent_clones = $SLOTS, $RUNS rounds each"

# The steps of a clone that one process runs in turn, timed alone, ten
# times each in one session (psql's \timing): where a serial lifecycle
# worker's time would go.
step_ms() {
	as_pg psql -X -q -v ON_ERROR_STOP=1 -c '\timing on' "$@" |
		sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}
args=()
for i in $(seq 1 10); do args+=(-c "CREATE DATABASE step_$i TEMPLATE template0"); done
say "  CREATE DATABASE ... TEMPLATE template0 (WAL_LOG), alone: median $(step_ms "${args[@]}") ms"
args=()
for i in $(seq 1 10); do args+=(-c "DROP DATABASE step_$i"); done
as_pg psql -X -q "${args[@]}" >/dev/null
args=()
for i in $(seq 1 10); do args+=(-c "CREATE ROLE step_$i LOGIN PASSWORD 'x$i-Secret'"); done
say "  CREATE ROLE ... LOGIN PASSWORD (SCRAM), alone: median $(step_ms "${args[@]}") ms"
args=()
for i in $(seq 1 10); do args+=(-c "DROP ROLE step_$i"); done
as_pg psql -X -q "${args[@]}" >/dev/null

# one round: every caller at once; prints "seconds busiest"
round() {
	local schema_only=$1 t0 t1 busiest=0 n pids=() sampler failed=0
	t0=$(date +%s.%N)
	for i in $(seq 1 "$CALLERS"); do
		q "SELECT name FROM pgsandbox.clone('small', schema_only => $schema_only)" >"$tmp/c$i.out" 2>"$tmp/c$i.err" &
		pids+=($!)
	done
	(
		while :; do
			q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pgsandbox clone'"
			sleep 0.05
		done
	) >"$tmp/busy" 2>/dev/null &
	sampler=$!
	for p in "${pids[@]}"; do
		wait "$p" || failed=$((failed + 1))
	done
	t1=$(date +%s.%N)
	kill "$sampler" 2>/dev/null || true
	wait "$sampler" 2>/dev/null || true
	[ "$failed" = 0 ] || die "$failed clones failed: $(cat "$tmp"/c*.err | sort | uniq -c | head -n 3)"
	busiest=$(sort -n "$tmp/busy" | tail -n 1)
	# every sandbox dropped before the next round
	q "SELECT count(pgsandbox.drop(name)) FROM pgsandbox.sandboxes WHERE status = 'ready'" >/dev/null
	for _ in $(seq 1 600); do
		n=$(q "SELECT count(*) FROM pg_database WHERE datname LIKE 'sbx\\_%'
		       AND datname NOT IN (SELECT name FROM pgsandbox.sandbox WHERE kind = 'snapshot' AND status = 'ready')")
		[ "$n" = 0 ] && break
		sleep 0.1
	done
	awk -v a="$t0" -v b="$t1" -v m="$busiest" 'BEGIN { printf "%.2f %d\n", b - a, m }'
}

median() {
	sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

for kind in schema data; do
	so=true
	[ "$kind" = data ] && so=false
	: >"$tmp/$kind.runs"
	for r in $(seq 1 "$RUNS"); do
		res=$(round "$so")
		echo "$res" >>"$tmp/$kind.runs"
		say "  $kind round $r: ${res% *} s, at most ${res#* } clone workers seen busy"
	done
	secs=$(cut -d' ' -f1 "$tmp/$kind.runs" | median)
	busy=$(cut -d' ' -f2 "$tmp/$kind.runs" | median)
	rate=$(awk -v n="$CALLERS" -v s="$secs" 'BEGIN { printf "%.1f", n / s }')
	case $kind in
	schema) say "schema-only dumps: median $secs s for $CALLERS clones ($rate clones/s), median peak $busy clone workers" ;;
	data) say "copies of the data snapshot: median $secs s for $CALLERS clones ($rate clones/s), median peak $busy clone workers" ;;
	esac
done
