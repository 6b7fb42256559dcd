#!/usr/bin/env bash
#
# subset.sh: what a reduced data clone costs, side by side in one run on a
# throwaway PostgreSQL 15 cluster, against a full data clone of the same
# source (clone() through a dump), the manual pipeline (createdb + pg_dump
# -Fc | pg_restore) and CREATE DATABASE ... TEMPLATE.  See bench/README.md.
#
# The source is pgbench -s SCALE made with --foreign-keys.  Three sources
# name it: "full", without rules, "reduced", with subset('pgbench_accounts',
# '1%'), and "pages", with subset('pgbench_accounts', '1% of pages'): the
# branches of the kept accounts are kept (up), the tellers and history rows
# that refer to them (down).  RUNS rounds each time, in a rotating order:
#   reduced   clone('reduced', schema_only => false): 1% of the rows, by a
#             hash of the key, which reads every row of pgbench_accounts
#   pages     clone('pages', schema_only => false): the rows of 1% of the
#             pages (TABLESAMPLE SYSTEM), which reads those pages only
#   full      clone('full', schema_only => false)
#   schema    clone('full'): a schema-only clone, the floor of any clone
#   manual    createdb, then pg_dump -Fc | pg_restore
#   template  CREATE DATABASE ... TEMPLATE <source>
# each after a CHECKPOINT, and the size of each database made.  It prints
# medians, the median over rounds of each ratio, and the disk ratio.
#
# Then, if the pagila sample sits in ../shared/data/pagila, a 10% subset of
# its customers, following their rentals and payments (PAGILA_RUNS clones),
# and the rows kept of each table.  Last, the plans on the source, as
# auto_explain logs them: the seed's cursor, a round's step from
# pgbench_accounts to the branches, the down tables' cursor, and the COPY
# of pgbench_accounts' kept rows.
#
# Run as root on a Debian 12 machine: it installs what it needs, builds and
# installs pgsandbox (unless SKIP_BUILD=1), and runs the server as the
# "postgres" OS user.
#
# Settings, from the environment:
#   SCALE=50  RUNS=5  PAGILA_RUNS=3  SUBSET_PORT=5531  SKIP_BUILD=0
#   PGBIN=/usr/lib/postgresql/15/bin  OUTDIR=bench/out
#
set -Eeuo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
SCALE=${SCALE:-50}
RUNS=${RUNS:-5}
PAGILA_RUNS=${PAGILA_RUNS:-3}
SUBSET_PORT=${SUBSET_PORT:-5531}
SKIP_BUILD=${SKIP_BUILD:-0}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
OUTDIR=${OUTDIR:-$repo/bench/out}

for v in SCALE RUNS PAGILA_RUNS SUBSET_PORT; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "subset.sh: $v must be a positive integer, not \"${!v}\"" >&2; exit 1; }
done
trap 'echo "subset.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR

CLUSTER_NAME=subset
CLUSTER_PORT=$SUBSET_PORT
. "$repo/bench/throwaway_cluster.sh"
out=$OUTDIR/subset.txt

cluster_start <<EOF
max_worker_processes = 16
shared_buffers = '512MB'
max_wal_size = '4GB'
pgsandbox.gc_interval = 3600
pgsandbox.max_sandboxes_per_owner = 100
pgsandbox.default_ttl = 3600
EOF

now() { date +%s.%N; }
elapsed() { echo "$(now) - $1" | bc; }

echo "subset.sh: making pgbench -s $SCALE with foreign keys" >&2
as_pg createdb bench
as_pg pgbench -q -i -s "$SCALE" --foreign-keys bench >/dev/null 2>&1
as_pg psql -X -q -d bench -c "VACUUM ANALYZE"
q "SELECT pgsandbox.add_source('full', 'dbname=bench', allow_data => true)" >/dev/null
q "SELECT pgsandbox.add_source('reduced', 'dbname=bench', allow_data => true)" >/dev/null
q "SELECT pgsandbox.subset('reduced', 'public.pgbench_accounts', '1%')" >/dev/null
q "SELECT pgsandbox.add_source('pages', 'dbname=bench', allow_data => true)" >/dev/null
q "SELECT pgsandbox.subset('pages', 'public.pgbench_accounts', '1% of pages')" >/dev/null

declare -a t_reduced t_pages t_full t_schema t_manual t_template s_reduced s_pages s_full
clone_time() {
	local source=$1 schema_only=${2:-false} start name
	q "CHECKPOINT" >/dev/null
	start=$(now)
	name=$(q "SELECT name FROM pgsandbox.clone('$source', schema_only => $schema_only)")
	echo "$(elapsed "$start") $(q "SELECT pg_database_size('$name')") $name"
}
for ((r = 0; r < RUNS; r++)); do
	for k in 0 1 2 3 4 5; do
		case $(((k + r) % 6)) in
		0)
			read -r secs size name < <(clone_time reduced)
			t_reduced+=("$secs"); s_reduced+=("$size")
			[ "$r" = 0 ] && q "SELECT detail FROM pgsandbox.events WHERE sandbox = '$name' AND action = 'ready'" >"$tmp/reduced_event.txt"
			q "SELECT pgsandbox.drop('$name')" >/dev/null ;;
		1)
			read -r secs size name < <(clone_time full)
			t_full+=("$secs"); s_full+=("$size")
			q "SELECT pgsandbox.drop('$name')" >/dev/null ;;
		2)
			q "CHECKPOINT" >/dev/null
			start=$(now)
			as_pg createdb manual
			as_pg bash -c "pg_dump -Fc bench | pg_restore --no-owner -d manual"
			t_manual+=("$(elapsed "$start")")
			as_pg dropdb manual ;;
		3)
			q "CHECKPOINT" >/dev/null
			start=$(now)
			q "CREATE DATABASE templ TEMPLATE bench" >/dev/null
			t_template+=("$(elapsed "$start")")
			q "DROP DATABASE templ" >/dev/null ;;
		5)
			read -r secs size name < <(clone_time pages)
			t_pages+=("$secs"); s_pages+=("$size")
			[ "$r" = 0 ] && q "SELECT detail FROM pgsandbox.events WHERE sandbox = '$name' AND action = 'ready'" >"$tmp/pages_event.txt"
			q "SELECT pgsandbox.drop('$name')" >/dev/null ;;
		4)
			read -r secs size name < <(clone_time full true)
			t_schema+=("$secs")
			q "SELECT pgsandbox.drop('$name')" >/dev/null ;;
		esac
	done
	echo "subset.sh: round $((r + 1)) of $RUNS done" >&2
done

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
ratios() {
	local -n num=$1 den=$2
	local out=()
	for ((i = 0; i < RUNS; i++)); do out+=("$(echo "${num[$i]} / ${den[$i]}" | bc -l)"); done
	median "${out[@]}"
}

{
	echo "# bench/subset.sh, $(date -u +%Y-%m-%dT%H:%MZ), PostgreSQL $(q 'SHOW server_version'), pgbench -s $SCALE --foreign-keys, $RUNS rounds"
	echo "source size: $(q "SELECT pg_size_pretty(pg_database_size('bench'))")"
	printf '%-10s %10s\n' step "median s"
	printf '%-10s %10.2f\n' reduced "$(median "${t_reduced[@]}")" pages "$(median "${t_pages[@]}")" \
		full "$(median "${t_full[@]}")" \
		schema "$(median "${t_schema[@]}")" manual "$(median "${t_manual[@]}")" \
		template "$(median "${t_template[@]}")"
	printf 'reduced / full clone:   %.3fx time (median of per-round ratios)\n' "$(ratios t_reduced t_full)"
	printf 'pages / full clone:     %.3fx time (median of per-round ratios)\n' "$(ratios t_pages t_full)"
	printf 'reduced / manual:       %.3fx time\n' "$(ratios t_reduced t_manual)"
	printf 'pages / manual:         %.3fx time\n' "$(ratios t_pages t_manual)"
	printf 'reduced / template:     %.3fx time\n' "$(ratios t_reduced t_template)"
	printf 'schema-only / full:     %.3fx time (the floor a reduced clone stands on)\n' "$(ratios t_schema t_full)"
	printf 'reduced / full clone:   %.3fx disk (%s against %s bytes, medians)\n' \
		"$(echo "$(median "${s_reduced[@]}") / $(median "${s_full[@]}")" | bc -l)" \
		"$(median "${s_reduced[@]}")" "$(median "${s_full[@]}")"
	printf 'pages / full clone:     %.3fx disk (%s against %s bytes, medians)\n' \
		"$(echo "$(median "${s_pages[@]}") / $(median "${s_full[@]}")" | bc -l)" \
		"$(median "${s_pages[@]}")" "$(median "${s_full[@]}")"
	echo "ready event of the first reduced clone: $(cat "$tmp/reduced_event.txt")"
	echo "ready event of the first pages clone: $(cat "$tmp/pages_event.txt")"
} | tee "$out"

# pagila: 10% of the customers, with their rentals and payments
pagila=$repo/../shared/data/pagila
if [ -r "$pagila/pagila-schema.sql" ] && [ -r "$pagila/pagila-data.sql" ]; then
	cp "$pagila/pagila-schema.sql" "$pagila/pagila-data.sql" "$tmp/"
	[ "$(id -u)" != 0 ] || chown postgres: "$tmp"/pagila-*.sql
	as_pg createdb pagila
	as_pg psql -X -q -d pagila -f "$tmp/pagila-schema.sql" >/dev/null 2>&1
	as_pg psql -X -q -d pagila -f "$tmp/pagila-data.sql" >/dev/null 2>&1
	q "SELECT pgsandbox.add_source('pagila', 'dbname=pagila', allow_data => true)" >/dev/null
	q "SELECT pgsandbox.subset('pagila', 'public.customer', '10%')" >/dev/null
	q "SELECT pgsandbox.follow('pagila', 'public.rental')" >/dev/null
	q "SELECT pgsandbox.follow('pagila', 'public.payment')" >/dev/null
	t_pagila=()
	for ((r = 0; r < PAGILA_RUNS; r++)); do
		read -r secs size name < <(clone_time pagila)
		t_pagila+=("$secs")
		detail=$(q "SELECT detail FROM pgsandbox.events WHERE sandbox = '$name' AND action = 'ready'")
		q "SELECT pgsandbox.drop('$name')" >/dev/null
	done
	{
		printf 'pagila, 10%% of customers with their rentals and payments: %.2f s (median of %d)\n' \
			"$(median "${t_pagila[@]}")" "$PAGILA_RUNS"
		echo "its ready event: $detail"
	} | tee -a "$out"
fi

# the closure's plan for pgbench_accounts, as auto_explain logs it
as_pg psql -X -q -d postgres -c "ALTER DATABASE bench SET session_preload_libraries = 'auto_explain'" \
	-c "ALTER DATABASE bench SET auto_explain.log_min_duration = 0" \
	-c "ALTER DATABASE bench SET auto_explain.log_nested_statements = on"
for src in reduced pages; do
	from=$(wc -l <"$tmp/server.log")
	name=$(q "SELECT name FROM pgsandbox.clone('$src', schema_only => false)")
	q "SELECT pgsandbox.drop('$name')" >/dev/null
	{
		echo "plans on the source for a clone of \"$src\" (auto_explain): the seed's cursor, a round's step from pgbench_accounts, the down tables' cursor, the COPY of pgbench_accounts' kept rows"
		tail -n +"$from" "$tmp/server.log" |
			awk '/LOG:  duration: .* plan:/ {p = 0; held = $0} /Query Text: DECLARE sbx_seed_rows|Query Text: SELECT DISTINCT b.tableoid, b.ctid FROM ONLY "public"."pgbench_accounts"|Query Text: DECLARE sbx_kept_rows|Query Text: COPY \(SELECT .* FROM ONLY "public"."pgbench_accounts" WHERE/ {p = 1; print held} p' |
			sed -E -e 's/(Query Text: .{160}).*/\1 .../' -e 's/(TID Cond: .{100}).*/\1 .../' | sed -n '1,150p'
	} | tee -a "$out"
done
