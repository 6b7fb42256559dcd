#!/usr/bin/env bash
#
# schema_diff.sh: how long pgsandbox.schema_diff() takes on the 300-table
# bench source (bench/many_tables.sql: every table with its constraints,
# indexes, a view and a function), unchanged and after a migration of 20
# changes, on a throwaway PostgreSQL 15 cluster.  See bench/README.md.
#
# Run as root on a Debian 12 machine, it installs the packages it needs and
# builds and installs pgsandbox (unless SKIP_BUILD=1).  Writes
# $OUTDIR/schema_diff.txt; exits non-zero if the diff is not what the
# migration did.
#
# Settings, from the environment:
#   NTABLES=300  RUNS=7  DIFF_PORT=5512  SKIP_BUILD=0
#   PGBIN=/usr/lib/postgresql/15/bin  OUTDIR=bench/out
#
set -Eeuo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
NTABLES=${NTABLES:-300}
RUNS=${RUNS:-7}
DIFF_PORT=${DIFF_PORT:-5512}
SKIP_BUILD=${SKIP_BUILD:-0}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
OUTDIR=${OUTDIR:-$repo/bench/out}

for v in NTABLES RUNS DIFF_PORT; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "schema_diff.sh: $v must be a positive integer" >&2; exit 1; }
done
[ "$NTABLES" -ge 20 ] || { echo "schema_diff.sh: NTABLES must be at least 20" >&2; exit 1; }
trap 'echo "schema_diff.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR

CLUSTER_NAME=schema_diff
CLUSTER_PORT=$DIFF_PORT
. "$repo/bench/throwaway_cluster.sh"
out=$OUTDIR/schema_diff.txt

cluster_start <<EOF
max_worker_processes = 16
pgsandbox.gc_interval = 3600
EOF
q "CREATE DATABASE many" >/dev/null
as_pg psql -X -q -d many -v ntables="$NTABLES" -v with_ext=0 -f - <"$repo/bench/many_tables.sql" >/dev/null
q "SELECT pgsandbox.add_source('many', 'dbname=many')" >/dev/null
sbx=$(q "SELECT name FROM pgsandbox.clone('many')")

# milliseconds of one schema_diff() call, measured in the server
diff_ms() {
	as_pg psql -X -q -v ON_ERROR_STOP=1 -c "
DO \$\$
DECLARE
	t timestamptz := clock_timestamp();
	d jsonb := pgsandbox.schema_diff('$sbx');
BEGIN
	RAISE NOTICE 'ms=%', round(extract(epoch FROM clock_timestamp() - t) * 1000, 1);
END
\$\$" 2>&1 | sed -n 's/.*ms=//p'
}
median() {
	sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
measure() {
	local label=$1 runs=()
	for _ in $(seq 1 "$RUNS"); do runs+=("$(diff_ms)"); done
	printf '  %-28s median %7s ms   (runs: %s)\n' "$label" \
		"$(printf '%s\n' "${runs[@]}" | median)" "${runs[*]}" | tee -a "$out"
}

: >"$out"
echo "schema_diff on $NTABLES tables, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(as_pg postgres --version)" | tee -a "$out"
measure "unchanged"

# a migration of 20 changes, run in the sandbox as its role
q "SELECT pgsandbox.run_sql('$sbx', \$m\$
	ALTER TABLE t0001 ADD COLUMN note text;
	ALTER TABLE t0002 ADD COLUMN flag boolean NOT NULL DEFAULT false;
	ALTER TABLE t0003 ALTER COLUMN amount SET DEFAULT 1;
	ALTER TABLE t0004 DROP CONSTRAINT t0004_amount_check;
	ALTER TABLE t0005 ADD CONSTRAINT t0005_code_len CHECK (length(code) < 20);
	CREATE INDEX t0006_amount ON t0006 (amount);
	DROP INDEX t0007_name;
	COMMENT ON TABLE t0008 IS 'migrated';
	CREATE TABLE audit (at timestamptz DEFAULT now(), what text);
	CREATE OR REPLACE VIEW v0009 AS SELECT a.id, a.name, a.attrs ->> 'k' AS k, b.code AS parent_code
	  FROM t0009 a LEFT JOIN t0008 b ON b.id = a.parent_id WHERE a.id > 0;
	DROP VIEW v0010;
	ALTER FUNCTION f0011(integer) VOLATILE;
	CREATE FUNCTION answer() RETURNS int LANGUAGE sql AS 'SELECT 42';
	CREATE TYPE state AS ENUM ('new', 'done');
	CREATE DOMAIN positive AS int CHECK (VALUE > 0);
	CREATE SEQUENCE ticket_seq;
	ALTER TABLE t0012 ENABLE ROW LEVEL SECURITY;
	CREATE POLICY t0013_all ON t0013 USING (true);
	CREATE RULE t0014_keep AS ON DELETE TO t0014 DO INSTEAD NOTHING;
	CREATE SCHEMA app;
\$m\$) -> 'error'" | grep -qx 'null' || { echo "schema_diff.sh: the migration failed" >&2; exit 1; }
measure "after 20 changes"

entries=$(q "SELECT jsonb_array_length(d->'added') + jsonb_array_length(d->'dropped')
               + jsonb_array_length(d->'changed')
             FROM pgsandbox.schema_diff('$sbx') d")
echo "  entries in the diff: $entries (one for each change)" | tee -a "$out"
[ "$entries" = 20 ] || { echo "schema_diff.sh: expected 20 entries" >&2; exit 1; }
