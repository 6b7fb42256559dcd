
# 027_statistics.pl: clones with the planner's statistics of their source.
#
# From PostgreSQL 18, pg_dump can carry the planner's statistics.  A
# sandbox with them has the source's rows of pg_stats at once, schema only
# or with data, and a data clone plans as its source does before any
# ANALYZE: EXPLAIN picks the source's plan for a query whose plan depends on
# them (a skewed column: a sequential scan for the common value, which
# without statistics is planned as rare).  A schema-only sandbox's tables
# are empty, and the planner sizes a table by its actual pages, so its
# scans plan as for an empty table whatever the statistics say; that is
# stated, not hidden, in the README.  Statistics hold values of
# the columns, so a clone gets them only from a source an admin approved
# with allow_statistics, never from one with masking rules, and never on a
# server older than 18: each refusal says why, with its SQLSTATE, and makes
# nothing.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $node = sandbox_node('statistics', "pgsandbox.max_concurrent_clones = 2\nautovacuum = off\n");
my $major = int($node->safe_psql('postgres', 'SHOW server_version_num') / 10000);

sub sq { return $node->safe_psql('postgres', $_[0]); }

# A refused clone: its SQLSTATE and message, and that nothing was made.
sub refused
{
	my ($call, $what) = @_;
	my $rows = sq('SELECT count(*) FROM pgsandbox.sandbox');
	my $made = sandbox_leftovers($node);
	my ($ret, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\nSELECT name FROM $call");
	isnt($ret, 0, "$what: refused");
	is(sq('SELECT count(*) FROM pgsandbox.sandbox') . ' ' . sandbox_leftovers($node), "$rows $made",
		"$what: nothing made");
	return $err;
}

$node->safe_psql('postgres', 'CREATE DATABASE shop');
$node->safe_psql('shop', q{
CREATE TABLE orders (id int PRIMARY KEY, status text NOT NULL, note text);
INSERT INTO orders SELECT g, CASE WHEN g % 1000 = 0 THEN 'open' ELSE 'done' END, 'n' || g
  FROM generate_series(1, 100000) g;
CREATE INDEX orders_status ON orders (status);
ANALYZE orders;
});
sq("SELECT pgsandbox.add_source('shop', 'dbname=shop', allow_data => true, allow_statistics => true)");
sq("SELECT pgsandbox.add_source('shop_plain', 'dbname=shop', allow_data => true)");

if ($major < 18)
{
	like(refused(q{pgsandbox.clone('shop', statistics => true)}, "on PostgreSQL $major"),
		qr/0A000: a clone with the planner's statistics needs PostgreSQL 18 or later/,
		"on PostgreSQL $major: 0A000, saying which version it needs");
	is(sq("SELECT allow_statistics FROM pgsandbox.sources WHERE name = 'shop'"), 't',
		'a source may still be approved for statistics, for a later upgrade');
	done_testing();
	exit 0;
}

# the plan of a query, without costs: its node types and the index used
sub plan_of
{
	my ($conninfo, $sql) = @_;
	my $explain = "EXPLAIN (COSTS OFF) $sql";
	my ($ret, $out, $err) =
	  defined $conninfo ? sandbox_psql($node, $conninfo, $explain) : $node->psql('shop', $explain);
	die $err if $ret != 0;
	return $out;
}

my $rare = q{SELECT * FROM orders WHERE status = 'open'};
my $common = q{SELECT * FROM orders WHERE status = 'done'};
like(plan_of(undef, $rare), qr/orders_status/, 'the source reads the rare value through the index');
like(plan_of(undef, $common), qr/Seq Scan on orders/, 'and the common one with a sequential scan');

# a schema-only clone with statistics plans as the source
my ($sbx, $conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('shop', statistics => true)");
my ($r, $count) = sandbox_psql($node, $conn, 'SELECT count(*) FROM orders');
is($count, '0', 'the sandbox is schema only: no row');
($r, my $mcv) = sandbox_psql($node, $conn,
	q{SELECT most_common_vals::text FROM pg_stats WHERE tablename = 'orders' AND attname = 'status'});
is($mcv, $node->safe_psql('shop',
	q{SELECT most_common_vals::text FROM pg_stats WHERE tablename = 'orders' AND attname = 'status'}),
	'pg_stats has the source\'s statistics of the column');
like(sq("SELECT detail FROM pgsandbox.event WHERE sandbox = '$sbx' AND action = 'ready'"),
	qr/with the planner's statistics of the source/, 'the ready event says so');
is(sq("SELECT method FROM pgsandbox.sandbox WHERE name = '$sbx'"), 'dump', 'it is a dump of the live source');

# without statistics, the same clone has none (the check above can fail)
my ($plain, $plain_conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('shop')");
($r, my $none) = sandbox_psql($node, $plain_conn, q{SELECT count(*) FROM pg_stats WHERE tablename = 'orders'});
is($none, '0', 'a clone without statistics has none');

# a data clone with statistics has them without an ANALYZE, and plans as
# the source; one without them plans the common value as a rare one
($sbx, $conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('shop', schema_only => false, statistics => true)");
($r, my $data_mcv) = sandbox_psql($node, $conn,
	q{SELECT (SELECT count(*) FROM orders) || ' ' || most_common_vals::text FROM pg_stats
	   WHERE tablename = 'orders' AND attname = 'status'});
is($data_mcv, "100000 $mcv", 'a data clone has its rows and the source\'s statistics');
is(plan_of($conn, $common), plan_of(undef, $common), 'EXPLAIN picks the source\'s plan for the common value');
is(plan_of($conn, $rare), plan_of(undef, $rare), 'and for the rare one');
my ($bare, $bare_conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('shop', schema_only => false)");
($r, $none) = sandbox_psql($node, $bare_conn, q{SELECT count(*) FROM pg_stats WHERE tablename = 'orders'});
is($none, '0', 'a data clone without statistics has none before an ANALYZE');
isnt(plan_of($bare_conn, $common), plan_of(undef, $common), 'and plans the common value otherwise');

# refusals
like(refused(q{pgsandbox.clone('shop_plain', statistics => true)}, 'a source not approved for statistics'),
	qr/42501: source "shop_plain" does not let its statistics be copied/,
	'a source not approved for statistics: 42501');
sq(q{SELECT pgsandbox.mask('shop', 'public.orders.note', 'NULL')});
like(refused(q{pgsandbox.clone('shop', statistics => true)}, 'a source with masking rules'),
	qr/0A000: the statistics of source "shop" cannot be copied: it has masking rules/,
	'a source with masking rules: 0A000');
sq(q{SELECT pgsandbox.unmask('shop', 'public.orders.note')});
sq(q{SELECT pgsandbox.exclude_data('shop', 'public.orders')});
like(refused(q{pgsandbox.clone('shop', statistics => true)}, 'a source with an exclude_data rule'),
	qr/0A000: the statistics of source "shop" cannot be copied: it has masking rules/,
	'a source with an exclude_data rule: 0A000');

is(untracked_sandboxes($node), '0', 'nothing untracked');
done_testing();
