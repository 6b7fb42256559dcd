
# 058_copy_waits.pl: a clone copied from a snapshot waits out what holds the
# snapshot for a moment, within pgsandbox.copy_lock_wait, and past it fails
# naming what held it (clone/template_wait.c).
#
# A session holds a lock on the snapshot's database that CREATE DATABASE
# ... TEMPLATE must wait for (COMMENT ON DATABASE, as the worker's swap of
# a refreshed snapshot or an autovacuum would for a moment), each try of
# the copy waiting pgsandbox.lock_timeout (500 ms here).  Held until the
# copy is seen waiting and then three times that long, the clone succeeds
# with the source's rows and its ready event says how long it waited and
# for whom.  Held until the clone fails, with copy_lock_wait at 2 s, the
# clone fails with 55P03 naming the session that held it, and leaves only
# its failed row.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $node = sandbox_node('waits', "pgsandbox.lock_timeout = 500\nautovacuum = off\n");
sub sq { return $node->safe_psql('postgres', $_[0]); }
my $su = superuser_name();

$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql('src', q{
CREATE TABLE t (id int PRIMARY KEY, v text);
INSERT INTO t SELECT x, md5(x::text) FROM generate_series(1, 1000) x;});
my $source_rows = $node->safe_psql('src', q{SELECT count(*) || ':' || md5(string_agg(v, '' ORDER BY id)) FROM t});
sq(q{SELECT pgsandbox.add_source('src', 'dbname=src', allow_data => true)});
sq(q{SELECT * FROM pgsandbox.snapshot('src')});
my $snap = sq(q{SELECT name FROM pgsandbox.sandbox WHERE kind = 'snapshot' AND status = 'ready'});
my $snap_oid = sq("SELECT oid FROM pg_database WHERE datname = '$snap'");
ok($snap_oid =~ /^\d+$/, "the source has a snapshot, $snap");

# a lock on the snapshot's database that CREATE DATABASE ... TEMPLATE waits for
my $waiting = qq{EXISTS (SELECT FROM pg_locks WHERE NOT granted AND locktype = 'object'
	AND classid = 'pg_database'::regclass AND objid = $snap_oid)};
sub hold_snapshot
{
	my ($until, $then) = @_;
	my $h = start_psql($node, 'dbname=postgres', 'SET statement_timeout = 120000', 'BEGIN',
		"COMMENT ON DATABASE $snap IS 'held'",
		"DO \$\$ BEGIN WHILE NOT ($until) LOOP PERFORM pg_sleep(0.05); END LOOP; $then END \$\$",
		'ROLLBACK');
	ok(wait_until(sub {
		sq(qq{SELECT count(*) FROM pg_locks WHERE granted AND locktype = 'object'
			AND classid = 'pg_database'::regclass AND objid = $snap_oid}) eq '1' }),
		'a session holds the snapshot');
	return $h;
}

# ---------------------------------------------------------------------
# held for a moment: the copy waits it out
# ---------------------------------------------------------------------
# once the copy waits, three times its lock timeout more
my $holder = hold_snapshot($waiting, 'PERFORM pg_sleep(1.5);');
my ($ret, $out, $err) = $node->psql('postgres',
	q{SELECT name, conninfo FROM pgsandbox.clone('src', schema_only => false)});
my ($hret) = finish_psql($holder);
is($ret, 0, 'a clone whose snapshot is held for a moment succeeds') or diag $err;
is($hret, 0, 'the session that held it ended as it meant to');
my ($name, $conninfo) = split /\|/, $out;
my $ready = sq("SELECT detail FROM pgsandbox.events WHERE sandbox = '$name' AND action = 'ready'");
like($ready, qr/^copied from a snapshot/, 'it is a copy of the snapshot');
like($ready, qr/the copy waited [0-9.]+ s for its snapshot, held by client backend \d+ of role "?\Q$su\E"? in database postgres/,
	'its ready event says how long it waited, and for whom');
my ($sret, $sout, $serr) = sandbox_psql($node, $conninfo,
	q{SELECT count(*) || ':' || md5(string_agg(v, '' ORDER BY id)) FROM t});
is($sret, 0, 'the sandbox role logs in with the returned credentials') or diag $serr;
is($sout, $source_rows, "the copy holds the source's rows");
sq("SELECT pgsandbox.drop('$name')");

# ---------------------------------------------------------------------
# held past copy_lock_wait: the clone fails, naming what held it
# ---------------------------------------------------------------------
sq("ALTER SYSTEM SET pgsandbox.copy_lock_wait = '2s'");
sq('SELECT pg_reload_conf()');
poll_value($node, 'SHOW pgsandbox.copy_lock_wait', '2s');
$holder = hold_snapshot(q{EXISTS (SELECT FROM pgsandbox.sandbox WHERE kind = 'sandbox' AND status = 'failed')}, '');
my $before = sq(q{SELECT count(*) FROM pgsandbox.sandbox WHERE kind = 'sandbox'});
($ret, $out, $err) = $node->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT name FROM pgsandbox.clone('src', schema_only => false)");
($hret) = finish_psql($holder);
isnt($ret, 0, 'a clone whose snapshot is held past copy_lock_wait fails');
is($hret, 0, 'the session that held it saw it fail');
like($err, qr/ERROR:\s+55P03: could not copy the snapshot: canceling statement due to lock timeout/,
	'with 55P03');
like($err, qr/DETAIL:\s+It was held for \d+ ms, by client backend \d+ of role "?\Q$su\E"? in database postgres\./,
	'naming the session that held it');
like($err, qr/HINT:\s+A copy waits at most pgsandbox\.copy_lock_wait for its snapshot\./, 'and the setting');
is(sq(q{SELECT count(*) FROM pgsandbox.sandbox WHERE kind = 'sandbox'}) - $before, 1, 'one row was added');
is(sq(q{SELECT status FROM pgsandbox.sandbox WHERE kind = 'sandbox' ORDER BY id DESC LIMIT 1}), 'failed',
	'and it is failed');
is(untracked_sandboxes($node), '0', 'no database or role is left');
is(sq(q{SELECT status FROM pgsandbox.sandbox WHERE kind = 'snapshot' AND name = '} . $snap . q{'}), 'ready',
	'the snapshot is still served');

$node->stop;
done_testing();
