#!/usr/bin/env bash
#
# cold_path.sh: what a clone costs where no file can be cloned, side by side
# in one run on a throwaway cluster (PostgreSQL 15 unless PGBIN says
# otherwise), against the manual pipeline
#   createdb X && pg_dump -Fc SRC | pg_restore --single-transaction -d X
# and against CREATE DATABASE ... TEMPLATE.  See bench/README.md.
#
# Four sources with data: "pgbench" (pgbench -s SCALE, its blank-padded
# filler: many narrow rows), "md5" (the same with md5 text in the filler),
# "many" (NTABLES related tables of ROWS rows, with md5 text, three indexes
# each, bench/many_tables.sql) and "zabbix" (the schema, images and data
# that Debian's zabbix-server-pgsql ships: a real application's database).
# For each, RUNS rounds in a rotating order of:
#   j1        clone(fresh => true) with pgsandbox.clone_jobs = 1: one
#             pg_dump into one pg_restore through a pipe, and where one
#             table holds half the pages (pgbench, md5), its rows copied by
#             the clone worker in binary (bulk_copy_min_size, as shipped)
#   dump      the same with bulk_copy_min_size = -1: every row through
#             pg_dump and pg_restore
#   j2, j4    the same as j1 with clone_jobs = 2 and 4, parallel_min_size = 0: a
#             directory archive, pg_dump --jobs, pg_restore --jobs (unless
#             one table holds half the pages: then it streams with one job,
#             and the table says so)
#   manual    the manual pipeline above (gzip, as pg_dump's default)
#   template  CREATE DATABASE ... TEMPLATE
#   pgcopydb  createdb X && pgcopydb clone --no-owner --no-acl
#             $PGCOPYDB_FLAGS (Debian's pgcopydb, installed when missing)
# Then the snapshot of pgbench: its build (snapshot()) against the manual
# pipeline; and for pgbench at each scale of COPY_SCALES, copies of its
# snapshot with copy_strategy wal_log and file_copy, in turn.
# Then the fixed cost: a schema-only clone of a 10-table source against
# the manual pipeline with --schema-only, FIXED_RUNS times, and the steps
# of its median clone, from its ready event.
#
# Every copy's rows are counted against its source before it is dropped.
# The WAL each clone and the manual pipeline wrote (the server's WAL
# position before and after) is given too: with WAL_LEVEL=minimal, what
# the rows that skip it leave.
# Every step runs after a CHECKPOINT.  It prints medians and the medians of
# the per-round ratios.
#
# Settings, from the environment:
#   SCALE=50  NTABLES=60  ROWS=8000  RUNS=5  FIXED_RUNS=10  COLD_PORT=5533
#   SKIP_BUILD=0  PGBIN=/usr/lib/postgresql/15/bin  OUTDIR=bench/out
#   CASES="pgbench md5 many zabbix snapshot fixed"  COPY_SCALES="5 20 100"
#   PGCOPYDB_FLAGS="--split-tables-larger-than 64MB" (its jobs: its defaults)
#   ZABBIX_DEB=  Debian's zabbix-server-pgsql package; as root, fetched with
#             apt-get download when not given
#   REMOTE=0  1: the sources live on a second throwaway cluster, reached
#             over TCP (127.0.0.1) with a password, as a remote source is;
#             only the pgbench, many and zabbix cases, and no template step
#   WAL_LEVEL=replica (minimal: a table loaded in the transaction that made
#             it skips the WAL; pg_restore --jobs loads each table in a
#             transaction that first truncates it, for the same reason)
#
set -Eeuo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
SCALE=${SCALE:-50}
NTABLES=${NTABLES:-60}
ROWS=${ROWS:-8000}
RUNS=${RUNS:-5}
FIXED_RUNS=${FIXED_RUNS:-10}
COLD_PORT=${COLD_PORT:-5533}
SKIP_BUILD=${SKIP_BUILD:-0}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
OUTDIR=${OUTDIR:-$repo/bench/out}
CASES=${CASES:-pgbench md5 many zabbix snapshot fixed}
PGCOPYDB_FLAGS=${PGCOPYDB_FLAGS---split-tables-larger-than 64MB}
COPY_SCALES=${COPY_SCALES:-5 20 100}
WAL_LEVEL=${WAL_LEVEL:-replica}
REMOTE=${REMOTE:-0}

for v in SCALE NTABLES ROWS RUNS FIXED_RUNS COLD_PORT; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "cold_path.sh: $v must be a positive integer, not \"${!v}\"" >&2; exit 1; }
done
for c in $CASES; do
	case $c in pgbench | md5 | many | zabbix | snapshot | fixed) ;; *) echo "cold_path.sh: unknown case \"$c\"" >&2; exit 1 ;; esac
done
case $WAL_LEVEL in replica | minimal) ;; *) echo "cold_path.sh: WAL_LEVEL must be replica or minimal" >&2; exit 1 ;; esac
case $REMOTE in 0) ;; 1) [[ " $CASES " != *" snapshot "* && " $CASES " != *" fixed "* ]] ||
	{ echo "cold_path.sh: REMOTE=1 measures the pgbench, md5, many and zabbix cases only (set CASES)" >&2; exit 1; } ;;
	*) echo "cold_path.sh: REMOTE must be 0 or 1" >&2; exit 1 ;; esac
trap 'echo "cold_path.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR

if ! command -v pgcopydb >/dev/null; then
	[ "$(id -u)" = 0 ] || { echo "cold_path.sh: pgcopydb is not installed (apt-get install pgcopydb)" >&2; exit 1; }
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q pgcopydb >/dev/null
fi

CLUSTER_NAME=cold_path
CLUSTER_PORT=$COLD_PORT
. "$repo/bench/throwaway_cluster.sh"
out=$OUTDIR/cold_path.txt

cluster_start <<EOF
max_worker_processes = 16
shared_buffers = '512MB'
max_wal_size = '8GB'
pgsandbox.gc_interval = 3600
pgsandbox.max_sandboxes_per_owner = 100
pgsandbox.default_ttl = 3600
pgsandbox.max_concurrent_clones = 4
wal_level = $WAL_LEVEL
$([ "$WAL_LEVEL" = minimal ] && echo "max_wal_senders = 0")
EOF

# the sources' cluster: this one, or with REMOTE=1 a second one over TCP
src_port=$COLD_PORT
src_conninfo() { echo "dbname=$1"; }
if [ "$REMOTE" = 1 ]; then
	src_port=$((COLD_PORT + 1))
	rdata=$tmp/remote
	as_pg initdb -D "$rdata" -U postgres -A trust -E UTF8 --no-locale --no-sync >/dev/null
	cat >"$rdata/pg_hba.conf" <<-EOF
	local all all trust
	host all bench 127.0.0.1/32 scram-sha-256
	EOF
	cat >>"$rdata/postgresql.conf" <<-EOF
	port = $src_port
	listen_addresses = '127.0.0.1'
	unix_socket_directories = '$sock'
	shared_buffers = '512MB'
	max_wal_size = '8GB'
	EOF
	as_pg pg_ctl -D "$rdata" -l "$tmp/remote.log" -w start >/dev/null
	remote_stop() { as_pg pg_ctl -D "$rdata" -m immediate -w stop >/dev/null 2>&1 || true; }
	trap 'rc=$?; remote_stop; (exit $rc); cluster_cleanup' EXIT
	as_pg psql -X -q -p "$src_port" -c "CREATE ROLE bench LOGIN CREATEDB PASSWORD 'bench-password'"
	src_conninfo() { echo "host=127.0.0.1 port=$src_port dbname=$1 user=bench password=bench-password"; }
fi
# run a program as the sources' owner, aimed at the sources' cluster
as_src() {
	if [ "$REMOTE" = 1 ]; then as_pg env PGPORT="$src_port" PGUSER=bench "$@"; else as_pg "$@"; fi
}

now() { date +%s.%N; }
# arithmetic in awk: bc is not everywhere (the test chroots lack it)
calc() { awk "BEGIN { printf \"%.6f\\n\", $1 }"; }
elapsed() { calc "$(now) - $1"; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
# the median over rounds of num[i] / den[i]
ratio() {
	local -n num=$1 den=$2
	local r=()
	for ((i = 0; i < ${#num[@]}; i++)); do r+=("$(calc "${num[$i]} / ${den[$i]}")"); done
	median "${r[@]}"
}
set_jobs() {
	q "ALTER SYSTEM SET pgsandbox.clone_jobs = $1" >/dev/null
	q "ALTER SYSTEM SET pgsandbox.parallel_min_size = 0" >/dev/null
	q "ALTER SYSTEM SET pgsandbox.bulk_copy_min_size = ${2:-64}" >/dev/null
	q "SELECT pg_reload_conf()" >/dev/null
	sleep 0.2
}
# rows of every table, as one text, of database $1
contents() {
	${2:-as_pg} psql -X -q -A -t -d "$1" -c "SELECT string_agg(format('%s=%s', c.oid::regclass, (xpath('/row/n/text()', query_to_xml(format('SELECT count(*) AS n FROM %s', c.oid::regclass), false, true, '')))[1]), ',' ORDER BY c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND n.nspname = 'public'"
}
check_copy() {
	local got
	got=$(contents "$2")
	[ "$got" = "$(cat "$tmp/contents_$1")" ] || { echo "cold_path.sh: $2 differs from $1" >&2; exit 1; }
}
manual() {
	local src=$1
	shift
	q "CHECKPOINT" >/dev/null
	local start
	start=$(now)
	as_pg env PGPASSWORD=bench-password bash -c "createdb manual && pg_dump -Fc $* -d '$(src_conninfo "$src")' | pg_restore --no-owner --no-privileges --exit-on-error --single-transaction -d manual"
	elapsed "$start"
}
# pgcopydb clone of source $1 into a new database "pgcopydb": seconds
pgcopydb_timed() {
	local src=$1 target
	target=$([ "$REMOTE" = 1 ] && echo "host=$sock port=$COLD_PORT dbname=pgcopydb user=postgres" || echo "host=$sock port=$COLD_PORT dbname=pgcopydb")
	rm -rf "$tmp/pgcopydb.dir"
	q "CHECKPOINT" >/dev/null
	local start
	start=$(now)
	# shellcheck disable=SC2086
	as_pg env PGPASSWORD=bench-password bash -c "createdb pgcopydb && pgcopydb clone --source '$(src_conninfo "$src")$([ "$REMOTE" = 1 ] || echo " host=$sock port=$COLD_PORT")' --target '$target' --dir '$tmp/pgcopydb.dir' --no-owner --no-acl $PGCOPYDB_FLAGS >'$tmp/pgcopydb.log' 2>&1" ||
		{ tail -20 "$tmp/pgcopydb.log" >&2; exit 1; }
	elapsed "$start"
}
# a fresh clone of $1 (schema only if $2 is true): seconds, then its name
clone_timed() {
	local start name
	q "CHECKPOINT" >/dev/null
	start=$(now)
	name=$(q "SELECT name FROM pgsandbox.clone('$1', schema_only => ${2:-false}, fresh => true)")
	echo "$(elapsed "$start") $name"
}

declare -A med
report=()

# one clone of $src with $jobs jobs and bulk_copy_min_size $2; its time
# goes to the array named $1, the jobs it took to took[$1]
clone_round() {
	local -n times=$1 wals=wal_$1
	local lsn
	set_jobs "$jobs" "$2"
	lsn=$(q "SELECT pg_current_wal_lsn()")
	read -r secs name < <(clone_timed "$src")
	wals+=("$(q "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '$lsn')")")
	check_copy "$src" "$name"
	# the jobs it took: fewer where one table holds half the pages
	took[$1]=$(q "SELECT coalesce(substring(detail from 'with ([0-9]+) jobs'), '1') FROM pgsandbox.events WHERE sandbox = '$name' AND action = 'ready'")
	[ "$r" = 0 ] && q "SELECT detail FROM pgsandbox.events WHERE sandbox = '$name' AND action = 'ready'" >"$tmp/event_${src}_$1"
	q "SELECT pgsandbox.drop('$name')" >/dev/null
	times+=("$secs")
}

run_source() {
	local src=$1
	local -a j1=() dump=() j2=() j4=() man=() tpl=() pcd=()
	local -a wal_j1=() wal_dump=() wal_j2=() wal_j4=() wal_man=()
	local -A took=()
	local secs name k jobs lsn variants=7
	contents "$src" as_src >"$tmp/contents_$src"
	for ((r = 0; r < RUNS; r++)); do
		for ((k = 0; k < variants; k++)); do
			case $(((k + r) % variants)) in
			0) jobs=1 clone_round j1 64 ;;
			1) jobs=1 clone_round dump -1 ;;
			2) jobs=2 clone_round j2 64 ;;
			3) jobs=4 clone_round j4 64 ;;
			4)
				lsn=$(q "SELECT pg_current_wal_lsn()")
				man+=("$(manual "$src")")
				wal_man+=("$(q "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '$lsn')")")
				check_copy "$src" manual
				as_pg dropdb manual ;;
			5)
				[ "$REMOTE" = 1 ] && { tpl+=(1); continue; }
				q "CHECKPOINT" >/dev/null
				local start
				start=$(now)
				q "CREATE DATABASE templ TEMPLATE $src" >/dev/null
				tpl+=("$(elapsed "$start")")
				q "DROP DATABASE templ" >/dev/null ;;
			6)
				pcd+=("$(pgcopydb_timed "$src")")
				check_copy "$src" pgcopydb
				as_pg dropdb pgcopydb ;;
			esac
		done
		echo "cold_path.sh: $src, round $((r + 1)) of $RUNS done" >&2
	done
	{
		echo "## $src: $(as_src psql -X -q -A -t -d "$src" -c "SELECT pg_size_pretty(pg_database_size('$src'))"), $RUNS rounds$([ "$REMOTE" = 1 ] && echo ", the source over TCP on a second cluster")"
		printf '%-30s %9s %10s %11s %11s %10s\n' step "median s" "/ manual" "/ pgcopydb" "/ template" "WAL MB"
		row() {
			local label=$1 arr=$2 wal=wal_$3[@]
			printf '%-30s %9.2f %9.3fx %10.3fx %10s %10s\n' "$label" "$(median "${!arr}")" \
				"$(ratio "$3" man)" "$(ratio "$3" pcd)" \
				"$([ "$REMOTE" = 1 ] && echo - || printf '%.3fx' "$(ratio "$3" tpl)")" \
				"$(declare -p "wal_$3" >/dev/null 2>&1 && printf '%.1f' "$(calc "$(median "${!wal}") / 1048576")" || echo -)"
		}
		row "clone, 1 job (as shipped)" 'j1[@]' j1
		row "clone, 1 job, pg_dump only" 'dump[@]' dump
		row "clone, 2 jobs (took ${took[j2]})" 'j2[@]' j2
		row "clone, 4 jobs (took ${took[j4]})" 'j4[@]' j4
		row "manual pipeline" 'man[@]' man
		row "pgcopydb" 'pcd[@]' pcd
		[ "$REMOTE" = 1 ] || row "template" 'tpl[@]' tpl
		for v in j1 dump j2 j4; do echo "ready event, $v, round 1: $(cat "$tmp/event_${src}_$v")"; done
		echo
	} | tee -a "$out"
}

{
	echo "# bench/cold_path.sh, $(date -u +%Y-%m-%dT%H:%MZ), PostgreSQL $(q 'SHOW server_version'), $(nproc) cores, wal_level $(q 'SHOW wal_level')"
	echo
} | tee "$out"

if [[ " $CASES " == *" pgbench "* || " $CASES " == *" snapshot "* ]]; then
	echo "cold_path.sh: making pgbench -s $SCALE" >&2
	as_src createdb pgbench
	as_src pgbench -q -i -s "$SCALE" pgbench >/dev/null 2>&1
	as_src psql -X -q -d pgbench -c "VACUUM ANALYZE" 2>/dev/null
	q "SELECT pgsandbox.add_source('pgbench', '$(src_conninfo pgbench)', allow_data => true)" >/dev/null
fi
if [[ " $CASES " == *" pgbench "* ]]; then
	run_source pgbench
fi

if [[ " $CASES " == *" md5 "* ]]; then
	echo "cold_path.sh: making pgbench -s $SCALE with md5 text in its filler" >&2
	as_src createdb md5
	as_src pgbench -q -i -s "$SCALE" -I dtg md5 >/dev/null 2>&1
	as_src psql -X -q -d md5 -c "UPDATE pgbench_accounts SET filler = md5(aid::text) || substr(md5((aid + 7)::text), 1, 20)" -c "VACUUM FULL pgbench_accounts" >/dev/null
	as_src pgbench -q -i -I pv md5 >/dev/null 2>&1
	as_src psql -X -q -d md5 -c "VACUUM ANALYZE" 2>/dev/null
	q "SELECT pgsandbox.add_source('md5', '$(src_conninfo md5)', allow_data => true)" >/dev/null
	run_source md5
fi

if [[ " $CASES " == *" many "* ]]; then
	echo "cold_path.sh: making $NTABLES tables of $ROWS rows" >&2
	as_src createdb many
	as_src psql -X -q -d many -v ntables="$NTABLES" -v with_ext=0 -v rows="$ROWS" -f "$repo/bench/many_tables.sql" >/dev/null
	as_src psql -X -q -d many -c "VACUUM ANALYZE" 2>/dev/null
	q "SELECT pgsandbox.add_source('many', '$(src_conninfo many)', allow_data => true)" >/dev/null
	run_source many
fi

if [[ " $CASES " == *" zabbix "* ]]; then
	deb=${ZABBIX_DEB:-}
	if [ -z "$deb" ] && [ "$(id -u)" = 0 ]; then
		(cd "$tmp" && apt-get download zabbix-server-pgsql >/dev/null 2>&1) || true
		deb=$(ls "$tmp"/zabbix-server-pgsql_*.deb 2>/dev/null | head -1)
	fi
	[ -n "$deb" ] && [ -r "$deb" ] || { echo "cold_path.sh: no zabbix-server-pgsql package (set ZABBIX_DEB)" >&2; exit 1; }
	dpkg-deb -x "$deb" "$tmp/zabbix"
	[ "$(id -u)" != 0 ] || chown -R postgres: "$tmp/zabbix"
	zsql=$tmp/zabbix/usr/share/zabbix-server-pgsql
	echo "cold_path.sh: loading Zabbix's schema and data ($(basename "$deb"))" >&2
	as_src createdb zabbix
	for f in schema images data; do
		as_src bash -c "gzip -dc '$zsql/$f.sql.gz' | psql -X -q -v ON_ERROR_STOP=1 -d zabbix" >/dev/null
	done
	as_src psql -X -q -d zabbix -c "VACUUM ANALYZE" 2>/dev/null
	q "SELECT pgsandbox.add_source('zabbix', '$(src_conninfo zabbix)', allow_data => true)" >/dev/null
	run_source zabbix
fi

if [[ " $CASES " == *" snapshot "* ]]; then
	set_jobs 1
	contents pgbench >"$tmp/contents_pgbench"
	declare -a build=() bman=()
	for ((r = 0; r < RUNS; r++)); do
		q "SELECT pgsandbox.drop_snapshot('pgbench', false)" >/dev/null 2>&1 || true
		q "CHECKPOINT" >/dev/null
		start=$(now)
		q "SELECT pgsandbox.snapshot('pgbench', false)" >/dev/null
		build+=("$(elapsed "$start")")
		bman+=("$(manual pgbench)")
		as_pg dropdb manual
		echo "cold_path.sh: snapshot build, round $((r + 1)) of $RUNS done" >&2
	done
	q "SELECT pgsandbox.drop_snapshot('pgbench', false)" >/dev/null
	{
		echo "## the snapshot of pgbench ($(q "SELECT pg_size_pretty(pg_database_size('pgbench'))")), $RUNS rounds"
		printf '%-26s %9.2f s\n' "build (snapshot())" "$(median "${build[@]}")" \
			"manual pipeline" "$(median "${bman[@]}")"
		printf 'build / manual:            %.3fx\n' "$(ratio build bman)"
		echo
		echo "## copies of a snapshot, WAL_LOG against FILE_COPY, $RUNS rounds each"
		printf '%-8s %10s %10s %10s %12s\n' scale size "WAL_LOG s" "FILE_COPY s" "FILE/WAL"
	} | tee -a "$out"
	for scale in $COPY_SCALES; do
		src=copy$scale
		as_pg createdb "$src"
		as_pg pgbench -q -i -s "$scale" "$src" >/dev/null 2>&1
		as_pg psql -X -q -d "$src" -c "VACUUM ANALYZE"
		contents "$src" >"$tmp/contents_$src"
		q "SELECT pgsandbox.add_source('$src', 'dbname=$src', allow_data => true)" >/dev/null
		q "SELECT pgsandbox.snapshot('$src', false)" >/dev/null
		declare -a wal=() fcopy=()
		for ((r = 0; r < RUNS; r++)); do
			for k in 0 1; do
				strategy=$([ $(((k + r) % 2)) = 0 ] && echo wal_log || echo file_copy)
				q "ALTER SYSTEM SET pgsandbox.copy_strategy = $strategy" >/dev/null
				q "SELECT pg_reload_conf()" >/dev/null
				sleep 0.2
				q "CHECKPOINT" >/dev/null
				start=$(now)
				name=$(q "SELECT name FROM pgsandbox.clone('$src', schema_only => false)")
				secs=$(elapsed "$start")
				check_copy "$src" "$name"
				q "SELECT detail FROM pgsandbox.events WHERE sandbox = '$name' AND action = 'ready'" |
					grep -q "$([ $strategy = wal_log ] && echo 'WAL log' || echo 'file copy')" ||
					{ echo "cold_path.sh: the copy did not take $strategy" >&2; exit 1; }
				q "SELECT pgsandbox.drop('$name')" >/dev/null
				if [ $strategy = wal_log ]; then wal+=("$secs"); else fcopy+=("$secs"); fi
			done
		done
		size=$(q "SELECT pg_size_pretty(pg_database_size('$src'))")
		q "SELECT pgsandbox.drop_snapshot('$src', false)" >/dev/null
		as_pg dropdb "$src"
		printf '%-8s %10s %10.2f %10.2f %11.3fx\n' "$scale" "$size" \
			"$(median "${wal[@]}")" "$(median "${fcopy[@]}")" "$(ratio fcopy wal)" | tee -a "$out"
		echo "cold_path.sh: copies at scale $scale done" >&2
	done
	q "ALTER SYSTEM RESET pgsandbox.copy_strategy" >/dev/null
	q "SELECT pg_reload_conf()" >/dev/null
	echo | tee -a "$out"
fi

if [[ " $CASES " == *" fixed "* ]]; then
	as_pg createdb small
	as_pg psql -X -q -d small -v ntables=10 -v with_ext=0 -f "$repo/bench/many_tables.sql" >/dev/null
	q "SELECT pgsandbox.add_source('small', 'dbname=small')" >/dev/null
	declare -a fs=() fm=() names=()
	for ((r = 0; r < FIXED_RUNS; r++)); do
		read -r secs name < <(clone_timed small true)
		fs+=("$secs")
		q "SELECT detail FROM pgsandbox.events WHERE sandbox = '$name' AND action = 'ready'" >"$tmp/fixed_$r"
		q "SELECT pgsandbox.drop('$name')" >/dev/null
		fm+=("$(manual small --schema-only)")
		as_pg dropdb manual
	done
	ms=()
	for ((r = 0; r < FIXED_RUNS; r++)); do ms+=("$(calc "(${fs[$r]} - ${fm[$r]}) * 1000")"); done
	# the round closest to the median
	mid=$(median "${fs[@]}")
	mid_r=$(for ((r = 0; r < FIXED_RUNS; r++)); do echo "$r $(calc "(${fs[$r]} - $mid) * (${fs[$r]} - $mid)")"; done | sort -g -k2 | head -1 | cut -d' ' -f1)
	{
		echo "## fixed cost: a schema-only clone of 10 tables, $FIXED_RUNS rounds"
		printf 'clone:    %.1f ms (median)\n' "$(calc "$(median "${fs[@]}") * 1000")"
		printf 'manual:   %.1f ms (median)\n' "$(calc "$(median "${fm[@]}") * 1000")"
		printf 'clone - manual: %.1f ms (median of the per-round differences)\n' "$(median "${ms[@]}")"
		echo "ready event of the clone closest to the median: $(cat "$tmp/fixed_$mid_r")"
		echo
	} | tee -a "$out"
fi
