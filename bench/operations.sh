#!/usr/bin/env bash
#
# operations.sh: what idle tracking, the disk budget and the metrics cost,
# on two throwaway PostgreSQL 15 clusters side by side.  See bench/README.md.
#
#   Cluster "before" has the extension at 0.6: the same library skips idle
#   tracking, the budget and the counters there (its catalog has no place
#   for them).  Cluster "after" has 0.7 with all of it on: an idle timeout
#   on every sandbox, all three budgets set (large enough never to refuse),
#   sizes measured every second, counters written.  Both serve the same
#   source (20 tables of 100 rows).  RUNS rounds (default 5) alternate
#   between the clusters, in turns first; a round times CLONES clones (default 10) of each
#   kind one after the other, as their caller sees them (psql's \timing):
#   copies of a data snapshot, and schema-only dumps of the live source.
#   Medians per cluster and kind, and their ratio.
#
#   Then, on "after", SANDBOXES live sandboxes (default 200) and a scrape
#   of pgsandbox.metrics, SCRAPES times (default 200) in one session:
#   median and 95th percentile.
#
# Run as root on a Debian 12 machine: it installs the packages it needs,
# builds and installs pgsandbox (unless SKIP_BUILD=1), and runs the servers
# as the "postgres" OS user.
#
# Settings, from the environment:
#   RUNS=5  CLONES=10  SANDBOXES=200  SCRAPES=200  OPS_PORT=5521 (and +1)
#   SKIP_BUILD=0  PGBIN=/usr/lib/postgresql/15/bin  OUTDIR=bench/out
#
set -Eeuo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
RUNS=${RUNS:-5}
CLONES=${CLONES:-10}
SANDBOXES=${SANDBOXES:-200}
SCRAPES=${SCRAPES:-200}
OPS_PORT=${OPS_PORT:-5521}
SKIP_BUILD=${SKIP_BUILD:-0}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
OUTDIR=${OUTDIR:-$repo/bench/out}

die() {
	echo "operations.sh: $*" >&2
	exit 1
}
for v in RUNS CLONES SANDBOXES SCRAPES OPS_PORT; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, not \"${!v}\""
done
trap 'echo "operations.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR

if [ "$(id -u)" = 0 ]; then
	bash "$repo/test/install-deps.sh"
fi
if [ "$SKIP_BUILD" != 1 ]; then
	make -C "$repo" -s
	if [ "$(id -u)" = 0 ]; then make -C "$repo" -s install; else sudo make -C "$repo" -s install; fi
fi
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
out=$OUTDIR/operations.txt
tmp=$(mktemp -d /tmp/pgsandbox-operations.XXXXXX)
[ "$(id -u)" != 0 ] || chown postgres: "$tmp"
chmod 700 "$tmp"
cd "$tmp"
started=()

as_pg() {
	if [ "$(id -u)" = 0 ]; then runuser -u postgres -- env PATH="$PGBIN:$PATH" "$@"; else env PATH="$PGBIN:$PATH" "$@"; fi
}

# psql on cluster $1 ("before" or "after"), in "postgres"
on() {
	local c=$1
	shift
	as_pg psql -X -q -v ON_ERROR_STOP=1 -h "$tmp/$c" -p "$(port_of "$c")" -U postgres -d postgres "$@"
}
q() {
	on "$1" -A -t -c "$2"
}
port_of() {
	[ "$1" = before ] && echo "$OPS_PORT" || echo $((OPS_PORT + 1))
}

cleanup() {
	local rc=$?
	trap - ERR
	set +e
	for c in "${started[@]}"; do
		cp "$tmp/$c.log" "$OUTDIR/operations-$c-server.log" 2>/dev/null
		as_pg pg_ctl -D "$tmp/$c-data" -m immediate -w stop >/dev/null
	done
	rm -rf "$tmp"
	exit $rc
}
trap cleanup EXIT

# make cluster $1 with extension version $2 and postgresql.conf lines on stdin
make_cluster() {
	local c=$1 version=$2
	as_pg mkdir -p "$tmp/$c"
	as_pg initdb -D "$tmp/$c-data" -U postgres -A trust -E UTF8 --no-locale --no-sync >/dev/null
	{
		echo "port = $(port_of "$c")"
		echo "listen_addresses = ''"
		echo "unix_socket_directories = '$tmp/$c'"
		echo "shared_preload_libraries = 'pgsandbox'"
		echo "max_connections = 60"
		echo "pgsandbox.max_sandboxes = $((SANDBOXES + 50))"
		echo "pgsandbox.max_sandboxes_per_owner = $((SANDBOXES + 50))"
		echo "pgsandbox.gc_interval = 1"
		cat
	} >>"$tmp/$c-data/postgresql.conf"
	started+=("$c")
	as_pg pg_ctl -D "$tmp/$c-data" -l "$tmp/$c.log" -w start >/dev/null
	q "$c" "CREATE EXTENSION pgsandbox VERSION '$version'" >/dev/null
	q "$c" "CREATE DATABASE small" >/dev/null
	on "$c" -d small -c "
DO \$\$
BEGIN
	FOR i IN 1..20 LOOP
		EXECUTE format('CREATE TABLE t%s (id int PRIMARY KEY, name text UNIQUE, at timestamptz DEFAULT now())', i);
		EXECUTE format('INSERT INTO t%s (id, name) SELECT g, md5(g::text) FROM generate_series(1, 100) g', i);
	END LOOP;
END
\$\$" >/dev/null
	q "$c" "SELECT pgsandbox.add_source('small', 'dbname=small', allow_data => true)" >/dev/null
	q "$c" "SELECT pgsandbox.snapshot('small')" >/dev/null
}

make_cluster before 0.6 </dev/null
make_cluster after 0.7 <<EOF
pgsandbox.default_idle_timeout = '1h'
pgsandbox.max_total_size = '100GB'
pgsandbox.max_size_per_owner = '100GB'
pgsandbox.max_sandbox_size = '10GB'
pgsandbox.size_check_interval = 1
EOF

: >"$out"
say() {
	echo "$*" | tee -a "$out"
}
say "pgsandbox operations overhead, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(as_pg postgres --version), commit $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
say "$RUNS rounds of $CLONES clones of each kind per cluster, alternating"

median() {
	sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
p95() {
	sort -n | awk '{ v[NR] = $1 } END { i = int(NR * 0.95); if (i < 1) i = 1; print v[i] }'
}

# one round on cluster $1: CLONES clones of kind $2 (copy or dump), each
# timed by psql; the times (ms) go to $tmp/$1.$2; then all are dropped
round() {
	local c=$1 kind=$2 args=()
	local call="SELECT name FROM pgsandbox.clone('small', schema_only => false)"
	[ "$kind" = dump ] && call="SELECT name FROM pgsandbox.clone('small', fresh => true)"
	for _ in $(seq 1 "$CLONES"); do args+=(-c "$call"); done
	on "$c" -c '\timing on' "${args[@]}" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' >>"$tmp/$c.$kind"
	q "$c" "SELECT count(pgsandbox.drop(name)) FROM pgsandbox.sandboxes WHERE status = 'ready'" >/dev/null
}

# the order alternates too: a round's drops leave the disk busy for a moment
for r in $(seq 1 "$RUNS"); do
	for kind in copy dump; do
		if [ $((r % 2)) = 1 ]; then
			round before "$kind"
			round after "$kind"
		else
			round after "$kind"
			round before "$kind"
		fi
	done
done
for kind in copy dump; do
	b=$(median <"$tmp/before.$kind")
	a=$(median <"$tmp/after.$kind")
	what="copy of a data snapshot"
	[ "$kind" = dump ] && what="schema-only dump of the live source"
	say "$(awk -v k="$what" -v b="$b" -v a="$a" -v n="$(wc -l <"$tmp/after.$kind")" \
		'BEGIN { printf "  %s: median %.1f ms at 0.6, %.1f ms at 0.7 with all on: %.3fx (%d clones each)", k, b, a, a / b, n }')"
done
say "  after: $(q after "SELECT sum(value) FROM pgsandbox.metrics WHERE name = 'pgsandbox_clones_total'") clones counted, $(q after "SELECT count(*) FROM pgsandbox.sandbox WHERE idle_timeout IS NOT NULL") with an idle timeout"

# a scrape with SANDBOXES live sandboxes
args=()
for _ in $(seq 1 "$SANDBOXES"); do args+=(-c "SELECT name FROM pgsandbox.clone('small')"); done
on after "${args[@]}" >/dev/null
live=$(q after "SELECT count(*) FROM pgsandbox.sandboxes WHERE status = 'ready'")
args=()
for _ in $(seq 1 "$SCRAPES"); do args+=(-c "SELECT count(*) FROM pgsandbox.metrics"); done
on after -c '\timing on' "${args[@]}" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' >"$tmp/scrape"
say "  a scrape of pgsandbox.metrics with $live live sandboxes ($(q after 'SELECT count(*) FROM pgsandbox.metrics') series): median $(median <"$tmp/scrape") ms, p95 $(p95 <"$tmp/scrape") ms ($SCRAPES scrapes)"
say "  the catalog behind it: $(q after 'SELECT count(*) FROM pgsandbox.sandbox') rows in pgsandbox.sandbox"
