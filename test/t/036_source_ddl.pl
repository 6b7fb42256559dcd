
# 036_source_ddl.pl: a masked clone racing a change of its source's schema.
#
# A masked clone's reader holds its locks on the masked tables until the
# clone is filled, while pg_dump takes its own.  A statement on the source
# that waits for the reader's lock (here an ALTER TABLE) is queued ahead of
# pg_dump's lock on the same table; pg_dump would then wait for it while it
# waits for the reader, which waits for pg_dump, a deadlock the server
# cannot see, and both the clone and the source's statement would wait
# forever.  pg_dump gives up after pgsandbox.lock_timeout instead: the clone
# fails cleanly, the source's statement goes through, and the next clone
# works.
#
# The order is forced, not hoped for: a session holds a table that pg_dump
# locks before the masked one, so pg_dump is seen waiting for it; the ALTER
# TABLE is then seen waiting for the reader; only then is the first table
# let go.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

# long enough for the steps below to be taken while pg_dump waits on the
# first table, however slow the machine
my $lock_timeout = 15;
my $node = sandbox_node('source_ddl', "pgsandbox.lock_timeout = '${lock_timeout}s'\n");

sub sq { return $node->safe_psql('postgres', $_[0]); }

$node->safe_psql('postgres', 'CREATE DATABASE app');
# a_first is made first: pg_dump locks tables in the order of their oids
$node->safe_psql('app', q{
CREATE TABLE a_first (id int PRIMARY KEY);
INSERT INTO a_first SELECT generate_series(1, 10);
CREATE TABLE people (id int PRIMARY KEY, email text NOT NULL);
INSERT INTO people SELECT g, 'person' || g || '@corp.test' FROM generate_series(1, 100) g;});
sq("SELECT pgsandbox.add_source('app', 'dbname=app', allow_data => true)");
sq(q{SELECT pgsandbox.mask('app', 'public.people.email', $$'user' || id || '@example.invalid'$$)});

is(sq("SELECT count(*) FROM pgsandbox.sandbox"), '0', 'no sandbox yet');

# 1. a session holds a_first
my $holder = start_psql($node, 'dbname=app', 'BEGIN',
	'LOCK TABLE a_first IN ACCESS EXCLUSIVE MODE', 'SELECT pg_sleep(600)');
ok(wait_until(sub {
	$node->safe_psql('app', "SELECT count(*) FROM pg_locks WHERE relation = 'a_first'::regclass"
		  . " AND mode = 'AccessExclusiveLock' AND granted") eq '1' }, 60),
	'a session holds the first table');

# 2. the masked clone: its reader locks people, its pg_dump waits on a_first
my $clone = start_psql($node, 'dbname=postgres',
	"SELECT name FROM pgsandbox.clone('app', schema_only => false)");
ok(wait_until(sub {
	$node->safe_psql('app', q{SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
		WHERE a.application_name = 'pg_dump' AND l.relation = 'a_first'::regclass AND NOT l.granted}) eq '1'
	  && $node->safe_psql('app', q{SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
		WHERE a.application_name = 'pgsandbox' AND l.relation = 'people'::regclass AND l.mode = 'AccessShareLock' AND l.granted}) eq '1' },
	60),
	'the reader holds the masked table and pg_dump waits for the first one');

# 3. a change of the masked table waits for the reader
my $alter = start_psql($node, 'dbname=app', 'ALTER TABLE people ADD COLUMN nickname text');
ok(wait_until(sub {
	$node->safe_psql('app', "SELECT count(*) FROM pg_locks WHERE relation = 'people'::regclass"
		  . " AND mode = 'AccessExclusiveLock' AND NOT granted") eq '1' }, 60),
	'an ALTER TABLE of the masked table waits for the reader');

# 4. the first table is let go: pg_dump's lock on people is queued behind
# the ALTER TABLE, which waits for the reader
$node->safe_psql('postgres', "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
	  . " WHERE datname = 'app' AND query LIKE '%pg_sleep(600)%'");
finish_psql($holder);

ok(wait_until(sub { $clone->{run}->pumpable ? do { $clone->{run}->pump_nb; 0 } : 1 },
		3 * $lock_timeout + 30),
	'the clone ends instead of waiting forever');
my ($ret, $out, $err) = finish_psql($clone);
isnt($ret, 0, 'the clone fails');
like($err, qr/pg_dump/, 'the error says pg_dump failed');
my ($alter_ret, $alter_out, $alter_err) = finish_psql($alter);
is($alter_ret, 0, 'the ALTER TABLE on the source goes through') or diag($alter_err);
is($node->safe_psql('app', q{SELECT count(*) FROM pg_attribute
	WHERE attrelid = 'people'::regclass AND attname = 'nickname' AND NOT attisdropped}), '1',
	'and changed the table');
is(sq("SELECT string_agg(status, ',' ORDER BY id) FROM pgsandbox.sandbox"), 'failed',
	'the clone left one failed row');
is(untracked_sandboxes($node), '0', 'and no database or role');

# the next clone works, masked
my ($name, $conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('app', schema_only => false)");
($ret, $out, $err) = sandbox_psql($node, $conn,
	q{SELECT count(*) || ' ' || count(*) FILTER (WHERE email LIKE '%@example.invalid') || ' ' || count(nickname) FROM people});
is($out, '100 100 0', 'a clone after the change is masked and has the new column');

done_testing();
