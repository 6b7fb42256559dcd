# 052_bulk_copy.pl: a source's one large table copied by the clone worker
# (clone/bulk_copy.c, pgsandbox.bulk_copy_min_size).
#
# Where one plain table holds half a source's pages or more, the clone
# restores pg_dump's pre-data, copies that table's rows itself (in binary
# when the source runs this server's major version and every column's type
# is built in, has a binary form and is no reg* type, else as text), then
# restores the other tables' rows and the post-data section.  Checked:
# every table's rows compared with the source's (many built-in types,
# NULLs, non-ASCII text, special floats, a dropped and a generated column,
# a quoted schema, table and column name with a pattern's characters); the
# same indexes, constraints and sequences; the text path for the source's
# own enum and domain and for reg* columns (whose values then name the
# sandbox's own objects); no row in a clone of the schema only; no worker
# copy when the setting is -1, the table is smaller than it or a parent, or
# the largest relation is a materialized view; and, each leaving only the
# failed row and no process: an ALTER on the source table waiting for the
# clone's lock (which then runs), a check that fails in the sandbox, the
# sandbox's or the source's COPY backend ended, and a cancel in the middle
# of the copy.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $node = sandbox_node('bulk',
	"pgsandbox.bulk_copy_min_size = 0\npgsandbox.lock_timeout = '2s'\n");

sub sq { return $node->safe_psql('postgres', $_[0]); }

# every table's rows, as text, digested in order; and the objects around them
my $digest_sql = q{
SELECT string_agg(format('%s:%s', c.oid::regclass,
		(xpath('/row/d/text()', query_to_xml(format(
			'SELECT md5(coalesce(string_agg(t::text, %L ORDER BY t::text), %L)) || %L || count(*) AS d FROM %s t',
			'|', '', '/', c.oid::regclass), false, true, '')))[1]), ',' ORDER BY c.oid::regclass::text)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')};
my $shape_sql = q{
SELECT (SELECT string_agg(indexdef, ';' ORDER BY indexdef) FROM pg_indexes
		 WHERE schemaname NOT IN ('pg_catalog', 'information_schema')) || '#'
	|| (SELECT string_agg(conname || ' ' || pg_get_constraintdef(oid), ';' ORDER BY conname)
		 FROM pg_constraint WHERE connamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)) || '#'
	|| (SELECT string_agg(sequencename || '=' || coalesce(last_value::text, 'null'), ';' ORDER BY sequencename)
		 FROM pg_sequences)};

sub in_sandbox
{
	my ($conninfo, $sql) = @_;
	my ($ret, $out, $err) = sandbox_psql($node, $conninfo, $sql);
	is($ret, 0, 'the sandbox role logs in with the returned credentials') or diag $err;
	return $out;
}

sub ready_event
{
	my ($name) = @_;
	return sq("SELECT detail FROM pgsandbox.events WHERE sandbox = '$name' AND action = 'ready'");
}

# ---------------------------------------------------------------------------
# a source with one large table of every kind of column, and small ones
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', 'CREATE DATABASE wide');
$node->safe_psql('wide', q{
CREATE SCHEMA "Odd ""schema""";
CREATE TABLE "Odd ""schema"""."Big.table*?$|" (
	id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	gone int,
	"we""ird col" text,
	n numeric(20,6),
	f8 float8,
	f4 real,
	at timestamptz,
	d date,
	iv interval,
	b bytea,
	arr int[],
	tarr text[],
	j jsonb,
	ok boolean,
	u uuid,
	c char(10),
	ip inet,
	tw tstzrange,
	x xml,
	cash money,
	bits bit varying(12),
	ts tsvector,
	lsn pg_lsn,
	ov oidvector,
	doubled bigint GENERATED ALWAYS AS (id * 2) STORED,
	CHECK (n IS NULL OR n > -1000000)
);
CREATE INDEX ON "Odd ""schema"""."Big.table*?$|" (at, "we""ird col");
INSERT INTO "Odd ""schema"""."Big.table*?$|"
	(gone, "we""ird col", n, f8, f4, at, d, iv, b, arr, tarr, j, ok, u, c, ip, tw, x, cash, bits, ts, lsn, ov)
SELECT g,
	CASE WHEN g % 17 = 0 THEN NULL WHEN g % 5 = 0 THEN 'Grüße, 東京 ' || g || E'\ttab\nline \\ back' ELSE md5(g::text) END,
	CASE WHEN g % 13 = 0 THEN NULL ELSE (g * 1.000001)::numeric(20,6) END,
	CASE g % 7 WHEN 0 THEN 'NaN'::float8 WHEN 1 THEN '-Infinity' WHEN 2 THEN NULL ELSE g / 3.0 END,
	(g / 7.0)::real,
	timestamptz '2026-01-01 00:00:00+00' + g * interval '1 second 1 microsecond',
	date '2000-01-01' + g % 9000,
	make_interval(months => g % 14, days => g % 40, secs => g % 3600 + 0.25),
	CASE WHEN g % 11 = 0 THEN NULL ELSE decode(md5(g::text), 'hex') || '\x00ff'::bytea END,
	ARRAY[g, NULL, -g],
	ARRAY['a"b', NULL, 'c,d', '{e}'],
	jsonb_build_object('g', g, 'nested', jsonb_build_array(1, 'two', NULL)),
	CASE WHEN g % 3 = 0 THEN NULL ELSE g % 2 = 0 END,
	md5(g::text)::uuid,
	'c' || (g % 100),
	('10.0.' || (g % 256) || '.' || (g % 200))::inet,
	tstzrange(timestamptz '2026-01-01' + g * interval '1 minute', NULL),
	CASE WHEN g % 9 = 0 THEN NULL ELSE ('<a n="' || g || '">x &amp; y</a> tail')::xml END,
	(g * 0.01)::numeric::money,
	(g % 4096)::bit(12)::bit varying(12),
	to_tsvector('simple', 'word' || g % 50 || ' other ' || md5(g::text)),
	('0/' || to_hex(g * 1000))::pg_lsn,
	(g || ' ' || g + 1)::oidvector
FROM generate_series(1, 40000) g;
ALTER TABLE "Odd ""schema"""."Big.table*?$|" DROP COLUMN gone;
CREATE TABLE small (id int PRIMARY KEY, big_id bigint REFERENCES "Odd ""schema"""."Big.table*?$|", note text);
INSERT INTO small SELECT g, g * 3, 'note ' || g FROM generate_series(1, 500) g;
CREATE SEQUENCE counter;
SELECT setval('counter', 4242);
VACUUM ANALYZE;
});
sq("SELECT pgsandbox.add_source('wide', 'dbname=wide', allow_data => true)");
my $source_digest = $node->safe_psql('wide', $digest_sql);
# the large table's name, with characters a pattern would read otherwise
my $big = '"Big.table*?$|"';
my $source_shape = $node->safe_psql('wide', $shape_sql);
like($source_digest, qr/\Q$big\E:[0-9a-f]{32}\/40000/, 'the source digest counts the large table');

my ($bin, $bin_conn) = split /\|/,
  sq("SELECT name, conninfo FROM pgsandbox.clone('wide', schema_only => false)");
like(ready_event($bin),
	qr/\Qthe rows of table "Odd ""schema""".$big (40000) copied by the worker, in binary\E/,
	'binary: the ready event says the worker copied the large table, in binary');
is(in_sandbox($bin_conn, $digest_sql), $source_digest, 'binary: every table holds the source\'s rows');
is(in_sandbox($bin_conn, $shape_sql), $source_shape,
	'binary: the same indexes, constraints, and sequences at the same values');
is(in_sandbox($bin_conn,
		q{SELECT count(*) FROM "Odd ""schema"""."Big.table*?$|" WHERE doubled <> id * 2}),
	'0', 'binary: the generated column is computed in the sandbox');
is(in_sandbox($bin_conn,
		q{INSERT INTO "Odd ""schema"""."Big.table*?$|" ("we""ird col") VALUES ('new') RETURNING id}),
	'40001', 'binary: the identity goes on from the source\'s');
is(in_sandbox($bin_conn,
		"SELECT count(*) FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner WHERE c.relnamespace <> 'pg_catalog'::regnamespace AND c.relnamespace <> 'information_schema'::regnamespace AND c.relnamespace <> 'pg_toast'::regnamespace AND r.rolname <> current_user"),
	'0', 'binary: every restored relation belongs to the sandbox role');
sq("SELECT pgsandbox.drop('$bin')");

# a clone of the schema only copies no row
my ($schema, $schema_conn) = split /\|/,
  sq("SELECT name, conninfo FROM pgsandbox.clone('wide', schema_only => true)");
unlike(ready_event($schema), qr/copied by the worker/, 'schema only: no table is copied by the worker');
is(in_sandbox($schema_conn, q{SELECT count(*) FROM "Odd ""schema"""."Big.table*?$|"}), '0',
	'schema only: the large table is empty');
sq("SELECT pgsandbox.drop('$schema')");

# the setting at -1: pg_dump carries every row, the same contents
set_setting($node, 'bulk_copy_min_size', '-1');
my ($off, $off_conn) = split /\|/,
  sq("SELECT name, conninfo FROM pgsandbox.clone('wide', schema_only => false)");
unlike(ready_event($off), qr/copied by the worker/, 'off: no table is copied by the worker');
is(in_sandbox($off_conn, $digest_sql), $source_digest, 'off: every table holds the source\'s rows');
sq("SELECT pgsandbox.drop('$off')");
# larger than the table: neither
set_setting($node, 'bulk_copy_min_size', '1GB');
my $large = sq("SELECT name FROM pgsandbox.clone('wide', schema_only => false)");
unlike(ready_event($large), qr/copied by the worker/, 'a table below bulk_copy_min_size goes through pg_dump');
sq("SELECT pgsandbox.drop('$large')");
set_setting($node, 'bulk_copy_min_size', '0');

# ---------------------------------------------------------------------------
# a column of a type the source made: text, converted by each end
# ---------------------------------------------------------------------------
$node->safe_psql('wide', q{
CREATE TYPE mood AS ENUM ('sad', 'ok', 'glad');
CREATE DOMAIN positive AS int CHECK (VALUE > 0);
ALTER TABLE "Odd ""schema"""."Big.table*?$|" ADD COLUMN m mood, ADD COLUMN p positive;
UPDATE "Odd ""schema"""."Big.table*?$|" SET m = (ARRAY['sad', 'ok', 'glad']::mood[])[id % 3 + 1], p = id WHERE id % 4 <> 0;
VACUUM FULL ANALYZE;
});
$source_digest = $node->safe_psql('wide', $digest_sql);
my ($txt, $txt_conn) = split /\|/,
  sq("SELECT name, conninfo FROM pgsandbox.clone('wide', schema_only => false)");
like(ready_event($txt), qr/\Q$big (40000) copied by the worker, in text\E/,
	'text: a column of the source\'s own type is copied as text');
is(in_sandbox($txt_conn, $digest_sql), $source_digest, 'text: every table holds the source\'s rows');
sq("SELECT pgsandbox.drop('$txt')");

# a reg* column: its binary form is an oid, which would name another object
# in the sandbox; the rows go as text, and name the sandbox's own objects
$node->safe_psql('wide', q{
ALTER TABLE "Odd ""schema"""."Big.table*?$|" DROP COLUMN m, DROP COLUMN p,
	ADD COLUMN r regclass, ADD COLUMN rt regtype[];
UPDATE "Odd ""schema"""."Big.table*?$|" SET r = 'public.small'::regclass, rt = ARRAY['integer'::regtype, 'text'] WHERE id % 2 = 0;
VACUUM FULL ANALYZE;
});
$source_digest = $node->safe_psql('wide', $digest_sql);
my $regs_sql = q{SELECT count(*) FROM "Odd ""schema"""."Big.table*?$|" WHERE r = 'public.small'::regclass AND rt[1] = 'integer'::regtype};
my ($reg, $reg_conn) = split /\|/,
  sq("SELECT name, conninfo FROM pgsandbox.clone('wide', schema_only => false)");
like(ready_event($reg), qr/\Q$big (40000) copied by the worker, in text\E/,
	'reg*: a column of a reg* type is copied as text');
is(in_sandbox($reg_conn, $digest_sql), $source_digest, 'reg*: every table holds the source\'s rows');
is(in_sandbox($reg_conn, $regs_sql), $node->safe_psql('wide', $regs_sql),
	'reg*: the values name the sandbox\'s own table and types');
sq("SELECT pgsandbox.drop('$reg')");

# the largest relation a materialized view (which LOCK TABLE refuses): no
# table is copied by the worker, and the clone holds the source's rows
$node->safe_psql('postgres', 'CREATE DATABASE viewed');
$node->safe_psql('viewed', q{
CREATE TABLE t (id int PRIMARY KEY, note text);
INSERT INTO t SELECT g, 'n' || g FROM generate_series(1, 100) g;
CREATE MATERIALIZED VIEW mv AS SELECT g AS id, repeat(md5(g::text), 6) AS pad FROM generate_series(1, 20000) g;
VACUUM ANALYZE;
});
sq("SELECT pgsandbox.add_source('viewed', 'dbname=viewed', allow_data => true)");
my ($mv, $mv_conn) = split /\|/,
  sq("SELECT name, conninfo FROM pgsandbox.clone('viewed', schema_only => false)");
unlike(ready_event($mv), qr/copied by the worker/,
	'materialized view: the largest relation, not a table, is left to pg_dump');
my $mv_sql = q{SELECT (SELECT count(*) || '/' || md5(string_agg(pad, '' ORDER BY id)) FROM mv) || '|' || (SELECT count(*) FROM t)};
is(in_sandbox($mv_conn, $mv_sql), $node->safe_psql('viewed', $mv_sql),
	'materialized view: the view and the table hold the source\'s rows');
sq("SELECT pgsandbox.drop('$mv')");

# a check that fails in the sandbox (as a function may): the clone fails
# with the sandbox's reason, and leaves only its failed row
$node->safe_psql('postgres', 'CREATE DATABASE fussy');
$node->safe_psql('fussy', q{
CREATE FUNCTION fussy(int) RETURNS boolean LANGUAGE sql
	AS $$ SELECT current_database() NOT LIKE 'sbx\_%' OR $1 <= 20000 $$;
CREATE TABLE t (id int PRIMARY KEY, pad text CHECK (fussy(id)));
INSERT INTO t SELECT g, repeat('y', 200) FROM generate_series(1, 100000) g;
VACUUM ANALYZE;
});
sq("SELECT pgsandbox.add_source('fussy', 'dbname=fussy', allow_data => true)");
my ($ret, $out, $err) = $node->psql('postgres', "SELECT name FROM pgsandbox.clone('fussy', schema_only => false)");
isnt($ret, 0, 'check: the clone fails');
like($err, qr/could not write the rows of table "public"\."t" into the sandbox/,
	'check: the caller is told the copy into the sandbox failed');
like($err, qr/new row for relation "t" violates check constraint/, 'check: with the sandbox\'s reason');
is(sq("SELECT string_agg(status, ',') FROM pgsandbox.sandboxes WHERE source = 'fussy'"),
	'failed', 'check: only a failed row is left');
is(untracked_sandboxes($node), '0', 'check: no database or role is left untracked');

# a parent table: pg_dump carries its rows
$node->safe_psql('wide', q{CREATE TABLE "Odd ""schema"""."Big child" () INHERITS ("Odd ""schema"""."Big.table*?$|")});
my $parent = sq("SELECT name FROM pgsandbox.clone('wide', schema_only => false)");
unlike(ready_event($parent), qr/copied by the worker/, 'a table with a child goes through pg_dump');
sq("SELECT pgsandbox.drop('$parent')");
$node->safe_psql('wide', q{DROP TABLE "Odd ""schema"""."Big child"});

# ---------------------------------------------------------------------------
# a slow sandbox: each row's check sleeps in the sandbox, 3000 rows of 5 ms
# ---------------------------------------------------------------------------
# (a wide column: more rows than socket buffers hold are still to send)
make_slow_source($node, 'slow', 3000, 5,
	"ALTER TABLE slow ADD COLUMN pad text; UPDATE slow SET pad = repeat('x', 4000); VACUUM FULL ANALYZE");
sq("SELECT pgsandbox.add_source('slow', 'dbname=slow', allow_data => true)");

# Start a clone of the slow source from a session named $app and wait until
# the sandbox's COPY of the large table runs; returns (handle, name, the
# worker's pid).
sub start_slow_clone
{
	my ($app) = @_;
	my $h = start_psql($node, $node->connstr('postgres') . " application_name=$app",
		"SELECT name FROM pgsandbox.clone('slow', schema_only => false)");
	is(poll_value($node,
			"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pgsandbox clone'"
			  . " AND query = 'pgsandbox: copying the largest table''s rows'", '1', 60),
		'1', "$app: the clone worker copies the large table");
	my $name = sq("SELECT name FROM pgsandbox.sandboxes WHERE status = 'cloning'");
	is(poll_value($node,
			"SELECT count(*) FROM pg_stat_activity WHERE datname = '$name'"
			  . " AND state = 'active' AND query LIKE 'COPY %'", '1', 60),
		'1', "$app: the sandbox's COPY runs");
	my ($wpid) = clone_worker_pids($node);
	return ($h, $name, $wpid);
}

# an ALTER on the source table waits for the clone's lock: the second
# pg_dump cannot lock the table, and the clone fails (never a table left
# empty under the clone's snapshot); then the ALTER runs
my ($h, $name, $wpid) = start_slow_clone('altered');
my $alter = start_psql($node, $node->connstr('slow'), 'ALTER TABLE slow ADD COLUMN extra int');
is(poll_value($node,
		"SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database"
		  . " WHERE d.datname = 'slow' AND NOT l.granted AND l.mode = 'AccessExclusiveLock'", '1', 30),
	'1', 'altered: the ALTER waits for the lock of the clone\'s reader');
($ret, $out, $err) = finish_psql($h);
isnt($ret, 0, 'altered: the clone fails');
like($err, qr/pg_dump of source "slow" failed/, 'altered: the caller is told pg_dump failed');
check_clone_cleaned_up($node, $name, 'altered', 30, $wpid);
($ret, $out, $err) = finish_psql($alter);
is($ret, 0, 'altered: the ALTER then runs') or diag $err;
$node->safe_psql('slow', 'ALTER TABLE slow DROP COLUMN extra; VACUUM FULL ANALYZE');

# the sandbox's backend killed in the middle of the copy
($h, $name, $wpid) = start_slow_clone('killed');
is(sq("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '$name' AND query LIKE 'COPY %'"),
	't', 'killed: the sandbox\'s COPY is ended');
($ret, $out, $err) = finish_psql($h);
isnt($ret, 0, 'killed: the clone fails');
like($err, qr/could not write the rows of table "public"\."slow" into the sandbox/,
	'killed: the caller is told the copy into the sandbox failed');
check_clone_cleaned_up($node, $name, 'killed', 30, $wpid);

# the source's backend ended in the middle of the copy
($h, $name, $wpid) = start_slow_clone('source_ended');
is(sq("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'slow' AND query LIKE 'COPY %'"),
	't', 'source ended: the source\'s COPY is ended');
($ret, $out, $err) = finish_psql($h);
isnt($ret, 0, 'source ended: the clone fails');
like($err, qr/could not read the rows of table "public"\."slow" of source "slow"/,
	'source ended: the caller is told the read from the source failed');
check_clone_cleaned_up($node, $name, 'source ended', 30, $wpid);
is(untracked_sandboxes($node), '0', 'killed, source ended: no database or role is left untracked');

# a cancel in the middle of the copy
($h, $name, $wpid) = start_slow_clone('canceled');
sq("SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'canceled'");
($ret, $out, $err) = finish_psql($h);
isnt($ret, 0, 'canceled: the clone call fails');
check_clone_cleaned_up($node, $name, 'canceled', 30, $wpid);
is( sq("SELECT string_agg(action, ',' ORDER BY at) FROM pgsandbox.events WHERE sandbox = '$name'"),
	'clone,failed', 'canceled: events record the clone and its failure');

done_testing();
