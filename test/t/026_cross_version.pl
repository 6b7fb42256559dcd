
# 026_cross_version.pl: a sandbox host clones sources of other majors.
#
# The servers come from test/pg/foreign.sh, which test/run-tests.sh starts
# when PG_VERSIONS names several majors: PGSANDBOX_FOREIGN lists them as
# "VERSION:PORT ...", plain servers on 127.0.0.1 that trust "postgres".
# Without them the test is skipped, saying why.
#
# - A source of an older major clones with its rows, masked where a rule
#   says, and through a snapshot copy; doctor() says which major it runs.
# - A source of a newer major is refused by clone() before anything is
#   made (0A000, naming both majors, with a hint), and doctor() says
#   pg_dump cannot dump it.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my %port = foreign_ports();
my $node = sandbox_node('xversion', "pgsandbox.max_concurrent_clones = 2\n");
my $host_major = int($node->safe_psql('postgres', 'SHOW server_version_num') / 10000);
my @older = grep { $_ < $host_major } sort { $a <=> $b } keys %port;
my @newer = grep { $_ > $host_major } sort { $a <=> $b } keys %port;
if (!@older && !@newer)
{
	$node->stop;
	plan skip_all => "no server of another major than $host_major: run the suite with "
	  . 'PG_VERSIONS naming several majors (test/run-tests.sh starts them with test/pg/foreign.sh)';
}
my $marker = 'zq3cross-5521@example.org';

sub sq { return $node->safe_psql('postgres', $_[0]); }

# SQL on a foreign server, as its superuser; dies on error
sub fq
{
	my ($version, $db, $sql) = @_;
	return foreign_psql($node, $port{$version}, $db, $sql);
}

sub in_sandbox
{
	my ($conninfo, $sql) = @_;
	my ($ret, $out, $err) = sandbox_psql($node, $conninfo, $sql);
	die "in sandbox: $err" if $ret != 0;
	return $out;
}

my $rows_sql = q{SELECT string_agg(id || ':' || note || ':' || kind, ',' ORDER BY id) FROM app.customers};
my $db = "xsrc_for_$host_major";

foreach my $v (@older)
{
	my $source = "pg$v";
	fq($v, 'postgres', "DROP DATABASE IF EXISTS $db");
	fq($v, 'postgres', "CREATE DATABASE $db");
	fq($v, $db, qq{
CREATE SCHEMA app;
CREATE TYPE app.kind AS ENUM ('new', 'old');
CREATE TABLE app.customers (id int PRIMARY KEY, email text NOT NULL UNIQUE, note text, kind app.kind);
INSERT INTO app.customers SELECT g, 'p' || g || '\@corp.test', 'n' || g, 'old' FROM generate_series(1, 200) g;
INSERT INTO app.customers VALUES (201, '$marker', 'marker', 'new');
CREATE INDEX customers_note ON app.customers (note);
CREATE VIEW app.emails AS SELECT id, email FROM app.customers;
CREATE MATERIALIZED VIEW app.kinds AS SELECT kind, count(*) AS n FROM app.customers GROUP BY kind;
});
	sq("SELECT pgsandbox.add_source('$source', 'host=127.0.0.1 port=$port{$v} user=postgres dbname=$db', allow_data => true)");
	like(sq("SELECT detail FROM pgsandbox.doctor() WHERE \"check\" = 'source \"$source\" can be dumped'"),
		qr/runs PostgreSQL $v\b/, "PostgreSQL $v source: doctor() says which major it runs");

	# with its rows
	my ($sbx, $conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('$source', schema_only => false)");
	is(in_sandbox($conn, $rows_sql), fq($v, $db, $rows_sql),
		"PostgreSQL $v source on a $host_major host: every row, as in the source");
	is(in_sandbox($conn, q{SELECT count(*) FROM app.emails}) . ' ' . in_sandbox($conn, q{SELECT n FROM app.kinds WHERE kind = 'new'}),
		'201 1', "PostgreSQL $v source: its view and materialized view work");
	is(in_sandbox($conn, q{SELECT count(*) FROM pg_indexes WHERE schemaname = 'app'}), '3',
		"PostgreSQL $v source: its indexes are there");

	# schema_diff: the views print differently on the two majors (from 16
	# on, without their table's name), yet an unchanged schema shows no
	# difference, and a changed view shows, both sides printed alike
	is(sq("SELECT pgsandbox.schema_diff('$sbx')"), '{"added": [], "changed": [], "dropped": []}',
		"PostgreSQL $v source: schema_diff right after the clone is empty");
	my $viewdef = q{SET search_path = pg_catalog; SELECT pg_get_viewdef('app.emails'::regclass)};
	my $restored = in_sandbox($conn, $viewdef);
	isnt($restored, fq($v, $db, $viewdef), "PostgreSQL $v source: its view prints differently here")
	  if $v < 16 && $host_major >= 16;
	in_sandbox($conn, q{CREATE OR REPLACE VIEW app.emails AS SELECT id, email FROM app.customers WHERE id > 1});
	is( sq( qq{SELECT string_agg(c->>'kind' || ' ' || (c->>'name') || ': '
			|| (c->'before'->>'definition') || ' => ' || (c->'after'->>'definition'), ' | ')
			FROM jsonb_array_elements(pgsandbox.schema_diff('$sbx')->'changed') c}),
		"view app.emails: $restored => " . in_sandbox($conn, $viewdef),
		"PostgreSQL $v source: a changed view is the one change, both sides printed by the sandbox's server");
	is(sq("SELECT jsonb_array_length(d->'added') + jsonb_array_length(d->'dropped') FROM pgsandbox.schema_diff('$sbx') d"),
		'0', "PostgreSQL $v source: and nothing is added or dropped");

	# masked
	sq(qq{SELECT pgsandbox.mask('$source', 'app.customers.email', \$\$'c' || id || '\@example.invalid'\$\$)});
	($sbx, $conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('$source', schema_only => false)");
	is(in_sandbox($conn, qq{SELECT count(*) FILTER (WHERE email LIKE '%\@example.invalid') || '/'
		|| count(*) FILTER (WHERE email = '$marker') FROM app.customers}),
		'201/0', "PostgreSQL $v source: a masked clone holds no real value");
	is(in_sandbox($conn, q{SELECT count(*) FROM app.emails WHERE email LIKE '%corp.test'}), '0',
		"PostgreSQL $v source: nor does its view");

	# a snapshot copy (masked, as the snapshot is)
	sq("SELECT pgsandbox.snapshot('$source')");
	($sbx, $conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('$source', schema_only => false)");
	is(sq("SELECT method FROM pgsandbox.sandbox WHERE name = '$sbx'"), 'snapshot',
		"PostgreSQL $v source: the clone is a copy of its snapshot");
	is(in_sandbox($conn, q{SELECT count(*) || '/' || count(*) FILTER (WHERE email LIKE '%@example.invalid') FROM app.customers}),
		'201/201', "PostgreSQL $v source: the copy has every row, masked");
	sq("SELECT pgsandbox.drop_snapshot('$source')");
	sq("SELECT pgsandbox.remove_source('$source')");
}

foreach my $v (@newer)
{
	my $source = "pg$v";
	fq($v, 'postgres', "DROP DATABASE IF EXISTS $db");
	fq($v, 'postgres', "CREATE DATABASE $db");
	fq($v, $db, 'CREATE TABLE t (id int)');
	sq("SELECT pgsandbox.add_source('$source', 'host=127.0.0.1 port=$port{$v} user=postgres dbname=$db', allow_data => true)");
	my $rows = sq('SELECT count(*) FROM pgsandbox.sandbox');
	# the sbx_ databases and roles there now; the drops of the older
	# sources' snapshots may still be under way, so some may go meanwhile
	my $names_sql = q{SELECT string_agg(n, ',' ORDER BY n) FROM (
		SELECT 'db:' || datname FROM pg_database WHERE datname LIKE 'sbx\_%'
		UNION ALL SELECT 'role:' || rolname FROM pg_roles WHERE rolname LIKE 'sbx\_%') x(n)};
	my %before = map { $_ => 1 } split /,/, sq($names_sql);
	my ($ret, $out, $err) = $node->psql('postgres',
		"\\set VERBOSITY verbose\nSELECT name FROM pgsandbox.clone('$source')");
	isnt($ret, 0, "PostgreSQL $v source on a $host_major host: the clone is refused");
	like($err, qr/0A000: source "$source" runs PostgreSQL $v, which is newer than this server's PostgreSQL $host_major/,
		"PostgreSQL $v source: with 0A000, naming both majors");
	like($err, qr/HINT:  Run pgsandbox on PostgreSQL $v or later/, "PostgreSQL $v source: with a hint");
	is(sq('SELECT count(*) FROM pgsandbox.sandbox'), $rows, "PostgreSQL $v source: no row was made");
	is(join(',', untracked_sandboxes($node), grep { !$before{$_} } split /,/, sq($names_sql)), '0',
		"PostgreSQL $v source: nor any database or role");
	like(sq("SELECT ok || ' ' || detail FROM pgsandbox.doctor() WHERE \"check\" = 'source \"$source\" can be dumped'"),
		qr/^false .*pg_dump cannot dump a newer server/, "PostgreSQL $v source: doctor() says why");
	sq("SELECT pgsandbox.remove_source('$source')");
}

done_testing();
