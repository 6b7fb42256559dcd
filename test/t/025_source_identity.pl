
# 025_source_identity.pl: a source removed and added again is a new source,
# even in one transaction that a snapshot build of the old one overlaps.
#
# Session A begins a transaction, and waits there for a snapshot of source
# "gen" (database gen_a) to be ready; the test takes that snapshot, which is
# made after A's transaction began.  A then removes "gen", adds it again on
# database gen_b, and commits.  A clone of "gen" must hold gen_b's rows: the
# snapshot of gen_a serves it not, and is dropped as a snapshot of a removed
# source.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $node = sandbox_node('identity', "pgsandbox.max_concurrent_clones = 2\n");
my $su = superuser_name();

sub sq { return $node->safe_psql('postgres', $_[0]); }

for my $db ('gen_a', 'gen_b')
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, "CREATE TABLE t (v text); INSERT INTO t VALUES ('$db')");
}
sq("SELECT pgsandbox.add_source('gen', 'dbname=gen_a', allow_data => true)");

# A: the transaction begins, then waits for a ready snapshot of gen
my $a = start_psql(
	$node,
	$node->connstr('postgres') . " user=$su application_name=session_a",
	'BEGIN',
	q{DO $$
BEGIN
	WHILE NOT EXISTS (SELECT 1 FROM pgsandbox.sandbox
	                   WHERE kind = 'snapshot' AND source = 'gen' AND status = 'ready') LOOP
		PERFORM pg_sleep(0.05);
	END LOOP;
END $$},
	q{SELECT pgsandbox.remove_source('gen')},
	q{SELECT pgsandbox.add_source('gen', 'dbname=gen_b', allow_data => true)},
	'COMMIT');
ok( wait_until(
		sub {
			sq(q{SELECT count(*) FROM pg_stat_activity
			      WHERE application_name = 'session_a' AND query LIKE 'DO%' AND xact_start IS NOT NULL})
			  eq '1';
		}),
	'session A is in its transaction, waiting');

# the snapshot of gen_a, made after A's transaction began
sq(q{SELECT pgsandbox.snapshot('gen')});
my ($ret, $out, $err) = finish_psql($a);
is($ret, 0, 'session A removed and added the source again, in one transaction') or diag $err;
ok( sq(q{SELECT s.created_at > a.added_at FROM pgsandbox.sandbox s, pgsandbox.source a
	      WHERE s.kind = 'snapshot' AND a.name = 'gen'}) eq 't',
	'the snapshot of the old source was made after the new source\'s added_at');

my ($name, $conninfo) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('gen', schema_only => false)");
my ($r, $rows) = sandbox_psql($node, $conninfo, 'SELECT v FROM t');
is($rows, 'gen_b', 'the clone holds the new source\'s rows');
is(sq("SELECT method FROM pgsandbox.sandbox WHERE name = '$name'"), 'dump',
	'it was dumped from the source, not copied from the old source\'s snapshot');
ok( wait_until(
		sub { sq(q{SELECT count(*) FROM pgsandbox.sandbox WHERE kind = 'snapshot' AND status = 'dropped'}) eq '1' }),
	'the old source\'s snapshot is dropped');
like(sq(q{SELECT detail FROM pgsandbox.event e JOIN pgsandbox.sandbox s ON s.name = e.sandbox
	      WHERE s.kind = 'snapshot' AND e.action = 'drop'}),
	qr/snapshot of a removed source/, 'as a snapshot of a removed source');

# a snapshot of the new source serves it
sq(q{SELECT pgsandbox.snapshot('gen')});
($name, $conninfo) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('gen', schema_only => false)");
($r, $rows) = sandbox_psql($node, $conninfo, 'SELECT v FROM t');
is($rows . ' ' . sq("SELECT method FROM pgsandbox.sandbox WHERE name = '$name'"), 'gen_b snapshot',
	'a snapshot of the new source serves it');

is(untracked_sandboxes($node), '0', 'nothing untracked');
done_testing();
