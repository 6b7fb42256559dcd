#!/usr/bin/env bash
#
# reset.sh: what reset() costs, side by side in one run on a throwaway
# PostgreSQL 15 cluster, against a new copy of the same snapshot (clone()),
# a reset to a save, CREATE DATABASE ... TEMPLATE of the source, and the
# manual pipeline (createdb + pg_dump -Fc | pg_restore).  See bench/README.md.
#
# For each source (pgbench -s SCALE with data, and NTABLES small tables
# with data) it takes a snapshot, clones one sandbox from it, saves that
# sandbox once, then runs RUNS rounds; a round times, in a rotating order:
#   copy        clone(source, schema_only => false): a copy of the snapshot
#   reset       reset(sandbox, 'start'): back to a copy of the same snapshot
#   reset_save  reset(sandbox, '<the save's label>')
#   save        save(sandbox, ...): the time its sessions are interrupted
#               (the save is dropped after, untimed)
#   template    CREATE DATABASE ... TEMPLATE <source>
#   manual      createdb, then pg_dump -Fc <source> | pg_restore
# each after a CHECKPOINT, with the sandbox changed a little before each
# reset.  It prints medians and the median over rounds of each ratio.
#
# Run as root on a Debian 12 machine: it installs what it needs, builds and
# installs pgsandbox (unless SKIP_BUILD=1), and runs the server as the
# "postgres" OS user.
#
# Settings, from the environment:
#   SCALE=50  NTABLES=300  RUNS=5  RESET_PORT=5530  COPY_STRATEGY=wal_log
#   SKIP_BUILD=0  PGBIN=/usr/lib/postgresql/15/bin  OUTDIR=bench/out
#
set -Eeuo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
SCALE=${SCALE:-50}
NTABLES=${NTABLES:-300}
RUNS=${RUNS:-5}
RESET_PORT=${RESET_PORT:-5530}
COPY_STRATEGY=${COPY_STRATEGY:-wal_log}
SKIP_BUILD=${SKIP_BUILD:-0}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
OUTDIR=${OUTDIR:-$repo/bench/out}

die() {
	echo "reset.sh: $*" >&2
	exit 1
}
for v in SCALE NTABLES RUNS RESET_PORT; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, not \"${!v}\""
done
case $COPY_STRATEGY in wal_log | file_copy) ;; *) die "COPY_STRATEGY must be wal_log or file_copy" ;; esac
trap 'echo "reset.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR

if [ "$(id -u)" = 0 ]; then
	bash "$repo/test/install-deps.sh"
fi
if [ "$SKIP_BUILD" != 1 ]; then
	make -C "$repo" -s
	if [ "$(id -u)" = 0 ]; then make -C "$repo" -s install; else sudo make -C "$repo" -s install; fi
fi
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
out=$OUTDIR/reset.txt
tmp=$(mktemp -d /tmp/pgsandbox-reset.XXXXXX)
data=$tmp/data
sock=$tmp/sock
mkdir "$sock"
[ "$(id -u)" != 0 ] || chown -R postgres: "$tmp"
chmod 700 "$tmp"
cd "$tmp"
started=0

as_pg() {
	local env=(env PGHOST="$sock" PGPORT="$RESET_PORT" PGUSER=postgres
			   PGDATABASE=postgres PGAPPNAME=pgsandbox-bench PATH="$PGBIN:$PATH")
	if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "${env[@]}" "$@"; else "${env[@]}" "$@"; fi
}
q() {
	as_pg psql -X -q -v ON_ERROR_STOP=1 -A -t "$@"
}

cleanup() {
	local rc=$?

	trap - ERR
	set +e
	[ ! -f "$tmp/server.log" ] || cp "$tmp/server.log" "$OUTDIR/reset-server.log"
	if [ $started = 1 ]; then
		as_pg pg_ctl -D "$data" -m fast -w -t 120 stop >/dev/null ||
			as_pg pg_ctl -D "$data" -m immediate -w stop >/dev/null
	fi
	rm -rf "$tmp"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

as_pg initdb -D "$data" -U postgres -A trust -E UTF8 --no-locale --no-sync >/dev/null
cat >>"$data/postgresql.conf" <<EOF

# pgsandbox reset benchmark
port = $RESET_PORT
listen_addresses = ''
unix_socket_directories = '$sock'
shared_preload_libraries = 'pgsandbox'
pgsandbox.database = 'postgres'
pgsandbox.copy_strategy = $COPY_STRATEGY
max_worker_processes = 16
shared_buffers = 512MB
maintenance_work_mem = 256MB
max_wal_size = 4GB
checkpoint_timeout = 30min
autovacuum = off
EOF
started=1
as_pg pg_ctl -D "$data" -l "$tmp/server.log" -w -t 120 start >/dev/null

: >"$out"
say() {
	printf '%s\n' "$*" | tee -a "$out"
}
commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
say "pgsandbox reset benchmark, $(date -u '+%Y-%m-%d %H:%M UTC')"
say "machine:    $(nproc) CPUs, $(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo) memory, load $(cut -d' ' -f1-3 /proc/loadavg)"
say "postgres:   $(q -c 'SELECT version()')"
say "pgsandbox:  commit $commit; SCALE=$SCALE NTABLES=$NTABLES RUNS=$RUNS COPY_STRATEGY=$COPY_STRATEGY"

q -c 'CREATE EXTENSION pgsandbox'
q -c 'CREATE DATABASE src_pgbench' -c 'CREATE DATABASE src_many'
as_pg pgbench -i -q -s "$SCALE" src_pgbench >"$tmp/pgbench.log" 2>&1 ||
	die "pgbench -i failed: $(tail -n 5 "$tmp/pgbench.log")"
q -d src_many -v ntables="$NTABLES" -v with_ext=0 -f - <"$repo/bench/many_tables.sql" >/dev/null

now_ns() { date +%s%N; }
secs() { awk -v ns="$1" 'BEGIN { printf "%.3f", ns / 1e9 }'; }
median() {
	printf '%s\n' "$@" | sort -g |
		awk '{ v[NR] = $1 } END { if (NR % 2) printf "%.3f", v[(NR + 1) / 2]; else printf "%.3f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

declare -A t
methods=(copy reset reset_save save template manual)

# time one method once, for source $1 (database $2), sandbox $3, round $4
run_one() {
	local s=$1 db=$2 sbx=$3 m=$4 r=$5 t0 t1 name
	case $m in
		reset | reset_save)
			q -d postgres -c "SELECT pgsandbox.run_sql('$sbx', 'DELETE FROM $(probe_table "$s") WHERE ctid IN (SELECT ctid FROM $(probe_table "$s") LIMIT 10)')" >/dev/null ;;
	esac
	q -c CHECKPOINT
	t0=$(now_ns)
	case $m in
		copy) name=$(q -c "SELECT name FROM pgsandbox.clone('$s', schema_only => false)") ;;
		reset) q -c "SET client_min_messages = warning" -c "SELECT pgsandbox.reset('$sbx', 'start')" >/dev/null ;;
		reset_save) q -c "SET client_min_messages = warning" -c "SELECT pgsandbox.reset('$sbx', 'base')" >/dev/null ;;
		save) name=$(q -c "SELECT pgsandbox.save('$sbx', 'round $r')") ;;
		template) q -c "CREATE DATABASE bench_template TEMPLATE $db" ;;
		manual)
			as_pg createdb bench_manual
			as_pg bash -c "pg_dump -Fc '$db' | pg_restore --no-owner -d bench_manual"
			;;
	esac
	t1=$(now_ns)
	t[$s/$m/$r]=$(secs $((t1 - t0)))
	case $m in
		copy) q -c "SELECT pgsandbox.drop('$name')" >/dev/null ;;
		save)
			q -c "SELECT pgsandbox.drop_save('$name')" >/dev/null
			# the upkeep drops it within a second; wait, so that no drop overlaps a timed step
			for _ in $(seq 1 600); do
				[ "$(q -c "SELECT count(*) FROM pg_database WHERE datname = '$name'")" = 0 ] && break
				sleep 0.1
			done
			;;
		template) q -c 'DROP DATABASE bench_template' ;;
		manual) q -c 'DROP DATABASE bench_manual' ;;
	esac
}
probe_table() {
	case $1 in pgbench) echo pgbench_accounts ;; *) echo t0001 ;; esac
}

for s in pgbench many; do
	db=src_$s
	q -c "SELECT pgsandbox.add_source('$s', 'dbname=$db user=postgres', allow_data => true)" >/dev/null
	q -c "SELECT pgsandbox.snapshot('$s', schema_only => false)" >/dev/null
	sbx=$(q -c "SELECT name FROM pgsandbox.clone('$s', schema_only => false, ttl => '1 day')")
	q -c "SELECT pgsandbox.save('$sbx', 'base')" >/dev/null
	size=$(q -c "SELECT pg_size_pretty(size_bytes) FROM pgsandbox.sandboxes WHERE name = '$sbx'")
	for r in $(seq 1 "$RUNS"); do
		# rotate the order, so that no method always follows the same one
		for i in 0 1 2 3 4 5; do
			run_one "$s" "$db" "$sbx" "${methods[$(((i + r) % 6))]}" "$r"
		done
		printf '%s round %d:' "$s" "$r" >&2
		for m in "${methods[@]}"; do printf ' %s %s' "$m" "${t[$s/$m/$r]}" >&2; done
		printf '\n' >&2
	done
	# the sandbox reset to the start holds the snapshot's rows
	rows=$(q -c 'SET client_min_messages = warning' -c "SELECT pgsandbox.reset('$sbx', 'start') IS NOT NULL" -c "SELECT (pgsandbox.run_sql('$sbx', 'SELECT count(*) FROM $(probe_table "$s")') -> 'results' -> 0 -> 'rows' -> 0 ->> 0)" | tail -n 1)
	want=$(q -d "$db" -c "SELECT count(*) FROM $(probe_table "$s")")
	[ "$rows" = "$want" ] || die "a reset of $s holds $rows rows of $(probe_table "$s"), not $want"

	say ""
	case $s in pgbench) say "source: pgbench -s $SCALE, with data ($size)" ;; *) say "source: $NTABLES tables, with data ($size)" ;; esac
	say "  method       median s   (each round)"
	for m in "${methods[@]}"; do
		vals=()
		for r in $(seq 1 "$RUNS"); do vals+=("${t[$s/$m/$r]}"); done
		say "$(printf '  %-12s %8s   (%s)' "$m" "$(median "${vals[@]}")" "${vals[*]}")"
	done
	for pair in reset/copy reset_save/reset save/copy reset/template reset/manual copy/manual; do
		a=${pair%/*}
		b=${pair#*/}
		vals=()
		for r in $(seq 1 "$RUNS"); do
			vals+=("$(awk -v x="${t[$s/$a/$r]}" -v y="${t[$s/$b/$r]}" 'BEGIN { printf "%.4f", x / y }')")
		done
		say "$(printf '  %-20s %5.2fx (median over rounds)' "$a / $b" "$(median "${vals[@]}")")"
	done
	q -c "SELECT pgsandbox.drop('$sbx')" >/dev/null
	q -c "SELECT pgsandbox.drop_snapshot('$s')" >/dev/null
done
say ""
say "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
