
# 054_live_cross_version.pl: a source of an older major, live on this host
# (worker/live.c, clone/live_copy.c): its slot, its publication and its
# walsender are the older server's, the subscription and its apply this
# one's.
#
# The servers come from test/pg/foreign.sh (wal_level = logical, logins by
# password), which test/run-tests.sh starts when PG_VERSIONS names several
# majors; without one older than this host, the test is skipped, saying
# why.  For each older major:
# - set_live() builds a live snapshot, leaving out the rows of a table an
#   exclude_data rule names (the build reads in the slot's snapshot on the
#   older server); doctor() finds the source followable;
# - inserts, updates, deletes and a TRUNCATE reach new copies and not the
#   earlier ones, with every sequence as the source has it, and a
#   data_as_of no earlier than the changes, and none of the excluded
#   table's; doctor() finds the live snapshot keeping up;
# - a column added on the source: a live_rebuild event, then a new live
#   snapshot with the column, whose copies hold the source;
# - unset_live() and remove_source() leave no subscription here and no slot
#   pgsandbox made on the source.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my %port = foreign_ports();
my $node = sandbox_node('xlive', "pgsandbox.max_sandboxes_per_owner = 50\npgsandbox.live_look_interval = '1s'\n");
my $host_major = int($node->safe_psql('postgres', 'SHOW server_version_num') / 10000);
my @older = grep { $_ < $host_major } sort { $a <=> $b } keys %port;
if (!@older)
{
	$node->stop;
	plan skip_all => "no server of an older major than $host_major: run the suite with "
	  . 'PG_VERSIONS naming several majors (test/run-tests.sh starts them with test/pg/foreign.sh)';
}

sub sq { return $node->safe_psql('postgres', $_[0]); }

sub in_sandbox { return sandbox_sql($node, @_); }

# what a database holds of both tables, as one line
my $digest = q{SELECT (SELECT count(*) || ' ' || md5(COALESCE(string_agg(id || ':' || note || ':' || kind,
                                   ',' ORDER BY id), '')) FROM shop.orders)
                || ' ' || (SELECT count(*) FROM shop.notes)};
my $seq = q{SELECT last_value FROM shop.orders_id_seq};
# (the databases of the foreign servers are shared by the hosts of one
# run: each host uses its own)
my $db = "xlive_for_$host_major";
my $login = "xlive_repl_$host_major";

foreach my $v (@older)
{
	my $source = "live$v";
	my $fq = sub { return foreign_psql($node, $port{$v}, $_[0] // $db, $_[1]); };
	$fq->('postgres', "DROP DATABASE IF EXISTS $db");
	$fq->('postgres', "DROP ROLE IF EXISTS $login");
	$fq->('postgres', "CREATE ROLE $login LOGIN REPLICATION PASSWORD 'xlivepw' IN ROLE pg_read_all_data");
	$fq->('postgres', "CREATE DATABASE $db");
	$fq->(undef, q{
CREATE SCHEMA shop;
CREATE TYPE shop.kind AS ENUM ('new', 'old');
CREATE TABLE shop.orders (id bigserial PRIMARY KEY, note text NOT NULL, kind shop.kind NOT NULL);
INSERT INTO shop.orders (note, kind) SELECT 'o' || g, 'old' FROM generate_series(1, 300) g;
CREATE TABLE shop.notes (id int PRIMARY KEY, body text);
INSERT INTO shop.notes SELECT g, 'n' || g FROM generate_series(1, 10) g;
CREATE TABLE shop.secrets (id int PRIMARY KEY, s text);
INSERT INTO shop.secrets VALUES (1, 'before');
CREATE PUBLICATION pub FOR TABLE shop.orders, shop.notes, shop.secrets;
});
	sq("SELECT pgsandbox.add_source('$source',"
		  . " 'host=127.0.0.1 port=$port{$v} dbname=$db user=$login password=xlivepw', allow_data => true)");
	sq("SELECT pgsandbox.exclude_data('$source', 'shop.secrets')");

	sq("SELECT pgsandbox.set_live('$source', 'pub')");
	my $snap = live_snapshot_of($node, $source);
	ok($snap, "PostgreSQL $v source on a $host_major host: set_live() builds a live snapshot");
	is(sq("SELECT ok FROM pgsandbox.doctor() WHERE \"check\" = 'live source \"$source\" can be followed'"),
		't', "PostgreSQL $v source: doctor() finds it followable");
	my ($a_name, $a_conn) = split /\|/,
	  sq("SELECT name, conninfo FROM pgsandbox.clone('$source', schema_only => false)");
	is(in_sandbox($a_conn, $digest), $fq->(undef, $digest), "PostgreSQL $v source: a copy holds the source");

	$fq->(undef, q{
INSERT INTO shop.orders (note, kind) SELECT 'later ' || g, 'new' FROM generate_series(1, 25) g;
UPDATE shop.orders SET note = note || ' changed', kind = 'new' WHERE id % 7 = 0;
DELETE FROM shop.orders WHERE id BETWEEN 50 AND 60;
TRUNCATE shop.notes;
INSERT INTO shop.secrets VALUES (2, 'after');
});
	my $at = $fq->(undef, 'SELECT now()');
	live_caught_up($node, $source, $at, "PostgreSQL $v source");
	my ($b_name, $b_conn) = split /\|/,
	  sq("SELECT name, conninfo FROM pgsandbox.clone('$source', schema_only => false)");
	is(in_sandbox($b_conn, $digest), $fq->(undef, $digest),
		"PostgreSQL $v source: inserts, updates, deletes and a TRUNCATE reach a new copy");
	is(in_sandbox($b_conn, $seq), $fq->(undef, $seq), "PostgreSQL $v source: with the source's sequence");
	is(in_sandbox($b_conn, q{SELECT count(*) FROM shop.secrets}), '0',
		"PostgreSQL $v source: and no row of the table exclude_data leaves out");
	like(sq("SELECT ok || ' ' || detail FROM pgsandbox.doctor()"
			  . " WHERE \"check\" = 'the live snapshot of source \"$source\" keeps up'"),
		qr/^true It holds every change the source made up to .* \([0-9.]+ s ago, by this server.s clock\)/,
		"PostgreSQL $v source: doctor() finds its live snapshot keeping up");
	ok(sq("SELECT data_as_of >= '$at'::timestamptz FROM pgsandbox.sandbox WHERE name = '$b_name'") eq 't',
		"PostgreSQL $v source: its data_as_of is no earlier than the changes");
	isnt(in_sandbox($a_conn, $digest), in_sandbox($b_conn, $digest),
		"PostgreSQL $v source: and not the earlier copy");

	# a column added: not replicated, so a rebuild
	$fq->(undef, q{ALTER TABLE shop.notes ADD COLUMN extra int DEFAULT 7;
INSERT INTO shop.notes VALUES (1, 'after the column', 8)});
	my $snap2 = live_snapshot_of($node, $source, $snap);
	ok($snap2, "PostgreSQL $v source: a column added leads to a new live snapshot");
	ok(sq("SELECT count(*) > 0 FROM pgsandbox.events e JOIN pgsandbox.sandbox s ON s.name = e.sandbox"
			  . " WHERE s.id = $snap AND e.action = 'live_rebuild'") eq 't',
		"PostgreSQL $v source: with a live_rebuild event");
	$fq->(undef, q{INSERT INTO shop.notes VALUES (2, 'after the rebuild', 9)});
	$at = $fq->(undef, 'SELECT now()');
	live_caught_up($node, $source, $at, "PostgreSQL $v source, rebuilt");
	my ($c_name, $c_conn) = split /\|/,
	  sq("SELECT name, conninfo FROM pgsandbox.clone('$source', schema_only => false)");
	my $notes = q{SELECT string_agg(id || ':' || body || ':' || extra, ',' ORDER BY id) FROM shop.notes};
	is(in_sandbox($c_conn, $notes), $fq->(undef, $notes),
		"PostgreSQL $v source: its copies hold the new column and the changes since");

	# unset_live(), then remove_source()
	sq("SELECT pgsandbox.unset_live('$source')");
	ok( wait_until(
			sub {
				sq(q{SELECT count(*) FROM pg_subscription}) eq '0'
				  && $fq->(undef, q{SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'pgsandbox\_%' AND database = current_database()})
				  eq '0';
			},
			60),
		"PostgreSQL $v source: unset_live() leaves no subscription here and no slot there");
	sq("SELECT pgsandbox.drop('$_')") foreach ($a_name, $b_name, $c_name);
	sq("SELECT pgsandbox.remove_source('$source')");
	is(untracked_sandboxes($node), 0, "PostgreSQL $v source: nothing left that pgsandbox does not track");
	$fq->('postgres', "DROP DATABASE $db");
	$fq->('postgres', "DROP ROLE $login");
}

$node->stop;
done_testing();
