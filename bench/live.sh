#!/usr/bin/env bash
#
# live.sh: what a live snapshot gives and costs (0.12), side by side in one
# run on a throwaway cluster (PostgreSQL 15 unless PGBIN says otherwise).
# See bench/README.md.
#
# Two sources of pgbench -i -s SCALE in the cluster: "live", made live
# (set_live) under a steady write load (pgbench -c CLIENTS -R RATE, plus a
# heartbeat row its source rewrites ten times a second), and "static", an
# identical one with an ordinary data snapshot.  Then:
#   1. the lag, for LAG_SECS seconds under the load: each second, how old
#      the heartbeat the live snapshot holds is (read in its database, as
#      the superuser may); median and 99th percentile;
#      the source's cost meanwhile: the WAL its walsender decoded (the WAL
#      written, per hour), the walsender's CPU time, and the most WAL the
#      slot kept; against a full refresh every 15 minutes, which reads the
#      whole source each time (its pages read, from pg_stat_database, for
#      one snapshot() of "static");
#   2. RUNS rounds, the load still on, of a data clone of "live" (a copy of
#      the live snapshot: catch-up, pause, copy, sequences) and one of
#      "static" (a copy of its snapshot), in turn: their times, the ratio,
#      and how far each live copy's data_as_of is from the moment it was
#      asked for (after it when the copy waited for the apply to reach the
#      source's present); beside them, fresh data the usual way (createdb +
#      pg_dump -Fc | pg_restore from the live source) and CREATE DATABASE
#      ... TEMPLATE of the static snapshot.  Every copy's pgbench_accounts
#      is counted against its source.
#
# Run as root on a Debian 12 machine, it installs the packages it needs and
# builds and installs pgsandbox (unless SKIP_BUILD=1).  Writes
# $OUTDIR/live.txt.
#
# LIVE_ON=18-xfs runs it on PostgreSQL 18 with the cluster on an XFS
# filesystem with reflink, where copies are file clones (copy_strategy
# auto): as root, it provisions the chroot of test/pg/provision.sh, builds
# and installs pgsandbox there, makes the filesystem in a loop file
# (test/pg/cow.sh, COW_SIZE=40G, sparse), and runs itself inside the
# chroot as the "postgres" OS user.  Writes $OUTDIR/live-18-xfs.txt.
#
# Settings, from the environment:
#   SCALE=50  CLIENTS=4  RATE=200  LAG_SECS=600  RUNS=5  LIVE_PORT=5537
#   COPY_STRATEGY=file_copy (auto with LIVE_ON=18-xfs)  SKIP_BUILD=0
#   PGBIN=/usr/lib/postgresql/15/bin  OUTDIR=bench/out  LIVE_ON=  COW_SIZE=40G
#   EXTRA_CONF=  more postgresql.conf lines ('\n' between them), such as the
#                source's checkpoint_timeout and wal_compression, which
#                decide how much WAL its walsender decodes
#
set -Eeuo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)

if [ "${LIVE_ON:-}" = 18-xfs ] && [ -z "${LIVE_INNER:-}" ]; then
	[ "$(id -u)" = 0 ] || { echo "live.sh: LIVE_ON=18-xfs runs as root (a chroot, a loop filesystem)" >&2; exit 1; }
	OUTDIR=${OUTDIR:-$repo/bench/out}
	mkdir -p "$OUTDIR"
	OUTDIR=$(cd "$OUTDIR" && pwd)
	bash "$repo/test/pg/provision.sh" 18 >/dev/null
	work=$(mktemp -d /tmp/pgsandbox-live18.XXXXXX)
	cow=""
	cleanup18() {
		[ -f "$work/out/live.txt" ] && cp "$work/out/live.txt" "$OUTDIR/live-18-xfs.txt"
		[ -f "$work/out/live-server.log" ] && cp "$work/out/live-server.log" "$OUTDIR/live-18-xfs-server.log"
		[ -n "$cow" ] && bash "$repo/test/pg/cow.sh" stop "$work/cow"
		rm -rf "$work"
	}
	trap cleanup18 EXIT
	tar -C "$repo" --exclude=.git --exclude=node_modules --exclude='tmp_check*' \
		--exclude='*.o' --exclude='*.so' --exclude='*.bc' -cf - . | tar -C "$work" -xf -
	run=("$repo/test/pg/run-in.sh" -b "$work")
	"${run[@]}" 18 make -C "$work" -s
	"${run[@]}" 18 make -C "$work" -s install
	cow=$(bash "$repo/test/pg/cow.sh" start "$work/cow" "${COW_SIZE:-40G}")
	mkdir -p "$work/out"
	chown -R postgres: "$work"
	"${run[@]}" -b "$cow" -u postgres 18 env LIVE_ON=18-xfs LIVE_INNER=1 SKIP_BUILD=1 CLUSTER_DIR="$cow" \
		PGBIN=/usr/lib/postgresql/18/bin OUTDIR="$work/out" COPY_STRATEGY="${COPY_STRATEGY:-auto}" \
		SCALE="${SCALE:-50}" CLIENTS="${CLIENTS:-4}" RATE="${RATE:-200}" LAG_SECS="${LAG_SECS:-600}" \
		RUNS="${RUNS:-5}" LIVE_PORT="${LIVE_PORT:-5537}" EXTRA_CONF="${EXTRA_CONF:-}" bash "$work/bench/live.sh"
	exit 0
fi
SCALE=${SCALE:-50}
CLIENTS=${CLIENTS:-4}
RATE=${RATE:-200}
LAG_SECS=${LAG_SECS:-600}
RUNS=${RUNS:-5}
LIVE_PORT=${LIVE_PORT:-5537}
COPY_STRATEGY=${COPY_STRATEGY:-file_copy}
SKIP_BUILD=${SKIP_BUILD:-0}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
OUTDIR=${OUTDIR:-$repo/bench/out}

for v in SCALE CLIENTS RATE LAG_SECS RUNS LIVE_PORT; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "live.sh: $v must be a positive integer" >&2; exit 1; }
done
case $COPY_STRATEGY in auto|wal_log|file_copy) ;; *) echo "live.sh: COPY_STRATEGY is auto, wal_log or file_copy" >&2; exit 1 ;; esac
trap 'echo "live.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR

CLUSTER_NAME=live
CLUSTER_PORT=$LIVE_PORT
. "$repo/bench/throwaway_cluster.sh"
out=$OUTDIR/live.txt
load_pids=()
stop_load() {
	local p
	for p in "${load_pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	load_pids=()
}
trap 'rc=$?; stop_load; (exit $rc); cluster_cleanup' EXIT

cluster_start <<EOF
wal_level = logical
max_wal_senders = 10
max_replication_slots = 10
max_worker_processes = 20
shared_buffers = 512MB
max_wal_size = 8GB
pgsandbox.gc_interval = 3600
pgsandbox.copy_strategy = $COPY_STRATEGY
pgsandbox.max_sandboxes = 100
pgsandbox.max_sandboxes_per_owner = 100
$(printf '%b' "${EXTRA_CONF:-}")
EOF

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
p99() { sort -n | awk '{ v[NR] = $1 } END { i = int(NR * 0.99 + 0.999); if (i < 1) i = 1; print v[i] }'; }
now_ms() { date +%s%3N; }

# --- the sources --------------------------------------------------------------
q "CREATE ROLE repl LOGIN REPLICATION PASSWORD 'benchpw' IN ROLE pg_read_all_data" >/dev/null
for db in live static; do
	q "CREATE DATABASE $db" >/dev/null
	as_pg pgbench -q -i -s "$SCALE" "$db" >/dev/null 2>&1
	as_pg psql -X -q -d "$db" -c "ALTER TABLE pgbench_history REPLICA IDENTITY FULL" \
		-c "CREATE TABLE heartbeat (id int PRIMARY KEY, ts timestamptz NOT NULL)" \
		-c "INSERT INTO heartbeat VALUES (1, clock_timestamp())" >/dev/null
	as_pg vacuumdb -q -z -d "$db"
	q "SELECT pgsandbox.add_source('$db', 'dbname=$db user=repl password=benchpw', allow_data => true)" >/dev/null
done
as_pg psql -X -q -d live -c "CREATE PUBLICATION benchpub FOR ALL TABLES" >/dev/null
size=$(q "SELECT pg_size_pretty(pg_database_size('live'))")

# the static snapshot, and what one full refresh reads of its source
reads() { q "SELECT blks_read + blks_hit FROM pg_stat_database WHERE datname = 'static'"; }
r0=$(reads)
t0=$(now_ms)
q "SELECT 1 FROM pgsandbox.snapshot('static')" >/dev/null
refresh_ms=$(( $(now_ms) - t0 ))
sleep 1
refresh_pages=$(( $(reads) - r0 ))

# the live snapshot
t0=$(now_ms)
q "SELECT pgsandbox.set_live('live', 'benchpub')" >/dev/null
for _ in $(seq 1 600); do
	[ "$(q "SELECT count(*) FROM pgsandbox.snapshots WHERE source = 'live' AND live AND status = 'ready'")" = 1 ] && break
	sleep 0.5
done
[ "$(q "SELECT count(*) FROM pgsandbox.snapshots WHERE source = 'live' AND live AND status = 'ready'")" = 1 ] ||
	{ echo "live.sh: the live snapshot was not built" >&2; exit 1; }
build_ms=$(( $(now_ms) - t0 ))
snapdb=$(q "SELECT s.name FROM pgsandbox._current_snapshots() c JOIN pgsandbox.sandbox s ON s.id = c.id
             WHERE c.source = 'live' AND NOT c.schema_only")
slot=$(q "SELECT live_slot FROM pgsandbox.sandbox WHERE name = '$snapdb'")

# --- the load -------------------------------------------------------------------
total_secs=$(( LAG_SECS + RUNS * 120 + 120 ))
printf 'UPDATE heartbeat SET ts = clock_timestamp() WHERE id = 1;\n' >"$tmp/heartbeat.sql"
chown postgres "$tmp/heartbeat.sql" 2>/dev/null || true
as_pg pgbench -n -c "$CLIENTS" -R "$RATE" -T "$total_secs" live >"$tmp/load.log" 2>&1 &
load_pids+=($!)
as_pg pgbench -n -c 1 -R 10 -T "$total_secs" -f "$tmp/heartbeat.sql" live >"$tmp/heartbeat.log" 2>&1 &
load_pids+=($!)
sleep 10

: >"$out"
{
	echo "live.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(as_pg postgres --version)"
	echo "  SCALE=$SCALE ($size) CLIENTS=$CLIENTS RATE=$RATE LAG_SECS=$LAG_SECS RUNS=$RUNS COPY_STRATEGY=$COPY_STRATEGY"
	[ -z "${EXTRA_CONF:-}" ] || echo "  EXTRA_CONF: $(printf '%b' "$EXTRA_CONF" | tr '\n' ';')"
	echo "  live snapshot built in $build_ms ms; a full snapshot() of the static source in $refresh_ms ms"
} | tee -a "$out"

# --- 1. the lag, and the source's cost -----------------------------------------
walsender=$(q "SELECT active_pid FROM pg_replication_slots WHERE slot_name = '$slot'")
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$walsender/stat"; }
c0=$(cpu_ticks)
lsn0=$(q "SELECT pg_current_wal_lsn()")
lags=()
kept_max=0
for _ in $(seq 1 "$LAG_SECS"); do
	lags+=("$(as_pg psql -X -A -t -d "$snapdb" -c "SELECT round(extract(epoch FROM clock_timestamp() - ts) * 1000) FROM heartbeat")")
	kept=$(q "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint FROM pg_replication_slots WHERE slot_name = '$slot'")
	[ "$kept" -gt "$kept_max" ] && kept_max=$kept
	sleep 1
done
wal_bytes=$(q "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '$lsn0')::bigint")
cpu_s=$(awk -v a="$c0" -v b="$(cpu_ticks)" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", (b - a) / hz }')
lag_med=$(printf '%s\n' "${lags[@]}" | median)
lag_p99=$(printf '%s\n' "${lags[@]}" | p99)
per_hour() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.0f", b * 3600 / s / 1048576 }'; }
live_mb_h=$(per_hour "$wal_bytes" "$LAG_SECS")
dump_mb_h=$(awk -v p="$refresh_pages" 'BEGIN { printf "%.0f", p * 8192 * 4 / 1048576 }')
{
	echo "1. lag over $LAG_SECS s, the heartbeat's age in the live snapshot: median $lag_med ms, p99 $lag_p99 ms"
	echo "   the source's cost: its walsender decoded $live_mb_h MB of WAL an hour, took ${cpu_s} s of CPU in $LAG_SECS s;"
	echo "   the slot kept at most $(( kept_max / 1048576 )) MB of WAL;"
	echo "   a full refresh every 15 minutes reads $dump_mb_h MB of the source's pages an hour ($refresh_pages pages a refresh):"
	echo "   live / refresh = $(awk -v a="$live_mb_h" -v b="$dump_mb_h" 'BEGIN { printf "%.3f", a / b }')"
} | tee -a "$out"

# --- 2. copies under the load -------------------------------------------------
accounts() { as_pg psql -X -A -t -d "$1" -c "SELECT count(*) FROM pgbench_accounts"; }
want=$(accounts live)
lt=() st=() mt=() tt=() ratio=() ratio_m=() ratio_t=() behind=()
staticdb=$(q "SELECT s.name FROM pgsandbox._current_snapshots() c JOIN pgsandbox.sandbox s ON s.id = c.id
              WHERE c.source = 'static' AND NOT c.schema_only")
strategy=""
[ "$COPY_STRATEGY" = auto ] || strategy=" STRATEGY $COPY_STRATEGY"
# on 18 on XFS, the template copy clones its files too, as pgsandbox's does
template_options=${PGOPTIONS:-}
if [ "${LIVE_ON:-}" = 18-xfs ]; then
	strategy=" STRATEGY FILE_COPY"
	template_options="-c file_copy_method=clone"
fi
for round in $(seq 1 "$RUNS"); do
	q "CHECKPOINT" >/dev/null
	asked=$(q "SELECT clock_timestamp()")
	t0=$(now_ms)
	sbx=$(q "SELECT name FROM pgsandbox.clone('live', schema_only => false)")
	l=$(( $(now_ms) - t0 ))
	[ "$(accounts "$sbx")" = "$want" ] || { echo "live.sh: $sbx lacks accounts" >&2; exit 1; }
	behind+=("$(q "SELECT round(extract(epoch FROM data_as_of - '$asked'::timestamptz) * 1000) FROM pgsandbox.sandboxes WHERE name = '$sbx'")")
	q "SELECT pgsandbox.drop('$sbx')" >/dev/null
	q "CHECKPOINT" >/dev/null
	t0=$(now_ms)
	sbx=$(q "SELECT name FROM pgsandbox.clone('static', schema_only => false)")
	s=$(( $(now_ms) - t0 ))
	[ "$(accounts "$sbx")" = "$want" ] || { echo "live.sh: $sbx lacks accounts" >&2; exit 1; }
	q "SELECT pgsandbox.drop('$sbx')" >/dev/null
	# fresh data without pgsandbox: the manual pipeline from the source
	q "CHECKPOINT" >/dev/null
	t0=$(now_ms)
	as_pg createdb bench_manual
	as_pg bash -c "set -o pipefail; pg_dump -Fc -d live | pg_restore --no-owner -d bench_manual"
	m=$(( $(now_ms) - t0 ))
	[ "$(accounts bench_manual)" = "$want" ] || { echo "live.sh: the manual pipeline lacks accounts" >&2; exit 1; }
	as_pg dropdb bench_manual
	# and a template copy of the static snapshot's database
	q "CHECKPOINT" >/dev/null
	t0=$(now_ms)
	PGOPTIONS=$template_options q "CREATE DATABASE bench_template TEMPLATE \"$staticdb\"$strategy" >/dev/null
	t=$(( $(now_ms) - t0 ))
	[ "$(accounts bench_template)" = "$want" ] || { echo "live.sh: the template copy lacks accounts" >&2; exit 1; }
	q "DROP DATABASE bench_template" >/dev/null
	lt+=("$l"); st+=("$s"); mt+=("$m"); tt+=("$t")
	ratio+=("$(awk -v a="$l" -v b="$s" 'BEGIN { printf "%.3f", a / b }')")
	ratio_m+=("$(awk -v a="$l" -v b="$m" 'BEGIN { printf "%.3f", a / b }')")
	ratio_t+=("$(awk -v a="$l" -v b="$t" 'BEGIN { printf "%.3f", a / b }')")
	echo "  round $round: live copy $l ms (its data_as_of ${behind[-1]} ms from the moment it was asked for)," \
		"static copy $s ms, manual pipeline $m ms, template $t ms" | tee -a "$out"
done
{
	echo "2. copies, medians of $RUNS rounds: live $(printf '%s\n' "${lt[@]}" | median) ms, static $(printf '%s\n' "${st[@]}" | median) ms,"
	echo "   manual pipeline (createdb + pg_dump -Fc | pg_restore, fresh data the usual way) $(printf '%s\n' "${mt[@]}" | median) ms,"
	echo "   CREATE DATABASE ... TEMPLATE of the static snapshot $(printf '%s\n' "${tt[@]}" | median) ms;"
	echo "   live / static $(printf '%s\n' "${ratio[@]}" | median)x, live / manual $(printf '%s\n' "${ratio_m[@]}" | median)x," \
		"live / template $(printf '%s\n' "${ratio_t[@]}" | median)x (medians of the per-round ratios);"
	echo "   a live copy's data_as_of from the moment it was asked for (negative: older): median $(printf '%s\n' "${behind[@]}" | median) ms, at worst $(printf '%s\n' "${behind[@]}" | sort -n | head -1) ms"
	echo "   copies made by: $(q "SELECT string_agg(DISTINCT substring(detail FROM 'copied [^()]*\\(([^)]*)\\)'), '; ') FROM pgsandbox.events WHERE action = 'ready' AND detail LIKE '%apply was paused%'")"
	echo "   pauses: $(q "SELECT string_agg(substring(detail FROM 'paused for ([0-9.]+ s)'), ', ' ORDER BY at) FROM pgsandbox.events WHERE action = 'ready' AND detail LIKE '%apply was paused%'")"
} | tee -a "$out"
stop_load
