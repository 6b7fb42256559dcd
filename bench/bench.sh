#!/usr/bin/env bash
#
# bench.sh: time pgsandbox.clone() (a dump of the live source, a copy of
# the source's snapshot, a hand-out from its pool) against the pg_dump |
# pg_restore pipeline it wraps, run by hand, and against CREATE DATABASE ...
# TEMPLATE, on a throwaway PostgreSQL 15 cluster.  See bench/README.md.
#
# Run as root on a Debian 12 machine, it installs the packages it needs,
# builds and installs pgsandbox (unless SKIP_BUILD=1), and runs the server
# as the "postgres" OS user.  Run as another user, it expects all that done
# and runs the server as that user.
#
# Settings, from the environment:
#   SCALE=50          pgbench scale of the pgbench source
#   RUNS=5            repetitions of every measurement
#   NTABLES=300       tables in each many-table source
#   BENCH_PORT=5510   port of the throwaway cluster (Unix socket only)
#   SOURCES="pgbench many many_ext"   sources to measure; pgbench_ext (the
#                     pgbench source plus an extension) may be added
#   MODES="schema data"               schema only, and schema with data
#   COPY_STRATEGY=wal_log  pgsandbox.copy_strategy for snapshot copies
#                     (wal_log or file_copy)
#   LOAD_SECS=20      seconds of pgbench load per copy strategy compared
#   SKIP_BUILD=0      1: do not build and install the extension
#   MASKING_ONLY=0    1: measure masked data clones only (needs pgbench in
#                     SOURCES and data in MODES), then stop
#   PGBIN=/usr/lib/postgresql/15/bin  server and client programs
#   BENCH_TMPDIR=/tmp where the cluster's temporary directory is made
#   OUTDIR=bench/out  where results.txt, timings.csv and server.log go
#
# Exits 0 when every measurement ran and every copy checked out, non-zero
# otherwise.  The cluster is stopped and its directory removed either way.
#
set -Eeuo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
bench=$repo/bench

SCALE=${SCALE:-50}
RUNS=${RUNS:-5}
NTABLES=${NTABLES:-300}
BENCH_PORT=${BENCH_PORT:-5510}
SOURCES=${SOURCES:-pgbench many many_ext}
MODES=${MODES:-schema data}
SKIP_BUILD=${SKIP_BUILD:-0}
MASKING_ONLY=${MASKING_ONLY:-0}
COPY_STRATEGY=${COPY_STRATEGY:-wal_log}
LOAD_SECS=${LOAD_SECS:-20}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
BENCH_TMPDIR=${BENCH_TMPDIR:-/tmp}
OUTDIR=${OUTDIR:-$bench/out}

die() {
	echo "bench.sh: $*" >&2
	exit 1
}

for v in SCALE RUNS NTABLES BENCH_PORT LOAD_SECS; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, not \"${!v}\""
done
for s in $SOURCES; do
	case $s in pgbench | pgbench_ext | many | many_ext) ;; *) die "unknown source \"$s\" in SOURCES" ;; esac
done
for m in $MODES; do
	case $m in schema | data) ;; *) die "unknown mode \"$m\" in MODES" ;; esac
done
case $COPY_STRATEGY in wal_log | file_copy) ;; *) die "COPY_STRATEGY must be wal_log or file_copy" ;; esac

trap 'echo "bench.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR

# --- packages and build ----------------------------------------------------

if [ "$(id -u)" = 0 ]; then
	bash "$repo/test/install-deps.sh"
	id postgres >/dev/null 2>&1 || die "no \"postgres\" OS user to run the server as"
fi
for p in initdb pg_ctl postgres psql pgbench pg_dump pg_restore createdb dropdb; do
	[ -x "$PGBIN/$p" ] || die "$PGBIN/$p is missing (set PGBIN?)"
done

if [ "$SKIP_BUILD" = 1 ]; then
	build="not built (SKIP_BUILD=1)"
else
	make -C "$repo" -s
	if [ "$(id -u)" = 0 ]; then
		make -C "$repo" -s install
	else
		sudo make -C "$repo" -s install
	fi
	build="built and installed from $repo"
fi

# --- throwaway cluster -----------------------------------------------------

mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
tmp=""
data=""
sock=""
started=0

# Run a command as the cluster's OS user, aimed at the cluster.
as_pg() {
	local env=(env PGHOST="$sock" PGPORT="$BENCH_PORT" PGUSER=postgres
			   PGDATABASE=postgres PGAPPNAME=pgsandbox-bench PATH="$PGBIN:$PATH")
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "${env[@]}" "$@"
	else
		"${env[@]}" "$@"
	fi
}

psql_pg() {
	as_pg psql -X -q -v ON_ERROR_STOP=1 -A -t "$@"
}

cleanup() {
	local rc=$?

	trap - ERR
	set +e
	if [ -n "$tmp" ] && [ -f "$tmp/server.log" ]; then
		cp "$tmp/server.log" "$OUTDIR/server.log"
		if [ $rc -ne 0 ]; then
			echo "--- last lines of the server log (all of it in $OUTDIR/server.log)"
			grep -v -e 'LOG:  checkpoint starting' -e 'LOG:  checkpoint complete' "$tmp/server.log" | tail -n 30
		fi >&2
	fi
	if [ $started = 1 ]; then
		as_pg pg_ctl -D "$data" -m fast -w -t 120 stop >/dev/null ||
			as_pg pg_ctl -D "$data" -m immediate -w stop >/dev/null
	fi
	[ -z "$tmp" ] || rm -rf "$tmp"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

tmp=$(mktemp -d "$BENCH_TMPDIR/pgsandbox-bench.XXXXXX")
data=$tmp/data
sock=$tmp/sock
mkdir "$sock"
if [ "$(id -u)" = 0 ]; then
	chown -R postgres: "$tmp"
fi
chmod 700 "$tmp"
cd "$tmp"

as_pg initdb -D "$data" -U postgres -A trust -E UTF8 --no-locale --no-sync >/dev/null
cat >"$data/pg_hba.conf" <<EOF
local all postgres trust
local all all scram-sha-256
EOF
cat >>"$data/postgresql.conf" <<EOF

# pgsandbox benchmark
port = $BENCH_PORT
listen_addresses = ''
unix_socket_directories = '$sock'
shared_preload_libraries = 'pgsandbox'
pgsandbox.database = 'postgres'
max_worker_processes = 16
shared_buffers = 512MB
maintenance_work_mem = 256MB
max_wal_size = 4GB
checkpoint_timeout = 30min
autovacuum = off
pgsandbox.copy_strategy = $COPY_STRATEGY
EOF
started=1	# from here on, stop whatever pg_ctl may have started
as_pg pg_ctl -D "$data" -l "$tmp/server.log" -w -t 120 start >/dev/null

# --- report header ---------------------------------------------------------

out=$tmp/results.txt
say() {
	printf '%s\n' "$*" | tee -a "$out"
}

commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
so=$("$PGBIN/pg_config" --pkglibdir 2>/dev/null || echo /usr/lib/postgresql/15/lib)/pgsandbox.so
so_time=$(date -u -r "$so" '+%Y-%m-%d %H:%M:%S UTC' 2>/dev/null || echo "?")
say "pgsandbox clone benchmark, $(date -u '+%Y-%m-%d %H:%M UTC')"
say "machine:    $(nproc) CPUs ($(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)), $(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo) memory, kernel $(uname -r)"
say "postgres:   $(psql_pg -c 'SELECT version()')"
say "pgsandbox:  tree at commit $commit, $build; $so installed $so_time"
say "settings:   SCALE=$SCALE RUNS=$RUNS NTABLES=$NTABLES BENCH_PORT=$BENCH_PORT SOURCES=\"$SOURCES\" MODES=\"$MODES\" COPY_STRATEGY=$COPY_STRATEGY"
say "server:     $(psql_pg -c "SELECT string_agg(name || '=' || current_setting(name), ' ' ORDER BY name) FROM pg_settings WHERE name IN ('shared_buffers', 'maintenance_work_mem', 'max_wal_size', 'checkpoint_timeout', 'wal_level', 'fsync', 'synchronous_commit', 'autovacuum', 'max_worker_processes')")"
say "cluster:    $data (socket $sock)"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
say "load:       $load_start (1, 5, 15 min; the machine may be shared)"

# --- sources ---------------------------------------------------------------

psql_pg -c 'CREATE EXTENSION pgsandbox'

declare -A srcdb label
srcdb=([pgbench]=src_pgbench [pgbench_ext]=src_pgbench_ext [many]=src_many [many_ext]=src_many_ext)
label=([pgbench]="pgbench -s $SCALE" [pgbench_ext]="pgbench -s $SCALE + ext"
	   [many]="$NTABLES tables" [many_ext]="$NTABLES tables + ext")

for s in $SOURCES; do
	db=${srcdb[$s]}
	echo "creating source $s (database $db)"
	as_pg createdb "$db"
	case $s in
	pgbench | pgbench_ext)
		as_pg pgbench -i -q -s "$SCALE" "$db" >"$tmp/pgbench.log" 2>&1 ||
			die "pgbench -i failed: $(tail -n 5 "$tmp/pgbench.log")"
		# an extension, used by nothing, sends pgsandbox through its archive
		[ "$s" = pgbench ] || psql_pg -d "$db" -c 'CREATE EXTENSION hstore'
		;;
	many)
		psql_pg -d "$db" -v ntables="$NTABLES" -v with_ext=0 -f - <"$bench/many_tables.sql" >/dev/null
		;;
	many_ext)
		psql_pg -d "$db" -v ntables="$NTABLES" -v with_ext=1 -f - <"$bench/many_tables.sql" >/dev/null
		;;
	esac
	psql_pg -d "$db" -c 'VACUUM ANALYZE'
	psql_pg -c "SELECT pgsandbox.add_source('$s', 'dbname=$db user=postgres', allow_data => true)" >/dev/null
done
psql_pg -c CHECKPOINT

# What a copy of a source holds: its structure, and the rows of one small
# table (0 in a schema-only copy).
probe_table() {
	case $1 in pgbench*) echo pgbench_branches ;; *) echo t0001 ;; esac
}
structure_sql="
SELECT format('%s tables, %s views, %s indexes, %s foreign keys, %s functions, extensions: %s',
  (SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'),
  (SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'v'),
  (SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'i'),
  (SELECT count(*) FROM pg_constraint WHERE connamespace = 'public'::regnamespace AND contype = 'f'),
  (SELECT count(*) FROM pg_proc p WHERE pronamespace = 'public'::regnamespace
      AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass
                      AND d.objid = p.oid AND d.deptype = 'e')),
  (SELECT coalesce(string_agg(extname, ',' ORDER BY extname), 'none')
     FROM pg_extension WHERE extname <> 'plpgsql'))"
signature() { # database source
	echo "$(psql_pg -d "$1" -c "$structure_sql"); $(psql_pg -d "$1" -c "SELECT count(*) FROM $(probe_table "$2")") rows in $(probe_table "$2")"
}

declare -A expect_data expect_schema
for s in $SOURCES; do
	db=${srcdb[$s]}
	expect_data[$s]=$(signature "$db" "$s")
	expect_schema[$s]="$(psql_pg -d "$db" -c "$structure_sql"); 0 rows in $(probe_table "$s")"
	say "source:     ${label[$s]} ($db, $(psql_pg -c "SELECT pg_size_pretty(pg_database_size('$db'))")): ${expect_data[$s]}"
done
say ""

# --- snapshots ---------------------------------------------------------------

# Every source's snapshot of each kind, taken before the runs (untimed by
# the runs; the time of each build is reported).
declare -A t_snapshot
[ "$MASKING_ONLY" = 1 ] || for s in $SOURCES; do
	for m in $MODES; do
		so=true
		[ "$m" = data ] && so=false
		t0=$(date +%s%N)
		psql_pg -c "SELECT pgsandbox.snapshot('$s', schema_only => $so)" >/dev/null
		t1=$(date +%s%N)
		t_snapshot[$s/$m]=$(awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.3f", ns / 1e9 }')
		echo "snapshot of $s ($m) taken in ${t_snapshot[$s/$m]} s"
	done
done

# --- the methods -------------------------------------------------------------

so_of() { # mode
	if [ "$1" = data ]; then echo false; else echo true; fi
}
# Each sets $copy to the database it made; its caller times it.
do_pgsandbox() { # source mode
	copy=$(psql_pg -c "SELECT name FROM pgsandbox.clone('$1', schema_only => $(so_of "$2"), fresh => true)")
}
drop_pgsandbox() {
	psql_pg -c "SELECT pgsandbox.drop('$copy')" >/dev/null
}
do_snapshot() { # source mode
	copy=$(psql_pg -c "SELECT name FROM pgsandbox.clone('$1', schema_only => $(so_of "$2"))")
}
drop_snapshot() {
	drop_pgsandbox
}
# the pool is made ready before the timed clone (prepare_pool) and removed
# after the drop, so that its refill runs in no other timed step
prepare_pool() { # source mode
	psql_pg -c "SELECT pgsandbox.set_pool('$1', 1, schema_only => $(so_of "$2"))" >/dev/null
	wait_for "pool of $1 ($2) to fill" \
		"SELECT ready = 1 FROM pgsandbox.pools WHERE source = '$1' AND schema_only = $(so_of "$2")"
}
do_pool() { # source mode
	copy=$(psql_pg -c "SELECT name FROM pgsandbox.clone('$1', schema_only => $(so_of "$2"))")
}
drop_pool() {
	drop_pgsandbox
	psql_pg -c "SELECT pgsandbox.set_pool('$s', 0, schema_only => $(so_of "$m"))" >/dev/null
	wait_for "pool of $s ($m) to empty" "SELECT count(*) = 0 FROM pgsandbox.progress"
}
do_manual() { # source mode run
	local flag=""

	[ "$2" = schema ] && flag=--schema-only
	copy=bench_manual_$3
	# shellcheck disable=SC2016
	as_pg bash -c 'set -eo pipefail
		createdb "$1"
		pg_dump --format=custom --no-owner --no-privileges $3 "$2" |
			pg_restore --no-owner --no-privileges --exit-on-error --single-transaction -d "$1"' \
		manual "$copy" "${srcdb[$1]}" "$flag"
}
drop_manual() {
	as_pg dropdb "$copy"
}
do_template() { # source mode run
	copy=bench_template_$3
	psql_pg -c "CREATE DATABASE $copy TEMPLATE ${srcdb[$1]}"
}
drop_template() {
	psql_pg -c "DROP DATABASE $copy"
}

# Wait (up to 10 minutes) until a query returns true.
wait_for() { # what query
	local _

	for _ in $(seq 1 6000); do
		[ "$(psql_pg -c "$2")" = t ] && return 0
		sleep 0.1
	done
	die "gave up waiting for the $1"
}

# Before each timed step: no session left on the source (CREATE DATABASE
# ... TEMPLATE needs that), no work of the worker's under way, and no dirty
# buffers left by the step before.
quiesce() { # source
	local _

	for _ in $(seq 1 100); do
		[ "$(psql_pg -c "SELECT count(*) FROM pg_stat_activity WHERE datname = '${srcdb[$1]}'")" = 0 ] && break
		sleep 0.1
	done
	wait_for "worker to be idle" "SELECT count(*) = 0 FROM pgsandbox.progress"
	psql_pg -c CHECKPOINT
}

median() { # values...
	printf '%s\n' "$@" | sort -g |
		awk '{ v[NR] = $1 } END { if (NR % 2) printf "%.3f", v[(NR + 1) / 2]; else printf "%.3f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
ratio() { # a b
	awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "-" }'
}
# median over the runs of the ratio of two methods' or cases' times
paired() { # key-a key-b (source/mode/method)
	local r vals=()

	for r in $(seq 1 "$RUNS"); do
		vals+=("$(awk -v a="${t_run[$1/$r]}" -v b="${t_run[$2/$r]}" 'BEGIN { printf "%.4f", a / b }')")
	done
	awk -v m="$(median "${vals[@]}")" 'BEGIN { printf "%.2f", m }'
}
spread() { # values...
	printf '%s\n' "$@" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%s-%s", lo, hi }'
}
modename() {
	case $1 in schema) echo "schema only" ;; data) echo "with data" ;; esac
}

now_ns() {
	date +%s%N
}
secs() { # nanoseconds
	awk -v ns="$1" 'BEGIN { printf "%.3f", ns / 1e9 }'
}

# --- masked data clones ------------------------------------------------------

# A data clone of pgbench with pgbench_accounts.filler masked and the rows
# of pgbench_history left out (sources on the same database, with those
# rules), against the unmasked data clone, all dumps of the live source
# (fresh => true), interleaved run by run.  Two masks: 'filler ' || aid, a
# value made from the row's key as most masks are, and md5(filler), which
# costs the source an md5 per row.  Each masked copy is checked: every row
# of pgbench_accounts, its filler masked, no history, recorded as masked.
declare -A t_masking t_run mask_expr
mask_expr=([masked]="'filler ' || aid" [masked_md5]="md5(filler)")
mask_result=""
if [[ " $SOURCES " == *" pgbench "* && " $MODES " == *" data "* ]]; then
	as_pg pgbench -n -t 200 src_pgbench >"$tmp/pgbench-history.log" 2>&1 ||
		die "pgbench could not write history rows: $(tail -n 3 "$tmp/pgbench-history.log")"
	declare -A want_masked
	for method in masked masked_md5; do
		psql_pg -c "SELECT pgsandbox.add_source('pgbench_$method', 'dbname=src_pgbench user=postgres', allow_data => true)" \
			-c "SELECT pgsandbox.mask('pgbench_$method', 'public.pgbench_accounts.filler', \$\$${mask_expr[$method]}\$\$)" \
			-c "SELECT pgsandbox.exclude_data('pgbench_$method', 'public.pgbench_history')" >/dev/null
		want_masked[$method]="$((SCALE * 100000)) $(psql_pg -d src_pgbench -c "SELECT rtrim(${mask_expr[$method]}) FROM pgbench_accounts WHERE aid = 1") 0 t"
	done
	for r in $(seq 1 "$RUNS"); do
		for method in unmasked masked masked_md5; do
			src=pgbench
			[ "$method" = unmasked ] || src=pgbench_$method
			quiesce pgbench
			t0=$(now_ns)
			copy=$(psql_pg -c "SELECT name FROM pgsandbox.clone('$src', schema_only => false, fresh => true)")
			t1=$(now_ns)
			t_run[masking/$method/$r]=$(secs $((t1 - t0)))
			t_masking[$method]+=" ${t_run[masking/$method/$r]}"
			if [ "$method" != unmasked ]; then
				got="$(psql_pg -d "$copy" -c "SELECT count(*) || ' ' || (SELECT rtrim(filler) FROM pgbench_accounts WHERE aid = 1) || ' ' || (SELECT count(*) FROM pgbench_history) FROM pgbench_accounts") $(psql_pg -c "SELECT masked FROM pgsandbox.sandboxes WHERE name = '$copy'")"
				[ "$got" = "${want_masked[$method]}" ] || die "a $method copy of pgbench is not what the rules say:
  want: ${want_masked[$method]}
  got:  $got"
			fi
			drop_pgsandbox
			echo "masking, run $r/$RUNS: $method ${t_run[masking/$method/$r]} s"
		done
	done
	# shellcheck disable=SC2086
	unmasked=$(median ${t_masking[unmasked]})
	for method in masked masked_md5; do
		# shellcheck disable=SC2086
		a=$(median ${t_masking[$method]})
		mask_result+="  ${mask_expr[$method]}: masked $a s, unmasked $unmasked s: ratio $(ratio "$a" "$unmasked"), paired $(paired "masking/$method" masking/unmasked)"$'\n'
		psql_pg -c "SELECT pgsandbox.remove_source('pgbench_$method')" >/dev/null
	done
fi
say_masking() {
	[ -n "$mask_result" ] || return 0
	say ""
	say "Masked data clones of ${label[pgbench]}: pgbench_accounts.filler masked, the rows of pgbench_history left"
	say "out; dumps of the live source, median seconds over $RUNS runs (the issue's target: at most 1.3)"
	say "${mask_result%$'\n'}"
}
if [ "$MASKING_ONLY" = 1 ]; then
	[ -n "$mask_result" ] || die "MASKING_ONLY=1 needs pgbench in SOURCES and data in MODES"
	say_masking
	cp "$tmp/results.txt" "$OUTDIR/"
	echo "results in $OUTDIR/results.txt"
	exit 0
fi

declare -A t_create t_drop t_server t_run
printf 'source,mode,method,run,create_s,drop_s\n' >"$tmp/timings.csv"

# Runs are interleaved across methods and across sources, so that a change
# in the load of a shared machine falls on every case alike.
for m in $MODES; do
	for r in $(seq 1 "$RUNS"); do
		for s in $SOURCES; do
			line="${label[$s]}, $(modename "$m"), run $r/$RUNS:"
			for method in pgsandbox snapshot pool manual template; do
				[ "$method" = pool ] && prepare_pool "$s" "$m"
				quiesce "$s"
				t0=$(now_ns)
				"do_$method" "$s" "$m" "$r"
				t1=$(now_ns)
				create=$(secs $((t1 - t0)))

				if [ "$m" = data ] || [ "$method" = template ]; then
					want=${expect_data[$s]}
				else
					want=${expect_schema[$s]}
				fi
				if [ "$method" != manual ] && [ "$method" != template ]; then
					want_method=dump
					[ "$method" = pgsandbox ] || want_method=$method
					got_method=$(psql_pg -c "SELECT method FROM pgsandbox.sandboxes WHERE name = '$copy'")
					[ "$got_method" = "$want_method" ] ||
						die "a $method clone of $s ($m) was served by \"$got_method\""
				fi
				if [ "$method" = pgsandbox ]; then
					t_server[$s/$m]+=" $(psql_pg -c "SELECT round(extract(epoch FROM ready_at - created_at), 3) FROM pgsandbox.sandbox WHERE name = '$copy'")"
				fi
				got=$(signature "$copy" "$s")
				if [ "$got" != "$want" ]; then
					die "$method copy of $s ($m) differs from the source:
  source: $want
  copy:   $got"
				fi

				psql_pg -c CHECKPOINT
				t0=$(now_ns)
				"drop_$method"
				t1=$(now_ns)
				drop=$(secs $((t1 - t0)))

				t_create[$s/$m/$method]+=" $create"
				t_run[$s/$m/$method/$r]=$create
				t_drop[$s/$m/$method]+=" $drop"
				printf '%s,%s,%s,%s,%s,%s\n' "$s" "$m" "$method" "$r" "$create" "$drop" >>"$tmp/timings.csv"
				line+=" $method $create s"
			done
			echo "$line"
		done
	done
done

# --- clones while a refresh runs --------------------------------------------

# For the first source, with data if measured: the snapshot is retaken in the background
# while snapshot clones are made one after another; their times are set
# against the same clones made idle (the runs above).
rs=${SOURCES%% *}
rm_=${MODES%% *}
[[ " $MODES " == *" data "* ]] && rm_=data
refresh_times=()
quiesce "$rs"
as_pg psql -X -q -c "SELECT pgsandbox.snapshot('$rs', schema_only => $(so_of "$rm_"))" >/dev/null &
refresh_pid=$!
while kill -0 "$refresh_pid" 2>/dev/null || [ ${#refresh_times[@]} -lt "$RUNS" ]; do
	building=$(psql_pg -c "SELECT count(*) FROM pgsandbox.progress WHERE kind = 'snapshot'")
	t0=$(now_ns)
	do_snapshot "$rs" "$rm_"
	t1=$(now_ns)
	[ "$building" = 1 ] && refresh_times+=("$(secs $((t1 - t0)))")
	drop_snapshot
	[ ${#refresh_times[@]} -ge $((RUNS * 4)) ] && break
	if ! kill -0 "$refresh_pid" 2>/dev/null; then
		[ ${#refresh_times[@]} -ge "$RUNS" ] && break
		# the refresh ended before enough clones: start another
		wait "$refresh_pid" || die "the refresh of $rs failed"
		as_pg psql -X -q -c "SELECT pgsandbox.snapshot('$rs', schema_only => $(so_of "$rm_"))" >/dev/null &
		refresh_pid=$!
	fi
done
wait "$refresh_pid" || die "the refresh of $rs failed"

# --- copy strategies on a busy server ----------------------------------------

# pgbench writes to a database of its own for LOAD_SECS, three times: with
# no clone, while snapshot clones (of the first source, with data if
# measured) are made one after another with STRATEGY wal_log, and with
# file_copy.  Its transactions per second, the clones made and the
# checkpoints the server was asked for show what each strategy costs
# everyone else.
declare -A load_tps load_clones load_ckpt
as_pg createdb bench_load
as_pg pgbench -i -q -s 5 bench_load >"$tmp/pgbench-load.log" 2>&1 ||
	die "pgbench -i of the load database failed"
for strategy in none wal_log file_copy; do
	if [ "$strategy" != none ]; then
		psql_pg -c "ALTER SYSTEM SET pgsandbox.copy_strategy = '$strategy'" -c "SELECT pg_reload_conf()" >/dev/null
		sleep 1
	fi
	quiesce "$rs"
	ckpt0=$(psql_pg -c "SELECT checkpoints_req FROM pg_stat_bgwriter")
	as_pg pgbench -n -c 2 -j 2 -T "$LOAD_SECS" bench_load >"$tmp/load-$strategy.log" 2>&1 &
	load_pid=$!
	n=0
	if [ "$strategy" != none ]; then
		while kill -0 "$load_pid" 2>/dev/null; do
			do_snapshot "$rs" "$rm_"
			drop_snapshot
			n=$((n + 1))
		done
	fi
	wait "$load_pid" || die "pgbench under load failed: $(tail -n 3 "$tmp/load-$strategy.log")"
	load_tps[$strategy]=$(awk '/^tps = / { printf "%.0f", $3; exit }' "$tmp/load-$strategy.log")
	load_clones[$strategy]=$n
	load_ckpt[$strategy]=$(($(psql_pg -c "SELECT checkpoints_req FROM pg_stat_bgwriter") - ckpt0))
done
psql_pg -c "ALTER SYSTEM RESET pgsandbox.copy_strategy" -c "SELECT pg_reload_conf()" >/dev/null
as_pg dropdb bench_load

# --- hand-outs within one session ------------------------------------------

# The pool method above is timed from the shell, so it includes starting
# psql (and runuser), which costs more than the hand-out itself.  Here
# RUNS hand-outs of the last source and mode are timed by psql's \timing in
# one session.
hs=${SOURCES##* }
hm=${MODES##* }
psql_pg -c "SELECT pgsandbox.set_pool('$hs', $RUNS, schema_only => $(so_of "$hm"))" >/dev/null
wait_for "pool of $hs ($hm) to fill" \
	"SELECT ready = $RUNS FROM pgsandbox.pools WHERE source = '$hs' AND schema_only = $(so_of "$hm")"
quiesce "$hs"
session_times=()
while read -r t; do
	session_times+=("$t")
done < <(for _ in $(seq 1 "$RUNS"); do
			echo "SELECT name FROM pgsandbox.clone('$hs', schema_only => $(so_of "$hm"));"
		done | as_pg psql -X -q -v ON_ERROR_STOP=1 -c '\timing on' -f - |
			awk '/^Time: / { printf "%.4f\n", $2 / 1000 }')
[ ${#session_times[@]} = "$RUNS" ] || die "could not time the hand-outs within one session"
psql_pg -c "SELECT pgsandbox.drop(name) FROM pgsandbox.sandboxes WHERE status = 'ready'" >/dev/null
psql_pg -c "SELECT pgsandbox.set_pool('$hs', 0, schema_only => $(so_of "$hm"))" >/dev/null
wait_for "pool of $hs ($hm) to empty" "SELECT count(*) = 0 FROM pgsandbox.progress"

# pgsandbox leaves nothing behind but the snapshots
psql_pg -c "SELECT pgsandbox.drop_snapshot(name) FROM pgsandbox.sources" >/dev/null
wait_for "snapshots to be dropped" \
	"SELECT count(*) = 0 FROM pgsandbox.sandbox WHERE status NOT IN ('dropped', 'failed')"
left=$(psql_pg -c "SELECT count(*) FROM pg_database WHERE datname LIKE 'sbx\_%' OR datname LIKE 'bench\_%'")
[ "$left" = 0 ] || die "$left copies are left in the cluster after their drops"
left=$(psql_pg -c "SELECT count(*) FROM pgsandbox.sandbox WHERE status NOT IN ('dropped')")
[ "$left" = 0 ] || die "$left sandboxes are not marked dropped"

# --- results ---------------------------------------------------------------

declare -A med_c med_d
for key in "${!t_create[@]}"; do
	# shellcheck disable=SC2086
	med_c[$key]=$(median ${t_create[$key]})
	# shellcheck disable=SC2086
	med_d[$key]=$(median ${t_drop[$key]})
done

say ""
say "Median seconds to make a copy, over $RUNS runs (in each run every case in turn, each case as"
say "pgsandbox, then manual, then template)"
say "$(printf '%-32s %10s %10s %10s %11s %11s' case pgsandbox manual template sbx/manual sbx/templ)"
for s in $SOURCES; do
	for m in $MODES; do
		a=${med_c[$s/$m/pgsandbox]}
		b=${med_c[$s/$m/manual]}
		c=${med_c[$s/$m/template]}
		say "$(printf '%-32s %10s %10s %10s %11s %11s' "${label[$s]}, $(modename "$m")" "$a" "$b" "$c" "$(ratio "$a" "$b")" "$(ratio "$a" "$c")")"
	done
done
say "  pgsandbox: SELECT name FROM pgsandbox.clone(..., fresh => true) from psql: a dump of the live"
say "             source, through the worker, as a new role"
say "  manual:    createdb + pg_dump -Fc | pg_restore --single-transaction, as superuser"
say "  template:  CREATE DATABASE ... TEMPLATE source; it always copies the data, schema-only case or not"

say ""
say "Fast clones: median seconds of a clone copied from the source's snapshot and of one handed out"
say "from its pool, as ratios of the manual pipeline (the issue's targets: at most 0.35 and 0.02)"
say "$(printf '%-32s %10s %10s %10s %11s %11s %10s' case snapshot pool manual snap/manual pool/manual snap-build)"
for s in $SOURCES; do
	for m in $MODES; do
		a=${med_c[$s/$m/snapshot]}
		b=${med_c[$s/$m/pool]}
		c=${med_c[$s/$m/manual]}
		say "$(printf '%-32s %10s %10s %10s %11s %11s %10s' "${label[$s]}, $(modename "$m")" "$a" "$b" "$c" \
			"$(ratio "$a" "$c")" "$(ratio "$b" "$c")" "${t_snapshot[$s/$m]}")"
	done
done
say "  snapshot:   clone() copying the snapshot (CREATE DATABASE ... TEMPLATE, STRATEGY $(psql_pg -c "SHOW pgsandbox.copy_strategy"), REASSIGN OWNED)"
say "  pool:       clone() handing out a ready pool member (a new password, catalog updates)"
say "  snap-build: seconds snapshot() took to build the snapshot before the runs, once"
idle=${med_c[$rs/$rm_/snapshot]}
# shellcheck disable=SC2068
busy=$(median ${refresh_times[@]})
# shellcheck disable=SC2068
in_session=$(median ${session_times[@]})
say ""
say "Pool hand-outs of ${label[$hs]}, $(modename "$hm") timed within one psql session (\\timing), without"
say "starting psql: median $in_session s over ${#session_times[@]}, $(ratio "$in_session" "${med_c[$hs/$hm/manual]}") of the manual pipeline"
say ""
say "A busy server: pgbench -c 2 -T $LOAD_SECS on a database of its own (scale 5), alone and while snapshot"
say "clones of ${label[$rs]}, $(modename "$rm_") are made one after another with each copy strategy"
say "$(printf '%-22s %10s %14s %20s' 'copy strategy' 'tps' 'clones made' 'checkpoints asked')"
for strategy in none wal_log file_copy; do
	say "$(printf '%-22s %10s %14s %20s' "$( [ "$strategy" = none ] && echo 'no clones' || echo "$strategy")" \
		"${load_tps[$strategy]}" "${load_clones[$strategy]}" "${load_ckpt[$strategy]}")"
done
say ""
say "Snapshot clones of ${label[$rs]}, $(modename "$rm_") while a refresh of the same snapshot runs:"
say "  ${#refresh_times[@]} clones, median $busy s (spread $(spread "${refresh_times[@]}")), idle median $idle s,"
say "  ratio $(ratio "$busy" "$idle") (the issue's target: at most 2)"

say ""
say "Spread over the $RUNS runs (min-max seconds), and the median of the per-run ratio pgsandbox/manual"
say "(each pgsandbox run against the manual run right after it)"
say "$(printf '%-32s %14s %14s %14s %10s' case pgsandbox manual template paired)"
for s in $SOURCES; do
	for m in $MODES; do
		# shellcheck disable=SC2086
		say "$(printf '%-32s %14s %14s %14s %10s' "${label[$s]}, $(modename "$m")" \
			"$(spread ${t_create[$s/$m/pgsandbox]})" "$(spread ${t_create[$s/$m/manual]})" \
			"$(spread ${t_create[$s/$m/template]})" "$(paired "$s/$m/pgsandbox" "$s/$m/manual")")"
	done
done

say ""
say "Where pgsandbox's time goes (medians): in the server, from the catalog row to 'ready' (role, database,"
say "clone worker, pg_dump | pg_restore), and the rest (psql, queue, database size, answer)"
say "$(printf '%-32s %10s %10s %10s' case end-to-end in-server rest)"
for s in $SOURCES; do
	for m in $MODES; do
		a=${med_c[$s/$m/pgsandbox]}
		# shellcheck disable=SC2086
		b=$(median ${t_server[$s/$m]})
		say "$(printf '%-32s %10s %10s %10s' "${label[$s]}, $(modename "$m")" "$a" "$b" \
			"$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", a - b }')")"
	done
done

say ""
say "Median seconds to drop the copy (pgsandbox.drop(), dropdb, DROP DATABASE)"
say "$(printf '%-32s %10s %10s %10s' case pgsandbox manual template)"
for s in $SOURCES; do
	for m in $MODES; do
		say "$(printf '%-32s %10s %10s %10s' "${label[$s]}, $(modename "$m")" \
			"${med_d[$s/$m/pgsandbox]}" "${med_d[$s/$m/manual]}" "${med_d[$s/$m/template]}")"
	done
done

archive_pairs=()
for plain in pgbench many; do
	if [[ " $SOURCES " == *" $plain "* && " $SOURCES " == *" ${plain}_ext "* ]]; then
		archive_pairs+=("$plain")
	fi
done
if [ ${#archive_pairs[@]} -gt 0 ]; then
	say ""
	say "Archive on disk: for a source with extensions (\"+ ext\"), pgsandbox creates them first, then"
	say "dumps the source to a file in \$PGDATA/pgsandbox_tmp, lists and filters its contents and restores"
	say "it; a source without streams through a pipe.  The manual pipeline streams both, so its"
	say "difference is that of the extensions alone."
	say "$(printf '%-32s %9s %9s %9s %7s %9s %9s %9s %7s %9s' case sbx-plain sbx-ext ext/plain paired man-plain man-ext ext/plain paired extra-sbx)"
	for plain in "${archive_pairs[@]}"; do
		ext=${plain}_ext
		for m in $MODES; do
			a=${med_c[$plain/$m/pgsandbox]}
			b=${med_c[$ext/$m/pgsandbox]}
			c=${med_c[$plain/$m/manual]}
			d=${med_c[$ext/$m/manual]}
			extra=$(awk -v a="$a" -v b="$b" -v c="$c" -v d="$d" 'BEGIN { printf "%+.3f", (b - a) - (d - c) }')
			say "$(printf '%-32s %9s %9s %9s %7s %9s %9s %9s %7s %9s' "${label[$plain]}, $(modename "$m")" \
				"$a" "$b" "$(ratio "$b" "$a")" "$(paired "$ext/$m/pgsandbox" "$plain/$m/pgsandbox")" \
				"$c" "$d" "$(ratio "$d" "$c")" "$(paired "$ext/$m/manual" "$plain/$m/manual")" "$extra")"
		done
	done
	say "  extra-sbx = (sbx-ext - sbx-plain) - (man-ext - man-plain): seconds that pgsandbox's handling of"
	say "  extensions (its own CREATE EXTENSION step and the archive on disk) adds beyond what the extensions"
	say "  cost the manual pipeline; computed from medians, an estimate rather than a measurement."
	say "  paired: median over the runs of the ratio ext/plain within one run (the two are measured"
	say "  a few seconds apart)"
fi
say_masking
say ""
say "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) (at the start: $load_start)"

cp "$tmp/results.txt" "$tmp/timings.csv" "$OUTDIR/"
echo ""
echo "results in $OUTDIR/results.txt, every timing in $OUTDIR/timings.csv"
