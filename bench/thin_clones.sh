#!/usr/bin/env bash
#
# thin_clones.sh: time copies of a snapshot (pgsandbox.clone() of a source
# that has a data snapshot) on PostgreSQL 18, with the databases on an XFS
# filesystem with reflink and on the machine's own disk (ext4), side by side
# in one run, against the manual pipeline (createdb + pg_dump -Fc |
# pg_restore) and CREATE DATABASE ... TEMPLATE; and the filesystem space
# each copy takes; and the transactions per second of a pgbench load while
# copies are made one after another (FILE_COPY asks for two checkpoints per
# copy).  See bench/README.md.
#
# Run as root on a Debian 12 machine: it provisions PostgreSQL 18 (the
# chroot of test/pg/provision.sh), builds and installs pgsandbox there,
# makes the XFS filesystem in a loop file (test/pg/cow.sh), and runs the
# clusters as the "postgres" OS user inside the chroot.
#
# Settings, from the environment:
#   SCALES="10 200"   pgbench scales of the sources (200 is about 3 GB)
#   RUNS=3            repetitions of every measurement (medians are quoted)
#   LOAD_SECS=20      seconds of pgbench load per copy strategy
#   COW_SIZE=40G      size of the (sparse) XFS loop file
#   FILESYSTEMS="xfs ext4"
#   OUTDIR=bench/out  where thin_clones.txt and thin_clones.csv go
#
set -Eeuo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
SCALES=${SCALES:-10 200}
RUNS=${RUNS:-3}
LOAD_SECS=${LOAD_SECS:-20}
COW_SIZE=${COW_SIZE:-40G}
FILESYSTEMS=${FILESYSTEMS:-xfs ext4}
OUTDIR=${OUTDIR:-$repo/bench/out}

die() {
	echo "thin_clones.sh: $*" >&2
	exit 1
}

# ---------------------------------------------------------------------------
# inside the chroot, as postgres: one cluster on one filesystem
# ---------------------------------------------------------------------------
if [ "${1:-}" = --inner ]; then
	fs=$2 dir=$3 waldir=$4 csv=$5
	port=5518
	data=$dir/data
	sock=$dir/sock
	mkdir -p "$sock"
	export PGHOST=$sock PGPORT=$port PGUSER=postgres PGDATABASE=postgres

	# WAL on the machine's disk in both cases: the used space of the
	# filesystem under test then counts database files only
	initdb -D "$data" --waldir="$waldir" -U postgres -A trust -E UTF8 --no-locale --no-sync >/dev/null
	cat >>"$data/postgresql.conf" <<EOF
port = $port
listen_addresses = ''
unix_socket_directories = '$sock'
shared_preload_libraries = 'pgsandbox'
max_worker_processes = 16
shared_buffers = 512MB
maintenance_work_mem = 256MB
max_wal_size = 8GB
checkpoint_timeout = 30min
autovacuum = off
pgsandbox.max_sandboxes_per_owner = 50
EOF
	pg_ctl -D "$data" -l "$dir/server.log" -w -t 120 start >/dev/null
	trap 'pg_ctl -D "$data" -m fast -w -t 120 stop >/dev/null || pg_ctl -D "$data" -m immediate -w stop >/dev/null' EXIT

	q() { psql -X -q -v ON_ERROR_STOP=1 -A -t "$@"; }
	now() { date +%s.%N; }
	used() {
		q -c CHECKPOINT
		sync
		df -B1 --output=used "$data" | tail -n 1 | tr -d ' '
	}
	record() { echo "$fs,$1,$2,$3,$4" >>"$csv"; }	# fs,scale,what,run,value

	q -c 'CREATE EXTENSION pgsandbox'
	echo "# $fs: $(q -c 'SELECT version()')"
	for scale in $SCALES; do
		db=src_$scale
		createdb "$db"
		pgbench -i -q -s "$scale" "$db" >/dev/null 2>&1
		size=$(q -c "SELECT pg_database_size('$db')")
		record "$scale" size_bytes 0 "$size"
		q -c "SELECT pgsandbox.add_source('s$scale', 'dbname=$db', allow_data => true)" >/dev/null
		q -c "SELECT pgsandbox.snapshot('s$scale')" >/dev/null
		sum=$(q -d "$db" -c 'SELECT sum(abalance), count(*) FROM pgbench_accounts')
		echo "# $fs: pgbench -s $scale, $size bytes, snapshot ready"
		for run in $(seq "$RUNS"); do
			# a copy of the snapshot, through pgsandbox
			u0=$(used)
			t0=$(now)
			IFS='|' read -r name conninfo < <(q -c "SELECT name, conninfo FROM pgsandbox.clone('s$scale', schema_only => false)")
			t1=$(now)
			u1=$(used)
			how=$(q -c "SELECT detail FROM pgsandbox.events WHERE sandbox = '$name' AND action = 'ready'")
			[ "$(psql -X -A -t -d "$conninfo" -c 'SELECT sum(abalance), count(*) FROM pgbench_accounts')" = "$sum" ] ||
				die "the copy $name does not have the source's rows"
			record "$scale" clone "$run" "$(awk "BEGIN {print $t1 - $t0}")"
			record "$scale" clone_used_bytes "$run" "$((u1 - u0))"
			echo "# $fs -s $scale run $run: $how"
			q -c "SELECT pgsandbox.drop('$name')" >/dev/null

			# CREATE DATABASE ... TEMPLATE, the default strategy (WAL_LOG)
			t0=$(now)
			q -c "CREATE DATABASE t_copy TEMPLATE $db"
			t1=$(now)
			record "$scale" template_wal_log "$run" "$(awk "BEGIN {print $t1 - $t0}")"
			q -c 'DROP DATABASE t_copy'

			# CREATE DATABASE ... TEMPLATE STRATEGY FILE_COPY, file_copy_method = clone
			t0=$(now)
			q -c 'SET file_copy_method = clone' -c "CREATE DATABASE t_copy TEMPLATE $db STRATEGY file_copy"
			t1=$(now)
			record "$scale" template_file_clone "$run" "$(awk "BEGIN {print $t1 - $t0}")"
			q -c 'DROP DATABASE t_copy'

			# the manual pipeline
			t0=$(now)
			createdb m_copy
			pg_dump -Fc "$db" | pg_restore -d m_copy
			t1=$(now)
			record "$scale" manual "$run" "$(awk "BEGIN {print $t1 - $t0}")"
			dropdb m_copy
		done
		q -c "SELECT pgsandbox.remove_source('s$scale')" >/dev/null
		dropdb "$db"
	done

	# pgbench load while copies are made one after another
	smallest=${SCALES%% *}
	createdb load
	pgbench -i -q -s 10 load >/dev/null 2>&1
	createdb src_load
	pgbench -i -q -s "$smallest" src_load >/dev/null 2>&1
	q -c "SELECT pgsandbox.add_source('sl', 'dbname=src_load', allow_data => true)" >/dev/null
	q -c "SELECT pgsandbox.snapshot('sl')" >/dev/null
	for strategy in none auto wal_log; do
		[ "$strategy" = none ] || q -c "ALTER SYSTEM SET pgsandbox.copy_strategy = '$strategy'" -c 'SELECT pg_reload_conf()' >/dev/null
		pgbench -n -c 2 -j 2 -T "$LOAD_SECS" load >"$dir/pgbench.out" 2>&1 &
		pgb=$!
		copies=0
		while kill -0 "$pgb" 2>/dev/null; do
			[ "$strategy" = none ] && { sleep 1; continue; }
			name=$(q -c "SELECT name FROM pgsandbox.clone('sl', schema_only => false)")
			q -c "SELECT pgsandbox.drop('$name')" >/dev/null
			copies=$((copies + 1))
		done
		wait "$pgb"
		tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$dir/pgbench.out" | head -n 1)
		record "$smallest" "load_tps_$strategy" 1 "$tps"
		record "$smallest" "load_copies_per_min_$strategy" 1 "$((copies * 60 / LOAD_SECS))"
	done

	# eight copies asked for at once, four at a time: the checkpoints they cost
	q -c "ALTER SYSTEM SET pgsandbox.copy_strategy = 'auto'" \
		-c 'ALTER SYSTEM SET pgsandbox.max_concurrent_clones = 4' -c 'SELECT pg_reload_conf()' >/dev/null
	c0=$(q -c 'SELECT num_requested FROM pg_stat_checkpointer')
	pids=()
	for i in 1 2 3 4 5 6 7 8; do
		q -c "SELECT name FROM pgsandbox.clone('sl', schema_only => false)" >"$dir/at_once.$i" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p"; done
	c1=$(q -c 'SELECT num_requested FROM pg_stat_checkpointer')
	record "$smallest" checkpoints_for_8_copies 1 "$((c1 - c0))"
	for i in 1 2 3 4 5 6 7 8; do
		q -c "SELECT pgsandbox.drop('$(cat "$dir/at_once.$i")')" >/dev/null
	done
	exit 0
fi

# ---------------------------------------------------------------------------
# on the host, as root
# ---------------------------------------------------------------------------
[ "$(id -u)" = 0 ] || die "run as root (it mounts a loop filesystem and uses a chroot)"
for v in RUNS LOAD_SECS; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, not \"${!v}\""
done
for s in $SCALES; do
	[[ $s =~ ^[1-9][0-9]*$ ]] || die "SCALES must be positive integers, not \"$s\""
done

bash "$repo/test/pg/provision.sh" 18 >/dev/null
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
work=$(mktemp -d /tmp/pgsandbox-thin.XXXXXX)
cow=""
cleanup() {
	# the raw figures are kept, whatever happened
	[ -f "$work/thin_clones.csv" ] && cp "$work/thin_clones.csv" "$OUTDIR/thin_clones.csv"
	[ -n "$cow" ] && bash "$repo/test/pg/cow.sh" stop "$work/cow"
	rm -rf "$work"
}
trap cleanup EXIT
tar -C "$repo" --exclude=.git --exclude=node_modules --exclude='tmp_check*' \
	--exclude='*.o' --exclude='*.so' --exclude='*.bc' -cf - . | tar -C "$work" -xf -
run=("$repo/test/pg/run-in.sh" -b "$work")
"${run[@]}" 18 make -C "$work" -s
"${run[@]}" 18 make -C "$work" -s install
cow=$(bash "$repo/test/pg/cow.sh" start "$work/cow" "$COW_SIZE")
run+=(-b "$cow")
mkdir -p "$work/ext4"
chown -R postgres: "$work"
csv=$work/thin_clones.csv
echo "fs,scale,what,run,value" >"$csv"
chown postgres: "$csv"

for fs in $FILESYSTEMS; do
	case $fs in
	xfs) dir=$cow/cluster ;;
	ext4) dir=$work/ext4/cluster ;;
	*) die "unknown filesystem \"$fs\" in FILESYSTEMS" ;;
	esac
	SCALES=$SCALES RUNS=$RUNS LOAD_SECS=$LOAD_SECS \
		"${run[@]}" -u postgres 18 env SCALES="$SCALES" RUNS="$RUNS" LOAD_SECS="$LOAD_SECS" \
		bash "$work/bench/thin_clones.sh" --inner "$fs" "$dir" "$work/ext4/wal-$fs" "$csv"
	rm -rf "$dir" "$work/ext4/wal-$fs"
done

# medians, and ratios
out=$OUTDIR/thin_clones.txt
cp "$csv" "$OUTDIR/thin_clones.csv"
{
	echo "pgsandbox thin clones, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
	echo "machine: $(nproc) CPUs, kernel $(uname -r); load $(cut -d' ' -f1-3 /proc/loadavg); RUNS=$RUNS, medians"
	python3 - "$csv" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def med(fs, scale, what):
    v = [float(r['value']) for r in rows if r['fs'] == fs and r['scale'] == scale and r['what'] == what]
    return statistics.median(v) if v else None
fss = sorted({r['fs'] for r in rows}, reverse=True)
scales = sorted({r['scale'] for r in rows if r['what'] == 'clone'}, key=int)
for fs in fss:
    print(f"\n{fs}:")
    print(f"  {'scale':>6} {'size MB':>8} {'clone s':>8} {'manual s':>9} {'tmpl wal s':>10} {'tmpl clone s':>12} {'clone/manual':>12} {'clone/tmpl':>10} {'used/copy':>10}")
    for s in scales:
        size = med(fs, s, 'size_bytes')
        c, m, tw, tc = (med(fs, s, w) for w in ('clone', 'manual', 'template_wal_log', 'template_file_clone'))
        u = med(fs, s, 'clone_used_bytes')
        print(f"  {s:>6} {size / 1e6:8.0f} {c:8.3f} {m:9.2f} {tw:10.2f} {tc:12.3f} {c / m:12.4f} {c / tw:10.3f} {100 * u / size:9.2f}%")
    if len(scales) > 1:
        lo, hi = scales[0], scales[-1]
        print(f"  clone at -s {hi} / clone at -s {lo}: {med(fs, hi, 'clone') / med(fs, lo, 'clone'):.2f}")
    for st in ('none', 'auto', 'wal_log'):
        tps = [r for r in rows if r['fs'] == fs and r['what'] == 'load_tps_' + st]
        cpm = [r for r in rows if r['fs'] == fs and r['what'] == 'load_copies_per_min_' + st]
        if tps:
            print(f"  pgbench load, copy_strategy {st}: {float(tps[0]['value']):.0f} tps, {cpm[0]['value']} copies a minute")
    ck = [r for r in rows if r['fs'] == fs and r['what'] == 'checkpoints_for_8_copies']
    if ck:
        print(f"  8 copies asked for at once (4 clone slots): {ck[0]['value']} checkpoints requested (2 per copy if none were shared: 16)")
EOF
} | tee "$out"
