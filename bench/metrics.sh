#!/usr/bin/env bash
#
# metrics.sh: what a scrape of pgsandbox.metrics costs with many sandboxes,
# 0.13's view against today's, side by side in one throwaway PostgreSQL 15
# cluster.  See bench/README.md.
#
#   The cluster serves a small source, whose schema-only snapshot every
#   sandbox copies.  At each count of COUNTS (default "50 200 800") live
#   sandboxes it times SCRAPES scrapes (default 100) of today's view and of
#   0.13's (its definition read from git, made as bench_metrics_013 in a
#   schema of its own), in blocks of ten that alternate, in one session
#   each (psql's \timing): median and 95th percentile, and their ratio.
#
# Run as root on a Debian 12 machine: it installs the packages it needs,
# builds and installs pgsandbox (unless SKIP_BUILD=1), and runs the server
# as the "postgres" OS user.
#
# Settings, from the environment:
#   COUNTS="50 200 800"  SCRAPES=100  METRICS_PORT=5531  SKIP_BUILD=0
#   PGBIN=/usr/lib/postgresql/15/bin  OUTDIR=bench/out
#   BEFORE_REF: the commit whose pgsandbox--0.13.sql holds 0.13's view
#   (default: the last commit that had the file)
#
set -Eeuo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
COUNTS=${COUNTS:-50 200 800}
SCRAPES=${SCRAPES:-100}
CLUSTER_PORT=${METRICS_PORT:-5531}
CLUSTER_NAME=metrics
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
OUTDIR=${OUTDIR:-$repo/bench/out}

die() {
	echo "metrics.sh: $*" >&2
	exit 1
}
for v in SCRAPES CLUSTER_PORT; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, not \"${!v}\""
done
max=0
for n in $COUNTS; do
	[[ $n =~ ^[1-9][0-9]*$ ]] || die "COUNTS must hold positive integers, not \"$n\""
	[ "$n" -gt "$max" ] && max=$n
done
[ $((SCRAPES % 10)) = 0 ] || die "SCRAPES must be a multiple of 10"
trap 'echo "metrics.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR

# 0.13's view, from git, before anything is built
ref=${BEFORE_REF:-$(git -C "$repo" log -1 --format=%H -- pgsandbox--0.13.sql)^}
old_sql=$(git -C "$repo" show "$ref:pgsandbox--0.13.sql" |
	sed -n '/^CREATE VIEW pgsandbox.metrics AS/,/^COMMENT ON VIEW pgsandbox.metrics/p' |
	sed '$d' | sed 's/^CREATE VIEW pgsandbox.metrics AS/CREATE VIEW bench.bench_metrics_013 AS/')
[ -n "$old_sql" ] || die "no metrics view in $ref:pgsandbox--0.13.sql"

. "$repo/bench/throwaway_cluster.sh"
out=$OUTDIR/metrics.txt

cluster_start <<EOF
pgsandbox.max_sandboxes = $((max + 20))
pgsandbox.max_sandboxes_per_owner = $((max + 20))
pgsandbox.default_ttl = '1 day'
max_connections = 100
fsync = off
EOF
q "CREATE DATABASE small" >/dev/null
as_pg psql -X -q -d small -c "CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 100) g"
q "SELECT pgsandbox.add_source('small', 'dbname=small')" >/dev/null
q "SELECT pgsandbox.snapshot('small', schema_only => true)" >/dev/null
q "CREATE SCHEMA bench" >/dev/null
as_pg psql -X -q -v ON_ERROR_STOP=1 -c "$old_sql" >/dev/null

say() { echo "$*" | tee -a "$out"; }
median() { sort -n | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.3f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
p95() { sort -n | awk '{ a[NR] = $1 } END { i = int(NR * 0.95 + 0.5); if (i < 1) i = 1; print a[i] }'; }

# SCRAPES scrapes of view $1, in one session: their times in ms
scrapes() {
	local args=(-c '\timing on')
	for _ in $(seq 1 10); do args+=(-c "SELECT count(*) FROM $1"); done
	as_pg psql -X -q -A -t "${args[@]}" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p'
}

: >"$out"
say "metrics.sh on $(date -u +%FT%TZ), PostgreSQL $("$PGBIN/postgres" --version | awk '{ print $3 }'), $(nproc) cores"
say "0.13's view from $ref"
say "$(printf '%9s %8s %13s %13s %13s %13s %7s' sandboxes series 'now median' 'now p95' '0.13 median' '0.13 p95' ratio)"
live=0
for n in $(echo "$COUNTS" | tr ' ' '\n' | sort -n); do
	args=()
	for _ in $(seq 1 $((n - live))); do args+=(-c "SELECT name FROM pgsandbox.clone('small')"); done
	[ ${#args[@]} = 0 ] || as_pg psql -X -q -A -t -v ON_ERROR_STOP=1 "${args[@]}" >/dev/null
	live=$(q "SELECT count(*) FROM pgsandbox.sandbox WHERE kind = 'sandbox' AND status = 'ready'")
	# the view is timed, not the worker's first measures of the new
	# sandboxes nor a catalog autovacuum has not analyzed yet
	for _ in $(seq 1 300); do
		[ "$(q "SELECT count(*) FROM pgsandbox.sandbox WHERE status = 'ready' AND size_measured_at IS NULL")" = 0 ] && break
		sleep 1
	done
	q "VACUUM ANALYZE pgsandbox.sandbox" >/dev/null
	q "CHECKPOINT" >/dev/null
	: >"$tmp/now"
	: >"$tmp/old"
	for _ in $(seq 1 $((SCRAPES / 10))); do
		scrapes pgsandbox.metrics >>"$tmp/now"
		scrapes bench.bench_metrics_013 >>"$tmp/old"
	done
	now_med=$(median <"$tmp/now")
	old_med=$(median <"$tmp/old")
	say "$(printf '%9s %8s %13s %13s %13s %13s %7s' "$live" "$(q 'SELECT count(*) FROM pgsandbox.metrics')" \
		"$now_med" "$(p95 <"$tmp/now")" "$old_med" "$(p95 <"$tmp/old")" \
		"$(awk -v a="$now_med" -v b="$old_med" 'BEGIN { printf "%.2fx", a / b }')")"
done
say "times in ms; ratio: today's median over 0.13's"
