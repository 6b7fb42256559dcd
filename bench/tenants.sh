#!/usr/bin/env bash
#
# tenants.sh: what the per-sandbox resource limits of pgsandbox 0.12 cost,
# what they buy, and what PostgreSQL gives no lever for, on a throwaway
# PostgreSQL 15 cluster (max_connections = 600, shared_preload_libraries =
# 'pgsandbox'), with sandboxes cloned from a small source (SRC_TABLES tables
# of bench/many_tables.sql).  Each part starts from a fresh cluster.
#
#   1. The login check's cost per login, with about IDLE_SANDBOXES x 10
#      other sessions open (each of IDLE_SANDBOXES sandboxes at its default
#      cap of 10 sessions, held idle by pgbench's \sleep).  pgbench -C times
#      LOGINS logins (connection, SELECT 1, disconnection) of:
#        (a) a sandbox role into its database, the checks on (defaults:
#            pgsandbox.max_connections_per_sandbox = 10,
#            pgsandbox.reserved_connections = 10)
#        (b) the same, cap and reserve off (-1 and 0, by a reload): the
#            login check then skips CountUserBackends and HaveNFreeProcs
#        (c) an ordinary role (not a sandbox's) into another database
#      all with scram-sha-256, in ROUNDS rounds, each round in a rotating
#      order.  It prints the median of pgbench's "latency average" (ms per
#      login and its query, connection included), of its "average
#      connection time", and of the server's CPU time per login (the
#      backends' user + system time, which the postmaster collects as it
#      reaps them: the growth of its cutime + cstime in /proc, divided by
#      LOGINS; autovacuum is off in this part, so that no other process
#      ends meanwhile), and the median over rounds of (a) - (b).  The CPU
#      time is the steadier figure on a busy machine: wall-clock times move
#      with whatever else runs, which is why the rounds are many and
#      short: each (a) is paired with the (b) measured seconds before or
#      after it, and the differences are taken round by round.
#   2. The bloat of the shared catalogs pgsandbox churns (pg_authid,
#      pg_database, pg_shdepend) after CYCLES clone+drop cycles of a
#      schema-only sandbox while another sandbox's session holds a
#      transaction open (BEGIN; SELECT txid_current(); then idle), on a
#      fresh cluster each:
#        (a) pgsandbox.max_transaction_age = 0: the session holds the xmin
#            horizon the whole time
#        (b) pgsandbox.max_transaction_age = AGE: the worker ends it
#      Sizes (heap, and with indexes), n_dead_tup (pg_stat_all_tables) and
#      the dead tuples pgstattuple finds in the heap, before the cycles,
#      after them and after a VACUUM of the three catalogs, and what that
#      VACUUM (VERBOSE) removed and could not remove; in (a), once more
#      after the open transaction's ROLLBACK.  Autovacuum is left on, as
#      on a real server.
#   3. What PostgreSQL gives no lever for:
#        (a) one sandbox session's memory: SET work_mem = '4GB' and a hash
#            join of two generate_series of HASH_ROWS rows; the backend's
#            peak RSS (VmHWM of /proc/<pid>/status, read in the still open
#            session before and after the query) and the query's time,
#            with enable_mergejoin = off (the planner would sort both sides
#            instead; any session may set it) and no parallel workers; the
#            same query at the default work_mem for comparison
#            (pgsandbox.sandbox_temp_file_limit bounds its spill only).
#            VmHWM counts the pages of code and shared memory the backend
#            touched too, so RssAnon is also sampled every 50 ms.
#        (b) the shared lock table, at the default max_locks_per_transaction
#            (64): one sandbox transaction locks its own tables (LOCK TABLE,
#            ACCESS EXCLUSIVE, one subtransaction each) until "out of shared
#            memory"; it creates LOCK_TABLES tables first, and if that many
#            are not enough it goes on with advisory locks.  While it holds
#            them: a warm session of another sandbox (another database)
#            selects from 3 of its tables and creates one, and new logins of
#            that sandbox and of the superuser are tried.  The counts come
#            from pg_locks (read in an admin transaction that took its locks
#            before), the errors as the clients saw them, and the "out of
#            shared memory" lines of the server log by backend type.
#
# Run as root on a Debian 12 machine: it installs what it needs, builds and
# installs pgsandbox (unless SKIP_BUILD=1), and runs the server as the
# "postgres" OS user.  The sessions it starts in the background are ended
# on exit, and the cluster is removed (bench/throwaway_cluster.sh).
#
# Settings, from the environment:
#   LOGINS=500  ROUNDS=25  IDLE_SANDBOXES=50  CYCLES=200  AGE=10
#   HASH_ROWS=10000000  LOCK_TABLES=70000  SRC_TABLES=20  TENANTS_PORT=5534
#   SKIP_BUILD=0  PGBIN=/usr/lib/postgresql/15/bin
#   OUTDIR=bench/out (tenants.txt goes there)
#
set -Eeuo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
LOGINS=${LOGINS:-500}
ROUNDS=${ROUNDS:-25}
IDLE_SANDBOXES=${IDLE_SANDBOXES:-50}
CYCLES=${CYCLES:-200}
AGE=${AGE:-10}
HASH_ROWS=${HASH_ROWS:-10000000}
LOCK_TABLES=${LOCK_TABLES:-70000}
SRC_TABLES=${SRC_TABLES:-20}
TENANTS_PORT=${TENANTS_PORT:-5534}
SKIP_BUILD=${SKIP_BUILD:-0}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
OUTDIR=${OUTDIR:-$repo/bench/out}

die() {
	echo "tenants.sh: $*" >&2
	exit 1
}
for v in LOGINS ROUNDS IDLE_SANDBOXES CYCLES AGE HASH_ROWS LOCK_TABLES SRC_TABLES TENANTS_PORT; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, not \"${!v}\""
done
[ "$IDLE_SANDBOXES" -le 55 ] || die "IDLE_SANDBOXES x 10 sessions must fit in max_connections = 600"
trap 'echo "tenants.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR

CLUSTER_NAME=tenants
CLUSTER_PORT=$TENANTS_PORT
. "$repo/bench/throwaway_cluster.sh"
out=$OUTDIR/tenants.txt

# --- background clients --------------------------------------------------------

# Clients run in the background as the cluster's user, each started so that
# $! is the process to signal (runuser passes a SIGTERM on to its child);
# all are ended on exit, before the cluster is stopped.
bg_pids=()
declare -A sess_fd sess_pid
bg() {
	local stdin=$1 stdout=$2
	shift 2
	local cmd=(env PGHOST="$sock" PGPORT="$CLUSTER_PORT" PGUSER=postgres
			   PGDATABASE=postgres PGAPPNAME=pgsandbox-bench PATH="$PGBIN:$PATH" "$@")
	[ "$(id -u)" != 0 ] || cmd=(runuser -u postgres -- "${cmd[@]}")
	# without the write ends of the sessions' FIFOs, so that closing one
	# ends its session; exec keeps $! the process to signal
	(
		for fd in "${sess_fd[@]}"; do exec {fd}>&-; done
		exec "${cmd[@]}"
	) <"$stdin" >"$stdout" 2>&1 &
	bg_pid=$!
	bg_pids+=("$bg_pid")
}
bg_stop() {
	local p
	for p in "$@"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "$@"; do
		wait "$p" 2>/dev/null || true
	done
}
tenants_cleanup() {
	local rc=$?
	trap - ERR
	set +e
	bg_stop "${bg_pids[@]}"
	return $rc
}
trap 'tenants_cleanup; cluster_cleanup' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A session fed through a FIFO, for the steps that need one connection kept
# open between commands: session_open NAME PSQL_ARGS..., then session_run
# NAME SQL prints what SQL printed (stdout and stderr) once it is done.
session_open() {
	local name=$1 fifo=$tmp/session-$1.in fd
	shift
	mkfifo "$fifo"
	[ "$(id -u)" != 0 ] || chown postgres: "$fifo"
	: >"$tmp/session-$name.out"
	bg "$fifo" "$tmp/session-$name.out" psql -X -A -t -v ON_ERROR_STOP=0 "$@"
	sess_pid[$name]=$bg_pid
	exec {fd}>"$fifo"
	sess_fd[$name]=$fd
}
session_run() {
	local name=$1 sql=$2 timeout=${3:-1200} mark start file=$tmp/session-$1.out i
	kill -0 "${sess_pid[$name]}" 2>/dev/null || { echo "(session $name has ended)"; return 1; }
	# unique without a counter: session_run often runs in a $(...) subshell
	mark="@@$name-$(date +%s%N)-$RANDOM@@"
	start=$(wc -l <"$file")
	printf '%s\n\\echo %s\n' "$sql" "$mark" >&"${sess_fd[$name]}"
	for ((i = 0; i < timeout * 10; i++)); do
		if grep -qxF "$mark" "$file"; then
			tail -n +$((start + 1)) "$file" | grep -vxF "$mark" || true
			return 0
		fi
		kill -0 "${sess_pid[$name]}" 2>/dev/null || break
		sleep 0.1
	done
	tail -n +$((start + 1)) "$file"
	echo "(session $name: no answer)"
	return 1
}
session_close() {
	local name=$1 fd=${sess_fd[$1]}
	exec {fd}>&-
	unset "sess_fd[$name]"
	wait "${sess_pid[$name]}" 2>/dev/null || true
}

# --- helpers --------------------------------------------------------------------

say() {
	printf '%s\n' "$*" | tee -a "$out"
}
median() {
	printf '%s\n' "$@" | sort -g |
		awk '{ v[NR] = $1 } END { if (NR % 2) printf "%.3f", v[(NR + 1) / 2]; else printf "%.3f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# quartile K (1 or 3) of the values that follow, by linear interpolation
quartile() {
	local k=$1
	shift
	printf '%s\n' "$@" | sort -g |
		awk -v k="$k" '{ v[NR] = $1 } END { p = 1 + (NR - 1) * k / 4; i = int(p); f = p - i;
			printf "%.3f", (i < NR) ? v[i] + f * (v[i + 1] - v[i]) : v[i] }'
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
kb() { awk -v b="$1" 'BEGIN { printf "%d", b / 1024 }'; }
mb() { awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }'; }

# A fresh cluster, postgresql.conf lines from stdin, and the source "src"
fresh_cluster() {
	if [ -d "$data" ]; then
		as_pg pg_ctl -D "$data" -m fast -w -t 120 stop >/dev/null
		rm -rf "$data"
	fi
	{
		echo "max_connections = 600"
		echo "pgsandbox.max_sandboxes = 500"
		echo "pgsandbox.max_sandboxes_per_owner = 500"
		echo "log_line_prefix = '%m [%p] %b '"
		cat
	} >"$tmp/conf"
	cluster_start <"$tmp/conf"
	cluster_so+=("$(so_stamp)")
	q "CREATE EXTENSION pgstattuple" >/dev/null
	q "CREATE DATABASE src" >/dev/null
	as_pg psql -X -q -d src -v ntables="$SRC_TABLES" -v with_ext=0 -f - <"$repo/bench/many_tables.sql" >/dev/null
	q "SELECT pgsandbox.add_source('src', 'dbname=src', allow_data => true)" >/dev/null
}
# clone a sandbox of src with its data: its name and conninfo into the
# variables named $1 and $2
clone_data() {
	local r
	r=$(q "SELECT name || ' ' || conninfo FROM pgsandbox.clone('src', schema_only => false)") || r=
	[ -n "$r" ] || die "clone() failed"
	printf -v "$1" '%s' "${r%% *}"
	printf -v "$2" '%s' "${r#* }"
}
# client backends of sandbox roles
sandbox_sessions() {
	q "SELECT count(*) FROM pg_stat_activity a JOIN pg_auth_members m ON m.member = a.usesysid
	    WHERE m.roleid = 'pgsandbox_sandbox'::regrole AND a.backend_type = 'client backend'"
}
log_size() { stat -c %s "$tmp/server.log"; }

: >"$out"
commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
say "pgsandbox tenant limits benchmark, $(date -u '+%Y-%m-%d %H:%M UTC')"
say "machine:    $(nproc) CPUs, $(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo) memory, load $(cut -d' ' -f1-3 /proc/loadavg)"
say "pgsandbox:  commit $commit; LOGINS=$LOGINS ROUNDS=$ROUNDS IDLE_SANDBOXES=$IDLE_SANDBOXES CYCLES=$CYCLES AGE=$AGE"
say "            HASH_ROWS=$HASH_ROWS LOCK_TABLES=$LOCK_TABLES SRC_TABLES=$SRC_TABLES"
so=$("$PGBIN/pg_config" --pkglibdir)/pgsandbox.so
so_stamp() { echo "$(md5sum <"$so" | cut -c1-12), installed $(date -u -r "$so" '+%Y-%m-%d %H:%M:%S UTC')"; }
so_start=$(so_stamp)
cluster_so=()
say "            $so: $so_start"

# --- 1. the login check's cost --------------------------------------------------

fresh_cluster <<<"autovacuum = off"
say "postgres:   $(q 'SELECT version()')"
pm_pid=$(head -n 1 "$data/postmaster.pid")
hz=$(getconf CLK_TCK)
# CPU time of the postmaster's reaped children, in clock ticks
children_ticks() { awk '{ print $16 + $17 }' "/proc/$pm_pid/stat"; }
say ""
say "1. the login check's cost per login, with $IDLE_SANDBOXES sandboxes x 10 idle sessions open"
q "SELECT pgsandbox.snapshot('src', schema_only => false)" >/dev/null
# (a \sleep of more than about 2000 s makes pgbench 15 spin: its wait in
# microseconds overflows an int)
printf '\\sleep 600 s\n' >"$tmp/idle.sql"
printf 'SELECT 1;\n' >"$tmp/select1.sql"
[ "$(id -u)" != 0 ] || chown postgres: "$tmp/idle.sql" "$tmp/select1.sql"
idle_pids=()
first_idle=
for i in $(seq 1 "$IDLE_SANDBOXES"); do
	clone_data name ci
	[ -n "$first_idle" ] || first_idle=$ci
	bg /dev/null "$tmp/idle-$i.log" pgbench -n -c 10 -j 1 -T 7200 -f "$tmp/idle.sql" "$ci"
	idle_pids+=("$bg_pid")
done
want=$((IDLE_SANDBOXES * 10))
for _ in $(seq 1 600); do
	[ "$(sandbox_sessions)" -ge "$want" ] && break
	sleep 0.2
done
[ "$(sandbox_sessions)" -ge "$want" ] || die "only $(sandbox_sessions) of $want idle sandbox sessions opened"
clone_data timed_name timed_ci
q "CREATE ROLE bench_ref LOGIN PASSWORD 'bench_ref_password'" >/dev/null
q "CREATE DATABASE refdb OWNER bench_ref" >/dev/null
ref_ci="host=$sock port=$CLUSTER_PORT dbname=refdb user=bench_ref password=bench_ref_password"
[ "$(q "SELECT rolpassword LIKE 'SCRAM-SHA-256\$%' FROM pg_authid WHERE rolname IN ('bench_ref', '$timed_name')" | sort -u)" = t ] ||
	die "the reference role and the sandbox role do not both have SCRAM passwords"
sessions_open=$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'")
say "  sessions open: $sessions_open client backends ($(sandbox_sessions) of sandbox roles), max_connections = 600"
say "  timed: sandbox $timed_name (no other session of its own); reference: role bench_ref into refdb"

# checks on (defaults) or off (no cap, no reserve); waits until a new
# backend sees the setting
checks() {
	local want
	if [ "$1" = on ]; then
		q "ALTER SYSTEM RESET pgsandbox.max_connections_per_sandbox" >/dev/null
		q "ALTER SYSTEM RESET pgsandbox.reserved_connections" >/dev/null
		want='10 10'
	else
		q "ALTER SYSTEM SET pgsandbox.max_connections_per_sandbox = -1" >/dev/null
		q "ALTER SYSTEM SET pgsandbox.reserved_connections = 0" >/dev/null
		want='-1 0'
	fi
	q "SELECT pg_reload_conf()" >/dev/null
	for _ in $(seq 1 100); do
		[ "$(q "SELECT current_setting('pgsandbox.max_connections_per_sandbox') || ' ' || current_setting('pgsandbox.reserved_connections')")" = "$want" ] && return 0
		sleep 0.1
	done
	die "the reload did not take"
}

# the checks are on: one more session of a full idle sandbox is refused
checks on
if refusal=$(as_pg psql -X -A -t -c 'SELECT 1' "$first_idle" 2>&1); then
	die "an 11th session of a sandbox was let in with the checks on"
fi
say "  check on:  an 11th session of an idle sandbox: $(printf '%s\n' "$refusal" | grep -m1 FATAL | sed 's/^.*FATAL: *//')"
checks off
if as_pg psql -X -A -t -c 'SELECT 1' "$first_idle" >/dev/null 2>&1; then
	say "  check off: an 11th session of an idle sandbox is let in"
else
	die "an 11th session of a sandbox was refused with the checks off"
fi

declare -A lat con cpu
run_logins() {
	local mode=$1 r=$2 ci f=$tmp/pgbench-$1-$2.log n c0 c1
	case $mode in
		a) checks on; ci=$timed_ci ;;
		b) checks off; ci=$timed_ci ;;
		c) checks on; ci=$ref_ci ;;
	esac
	sleep 0.3 # the backends of the checks above are reaped
	c0=$(children_ticks)
	as_pg pgbench -n -C -c 1 -j 1 -t "$LOGINS" -f "$tmp/select1.sql" "$ci" >"$f" 2>&1 ||
		die "pgbench ($mode, round $r) failed: $(tail -n 5 "$f")"
	sleep 0.3 # and the last of pgbench's
	c1=$(children_ticks)
	cpu[$mode/$r]=$(awk -v t=$((c1 - c0)) -v hz="$hz" -v n="$LOGINS" 'BEGIN { printf "%.3f", t * 1000 / hz / n }')
	n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$f")
	[ "$n" = "$LOGINS" ] || die "pgbench ($mode, round $r) did $n of $LOGINS logins: $(tail -n 5 "$f")"
	lat[$mode/$r]=$(sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p' "$f")
	con[$mode/$r]=$(sed -n 's/^average connection time = \([0-9.]*\) ms.*/\1/p' "$f")
}
modes=(a b c)
for r in $(seq 1 "$ROUNDS"); do
	for i in 0 1 2; do
		run_logins "${modes[$(((i + r) % 3))]}" "$r"
	done
	echo "  round $r: latency a ${lat[a/$r]} b ${lat[b/$r]} c ${lat[c/$r]}; connection a ${con[a/$r]} b ${con[b/$r]} c ${con[c/$r]}; server CPU a ${cpu[a/$r]} b ${cpu[b/$r]} c ${cpu[c/$r]} ms" >&2
done
checks on
[ "$(sandbox_sessions)" -ge "$want" ] || die "idle sessions were lost during the timing"
declare -A mode_label=([a]="(a) sandbox, checks on" [b]="(b) sandbox, cap and reserve off" [c]="(c) ordinary role, other db")
say "  $LOGINS logins each, $ROUNDS rounds; ms per login, median over rounds [quartiles]"
say "  mode                               pgbench latency            connection time            server CPU"
declare -A lat_med con_med cpu_med
# "median [q1, q3]" of the values of $1 for mode $2
spread() {
	local -n from=$1
	local r vals=()
	for r in $(seq 1 "$ROUNDS"); do vals+=("${from[$2/$r]}"); done
	printf '%s [%s, %s]' "$(median "${vals[@]}")" "$(quartile 1 "${vals[@]}")" "$(quartile 3 "${vals[@]}")"
}
for m in "${modes[@]}"; do
	lat_med[$m]=$(spread lat "$m")
	con_med[$m]=$(spread con "$m")
	cpu_med[$m]=$(spread cpu "$m")
	say "$(printf '  %-34s %-26s %-26s %s' "${mode_label[$m]}" "${lat_med[$m]}" "${con_med[$m]}" "${cpu_med[$m]}")"
done
# per round differences: the two were measured one right after the other
declare -A dif
for r in $(seq 1 "$ROUNDS"); do
	for k in lat con cpu; do
		declare -n v=$k
		dif[$k-ab/$r]=$(awk -v a="${v[a/$r]}" -v b="${v[b/$r]}" 'BEGIN { printf "%.3f", a - b }')
		dif[$k-ac/$r]=$(awk -v a="${v[a/$r]}" -v b="${v[c/$r]}" 'BEGIN { printf "%.3f", a - b }')
		unset -n v
	done
done
d_lat=$(spread dif lat-ab)
d_con=$(spread dif con-ab)
d_cpu=$(spread dif cpu-ab)
d_ac=$(spread dif lat-ac)
d_ac_con=$(spread dif con-ac)
d_ac_cpu=$(spread dif cpu-ac)
say "$(printf '  %-34s %-26s %-26s %s' "(a) - (b), round by round" "$d_lat" "$d_con" "$d_cpu")"
say "$(printf '  %-34s %-26s %-26s %s' "(a) - (c), round by round" "$d_ac" "$d_ac_con" "$d_ac_cpu")"
say "  (the CPU figures count whole clock ticks of 1/$hz s: $(awk -v hz="$hz" -v n="$LOGINS" 'BEGIN { printf "%.3f", 1000 / hz / n }') ms per login)"
bg_stop "${idle_pids[@]}"

# --- 2. shared catalog bloat ------------------------------------------------------

declare -A cat_stat vac_removed vac_kept vac_cutoff holder_fate cycle_secs
catalogs=(pg_authid pg_database pg_shdepend)
# heap bytes, total bytes, n_dead_tup (the cumulative statistics) and the
# dead tuples pgstattuple counts in the heap, of each catalog, into
# cat_stat[case/stage/catalog]
catalog_stats() {
	local key=$1 rel heap total dead deadp
	sleep 3 # the statistics of the last cycles are flushed within a few seconds, mostly
	while IFS='|' read -r rel heap total dead deadp; do
		cat_stat[$key/$rel]="$heap $total $dead $deadp"
	done < <(q "SELECT c.relname, pg_relation_size(c.oid), pg_total_relation_size(c.oid), s.n_dead_tup, p.dead_tuple_count
	              FROM pg_class c JOIN pg_stat_all_tables s ON s.relid = c.oid
	                   CROSS JOIN LATERAL pgstattuple(c.oid::regclass) p
	             WHERE c.oid IN ('pg_catalog.pg_authid'::regclass, 'pg_catalog.pg_database'::regclass,
	                             'pg_catalog.pg_shdepend'::regclass)")
}
vacuum_catalogs() {
	local key=$1 rel v
	for rel in "${catalogs[@]}"; do
		v=$(as_pg psql -X -q -c "VACUUM (VERBOSE) pg_catalog.$rel" 2>&1)
		vac_removed[$key/$rel]=$(printf '%s\n' "$v" | sed -n 's/^tuples: \([0-9]*\) removed.*/\1/p' | head -n 1)
		vac_kept[$key/$rel]=$(printf '%s\n' "$v" | sed -n 's/^tuples: .*, \([0-9]*\) are dead but not yet removable.*/\1/p' | head -n 1)
		vac_cutoff[$key/$rel]=$(printf '%s\n' "$v" | sed -n 's/^removable cutoff: [0-9]*, which was \([0-9]*\) XIDs old.*/\1/p' | head -n 1)
	done
}

for case in a b; do
	if [ $case = a ]; then age=0; else age=$AGE; fi
	fresh_cluster <<-EOF
	pgsandbox.max_transaction_age = $age
	EOF
	say ""
	say "2$case. $CYCLES clone+drop cycles of a schema-only sandbox, a transaction held open in another, pgsandbox.max_transaction_age = $age"
	clone_data hname hci
	session_open "holder$case" "$hci"
	hpid=$(session_run "holder$case" "SELECT pg_backend_pid();")
	session_run "holder$case" "BEGIN; SELECT txid_current();" >/dev/null
	hstart=$(q "SELECT xact_start FROM pg_stat_activity WHERE pid = $hpid")
	[ -n "$hstart" ] || die "the holding session is not in a transaction"
	catalog_stats "$case/before"
	t0=$(now)
	for i in $(seq 1 "$CYCLES"); do
		n=$(q "SELECT name FROM pgsandbox.clone('src')")
		q "SELECT pgsandbox.drop('$n')" >/dev/null
	done
	cycle_secs[$case]=$(since "$t0")
	alive=$(q "SELECT count(*) FROM pg_stat_activity WHERE pid = $hpid")
	if [ "$alive" = 1 ]; then
		holder_fate[$case]="still open after $(q "SELECT round(extract(epoch FROM now() - xact_start)) FROM pg_stat_activity WHERE pid = $hpid") s"
	else
		ended=$(q "SELECT round(extract(epoch FROM at - '$hstart'::timestamptz)::numeric, 1) FROM pgsandbox.events
		            WHERE sandbox = '$hname' AND action = 'session_ended' ORDER BY at DESC LIMIT 1")
		holder_fate[$case]="ended by the worker after ${ended:-?} s"
	fi
	say "  cycles took ${cycle_secs[$case]} s; the holding transaction (session of $hname): ${holder_fate[$case]}"
	catalog_stats "$case/cycles"
	vacuum_catalogs "$case/vacuum"
	catalog_stats "$case/vacuum"
	if [ "$alive" = 1 ]; then
		# and once it is gone
		session_run "holder$case" "ROLLBACK;" >/dev/null
		vacuum_catalogs "$case/vacuum2"
		catalog_stats "$case/vacuum2"
	fi
	session_close "holder$case"
	say "  catalog      stage                heap kB  total kB  n_dead_tup  dead (pgstattuple)"
	for rel in "${catalogs[@]}"; do
		stages=(before cycles vacuum)
		[ "$alive" = 0 ] || stages+=(vacuum2)
		for st in "${stages[@]}"; do
			read -r h t d dp <<<"${cat_stat[$case/$st/$rel]}"
			case $st in
				before) label="before the cycles"; extra= ;;
				cycles) label="after the cycles"; extra= ;;
				vacuum) label="after VACUUM"
					extra="  VACUUM: ${vac_removed[$case/$st/$rel]} removed, ${vac_kept[$case/$st/$rel]} dead but not yet removable, cutoff ${vac_cutoff[$case/$st/$rel]} XIDs old" ;;
				vacuum2) label="ROLLBACK, VACUUM"
					extra="  VACUUM: ${vac_removed[$case/$st/$rel]} removed, ${vac_kept[$case/$st/$rel]} dead but not yet removable" ;;
			esac
			say "$(printf '  %-12s %-18s %9s %9s %11s %19s%s' "$([ $st = before ] && echo "$rel")" "$label" \
				"$(kb "$h")" "$(kb "$t")" "$d" "$dp" "$extra")"
		done
	done
	[ "$alive" = 0 ] || say "  (ROLLBACK, VACUUM: the holding transaction rolled back, then the catalogs vacuumed again)"
	say "  autovacuum runs on them: $(q "SELECT string_agg(relname || ' ' || autovacuum_count, ', ' ORDER BY relname) FROM pg_stat_all_tables
	                                     WHERE relid IN ('pg_catalog.pg_authid'::regclass, 'pg_catalog.pg_database'::regclass, 'pg_catalog.pg_shdepend'::regclass)")"
done

# --- 3. no lever: memory and the lock table ------------------------------------------

fresh_cluster </dev/null
say ""
say "3a. one sandbox session's memory: a hash join of two generate_series of $HASH_ROWS rows"
clone_data mname mci
hash_sql="EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF)
SELECT count(*) FROM generate_series(1, $HASH_ROWS) a(k) JOIN generate_series(1, $HASH_ROWS) b(k) USING (k);"
declare -A hwm0 hwm1 anon_peak xtime hashline tempw herr
status_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
for wm in default 4GB; do
	session_open "mem$wm" "$mci"
	pid=$(session_run "mem$wm" "SELECT pg_backend_pid();")
	# one process; and a hash join, where the planner would sort both sides
	session_run "mem$wm" "SET max_parallel_workers_per_gather = 0; SET enable_mergejoin = off;" >/dev/null
	[ $wm = default ] || session_run "mem$wm" "SET work_mem = '$wm';" >/dev/null
	# the same query on 1000 rows first: the code and caches it needs are in before
	session_run "mem$wm" "${hash_sql//$HASH_ROWS/1000}" >/dev/null
	hwm0[$wm]=$(status_kb "$pid" VmHWM)
	session_run "mem$wm" "$hash_sql" >"$tmp/hash-$wm.txt" &
	runner=$!
	peak=0
	while kill -0 "$runner" 2>/dev/null; do
		a=$(status_kb "$pid" RssAnon 2>/dev/null || true)
		[ "${a:-0}" -le "$peak" ] || peak=$a
		sleep 0.05
	done
	wait "$runner" || die "the hash join did not finish: $(tail -n 5 "$tmp/hash-$wm.txt")"
	anon_peak[$wm]=$peak
	hwm1[$wm]=$(status_kb "$pid" VmHWM)
	rss_after=$(awk '$1 ~ /^Rss(Anon|File|Shmem):$/ { printf "%s%s %.0f", sep, substr($1, 4, length($1) - 4), $2 / 1024; sep = ", " }' "/proc/$pid/status")
	res=$(cat "$tmp/hash-$wm.txt")
	printf '%s\n' "$res" >"$OUTDIR/tenants-plan-$wm.txt"
	xtime[$wm]=$(printf '%s\n' "$res" | sed -n 's/^Execution Time: \([0-9.]*\) ms/\1/p')
	hashline[$wm]=$(printf '%s\n' "$res" | grep -m1 'Buckets:' | sed 's/^ *//' || true)
	tempw[$wm]=$(printf '%s\n' "$res" | grep -o 'temp read=[0-9]* written=[0-9]*' | head -n 1 || true)
	herr[$wm]=$(printf '%s\n' "$res" | grep -m1 'ERROR' || true)
	session_close "mem$wm"
	say "  work_mem $(q "SELECT CASE WHEN '$wm' = 'default' THEN current_setting('work_mem') || ' (default)' ELSE '$wm' END"), the role's settings $(q "SELECT rolconfig::text FROM pg_roles WHERE rolname = '$mname'"):"
	if [ -n "${herr[$wm]}" ]; then
		say "    the query failed: ${herr[$wm]}"
	else
		say "    $(awk -v t="${xtime[$wm]}" 'BEGIN { printf "%.1f", t / 1000 }') s; hash: ${hashline[$wm]}; ${tempw[$wm]:-no temp files} (8 kB blocks)"
	fi
	say "    backend VmHWM before the query $(mb "${hwm0[$wm]}") MB, after $(mb "${hwm1[$wm]}") MB (+$(mb $((${hwm1[$wm]} - ${hwm0[$wm]}))) MB); peak RssAnon sampled every 50 ms: $(mb "${anon_peak[$wm]}") MB; after, in MB: $rss_after"
done

say ""
say "3b. one sandbox transaction locking its own tables, max_locks_per_transaction = $(q 'SHOW max_locks_per_transaction')"
nominal=$(q "SELECT current_setting('max_locks_per_transaction')::int *
                    (current_setting('max_connections')::int + current_setting('autovacuum_max_workers')::int + 1 +
                     current_setting('max_worker_processes')::int + current_setting('max_wal_senders')::int +
                     current_setting('max_prepared_transactions')::int)")
say "  nominal size of the lock table: $nominal (max_locks_per_transaction x (max_connections + autovacuum_max_workers + 1 + max_worker_processes + max_wal_senders + max_prepared_transactions)); shared memory left over lets it grow past that"
clone_data lname lci
clone_data vname vci
t0=$(now)
for ((s = 1; s <= LOCK_TABLES; s += 1000)); do
	e=$((s + 999 > LOCK_TABLES ? LOCK_TABLES : s + 999))
	as_pg psql -X -q -v ON_ERROR_STOP=1 -c "DO \$\$BEGIN FOR i IN $s..$e LOOP EXECUTE format('CREATE TABLE lk_%s (id int)', i); END LOOP; END\$\$" "$lci"
done
say "  $LOCK_TABLES tables made in sandbox $lname in $(since "$t0") s"
as_pg psql -X -q -v ON_ERROR_STOP=1 -c "CREATE TABLE c1 (id int PRIMARY KEY); CREATE TABLE c2 (id int PRIMARY KEY); CREATE TABLE c3 (id int PRIMARY KEY);
	INSERT INTO c1 VALUES (1); INSERT INTO c2 VALUES (1); INSERT INTO c3 VALUES (1)" "$vci"
few_sql="SELECT count(*) FROM c1 JOIN c2 USING (id) JOIN c3 USING (id);"
session_open holder "$lci"
session_open victim "$vci"
session_open admin -d postgres
lpid=$(session_run holder "SELECT pg_backend_pid();")
vpid=$(session_run victim "SELECT pg_backend_pid();")
session_run victim "$few_sql" >/dev/null # warm: only its locks are missing below
locks_sql="SELECT count(*) FILTER (WHERE pid = $lpid) || ' ' ||
       count(*) FILTER (WHERE pid = $lpid AND locktype = 'relation' AND mode = 'AccessExclusiveLock') || ' ' ||
       count(*) FILTER (WHERE pid = $lpid AND locktype = 'advisory') || ' ' ||
       count(*) FILTER (WHERE pid = $lpid AND fastpath) || ' ' || count(*) FROM pg_locks;"
# the admin's transaction holds what its query locks, so that it can look again later
session_run admin "BEGIN;" >/dev/null
session_run admin "$locks_sql" >/dev/null
log0=$(log_size)
t0=$(now)
fill=$(session_run holder "BEGIN;
DO \$\$
DECLARE
	n int := 0;
	a int := 0;
	msg text;
	hint text;
BEGIN
	FOR i IN 1..$LOCK_TABLES LOOP
		BEGIN
			EXECUTE format('LOCK TABLE lk_%s', i);
			n := i;
		EXCEPTION WHEN out_of_memory THEN
			GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT;
			RAISE NOTICE 'FILL tables=% advisory=0 error=% hint=%', n, msg, hint;
			RETURN;
		END;
	END LOOP;
	LOOP
		BEGIN
			PERFORM pg_advisory_xact_lock(a + 1);
			a := a + 1;
		EXCEPTION WHEN out_of_memory THEN
			GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT;
			RAISE NOTICE 'FILL tables=% advisory=% error=% hint=%', n, a, msg, hint;
			RETURN;
		END;
	END LOOP;
END
\$\$;")
fill_secs=$(since "$t0")
fill_line=$(printf '%s\n' "$fill" | grep -m1 'FILL tables=' | sed 's/^.*FILL //') ||
	die "the holding transaction did not fill the lock table: $(tail -n 20 "$tmp/session-holder.out")"
held_tables=$(printf '%s\n' "$fill_line" | sed -n 's/^tables=\([0-9]*\) .*/\1/p')
held_advisory=$(printf '%s\n' "$fill_line" | sed -n 's/^.* advisory=\([0-9]*\) .*/\1/p')
fill_error=$(printf '%s\n' "$fill_line" | sed -n 's/^.* error=\(.*\) hint=.*/\1/p')
fill_hint=$(printf '%s\n' "$fill_line" | sed -n 's/^.* hint=\(.*\)$/\1/p')
read -r pl_all pl_ae pl_adv pl_fast pl_total < <(session_run admin "$locks_sql" | tail -n 1) || true
say "  the holder ($lname) locked $held_tables of its tables and $held_advisory advisory locks in $fill_secs s, then: \"$fill_error\" (hint: \"$fill_hint\")"
say "  pg_locks while it holds them: ${pl_all:-?} locks of the holder (${pl_ae:-?} AccessExclusive on relations, ${pl_adv:-?} advisory, ${pl_fast:-?} fast-path), ${pl_total:-?} in all"
declare -A victim_saw
first_error() {
	printf '%s\n' "$1" | grep -m1 -E 'ERROR|FATAL|server closed|could not' | sed -e 's/^psql:[^ ]* //' -e 's/^.* failed: //' ||
		printf '%s\n' "$1" | tail -n 1
}
r=$(session_run victim "$few_sql" 2>&1 || true)
victim_saw[select]=$(first_error "$r")
r=$(session_run victim "CREATE TABLE c4 (id int);" 2>&1 || true)
victim_saw[create]=$(first_error "$r")
r=$(as_pg psql -X -A -t -c "$few_sql" "$vci" 2>&1 || true)
victim_saw[login]=$(first_error "$r")
r=$(as_pg psql -X -A -t -c "SELECT 1" 2>&1 || true)
victim_saw[superuser]=$(first_error "$r")
say "  meanwhile, sandbox $vname (database $vname):"
say "    its open, warm session, SELECT from 3 of its tables:  ${victim_saw[select]}"
say "    the same session, CREATE TABLE:                      ${victim_saw[create]}"
say "    a new login of it, the same SELECT:                  ${victim_saw[login]}"
say "    a new superuser login into postgres, SELECT 1:       ${victim_saw[superuser]}"
session_run holder "ROLLBACK;" >/dev/null
r=$(session_run victim "$few_sql" 2>&1 || true)
victim_saw[after]=$(printf '%s\n' "$r" | tail -n 1)
say "  after the holder's ROLLBACK, the victim's SELECT returns: ${victim_saw[after]}"
session_run admin "COMMIT;" >/dev/null
session_close holder
session_close victim
session_close admin
sleep 1
say "  \"out of shared memory\" lines in the server log meanwhile, by backend type:"
tail -c +$((log0 + 1)) "$tmp/server.log" | grep 'out of shared memory' |
	sed -E 's/^.*\] (.*) (ERROR|FATAL|WARNING|LOG|PANIC): .*$/\1 \2/' | sort | uniq -c |
	while read -r cnt what; do say "    $cnt  $what"; done
oosm_lines=$(tail -c +$((log0 + 1)) "$tmp/server.log" | grep -c 'out of shared memory' || true)

# --- summary ----------------------------------------------------------------------------

say ""
say "=== summary ==="
say "1. login cost, $sessions_open sessions open, $LOGINS logins x $ROUNDS rounds; ms per login, median over rounds [quartiles]"
say "   mode                               pgbench latency            connection time            server CPU"
for m in "${modes[@]}"; do
	say "$(printf '   %-34s %-26s %-26s %s' "${mode_label[$m]}" "${lat_med[$m]}" "${con_med[$m]}" "${cpu_med[$m]}")"
done
say "$(printf '   %-34s %-26s %-26s %s' "(a) - (b): the checks' cost" "$d_lat" "$d_con" "$d_cpu")"
say "$(printf '   %-34s %-26s %-26s %s' "(a) - (c)" "$d_ac" "$d_ac_con" "$d_ac_cpu")"
say "2. shared catalogs after $CYCLES clone+drop cycles (heap kB before -> after the cycles -> after VACUUM; total kB, n_dead_tup and"
say "   pgstattuple's dead tuples after the cycles -> after VACUUM)"
for case in a b; do
	if [ $case = a ]; then label="(a) max_transaction_age = 0"; else label="(b) max_transaction_age = $AGE"; fi
	say "   $label: holder ${holder_fate[$case]}; cycles ${cycle_secs[$case]} s"
	for rel in "${catalogs[@]}"; do
		read -r h0 _ _ _ <<<"${cat_stat[$case/before/$rel]}"
		read -r h1 t1 d1 dp1 <<<"${cat_stat[$case/cycles/$rel]}"
		read -r h2 t2 d2 dp2 <<<"${cat_stat[$case/vacuum/$rel]}"
		say "$(printf '     %-12s heap %5s -> %5s -> %5s kB  total %5s -> %5s kB  n_dead_tup %5s -> %5s  dead %5s -> %5s  (VACUUM removed %s)' \
			"$rel" "$(kb "$h0")" "$(kb "$h1")" "$(kb "$h2")" "$(kb "$t1")" "$(kb "$t2")" "$d1" "$d2" "$dp1" "$dp2" \
			"${vac_removed[$case/vacuum/$rel]}")"
	done
done
say "3a. one session's hash join of 2 x $HASH_ROWS rows: peak RSS (VmHWM; and sampled RssAnon) and time"
for wm in default 4GB; do
	if [ -n "${herr[$wm]}" ]; then res="failed: ${herr[$wm]}"; else res="$(awk -v t="${xtime[$wm]}" 'BEGIN { printf "%.1f s", t / 1000 }')"; fi
	say "$(printf '     work_mem %-8s VmHWM %6s MB (+%s MB over the warmed session), RssAnon peak %s MB  %s' "$wm" "$(mb "${hwm1[$wm]}")" \
		"$(mb $((${hwm1[$wm]} - ${hwm0[$wm]})))" "$(mb "${anon_peak[$wm]}")" "$res")"
done
say "3b. one sandbox transaction held $held_tables table locks + $held_advisory advisory (pg_locks: ${pl_all:-?} of its own, nominal table $nominal) until \"$fill_error\""
say "     another sandbox's warm SELECT of 3 tables:  ${victim_saw[select]}"
say "     its CREATE TABLE:                           ${victim_saw[create]}"
say "     its new login:                              ${victim_saw[login]}"
say "     a new superuser login:                      ${victim_saw[superuser]}"
say "     \"out of shared memory\" lines in the server log meanwhile: $oosm_lines"
say ""
say "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$(printf '%s\n' "$so_start" "${cluster_so[@]}" "$(so_stamp)" | sort -u | wc -l)" != 1 ]; then
	say "NOTE: $so changed during the run; the clusters of parts 1, 2a, 2b and 3 started with:"
	for st in "${cluster_so[@]}"; do say "      $st"; done
	say "      and it is now $(so_stamp)"
fi
