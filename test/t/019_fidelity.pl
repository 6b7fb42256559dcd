
# 019_fidelity.pl: a sandbox behaves like its source.
#
# (a) extensions whose names need quoting (uuid-ossp) clone, schema only
#     and with data;
# (b) extensions with configuration tables clone with data, their rows
#     restored from the admin side: PostGIS (geometry, geography, a GiST
#     index; with and without SRIDs of the source's own), pg_partman,
#     orafce; spatial queries answer as in the source;
# (c) an event trigger is left out and named in the 'ready' event; an
#     operator family fails the clone with a message that says why;
# (d) the source database's settings for all roles reach the sandbox, the
#     superuser-only ones are left out and named;
# (e) encoding and locale: a LATIN1 / C source and an ICU source clone with
#     theirs and sort alike; a locale this server lacks fails with 22023
#     and nothing left, and works with pgsandbox.locale_fallback;
# (f) large objects, which pgsandbox_reader may not open: a plain and a
#     reduced clone hold each one whole (an empty one, a sparse one, one of
#     many pages, one an application role owns with no grant, one made
#     longer by lo_truncate), with its OID and length,
#     owned by the sandbox role, and nothing was granted on the source.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use File::Temp qw(tempdir);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $node = sandbox_node('fidelity',
	"pgsandbox.gc_interval = 3600\npgsandbox.max_sandboxes_per_owner = 100\n");

sub add_source
{
	my ($db, $create) = @_;
	$node->safe_psql('postgres', $create // "CREATE DATABASE $db");
	$node->safe_psql('postgres', "SELECT pgsandbox.add_source('$db', 'dbname=$db', allow_data => true)");
	return;
}

# Clone with data; returns (name, conninfo).
sub clone_ok
{
	my ($source, $what, $schema_only) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my ($ret, $out, $err) = $node->psql('postgres',
		"SELECT name || ' ' || conninfo FROM pgsandbox.clone('$source', schema_only => "
		  . ($schema_only ? 'true' : 'false') . ')');
	is($ret, 0, "$what: clones") or diag $err;
	return split / /, $out, 2;
}

# Run SQL in a sandbox logged in as its role.
sub in_sandbox
{
	my ($conninfo, $sql) = @_;
	my ($ret, $out, $err) = sandbox_psql($node, $conninfo // '', $sql);
	diag $err if $ret != 0;
	return $out;
}

sub ready_detail
{
	my ($name) = @_;
	return $node->safe_psql('postgres',
		"SELECT detail FROM pgsandbox.event WHERE sandbox = '$name' AND action = 'ready'");
}

sub leftovers
{
	return $node->safe_psql('postgres',
		    "SELECT (SELECT count(*) FROM pg_database d WHERE datname LIKE 'sbx\\_%' AND NOT EXISTS"
		  . "  (SELECT 1 FROM pgsandbox.sandbox s WHERE s.name = d.datname AND s.status = 'ready'))"
		  . " || ' ' || (SELECT count(*) FROM pg_roles r WHERE rolname LIKE 'sbx\\_%' AND NOT EXISTS"
		  . "  (SELECT 1 FROM pgsandbox.sandbox s WHERE s.name = r.rolname AND s.status = 'ready'))");
}

# ---------------------------------------------------------------------------
# (a) uuid-ossp
# ---------------------------------------------------------------------------

add_source('uuid');
$node->safe_psql('uuid', q{
CREATE EXTENSION "uuid-ossp";
CREATE TABLE t (id uuid PRIMARY KEY DEFAULT uuid_generate_v4(), n int);
INSERT INTO t (n) SELECT generate_series(1, 10);
});
my ($name, $conninfo) = clone_ok('uuid', '(a) uuid-ossp, schema only', 1);
is(in_sandbox($conninfo, 'SELECT count(*) FROM t'), '0', '(a) the schema-only sandbox has the table, empty');
($name, $conninfo) = clone_ok('uuid', '(a) uuid-ossp, with data');
is( in_sandbox($conninfo, "SELECT string_agg(id::text, ',' ORDER BY n) FROM t"),
	$node->safe_psql('uuid', "SELECT string_agg(id::text, ',' ORDER BY n) FROM t"),
	'(a) the rows are those of the source');
is(in_sandbox($conninfo, 'INSERT INTO t (n) VALUES (11) RETURNING length(id::text)'),
	'36', '(a) the column default calls the extension as the sandbox role');

# ---------------------------------------------------------------------------
# (b) configuration tables: PostGIS, pg_partman, orafce
# ---------------------------------------------------------------------------

my $gis_setup = q{
CREATE EXTENSION postgis;
CREATE TABLE places (id int PRIMARY KEY, name text,
                     geom geometry(Point, 4326), geog geography(Point, 4326));
INSERT INTO places
SELECT g, 'p' || g, ST_SetSRID(ST_MakePoint(g * 0.1, g * 0.05), 4326),
       ST_MakePoint(g * 0.1, g * 0.05)::geography
  FROM generate_series(1, 200) g;
CREATE INDEX places_geom ON places USING gist (geom);
};
my @spatial = (
	'SELECT round(sum(ST_Distance(a.geog, b.geog))::numeric, 3) FROM places a JOIN places b ON b.id = a.id + 1',
	'SELECT count(*) FROM places WHERE ST_DWithin(geom, ST_SetSRID(ST_MakePoint(5, 2.5), 4326), 1)',
	'SELECT ST_AsText(ST_SnapToGrid(ST_Transform(geom, 3857), 0.01)) FROM places WHERE id = 7',
	"SELECT indexdef FROM pg_indexes WHERE indexname = 'places_geom'");

add_source('gis');
$node->safe_psql('gis', $gis_setup);
($name, $conninfo) = clone_ok('gis', '(b) PostGIS without SRIDs of its own');
is(in_sandbox($conninfo, 'SELECT count(*) FROM places'), '200', '(b) PostGIS: every row');
foreach my $q (@spatial)
{
	is(in_sandbox($conninfo, $q), $node->safe_psql('gis', $q), "(b) PostGIS answers as the source: $q");
}
is( in_sandbox($conninfo, 'SELECT count(*) FROM spatial_ref_sys'),
	$node->safe_psql('gis', 'SELECT count(*) FROM spatial_ref_sys'),
	'(b) PostGIS: spatial_ref_sys as in the source');

add_source('gis_srid');
$node->safe_psql('gis_srid', $gis_setup . q{
INSERT INTO spatial_ref_sys (srid, auth_name, auth_srid, srtext, proj4text)
SELECT 910001, 'pgsandbox-test', 910001, srtext, proj4text FROM spatial_ref_sys WHERE srid = 3857;
CREATE TABLE local_places (id int, geom geometry(Point, 910001));
INSERT INTO local_places SELECT id, ST_Transform(geom, 910001) FROM places WHERE id <= 20;
});
($name, $conninfo) = clone_ok('gis_srid', '(b) PostGIS with an SRID of its own');
is(in_sandbox($conninfo, "SELECT auth_name FROM spatial_ref_sys WHERE srid = 910001"),
	'pgsandbox-test', '(b) the source\'s own SRID arrives in the sandbox');
is( in_sandbox($conninfo,
		'SELECT ST_AsText(ST_SnapToGrid(ST_Transform(geom, 4326), 0.000001)) FROM local_places WHERE id = 7'),
	$node->safe_psql('gis_srid',
		'SELECT ST_AsText(ST_SnapToGrid(ST_Transform(geom, 4326), 0.000001)) FROM local_places WHERE id = 7'),
	'(b) and transforms from it give the source\'s answer');
is( in_sandbox($conninfo,
		"SELECT pg_get_userbyid(relowner) = current_user FROM pg_class WHERE oid = 'spatial_ref_sys'::regclass"),
	'f', '(b) spatial_ref_sys stays the extension\'s, not the sandbox role\'s');
# spatial_ref_sys's proj4text names files PROJ opens with the server's
# rights: the sandbox role reads it, and may not change it
my ($ret_srs, $out_srs, $err_srs) = sandbox_psql($node, $conninfo,
	q{INSERT INTO spatial_ref_sys (srid, auth_name, auth_srid, srtext, proj4text)
	SELECT 910002, 'sandbox', 910002, srtext, '+init=/etc/passwd' FROM spatial_ref_sys WHERE srid = 3857});
like($err_srs, qr/permission denied for table spatial_ref_sys/,
	'(b) the sandbox role may not add an SRID, whose proj4text PROJ would read files by');

add_source('partman');
$node->safe_psql('partman', q{
CREATE SCHEMA partman;
CREATE EXTENSION pg_partman SCHEMA partman;
CREATE TABLE public.events (id bigint, at timestamptz NOT NULL, payload text) PARTITION BY RANGE (at);
});
# pg_partman 5 (Debian 13's and unstable's) takes (table, control, interval);
# 4 (Debian 12's) took (table, control, type, interval)
my $partman_v4 = $node->safe_psql('partman',
	"SELECT extversion LIKE '4.%' FROM pg_extension WHERE extname = 'pg_partman'") eq 't';
$node->safe_psql('partman',
	$partman_v4
	? q{SELECT partman.create_parent('public.events', 'at', 'native', 'daily')}
	: q{SELECT partman.create_parent('public.events', 'at', '1 day')});
$node->safe_psql('partman', q{
INSERT INTO public.events SELECT g, now() - (g % 3) * interval '1 day', 'x' FROM generate_series(1, 100) g;
});
($name, $conninfo) = clone_ok('partman', '(b) pg_partman');
is(in_sandbox($conninfo, 'SELECT count(*) FROM public.events'), '100', '(b) pg_partman: every row');
is( in_sandbox($conninfo, 'SELECT parent_table || \' \' || partition_interval FROM partman.part_config'),
	$node->safe_psql('partman', 'SELECT parent_table || \' \' || partition_interval FROM partman.part_config'),
	'(b) pg_partman: its configuration rows arrive, and the sandbox role reads them');
my $show = q{SELECT string_agg(partition_tablename, ',' ORDER BY partition_tablename)
	FROM partman.show_partitions('public.events')};
is(in_sandbox($conninfo, $show), $node->safe_psql('partman', $show),
	'(b) pg_partman: show_partitions() runs as the sandbox role, and answers as in the source');
# maintenance as the sandbox role: one more day ahead makes one more partition
in_sandbox($conninfo, q{UPDATE partman.part_config SET premake = premake + 1 WHERE parent_table = 'public.events';
	SELECT partman.run_maintenance('public.events')});
is( in_sandbox($conninfo, q{SELECT count(*) FROM partman.show_partitions('public.events')}),
	$node->safe_psql('partman', q{SELECT count(*) + 1 FROM partman.show_partitions('public.events')}),
	'(b) pg_partman: run_maintenance() runs as the sandbox role and makes the partition ahead');
is( in_sandbox($conninfo, q{SELECT count(*) FROM pg_tables WHERE tablename LIKE 'events_p%' AND tableowner <> current_user}),
	'0', '(b) pg_partman: every partition belongs to the sandbox role');
# a copy of a snapshot of it: the copy's role gets the same
$node->safe_psql('postgres', "SELECT pgsandbox.snapshot('partman')");
my ($copy_name, $copy_conninfo) = clone_ok('partman', '(b) pg_partman, from a snapshot');
is($node->safe_psql('postgres', "SELECT method FROM pgsandbox.sandbox WHERE name = '$copy_name'"), 'snapshot',
	'(b) pg_partman: the clone is a copy of the snapshot');
is(in_sandbox($copy_conninfo, $show), $node->safe_psql('partman', $show),
	'(b) pg_partman: show_partitions() runs as the copy\'s role too');
$node->safe_psql('postgres', "SELECT pgsandbox.drop_snapshot('partman')");
# but nothing of pg_catalog
my ($ret_pc, $out_pc, $err_pc) = sandbox_psql($node, $conninfo,
	q{CREATE OR REPLACE FUNCTION pg_catalog.lower(text) RETURNS text LANGUAGE sql AS 'SELECT $1'});
like($err_pc, qr/permission denied/, '(b) a function of pg_catalog stays out of the sandbox role\'s reach');
($ret_pc, $out_pc, $err_pc) = sandbox_psql($node, $conninfo, q{UPDATE pg_catalog.pg_extension SET extversion = 'x'});
like($err_pc, qr/permission denied/, '(b) so does a catalog');

add_source('orafce');
$node->safe_psql('orafce', q{
CREATE EXTENSION orafce;
CREATE TABLE o (id int PRIMARY KEY, v oracle.varchar2(20), d date);
INSERT INTO o SELECT g, 'v' || g, date '2024-01-31' FROM generate_series(1, 30) g;
INSERT INTO utl_file.utl_file_dir (dir, dirname) VALUES ('/tmp', 'TMPDIR');
});
($name, $conninfo) = clone_ok('orafce', '(b) orafce');
is( in_sandbox($conninfo, 'SELECT count(*), max(oracle.add_months(d, 1)) FROM o'),
	$node->safe_psql('orafce', 'SELECT count(*), max(oracle.add_months(d, 1)) FROM o'),
	'(b) orafce: every row, and its functions work');
is(in_sandbox($conninfo, 'SELECT dirname FROM utl_file.utl_file_dir'), 'TMPDIR',
	'(b) orafce: its configuration rows arrive');
# orafce's directory list says where its UTL_FILE functions write with the
# server's rights: the sandbox role may read it, never change it
my ($ret_o, $out_o, $err_o) = sandbox_psql($node, $conninfo,
	q{INSERT INTO utl_file.utl_file_dir (dir, dirname) VALUES ('/', 'ROOT')});
like($err_o, qr/permission denied for table utl_file_dir/,
	'(b) orafce: the sandbox role may not add a directory for UTL_FILE');

# ---------------------------------------------------------------------------
# (c) superuser-only objects
# ---------------------------------------------------------------------------

add_source('evt');
$node->safe_psql('evt', q{
CREATE FUNCTION evt_fn() RETURNS event_trigger LANGUAGE plpgsql AS $$ BEGIN END $$;
CREATE EVENT TRIGGER "audit trg" ON ddl_command_end EXECUTE FUNCTION evt_fn();
COMMENT ON EVENT TRIGGER "audit trg" IS 'audits';
CREATE TABLE t (id int);
INSERT INTO t VALUES (1), (2);
});
($name, $conninfo) = clone_ok('evt', '(c) a source with an event trigger');
is(in_sandbox($conninfo, 'SELECT count(*) FROM t'), '2', '(c) the rest of it is there');
is(in_sandbox($conninfo, 'SELECT count(*) FROM pg_event_trigger'), '0', '(c) without the event trigger');
like(ready_detail($name), qr/left out, as only a superuser may own them: event trigger "audit trg"/,
	'(c) the ready event names what was left out');

add_source('opfam');
$node->safe_psql('opfam', 'CREATE OPERATOR FAMILY myfam USING btree; CREATE TABLE t (id int)');
my $before = leftovers();
my ($ret, $out, $err) = $node->psql('postgres', "SELECT pgsandbox.clone('opfam')");
isnt($ret, 0, '(c) a source with an operator family does not clone');
like($err, qr/must be superuser to create an operator family/, '(c) the error says why');
is(leftovers(), $before, '(c) and leaves nothing behind');

# ---------------------------------------------------------------------------
# (d) database settings
# ---------------------------------------------------------------------------

add_source('settings');
$node->safe_psql('postgres', q{
ALTER DATABASE settings SET search_path = app, public;
ALTER DATABASE settings SET timezone = 'Asia/Tokyo';
ALTER DATABASE settings SET statement_timeout = '5min';
ALTER DATABASE settings SET app.tenant = 'acme';
ALTER DATABASE settings SET log_min_duration_statement = 0;
CREATE ROLE settings_reader;
ALTER ROLE settings_reader IN DATABASE settings SET work_mem = '64MB';
});
$node->safe_psql('settings', 'CREATE SCHEMA app; CREATE TABLE app.t (id int); INSERT INTO app.t VALUES (7)');
($name, $conninfo) = clone_ok('settings', '(d) a source with database settings');
is( in_sandbox($conninfo,
		"SELECT current_setting('search_path') || '|' || current_setting('timezone') || '|'"
		  . " || current_setting('statement_timeout') || '|' || coalesce(current_setting('app.tenant', true), 'unset')"),
	'app, public|Asia/Tokyo|5min|unset',
	'(d) the sandbox role\'s session has the source database\'s settings, but no placeholder (only a superuser may store one)');
is(in_sandbox($conninfo, 'SELECT id FROM t'), '7', '(d) unqualified names resolve through the search_path');
is(in_sandbox($conninfo, "SELECT current_setting('log_min_duration_statement')"), '-1',
	'(d) a superuser-only setting is not set');
is(in_sandbox($conninfo, "SELECT current_setting('work_mem')"), '4MB', '(d) nor one of a particular role');
like(ready_detail($name), qr/database settings left out: app\.tenant, log_min_duration_statement/,
	'(d) the ready event names the settings left out');

# ---------------------------------------------------------------------------
# (e) encoding and locale
# ---------------------------------------------------------------------------

# (17 renamed daticulocale to datlocale, which the builtin provider uses too)
my $datlocale = $node->pg_version >= 17 ? 'datlocale' : 'daticulocale';
my $locale_sql = "SELECT pg_encoding_to_char(encoding) || '|' || datcollate || '|' || datctype"
  . " || '|' || datlocprovider::text || '|' || coalesce($datlocale, '')"
  . " FROM pg_database WHERE datname = current_database()";
my $sort_sql = "SELECT string_agg(w, ',' ORDER BY w) FROM words";

add_source('latin', "CREATE DATABASE latin ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0");
$node->safe_psql('latin',
	"CREATE TABLE words (w text); INSERT INTO words VALUES ('b'), ('A'), ('caf\x{e9}'), ('a'), ('B')");
($name, $conninfo) = clone_ok('latin', '(e) a LATIN1 / C source');
is(in_sandbox($conninfo, $locale_sql), 'LATIN1|C|C|c|', '(e) the sandbox is LATIN1 / C as well');
is(in_sandbox($conninfo, $sort_sql), $node->safe_psql('latin', $sort_sql), '(e) and sorts as the source');

add_source('icu',
	"CREATE DATABASE icu TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER icu ICU_LOCALE 'de-DE' LOCALE 'C.UTF-8'");
$node->safe_psql('icu', "CREATE TABLE words (w text); INSERT INTO words VALUES ('b'), ('A'), ('z'), ('a'), ('B')");
($name, $conninfo) = clone_ok('icu', '(e) an ICU source');
is(in_sandbox($conninfo, $locale_sql), 'UTF8|C.UTF-8|C.UTF-8|i|de-DE', '(e) the sandbox has its ICU locale');
is(in_sandbox($conninfo, $sort_sql), 'a,A,b,B,z', '(e) and sorts as the source does');
is($node->safe_psql('icu', $sort_sql), 'a,A,b,B,z', '(e) (the source sorts so, unlike C)');

SKIP:
{
	skip 'the builtin locale provider comes with PostgreSQL 17', 3 unless $node->pg_version >= 17;
	add_source('builtin',
		"CREATE DATABASE builtin TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER builtin BUILTIN_LOCALE 'C.UTF-8' LOCALE 'C.UTF-8'");
	$node->safe_psql('builtin', "CREATE TABLE words (w text); INSERT INTO words VALUES ('b'), ('A'), ('a')");
	($name, $conninfo) = clone_ok('builtin', '(e) a source with the builtin provider');
	is(in_sandbox($conninfo, $locale_sql), 'UTF8|C.UTF-8|C.UTF-8|b|C.UTF-8', '(e) the sandbox has the builtin provider and locale');
	is(in_sandbox($conninfo, $sort_sql), $node->safe_psql('builtin', $sort_sql), '(e) and sorts as the source');
}

# A locale this server lacks: a source on another server that has it, made
# from the system's locale definitions into a directory of its own.
my $locdir = tempdir(CLEANUP => 1);
system("localedef -i de_DE -f UTF-8 $locdir/de_DE.UTF-8 >/dev/null 2>&1");
SKIP:
{
	skip 'localedef could not build de_DE.UTF-8 (package "locales")', 8
	  unless -d "$locdir/de_DE.UTF-8";
	my $far = PostgreSQL::Test::Cluster->new('far');
	$far->init;
	{
		local $ENV{LOCPATH} = $locdir;
		$far->start;
	}
	$far->safe_psql('postgres',
		"CREATE DATABASE german TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'de_DE.UTF-8' LC_CTYPE 'de_DE.UTF-8'");
	$far->safe_psql('german', "CREATE TABLE words (w text); INSERT INTO words VALUES ('b'), ('A'), ('a')");
	$node->safe_psql('postgres',
		"SELECT pgsandbox.add_source('german', 'host=" . $far->host . ' port=' . $far->port
		  . " dbname=german', allow_data => true)");

	$before = leftovers();
	($ret, $out, $err) = $node->psql('postgres', "SELECT pgsandbox.clone('german', schema_only => false)",
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	isnt($ret, 0, '(e) a source whose locale this server lacks does not clone');
	like($err, qr/22023: locale "de_DE.UTF-8" of source "german" is not available on this server/,
		'(e) the error names the locale, with SQLSTATE 22023');
	is(leftovers(), $before, '(e) and leaves nothing behind');
	is( $node->safe_psql('postgres',
			"SELECT status FROM pgsandbox.sandbox WHERE source = 'german' ORDER BY id DESC LIMIT 1"),
		'failed', '(e) but a failed row');

	$node->safe_psql('postgres', 'ALTER SYSTEM SET pgsandbox.locale_fallback = on; SELECT pg_reload_conf()');
	ok( wait_until(
			sub {
				my ($r, $o, $e) = $node->psql('postgres',
					"SELECT name || ' ' || conninfo FROM pgsandbox.clone('german', schema_only => false)");
				($name, $conninfo) = split / /, $o, 2 if $r == 0;
				return $r == 0;
			},
			30),
		'(e) with pgsandbox.locale_fallback it clones');
	is(in_sandbox($conninfo, 'SELECT count(*) FROM words'), '3', '(e) with its rows');
	like(ready_detail($name), qr/instead of the source's "UTF8", "de_DE\.UTF-8".*locale_fallback/,
		'(e) the ready event records the fallback');
	unlike(in_sandbox($conninfo, $locale_sql), qr/de_DE/, '(e) the sandbox has the server\'s locale');
	$far->stop;
}

# ---------------------------------------------------------------------------
# (f) large objects
# ---------------------------------------------------------------------------
add_source('blobs');
$node->safe_psql('blobs', q{
CREATE ROLE blob_owner;
CREATE TABLE docs (id int PRIMARY KEY, body oid);
INSERT INTO docs VALUES (1, lo_from_bytea(0, ''));
INSERT INTO docs VALUES (2, lo_from_bytea(0, 'a small one'));
INSERT INTO docs SELECT 3, lo_from_bytea(0, string_agg(md5(g::text), '')::bytea)
  FROM generate_series(1, 5000) g;
SELECT lo_create(424242);
SELECT lo_put(424242, 100000, 'past a hole');
INSERT INTO docs VALUES (4, 424242);
ALTER LARGE OBJECT 424242 OWNER TO blob_owner;
-- made longer by lo_truncate, to a page's boundary: an empty last page
SELECT lo_from_bytea(424243, 'x');
DO $$DECLARE fd int; BEGIN
	fd := lo_open(424243, x'20000'::int);
	PERFORM lo_truncate(fd, 4096);
	PERFORM lo_close(fd);
END$$;
INSERT INTO docs VALUES (5, 424243);
CREATE TABLE other (id int PRIMARY KEY, note text);
INSERT INTO other SELECT g, 'n' || g FROM generate_series(1, 20) g;
});
my $lo_sql = q{SELECT string_agg(m.oid || ':' || md5(lo_get(m.oid)) || ':' || length(lo_get(m.oid)), ','
                  ORDER BY m.oid) FROM pg_largeobject_metadata m};
my $want_lo = $node->safe_psql('blobs', $lo_sql);
my $acl_sql = q{SELECT count(*) || ' ' || count(lomacl) FROM pg_largeobject_metadata};
my $acl_before = $node->safe_psql('blobs', $acl_sql);
foreach my $how ('plain', 'reduced')
{
	$node->safe_psql('postgres', q{SELECT pgsandbox.subset('blobs', 'public.other', 'id <= 5')})
	  if $how eq 'reduced';
	my ($name, $conninfo) = clone_ok('blobs', "(f) $how, with large objects");
	is(in_sandbox($conninfo, $lo_sql), $want_lo,
		"(f) $how: every large object, whole, with its OID");
	is(in_sandbox($conninfo, q{SELECT count(*) FROM pg_largeobject_metadata
		WHERE lomowner <> (SELECT oid FROM pg_roles WHERE rolname = current_user)}),
		'0', "(f) $how: all owned by the sandbox role");
	is(in_sandbox($conninfo, q{SELECT count(*) FROM docs d JOIN pg_largeobject_metadata m ON m.oid = d.body}),
		'5', "(f) $how: the rows refer to them");
	like(ready_detail($name), qr/5 large objects copied by the worker/,
		"(f) $how: the ready event says who copied them");
	$node->safe_psql('postgres', "SELECT pgsandbox.drop('$name')");
}
is($node->safe_psql('blobs', $acl_sql), $acl_before, '(f) nothing was granted on the source\'s large objects');

$node->stop;
done_testing();
