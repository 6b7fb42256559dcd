#!/usr/bin/env bash
#
# keys.sh: what declared relationships and key masks cost, side by side in
# one run on a throwaway PostgreSQL 15 cluster.  See bench/README.md.
#
# Relationships.  pgbench -s SCALE twice: "fk" made with --foreign-keys,
# "rel" without, its five keys declared with relate() instead.  Each source
# keeps 1% of pgbench_accounts (subset, by a hash of the key): the branches
# of the kept accounts come up, the tellers and history rows that refer to
# them go down.  Steps, RUNS rounds in a rotating order:
#   fk        clone('fk', schema_only => false): the reduced clone along
#             foreign keys
#   rel       clone('rel', schema_only => false): the same, along
#             relationships
#   manual    createdb, then pg_dump -Fc | pg_restore of the whole source
#   template  CREATE DATABASE ... TEMPLATE <source>
#
# Key masks.  A source "km": parents(id int primary key, name) of PARENTS
# rows, and three tables of CHILD_ROWS rows each whose parent_id refers to
# it by a foreign key.  Steps, RUNS rounds in a rotating order:
#   unmasked  clone('km_plain', schema_only => false): a mask on
#             parents.name only, so the clone takes the masked path, and
#             the three tables go through pg_dump as they are
#   keymask   clone('km_key', ...): the same mask, and mask_key() on
#             parents.id (the default: a keyed Feistel permutation), so that
#             parents.id and the three parent_id columns are read through
#             it by the reader's COPY
#   nomask    clone('km_none', ...): no rule at all
#   manual    createdb, then pg_dump -Fc | pg_restore
#   template  CREATE DATABASE ... TEMPLATE km
# each after a CHECKPOINT.  It prints medians and the medians of per-round
# ratios.
#
# Run as root on a Debian 12 machine: it installs what it needs, builds and
# installs pgsandbox (unless SKIP_BUILD=1), and runs the server as the
# "postgres" OS user.
#
# Settings, from the environment:
#   SCALE=20  PARENTS=100000  CHILD_ROWS=1000000  RUNS=5  KEYS_PORT=5533
#   SKIP_BUILD=0  PGBIN=/usr/lib/postgresql/15/bin  OUTDIR=bench/out
#
set -Eeuo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
SCALE=${SCALE:-20}
PARENTS=${PARENTS:-100000}
CHILD_ROWS=${CHILD_ROWS:-1000000}
RUNS=${RUNS:-5}
KEYS_PORT=${KEYS_PORT:-5533}
SKIP_BUILD=${SKIP_BUILD:-0}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
OUTDIR=${OUTDIR:-$repo/bench/out}

for v in SCALE PARENTS CHILD_ROWS RUNS KEYS_PORT; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "keys.sh: $v must be a positive integer, not \"${!v}\"" >&2; exit 1; }
done
trap 'echo "keys.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR

CLUSTER_NAME=keys
CLUSTER_PORT=$KEYS_PORT
. "$repo/bench/throwaway_cluster.sh"
out=$OUTDIR/keys.txt

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
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
ratios() {
	local -n num=$1 den=$2
	local out=()
	for ((i = 0; i < RUNS; i++)); do out+=("$(echo "${num[$i]} / ${den[$i]}" | bc -l)"); done
	median "${out[@]}"
}
clone_time() {
	local source=$1 start name
	q "CHECKPOINT" >/dev/null
	start=$(now)
	name=$(q "SELECT name FROM pgsandbox.clone('$source', schema_only => false)")
	echo "$(elapsed "$start") $name"
}
manual_time() {
	local db=$1 start
	q "CHECKPOINT" >/dev/null
	start=$(now)
	as_pg createdb manual
	as_pg bash -c "pg_dump -Fc $db | pg_restore --no-owner -d manual"
	elapsed "$start"
	as_pg dropdb manual
}
template_time() {
	local db=$1 start
	q "CHECKPOINT" >/dev/null
	start=$(now)
	q "CREATE DATABASE templ TEMPLATE $db" >/dev/null
	elapsed "$start"
	q "DROP DATABASE templ" >/dev/null
}

# ---------------------------------------------------------------------------
# relationships against foreign keys
# ---------------------------------------------------------------------------
echo "keys.sh: making pgbench -s $SCALE twice, with and without foreign keys" >&2
as_pg createdb fk
as_pg pgbench -q -i -s "$SCALE" --foreign-keys fk >/dev/null 2>&1
as_pg createdb rel
as_pg pgbench -q -i -s "$SCALE" rel >/dev/null 2>&1
# history rows, which pgbench -i leaves empty: 1 per 10 accounts
for db in fk rel; do
	as_pg psql -X -q -d "$db" -c "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime)
		SELECT 1 + (a % (10 * $SCALE)), 1 + (a % $SCALE), a, 1, now() FROM generate_series(1, $SCALE * 100000, 10) a" \
		-c "VACUUM ANALYZE"
done
q "SELECT pgsandbox.add_source('fk', 'dbname=fk', allow_data => true)" >/dev/null
q "SELECT pgsandbox.subset('fk', 'public.pgbench_accounts', '1%')" >/dev/null
q "SELECT pgsandbox.add_source('rel', 'dbname=rel', allow_data => true)" >/dev/null
q "SELECT pgsandbox.subset('rel', 'public.pgbench_accounts', '1%')" >/dev/null
for pair in "pgbench_tellers(bid) pgbench_branches(bid)" "pgbench_accounts(bid) pgbench_branches(bid)" \
	"pgbench_history(bid) pgbench_branches(bid)" "pgbench_history(tid) pgbench_tellers(tid)" \
	"pgbench_history(aid) pgbench_accounts(aid)"; do
	read -r from to <<<"$pair"
	q "SELECT pgsandbox.relate('rel', 'public.$from', 'public.$to')" >/dev/null
done

declare -a t_fk t_rel t_manual t_template
for ((r = 0; r < RUNS; r++)); do
	for k in 0 1 2 3; do
		case $(((k + r) % 4)) in
		0)
			read -r secs name < <(clone_time fk)
			t_fk+=("$secs")
			[ "$r" = 0 ] && q "SELECT detail FROM pgsandbox.events WHERE sandbox = '$name' AND action = 'ready'" >"$tmp/fk_event.txt"
			q "SELECT pgsandbox.drop('$name')" >/dev/null ;;
		1)
			read -r secs name < <(clone_time rel)
			t_rel+=("$secs")
			[ "$r" = 0 ] && q "SELECT detail FROM pgsandbox.events WHERE sandbox = '$name' AND action = 'ready'" >"$tmp/rel_event.txt"
			q "SELECT pgsandbox.drop('$name')" >/dev/null ;;
		2) t_manual+=("$(manual_time fk)") ;;
		3) t_template+=("$(template_time fk)") ;;
		esac
	done
	echo "keys.sh: relationships, round $((r + 1)) of $RUNS done" >&2
done

{
	echo "# bench/keys.sh, $(date -u +%Y-%m-%dT%H:%MZ), PostgreSQL $(q 'SHOW server_version'), $RUNS rounds"
	echo "## relationships: pgbench -s $SCALE, 1% of pgbench_accounts, source $(q "SELECT pg_size_pretty(pg_database_size('fk'))")"
	printf '%-10s %10s\n' step "median s"
	printf '%-10s %10.2f\n' fk "$(median "${t_fk[@]}")" rel "$(median "${t_rel[@]}")" \
		manual "$(median "${t_manual[@]}")" template "$(median "${t_template[@]}")"
	printf 'relationships / foreign keys: %.3fx time (median of per-round ratios)\n' "$(ratios t_rel t_fk)"
	printf 'relationships / manual:       %.3fx time\n' "$(ratios t_rel t_manual)"
	printf 'relationships / template:     %.3fx time\n' "$(ratios t_rel t_template)"
	echo "ready event along foreign keys:  $(cat "$tmp/fk_event.txt")"
	echo "ready event along relationships: $(cat "$tmp/rel_event.txt")"
} | tee "$out"
as_pg dropdb fk
as_pg dropdb rel

# ---------------------------------------------------------------------------
# a key mask against the same clone with the key unmasked
# ---------------------------------------------------------------------------
echo "keys.sh: making km, $PARENTS parents and 3 x $CHILD_ROWS rows that refer to them" >&2
as_pg createdb km
as_pg psql -X -q -d km <<EOF
CREATE TABLE parents (id int PRIMARY KEY, name text NOT NULL);
INSERT INTO parents SELECT g, 'parent ' || g FROM generate_series(1, $PARENTS) g;
CREATE TABLE orders (id int PRIMARY KEY, parent_id int NOT NULL REFERENCES parents, amount int);
CREATE TABLE visits (id int PRIMARY KEY, parent_id int NOT NULL REFERENCES parents, at date);
CREATE TABLE notes (id int PRIMARY KEY, parent_id int REFERENCES parents, body text);
INSERT INTO orders SELECT g, 1 + (g * 7) % $PARENTS, g % 1000 FROM generate_series(1, $CHILD_ROWS) g;
INSERT INTO visits SELECT g, 1 + (g * 13) % $PARENTS, date '2026-01-01' + g % 300 FROM generate_series(1, $CHILD_ROWS) g;
INSERT INTO notes SELECT g, 1 + (g * 17) % $PARENTS, 'note ' || g FROM generate_series(1, $CHILD_ROWS) g;
CREATE INDEX ON orders (parent_id);
CREATE INDEX ON visits (parent_id);
CREATE INDEX ON notes (parent_id);
VACUUM ANALYZE;
EOF
for s in km_plain km_key km_none; do
	q "SELECT pgsandbox.add_source('$s', 'dbname=km', allow_data => true)" >/dev/null
done
for s in km_plain km_key; do
	q "SELECT pgsandbox.mask('$s', 'public.parents.name', \$\$'p' || id\$\$)" >/dev/null
done
q "SELECT pgsandbox.mask_key('km_key', 'public.parents.id')" >/dev/null

declare -a t_plain t_key t_none t_kmanual t_ktemplate
for ((r = 0; r < RUNS; r++)); do
	for k in 0 1 2 3 4; do
		case $(((k + r) % 5)) in
		0)
			read -r secs name < <(clone_time km_plain)
			t_plain+=("$secs")
			q "SELECT pgsandbox.drop('$name')" >/dev/null ;;
		1)
			read -r secs name < <(clone_time km_key)
			t_key+=("$secs")
			[ "$r" = 0 ] && q "SELECT detail FROM pgsandbox.events WHERE sandbox = '$name' AND action = 'ready'" >"$tmp/key_event.txt"
			q "SELECT pgsandbox.drop('$name')" >/dev/null ;;
		2)
			read -r secs name < <(clone_time km_none)
			t_none+=("$secs")
			q "SELECT pgsandbox.drop('$name')" >/dev/null ;;
		3) t_kmanual+=("$(manual_time km)") ;;
		4) t_ktemplate+=("$(template_time km)") ;;
		esac
	done
	echo "keys.sh: key masks, round $((r + 1)) of $RUNS done" >&2
done

{
	echo "## key masks: $PARENTS parents, 3 tables of $CHILD_ROWS rows referring to them, source $(q "SELECT pg_size_pretty(pg_database_size('km'))")"
	printf '%-10s %10s\n' step "median s"
	printf '%-10s %10.2f\n' unmasked "$(median "${t_plain[@]}")" keymask "$(median "${t_key[@]}")" \
		nomask "$(median "${t_none[@]}")" manual "$(median "${t_kmanual[@]}")" \
		template "$(median "${t_ktemplate[@]}")"
	printf 'key mask / key unmasked (same other mask): %.3fx time (median of per-round ratios)\n' "$(ratios t_key t_plain)"
	printf 'key mask / no rule at all:                 %.3fx time\n' "$(ratios t_key t_none)"
	printf 'key mask / manual:                         %.3fx time\n' "$(ratios t_key t_kmanual)"
	printf 'key mask / template:                       %.3fx time\n' "$(ratios t_key t_ktemplate)"
	echo "ready event with the key mask: $(cat "$tmp/key_event.txt")"
} | tee -a "$out"
