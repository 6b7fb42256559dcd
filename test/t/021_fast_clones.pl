# 021_fast_clones.pl: snapshots, pools, schedules and the progress view.
#
# A source is snapshotted; clones copy the snapshot (data as of the
# snapshot, not as of the clone), pools hand out ready sandboxes with a new
# password, a schedule refreshes the snapshot on its own, a failed refresh
# keeps the old snapshot serving, and kills and immediate shutdowns in the
# middle of a build or a fill leave nothing behind.  Every path must keep
# the safety model: objects belong to the sandbox role, a snapshot can be
# entered by no one, quotas count a pool member from hand-out.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $node = sandbox_node('fast',
	"pgsandbox.max_concurrent_clones = 3\npgsandbox.max_sandboxes_per_owner = 50\nrestart_after_crash = on\n");
my $su = superuser_name();

sub sq { return $node->safe_psql('postgres', $_[0]); }

# the same, for a server that may be restarting: '' on error
sub try_sq { return try_psql($node, 'postgres', $_[0]); }

$node->safe_psql('postgres', 'CREATE DATABASE shop');
$node->safe_psql(
	'shop', q{
CREATE SCHEMA sales;
CREATE TABLE sales.items (id serial PRIMARY KEY, name text NOT NULL UNIQUE, price numeric);
INSERT INTO sales.items (name, price) SELECT 'item ' || g, g FROM generate_series(1, 500) g;
CREATE VIEW sales.expensive AS SELECT * FROM sales.items WHERE price > 400;
CREATE FUNCTION sales.total() RETURNS numeric LANGUAGE sql AS $$ SELECT sum(price) FROM sales.items $$;
CREATE MATERIALIZED VIEW sales.counts AS SELECT count(*) AS n FROM sales.items;
});
$node->safe_psql('postgres', 'ALTER DATABASE shop SET work_mem = \'7MB\'');
sq("SELECT pgsandbox.add_source('shop', 'dbname=shop', allow_data => true)");
sq("SELECT pgsandbox.add_source('plain', 'dbname=shop')");

# a sandbox's content and ownership, through its own login
sub sandbox_facts
{
	my ($conninfo) = @_;
	my ($ret, $out, $err) = sandbox_psql($node, $conninfo, q{
SELECT (SELECT count(*) FROM sales.items) || '|' || sales.total() || '|' ||
	   (SELECT n FROM sales.counts) || '|' ||
	   (SELECT count(*) FROM pg_class c
		 WHERE c.relnamespace = 'sales'::regnamespace AND c.relowner <> current_user::regrole) || '|' ||
	   (SELECT count(*) FROM pg_proc WHERE pronamespace = 'sales'::regnamespace
		   AND proowner <> current_user::regrole) || '|' ||
	   (SELECT nspowner::regrole::text = current_user FROM pg_namespace WHERE nspname = 'sales') || '|' ||
	   (SELECT datdba::regrole::text = current_user FROM pg_database WHERE datname = current_database()) || '|' ||
	   current_setting('work_mem')});
	return $ret == 0 ? $out : "error: $err";
}

# ---------------------------------------------------------------------
# snapshot(), and clones that copy it
# ---------------------------------------------------------------------
my $snap = sq(q{SELECT source || '|' || schema_only || '|' || (taken_at BETWEEN now() AND clock_timestamp()) || '|' || (size_bytes > 0)
				 FROM pgsandbox.snapshot('shop')});
is($snap, 'shop|false|true|true', 'snapshot() returns when the data snapshot is ready');
is(sq(q{SELECT status || '|' || (taken_at IS NOT NULL) || '|' || coalesce(last_error, '-')
		  FROM pgsandbox.snapshots WHERE source = 'shop' AND NOT schema_only}),
	'ready|true|-', 'the snapshots view shows it ready');
my ($snapname, $snaprole) = split /\|/, sq(q{
	SELECT s.name || '|' || s.role_oid::regrole FROM pgsandbox.sandbox s
	 WHERE s.kind = 'snapshot' AND s.status = 'ready'});
is(sq(qq{SELECT datallowconn || '|' || (datdba = 10) || '|' ||
				(SELECT rolcanlogin FROM pg_roles WHERE rolname = '$snaprole')
		   FROM pg_database WHERE datname = '$snapname'}),
	'false|true|false', 'the snapshot database is closed, owned by the bootstrap superuser, its role cannot log in');
like(sq(q{SELECT detail FROM pgsandbox.events WHERE action = 'snapshot'}),
	qr/^taken in [0-9.]+ s, \d+ bytes/, 'a snapshot event records the time taken');
is(sq(qq{SELECT count(*) FROM pgsandbox.sandboxes WHERE name = '$snapname'}), '0',
	'the snapshot is not in the sandboxes view');

# the source changes after the snapshot
$node->safe_psql('shop', q{INSERT INTO sales.items (name, price) VALUES ('late item', 1)});

my ($name, $conninfo) = split /\|/,
  sq(q{SELECT name || '|' || conninfo FROM pgsandbox.clone('shop', schema_only => false)});
is(sandbox_facts($conninfo), '500|125250|500|0|0|true|true|7MB',
	'a clone copied from the snapshot has the snapshot\'s rows (not the later one), '
	  . 'every object belongs to its role, and the database setting came along');
is(sq(qq{SELECT method || '|' || (data_as_of = (SELECT taken_at FROM pgsandbox.snapshots
												  WHERE source = 'shop' AND NOT schema_only))
		   FROM pgsandbox.sandboxes WHERE name = '$name'}),
	'snapshot|true', 'the sandbox says it was copied from the snapshot, with data as of its moment');

my ($fname, $fconninfo) = split /\|/,
  sq(q{SELECT name || '|' || conninfo FROM pgsandbox.clone('shop', schema_only => false, fresh => true)});
like(sandbox_facts($fconninfo), qr/^501\|/, 'fresh => true dumps the live source');
is(sq(qq{SELECT method FROM pgsandbox.sandboxes WHERE name = '$fname'}), 'dump',
	'and says so');
my ($sname) = sq(q{SELECT name FROM pgsandbox.clone('shop')});
is(sq(qq{SELECT method FROM pgsandbox.sandboxes WHERE name = '$sname'}), 'dump',
	'a schema-only clone does not copy the data snapshot');

# no one enters a snapshot: not its role, not a pgsandbox_user, not a sandbox role
sq(q{CREATE ROLE alice LOGIN PASSWORD 'AlicePw123' IN ROLE pgsandbox_user});
my ($ret, $out, $err) = sandbox_psql($node, "dbname=$snapname user=alice password=AlicePw123", 'SELECT 1');
isnt($ret, 0, 'a pgsandbox_user cannot connect to a snapshot');
(my $other = $conninfo) =~ s/dbname=\S+/dbname=$snapname/;
($ret, $out, $err) = sandbox_psql($node, $other, 'SELECT 1');
isnt($ret, 0, 'a sandbox role cannot connect to a snapshot');
($ret, $out, $err) = $node->psql('postgres', "SELECT pgsandbox.drop('$snapname')");
like($err, qr/sandbox "$snapname" does not exist/, 'drop() does not drop a snapshot');
($ret, $out, $err) = $node->psql('postgres', "SELECT pgsandbox.run_sql('$snapname', 'SELECT 1')");
like($err, qr/does not exist/, 'run_sql() does not enter a snapshot');
($ret, $out, $err) = sandbox_psql($node, $conninfo, "CREATE POLICY p ON sales.items TO $snaprole USING (true)");
like($err, qr/may not name another sandbox role in a policy/,
	'a sandbox role cannot tie the snapshot\'s role to a policy of its own (which would keep it from being dropped)');

# a refresh replaces the snapshot; clones then see the later row
sq(q{SELECT pgsandbox.snapshot('shop')});
is(sq(q{SELECT count(*) FROM pgsandbox.sandbox WHERE kind = 'snapshot' AND status = 'ready' AND retired_at IS NULL}),
	'1', 'after a refresh one snapshot serves');
ok(wait_until(sub { sq(qq{SELECT status FROM pgsandbox.sandbox WHERE name = '$snapname'}) eq 'dropped' }, 30),
	'the replaced snapshot is dropped');
is(sandbox_leftovers($node, $snapname), '0|0', 'with its database and role');
(undef, $conninfo) = split /\|/,
  sq(q{SELECT name || '|' || conninfo FROM pgsandbox.clone('shop', schema_only => false)});
like(sandbox_facts($conninfo), qr/^501\|/, 'a clone after the refresh has the later row');

# ---------------------------------------------------------------------
# a failed refresh keeps the last good snapshot serving
# ---------------------------------------------------------------------
sq(q{SELECT pgsandbox.add_source('fragile', 'dbname=fragile', allow_data => true)});
$node->safe_psql('postgres', 'CREATE DATABASE fragile');
$node->safe_psql('fragile', 'CREATE TABLE t (x int); INSERT INTO t VALUES (1), (2)');
sq(q{SELECT pgsandbox.snapshot('fragile')});
$node->safe_psql('postgres', 'ALTER DATABASE fragile RENAME TO fragile_gone');
($ret, $out, $err) = $node->psql('postgres', q{SELECT pgsandbox.snapshot('fragile')});
isnt($ret, 0, 'a refresh of an unreachable source fails');
like($err, qr/fragile/, 'and says why');
is(sq(q{SELECT status || '|' || (last_error IS NOT NULL) FROM pgsandbox.snapshots WHERE source = 'fragile'}),
	'ready|true', 'the snapshot still serves, with the last error recorded');
is(sq(q{SELECT count(*) FROM pgsandbox.events WHERE action = 'snapshot_failed'}), '1',
	'a snapshot_failed event is recorded');
(undef, $conninfo) = split /\|/,
  sq(q{SELECT name || '|' || conninfo FROM pgsandbox.clone('fragile', schema_only => false)});
($ret, $out) = sandbox_psql($node, $conninfo, 'SELECT count(*) FROM t');
is($out, '2', 'clones of the unreachable source are still served from the old snapshot');
$node->safe_psql('postgres', 'ALTER DATABASE fragile_gone RENAME TO fragile');

# ---------------------------------------------------------------------
# schedules
# ---------------------------------------------------------------------
my $taken = sq(q{SELECT taken_at FROM pgsandbox.snapshots WHERE source = 'fragile'});
sq(q{SELECT pgsandbox.schedule_snapshot('fragile', '2 seconds')});
is(sq(q{SELECT schedule || '|' || (next_run_at BETWEEN now() AND now() + interval '3 seconds')
		  FROM pgsandbox.snapshots WHERE source = 'fragile'}),
	'2 seconds|true', 'a schedule is recorded with its next run');
$node->safe_psql('fragile', 'INSERT INTO t VALUES (3)');
ok( wait_until(
		sub {
			sq(qq{SELECT taken_at > '$taken' AND last_error IS NULL FROM pgsandbox.snapshots WHERE source = 'fragile'}) eq
			  't';
		},
		30),
	'the scheduled refresh happens on its own');
(undef, $conninfo) = split /\|/,
  sq(q{SELECT name || '|' || conninfo FROM pgsandbox.clone('fragile', schema_only => false)});
($ret, $out) = sandbox_psql($node, $conninfo, 'SELECT count(*) FROM t');
is($out, '3', 'and its clones have the new row');
sq(q{SELECT pgsandbox.schedule_snapshot('fragile', NULL)});
is(sq(q{SELECT coalesce(schedule, '-') || '|' || coalesce(next_run_at::text, '-')
		  FROM pgsandbox.snapshots WHERE source = 'fragile'}),
	'-|-', 'NULL unschedules');

# ---------------------------------------------------------------------
# pools
# ---------------------------------------------------------------------
sq(q{SELECT pgsandbox.set_pool('plain', 2)});
ok(wait_until(sub { sq(q{SELECT ready FROM pgsandbox.pools WHERE source = 'plain'}) eq '2' }, 60),
	'set_pool() builds the snapshot and fills the pool');
is(sq(q{SELECT count(*) FROM pgsandbox.events WHERE action = 'pool_fill'}), '2',
	'each fill is a pool_fill event');
my @members = split /\n/, sq(q{SELECT name FROM pgsandbox.sandbox WHERE kind = 'pool' AND status = 'ready' ORDER BY id});
is(sq(qq{SELECT bool_or(rolcanlogin) FROM pg_roles WHERE rolname IN ('$members[0]', '$members[1]')}), 'f',
	'pool members cannot log in before hand-out');

# quotas count a member only from hand-out
sq(q{ALTER SYSTEM SET pgsandbox.max_sandboxes_per_owner = 1; SELECT pg_reload_conf()});
sq(q{SELECT pgsandbox.grant_source('plain', 'alice')});
my $live_before = sq(q{SELECT count(*) FROM pgsandbox.sandbox WHERE status = 'ready' AND kind = 'sandbox'});
my $hand = sq(q{SET ROLE alice; SELECT name || '|' || conninfo FROM pgsandbox.clone('plain')});
my ($hname, $hconninfo) = split /\|/, $hand;
ok(grep({ $_ eq $hname } @members), 'a pgsandbox_user clone is handed out from the pool');
is(sq(qq{SELECT method || '|' || owner FROM pgsandbox.sandboxes WHERE name = '$hname'}), 'pool|alice',
	'it is alice\'s, by way of the pool');
is(sq(q{SELECT count(*) FROM pgsandbox.events WHERE action = 'handout'}), '1', 'a handout event is recorded');
($ret, $out, $err) = sandbox_psql($node, $hconninfo,
	q{SELECT (SELECT count(*) FROM sales.items) || '|' ||
			 (SELECT count(*) FROM pg_class WHERE relnamespace = 'sales'::regnamespace
			   AND relowner <> current_user::regrole)});
is($out, '0|0', 'the handed-out sandbox works with the new password, schema only, all its own');
my $old_secret = sq(qq{SELECT password FROM pgsandbox.sandbox_secret k JOIN pgsandbox.sandbox s ON s.id = k.sandbox_id
						WHERE s.name = '$hname'});
like($hconninfo, qr/password=\Q$old_secret\E/, 'the password returned is the one recorded at hand-out');
($ret, $out, $err) = $node->psql('postgres',
	q{SET ROLE alice; SELECT name FROM pgsandbox.clone('plain')});
like($err, qr/too many sandboxes for role "alice"/, 'the handed-out sandbox counts against alice\'s quota');
sq(q{ALTER SYSTEM RESET pgsandbox.max_sandboxes_per_owner; SELECT pg_reload_conf()});
ok(wait_until(sub { sq(q{SELECT ready FROM pgsandbox.pools WHERE source = 'plain'}) eq '2' }, 60),
	'the pool is refilled');

# the password a member was filled with is not the one handed out
my ($mname) = sq(q{SELECT name FROM pgsandbox.sandbox WHERE kind = 'pool' AND status = 'ready' ORDER BY id LIMIT 1});
my $fill_pw = 'x' x 32;
sq(qq{ALTER ROLE $mname PASSWORD '$fill_pw'});    # what a thief of the fill might know
my ($h2name, $h2conninfo) = split /\|/, sq(q{SELECT name || '|' || conninfo FROM pgsandbox.clone('plain')});
is($h2name, $mname, 'the oldest member is handed out');
($ret) = sandbox_psql($node, replace_password($h2conninfo, $fill_pw), 'SELECT 1');
isnt($ret, 0, 'a password it had before hand-out is refused');
($ret) = sandbox_psql($node, $h2conninfo, 'SELECT 1');
is($ret, 0, 'the new one works');

# pool members of an older snapshot are replaced
my $cur = sq(q{SELECT max(id) FROM pgsandbox.sandbox WHERE kind = 'snapshot' AND status = 'ready' AND source = 'plain'});
ok(wait_until(sub { sq(q{SELECT ready FROM pgsandbox.pools WHERE source = 'plain'}) eq '2' }, 60), 'refilled again');
sq(q{SELECT pgsandbox.snapshot('plain', schema_only => true)});
ok( wait_until(
		sub {
			sq(qq{SELECT count(*) FILTER (WHERE snapshot_id > $cur) || '|' || count(*) FILTER (WHERE snapshot_id <= $cur)
				   FROM pgsandbox.sandbox WHERE kind = 'pool' AND status = 'ready'}) eq '2|0';
		},
		60),
	'after a refresh, members of the older snapshot are dropped and replaced');

# progress view: a slow clone shows its phase
make_slow_source($node, 'slowsrc', 2000, 2);
sq(q{SELECT pgsandbox.add_source('slow', 'dbname=slowsrc', allow_data => true)});
my $h = start_psql($node, "dbname=postgres", q{SELECT name FROM pgsandbox.clone('slow', schema_only => false)});
ok( wait_until(
		sub {
			sq(q{SELECT phase || '|' || (total > 0) || '|' || (done > 0) FROM pgsandbox.progress WHERE source = 'slow'})
			  eq 'restoring|true|true';
		},
		30),
	'the progress view shows a clone restoring, with bytes done out of the total')
  or diag(sq(q{SELECT * FROM pgsandbox.progress}));
is(sq(q{SET ROLE alice; SELECT count(*) FROM pgsandbox._progress()}), '0',
	'a pgsandbox_user does not see another role\'s clone, even calling _progress() itself');
finish_psql($h);
is(sq(q{SELECT count(*) FROM pgsandbox.progress}), '0', 'nothing is in progress afterwards');

# with every clone job busy, a pool member is still handed out at once
my @busy = map {
	start_psql($node, "dbname=postgres",
		q{SELECT name FROM pgsandbox.clone('slow', schema_only => false, fresh => true)})
} 1 .. 3;
ok(wait_until(sub { sq(q{SELECT count(*) FROM pgsandbox.progress WHERE phase = 'restoring'}) eq '3' }, 30),
	'three slow clones take every clone job');
my $hn = sq(q{SELECT name FROM pgsandbox.clone('plain')});
is(sq(q{SELECT count(*) FROM pgsandbox.progress WHERE phase = 'restoring'}), '3',
	'a clone is served while they all still run');
is(sq(qq{SELECT method FROM pgsandbox.sandboxes WHERE name = '$hn'}), 'pool', 'from the pool');
is((finish_psql($_))[0], 0, 'and each slow clone then finishes') for @busy;
ok(wait_until(sub { sq(q{SELECT count(*) FROM pgsandbox.progress}) eq '0' }, 60), 'the pool is refilled');

# drop_snapshot() during a build: once complete, the build serves nothing
$h = start_psql($node, "dbname=postgres", q{SELECT pgsandbox.snapshot('slow')});
ok(wait_until(sub { sq(q{SELECT count(*) FROM pgsandbox.progress WHERE kind = 'snapshot' AND phase = 'restoring'}) eq '1' }, 30),
	'a snapshot build is under way');
sq(q{SELECT pgsandbox.drop_snapshot('slow')});
finish_psql($h);
ok( wait_until(
		sub {
			sq(q{SELECT count(*) FROM pgsandbox.sandbox WHERE kind = 'snapshot' AND source = 'slow' AND status IN ('cloning', 'ready')})
			  eq '0';
		},
		60),
	'drop_snapshot() during a build drops the build once it is complete');

# ---------------------------------------------------------------------
# kill -9 and immediate shutdown mid-build and mid-fill
# ---------------------------------------------------------------------
$h = start_psql($node, "dbname=postgres", q{SELECT pgsandbox.snapshot('slow')});
ok(wait_until(sub { sq(q{SELECT count(*) FROM pgsandbox.progress WHERE kind = 'snapshot' AND phase = 'restoring'}) eq '1' }, 30),
	'a snapshot build is under way');
my ($cw) = clone_worker_pids($node);
kill 'KILL', $cw;
finish_psql($h);
# a killed backend makes the postmaster restart every process
ok( wait_until(
		sub {
			try_sq(q{SELECT count(*) FROM pgsandbox.sandbox WHERE status = 'cloning'}) eq '0'
			  && try_sq(q{SELECT count(*) FROM pgsandbox.sandbox WHERE status = 'failed' AND kind = 'snapshot' AND source = 'slow'}) eq '1';
		},
		60),
	'kill -9 of a snapshot build\'s worker fails the build');
ok(wait_until(sub { untracked_sandboxes($node) eq '0' }, 30), 'and leaves no database or role behind');
is(sq(q{SELECT count(*) FROM pgsandbox.snapshots WHERE source = 'slow' AND status = 'ready'}), '0',
	'and no snapshot of that source serves');

$h = start_psql($node, "dbname=postgres", q{SELECT pgsandbox.snapshot('slow')});
ok(wait_until(sub { sq(q{SELECT count(*) FROM pgsandbox.progress WHERE kind = 'snapshot' AND phase = 'restoring'}) eq '1' }, 30),
	'another build is under way');
$node->stop('immediate');
finish_psql($h);
$node->start;
ok(wait_until(sub { try_sq(q{SELECT count(*) FROM pgsandbox.sandbox WHERE status = 'cloning'}) eq '0' && untracked_sandboxes($node) eq '0' }, 60),
	'an immediate shutdown mid-build leaves no database or role behind after restart');

# The fill of a small pool is over in a moment, too fast for a poll to be
# sure to see a member cloning: wait for the first member's clone event,
# which stays; the other members are still to come, or under way.
my $events_before = sq(q{SELECT coalesce(max(id), 0) FROM pgsandbox.event});
sq(q{SELECT pgsandbox.set_pool('plain', 4)});
ok( wait_until(
		sub {
			sq(qq{SELECT count(*) FROM pgsandbox.event WHERE id > $events_before AND action = 'clone'
			      AND detail LIKE 'pool member of source "plain"%'}) ne '0';
		},
		30),
	'a pool fill is under way');
$node->stop('immediate');
$node->start;
ok(wait_until(sub { try_sq(q{SELECT count(*) FROM pgsandbox.sandbox WHERE status = 'cloning'}) eq '0' && untracked_sandboxes($node) eq '0' }, 60),
	'an immediate shutdown mid-fill leaves no database or role behind');
ok(wait_until(sub { sq(q{SELECT ready FROM pgsandbox.pools WHERE source = 'plain'}) eq '4' }, 90),
	'and the pool fills up after the restart');

# ---------------------------------------------------------------------
# set_pool(0), drop_snapshot(), remove_source(), doctor()
# ---------------------------------------------------------------------
is(sq(q{SELECT string_agg("check" || '=' || ok, ', ' ORDER BY "check") FROM pgsandbox.doctor()
		 WHERE "check" IN ('every snapshot is locked', 'every sandbox role is tracked', 'pools are full')}),
	'every sandbox role is tracked=true, every snapshot is locked=true, pools are full=true',
	'doctor() finds snapshots locked, roles tracked, pools full');
my ($sn) = sq(q{SELECT name FROM pgsandbox.sandbox WHERE kind = 'snapshot' AND status = 'ready' AND source = 'plain'});
sq(qq{ALTER DATABASE $sn ALLOW_CONNECTIONS true});
is(sq(q{SELECT ok FROM pgsandbox.doctor() WHERE "check" = 'every snapshot is locked'}), 'f',
	'doctor() reports a snapshot open to connections');
sq(qq{ALTER DATABASE $sn ALLOW_CONNECTIONS false});
sq(q{CREATE DATABASE sbx_lostsnap ALLOW_CONNECTIONS false});
like(sq(q{SELECT ok || ' ' || detail FROM pgsandbox.doctor() WHERE "check" = 'every sandbox database is tracked'}),
	qr/^false .*: sbx_lostsnap\. /, 'doctor() reports a closed sbx_ database of the superuser that no row tracks');
sq(q{DROP DATABASE sbx_lostsnap});

sq(q{SELECT pgsandbox.set_pool('plain', 0)});
ok(wait_until(sub { sq(q{SELECT count(*) FROM pgsandbox.sandbox WHERE kind = 'pool' AND status IN ('cloning', 'ready')}) eq '0' }, 60),
	'set_pool(0) drops the pool\'s members');
is(sq(q{SELECT count(*) FROM pgsandbox.pools}), '0', 'and the pools view no longer lists it');

sq(q{SELECT pgsandbox.drop_snapshot('plain')});
ok(wait_until(sub { sq(q{SELECT count(*) FROM pgsandbox.sandbox WHERE kind = 'snapshot' AND status = 'ready' AND source = 'plain'}) eq '0' }, 30),
	'drop_snapshot() drops the snapshot');

sq(q{SELECT pgsandbox.set_pool('shop', 1, schema_only => false)});
ok(wait_until(sub { sq(q{SELECT ready FROM pgsandbox.pools WHERE source = 'shop' AND NOT schema_only}) eq '1' }, 60),
	'a data pool fills');
sq(q{SELECT pgsandbox.remove_source('shop')});
ok( wait_until(
		sub {
			sq(q{SELECT count(*) FROM pgsandbox.sandbox WHERE source = 'shop' AND kind <> 'sandbox' AND status IN ('cloning', 'ready')}) eq '0';
		},
		60),
	'remove_source() drops the source\'s snapshots and pool');
ok(wait_until(sub { untracked_sandboxes($node) eq '0' }, 10), 'nothing untracked is left');
is(sq(q{SELECT count(*) FROM pgsandbox.sandboxes WHERE source = 'shop' AND status = 'ready'}), '4',
	'the sandboxes already made from the source stay');

done_testing();
