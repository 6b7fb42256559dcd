#!/usr/bin/env bash
#
# verify.sh: what checking a copy before it is served costs (0.12), side by
# side in one run on a throwaway cluster (PostgreSQL 15 unless PGBIN says
# otherwise).  See bench/README.md.
#
# Two sources with data: "pgbench" (pgbench -i -s SCALE --foreign-keys) and
# "many" (NTABLES related tables of ROWS rows, bench/many_tables.sql).  For
# each, RUNS rounds in a rotating order of:
#   dump      clone(fresh => true, schema_only => false): the live source
#             dumped and restored, then checked against the source's
#             inventory in pg_dump's snapshot (and, through an archive,
#             the archive's files of rows against what was restored)
#   copy      clone(schema_only => false) of the source's snapshot: a copy,
#             then checked against the inventory recorded with the snapshot
#   manual    createdb X && pg_dump -Fc SRC | pg_restore -d X
#   template  CREATE DATABASE X TEMPLATE SRC
# The check's own time is read from each clone's ready event: the step
# "verified" less the step before it ("restored" or "copied"), both in
# milliseconds from the request.  Every copy's rows are counted against
# its source before it is dropped; every step runs after a CHECKPOINT.  It
# prints medians, the check's share of the clone, and the medians of the
# per-round ratios of the clone to the manual pipeline and to the template.
#
# Run as root on a Debian 12 machine, it installs the packages it needs and
# builds and installs pgsandbox (unless SKIP_BUILD=1).  Writes
# $OUTDIR/verify.txt.
#
# Settings, from the environment:
#   SCALE=50  NTABLES=60  ROWS=8000  RUNS=5  VERIFY_PORT=5536
#   SKIP_BUILD=0  PGBIN=/usr/lib/postgresql/15/bin  OUTDIR=bench/out
#   SOURCES="pgbench many"
#   CLONE_JOBS=  pgsandbox.clone_jobs (as shipped when empty; 1 makes the
#             60 tables stream, so that their check is the stream's)
#
set -Eeuo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
SCALE=${SCALE:-50}
NTABLES=${NTABLES:-60}
ROWS=${ROWS:-8000}
RUNS=${RUNS:-5}
VERIFY_PORT=${VERIFY_PORT:-5536}
SKIP_BUILD=${SKIP_BUILD:-0}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
OUTDIR=${OUTDIR:-$repo/bench/out}
SOURCES=${SOURCES:-pgbench many}
CLONE_JOBS=${CLONE_JOBS:-}

[ -z "$CLONE_JOBS" ] || [[ $CLONE_JOBS =~ ^[1-9][0-9]*$ ]] ||
	{ echo "verify.sh: CLONE_JOBS must be a positive integer" >&2; exit 1; }
for v in SCALE NTABLES ROWS RUNS VERIFY_PORT; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "verify.sh: $v must be a positive integer" >&2; exit 1; }
done
for s in $SOURCES; do
	case $s in pgbench|many) ;; *) echo "verify.sh: unknown source \"$s\" in SOURCES" >&2; exit 1 ;; esac
done
trap 'echo "verify.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR

CLUSTER_NAME=verify
CLUSTER_PORT=$VERIFY_PORT
. "$repo/bench/throwaway_cluster.sh"
out=$OUTDIR/verify.txt

cluster_start <<EOF
max_worker_processes = 16
shared_buffers = 512MB
max_wal_size = 8GB
pgsandbox.gc_interval = 3600
pgsandbox.max_sandboxes = 100
$([ -n "$CLONE_JOBS" ] && echo "pgsandbox.clone_jobs = $CLONE_JOBS")
EOF

median() {
	sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
now_ms() { date +%s%3N; }

# the rows of every table of database $1, as one line per table
row_counts() {
	as_pg psql -X -q -A -t -d "$1" -c "
SELECT string_agg(format('%s %s', c.oid::regclass,
                         (xpath('/row/n/text()', query_to_xml(format('SELECT count(*) AS n FROM %s', c.oid::regclass), false, true, '')))[1]),
                  E'\n' ORDER BY c.oid::regclass::text)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
}

# the check's milliseconds and the clone's, from sandbox $1's ready event
verify_ms() {
	q "SELECT detail FROM pgsandbox.events WHERE sandbox = '$1' AND action = 'ready'" |
		sed -n 's/.*steps (ms from the request): //p' | tr ',' '\n' |
		awk '{ v = $NF; $NF = ""; sub(/ +$/, ""); if ($0 == "verified") { printf "%.1f", v - prev; found = 1 } prev = v }
			 END { if (!found) exit 1 }'
}

# one clone of source $1 (fresh: $2): prints "<total ms> <check ms>"
clone_once() {
	local src=$1 fresh=$2 t0 t1 sbx check
	q "CHECKPOINT" >/dev/null
	t0=$(now_ms)
	sbx=$(q "SELECT name FROM pgsandbox.clone('$src', schema_only => false, fresh => $fresh)")
	t1=$(now_ms)
	check=$(verify_ms "$sbx")
	[ "$(row_counts "$sbx")" = "$(row_counts "$src")" ] ||
		{ echo "verify.sh: the rows of $sbx differ from $src's" >&2; exit 1; }
	q "SELECT pgsandbox.drop('$sbx')" >/dev/null
	echo "$((t1 - t0)) $check"
}

manual_once() {
	local src=$1 t0 t1
	q "CHECKPOINT" >/dev/null
	t0=$(now_ms)
	as_pg createdb bench_manual
	as_pg bash -c "set -o pipefail; pg_dump -Fc -d '$src' | pg_restore --no-owner -d bench_manual"
	t1=$(now_ms)
	[ "$(row_counts bench_manual)" = "$(row_counts "$src")" ] ||
		{ echo "verify.sh: the manual pipeline's rows differ from $src's" >&2; exit 1; }
	as_pg dropdb bench_manual
	echo $((t1 - t0))
}

template_once() {
	local src=$1 t0 t1
	q "CHECKPOINT" >/dev/null
	t0=$(now_ms)
	q "CREATE DATABASE bench_template TEMPLATE $src" >/dev/null
	t1=$(now_ms)
	[ "$(row_counts bench_template)" = "$(row_counts "$src")" ] ||
		{ echo "verify.sh: the template copy's rows differ from $src's" >&2; exit 1; }
	q "DROP DATABASE bench_template" >/dev/null
	echo $((t1 - t0))
}

make_source() {
	q "CREATE DATABASE $1" >/dev/null
	case $1 in
	pgbench) as_pg pgbench -q -i -s "$SCALE" --foreign-keys pgbench >/dev/null 2>&1 ;;
	many) as_pg psql -X -q -d many -v ntables="$NTABLES" -v rows="$ROWS" -v with_ext=0 \
			-f - <"$repo/bench/many_tables.sql" >/dev/null ;;
	esac
	as_pg vacuumdb -q -z -d "$1"
	q "SELECT pgsandbox.add_source('$1', 'dbname=$1', allow_data => true)" >/dev/null
}

: >"$out"
echo "verify.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(as_pg postgres --version), RUNS=$RUNS, clone_jobs ${CLONE_JOBS:-as shipped}" | tee -a "$out"

for src in $SOURCES; do
	make_source "$src"
	q "SELECT 1 FROM pgsandbox.snapshot('$src')" >/dev/null
	size=$(q "SELECT pg_size_pretty(pg_database_size('$src'))")
	declare -a d_total=() d_check=() c_total=() c_check=() m=() t=() r_man=() r_tpl=() share=() c_share=()
	order=(dump copy manual template)
	for round in $(seq 1 "$RUNS"); do
		for k in 0 1 2 3; do
			case ${order[$(( (k + round) % 4 ))]} in
			dump) read -r dt dc < <(clone_once "$src" true) ;;
			copy) read -r ct cc < <(clone_once "$src" false) ;;
			manual) mt=$(manual_once "$src") ;;
			template) tt=$(template_once "$src") ;;
			esac
		done
		d_total+=("$dt"); d_check+=("$dc"); c_total+=("$ct"); c_check+=("$cc"); m+=("$mt"); t+=("$tt")
		share+=("$(awk -v c="$dc" -v d="$dt" 'BEGIN { printf "%.2f", 100 * c / d }')")
		c_share+=("$(awk -v c="$cc" -v d="$ct" 'BEGIN { printf "%.2f", 100 * c / d }')")
		r_man+=("$(awk -v a="$dt" -v b="$mt" 'BEGIN { printf "%.3f", a / b }')")
		r_tpl+=("$(awk -v a="$ct" -v b="$tt" 'BEGIN { printf "%.3f", a / b }')")
		echo "  $src round $round: dump clone $dt ms (check $dc ms), copy $ct ms (check $cc ms), manual $mt ms, template $tt ms" | tee -a "$out"
	done
	med() { printf '%s\n' "$@" | median; }
	{
		echo "$src ($size), medians of $RUNS rounds:"
		echo "  dump clone     $(med "${d_total[@]}") ms, of which the check $(med "${d_check[@]}") ms: $(med "${share[@]}")% (median of the rounds' shares)"
		echo "  snapshot copy  $(med "${c_total[@]}") ms, of which the check $(med "${c_check[@]}") ms: $(med "${c_share[@]}")%"
		echo "  manual pipeline $(med "${m[@]}") ms; CREATE DATABASE ... TEMPLATE $(med "${t[@]}") ms"
		echo "  dump clone / manual pipeline: $(med "${r_man[@]}")x; snapshot copy / template: $(med "${r_tpl[@]}")x (medians of the per-round ratios)"
	} | tee -a "$out"
	q "SELECT pgsandbox.remove_source('$src')" >/dev/null
	unset d_total d_check c_total c_check m t r_man r_tpl share c_share
done
