
# 033_reset_save.pl: reset() puts a sandbox back in place, under the same
# name and credentials; save() keeps a sandbox's state to reset to or clone
# from.  What a reset keeps and brings back, a reset that fails or is
# interrupted (a kill -9, an immediate shutdown), a reset racing a drop and
# the reaper, and saves: resets to them, clones of them, who may see them,
# masking, quotas, and their drop with their sandbox.
#
# A reset is held in the middle by a lock on its source's table, which its
# pg_dump waits for: every wait here is for a state that lasts until the
# test releases the lock, or for an event row.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $node = sandbox_node('reset',
	"pgsandbox.gc_interval = 1\npgsandbox.max_sandboxes_per_owner = 6\nrestart_after_crash = on\n");

$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql('app', q{
CREATE TABLE items (id int PRIMARY KEY, v text NOT NULL);
INSERT INTO items SELECT g, md5(g::text) FROM generate_series(1, 200) g;
});
$node->safe_psql('postgres', 'CREATE DATABASE hr');
$node->safe_psql('hr', q{
CREATE TABLE people (id int PRIMARY KEY, email text NOT NULL);
INSERT INTO people SELECT g, 'REAL-SECRET-' || g || '@example.com' FROM generate_series(1, 50) g;
});
$node->safe_psql('postgres', q{
SELECT pgsandbox.add_source('app', 'dbname=app', allow_data => true);
SELECT pgsandbox.add_source('hr', 'dbname=hr', allow_data => true);
SELECT pgsandbox.mask('hr', 'public.people.email', $$'user' || id || '@masked.invalid'$$);
CREATE ROLE alice LOGIN PASSWORD 'AlicePw123' IN ROLE pgsandbox_user;
CREATE ROLE bob LOGIN PASSWORD 'BobPw12345' IN ROLE pgsandbox_user;
CREATE ROLE carol LOGIN PASSWORD 'CarolPw123' IN ROLE pgsandbox_user;
SELECT pgsandbox.grant_source('app', r) FROM unnest(ARRAY['alice', 'bob', 'carol']::regrole[]) r;
SELECT pgsandbox.grant_source('hr', 'alice');
});

my %pw = (alice => 'AlicePw123', bob => 'BobPw12345', carol => 'CarolPw123');

# SQL as a pgsandbox_user: (exit code, stdout, stderr), with SQLSTATEs
sub as_user
{
	my ($user, $sql) = @_;
	return sandbox_psql($node, "dbname=postgres user=$user password=$pw{$user}",
		"\\set VERBOSITY verbose\n$sql");
}

# a new sandbox for $user: (name, conninfo)
sub clone_as
{
	my ($user, $args) = @_;
	my ($ret, $out, $err) = as_user($user,
		"SELECT name || ' ' || conninfo FROM pgsandbox.clone($args)");
	die "clone($args) as $user failed: $err" if $ret != 0;
	return split / /, $out, 2;
}

# SQL in a sandbox, logged in with its credentials
sub in_sandbox
{
	my ($conninfo, $sql) = @_;
	my ($ret, $out, $err) = sandbox_psql($node, $conninfo, $sql);
	die "in sandbox: $err" if $ret != 0;
	return $out;
}

my $items_sum = q{SELECT md5(string_agg(id || ':' || v, ',' ORDER BY id)) FROM items};

sub wait_for_event
{
	my ($name, $action, $count) = @_;
	$count //= 1;
	return poll_value($node,
		"SELECT count(*) >= $count FROM pgsandbox.events WHERE sandbox = '$name' AND action = '$action'",
		't', 90) eq 't';
}

sub marked
{
	my ($name) = @_;
	return poll_value($node,
		"SELECT reset_started_at IS NOT NULL FROM pgsandbox.sandbox WHERE name = '$name'",
		't', 60) eq 't';
}

# hold every pg_dump of app: a session keeps its table locked
sub lock_app
{
	my $h = start_psql($node, 'dbname=app', 'BEGIN',
		'LOCK TABLE items IN ACCESS EXCLUSIVE MODE', 'SELECT pg_sleep(600)');
	ok(wait_until(
			sub {
				$node->safe_psql('app',
					"SELECT count(*) FROM pg_locks WHERE relation = 'items'::regclass"
					  . " AND mode = 'AccessExclusiveLock' AND granted") eq '1';
			},
			30),
		'the lock on app is held');
	return $h;
}

sub replace_dbname
{
	my ($conninfo, $dbname) = @_;
	(my $c = $conninfo) =~ s/dbname=\S+/dbname=$dbname/;
	return $c;
}

sub unlock_app
{
	my ($h) = @_;
	$node->safe_psql('postgres',
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
		  . " WHERE datname = 'app' AND query LIKE '%pg_sleep(600)%' AND pid <> pg_backend_pid()");
	finish_psql($h);
	return;
}

my $src_sum = $node->safe_psql('app', $items_sum);

# ---------------------------------------------------------------------------
# what a reset keeps and brings back (a dump-made sandbox)
# ---------------------------------------------------------------------------

my ($a1, $a1_conn) = clone_as('alice',
	q{'app', schema_only => false, labels => '{"task": "migrate"}'});
my $meta_sql = "SELECT name, expires_at, owner, labels FROM pgsandbox.sandboxes WHERE name = '$a1'";
my $meta_before = $node->safe_psql('postgres', $meta_sql);

in_sandbox($a1_conn, q{
DELETE FROM items WHERE id > 100;
UPDATE items SET v = 'changed' WHERE id = 1;
CREATE TABLE agent_table (x int);
});
isnt(in_sandbox($a1_conn, $items_sum), $src_sum, 'the agent changed the sandbox');

# a session left open, which the reset ends
my $open = start_psql($node, $a1_conn, 'SELECT pg_sleep(600)');
is(poll_value($node,
		"SELECT count(*) FROM pg_stat_activity WHERE usename = '$a1' AND query LIKE '%pg_sleep(600)%'",
		'1', 30), '1', 'a session of the sandbox is open');

my ($ret, $out, $err) = as_user('alice', "SELECT pgsandbox.reset('$a1') <= clock_timestamp()");
is($ret, 0, 'alice resets her sandbox') or diag $err;
like($err, qr/now holds a new dump of source "app"/, 'the notice says what it holds now');

my ($oret, undef, $oerr) = finish_psql($open);
isnt($oret, 0, 'the open session was ended');
like($oerr, qr/terminat/, '... by a termination');

is(in_sandbox($a1_conn, $items_sum), $src_sum,
	'the old credentials log in, and the rows are back as in the source');
is(in_sandbox($a1_conn, "SELECT to_regclass('agent_table') IS NULL"), 't',
	'the table the agent made is gone');
is($node->safe_psql('postgres', $meta_sql), $meta_before,
	'name, expiry, owner and labels are unchanged');
is(in_sandbox($a1_conn, 'INSERT INTO items VALUES (1000, $$new$$); SELECT count(*) FROM items'),
	'201', 'a new session works and writes');
like($node->safe_psql('postgres',
		"SELECT detail FROM pgsandbox.events WHERE sandbox = '$a1' AND action = 'reset'"),
	qr/^to a new dump of source "app", in [0-9.]+ s; 1 session ended$/,
	'the reset event says from what, how long, and the sessions ended');
is($node->safe_psql('postgres',
		"SELECT d.datdba = r.oid AND d.datallowconn AND s.db_oid = d.oid AND s.reset_started_at IS NULL"
		  . " FROM pgsandbox.sandbox s JOIN pg_database d ON d.datname = s.name"
		  . " JOIN pg_roles r ON r.rolname = s.name WHERE s.name = '$a1'"),
	't', 'the database under the name is the new one, open, owned by the role, recorded');
is(untracked_sandboxes($node), '0', 'no database or role is left untracked');

# a sandbox may not make its database a template, which no drop could drop
($ret, $out, $err) = sandbox_psql($node, $a1_conn, "\\set VERBOSITY verbose\nALTER DATABASE $a1 IS_TEMPLATE true");
like($err, qr/42501.*may not change its database's options/s,
	'the sandbox role may not make its database a template');

# ---------------------------------------------------------------------------
# a snapshot-made sandbox: start and latest
# ---------------------------------------------------------------------------

$node->safe_psql('postgres', q{SELECT pgsandbox.snapshot('app', schema_only => false)});
my ($a2, $a2_conn) = clone_as('alice', q{'app', schema_only => false});
$node->safe_psql('app', q{UPDATE items SET v = 'after the snapshot' WHERE id <= 10});
my $src_sum2 = $node->safe_psql('app', $items_sum);
in_sandbox($a2_conn, 'TRUNCATE items');

($ret, $out, $err) = as_user('alice', "SELECT pgsandbox.reset('$a2', 'start')");
is($ret, 0, 'a snapshot-made sandbox resets to its start') or diag $err;
like($err, qr/now holds a copy of snapshot "sbx_\w+" taken at/, '... a copy of its snapshot');
is(in_sandbox($a2_conn, $items_sum), $src_sum, '... with the rows of the snapshot, not the live source');

$node->safe_psql('postgres', q{SELECT pgsandbox.snapshot('app', schema_only => false)});
($ret, $out, $err) = as_user('alice', "SELECT pgsandbox.reset('$a2', 'latest')");
is($ret, 0, 'a reset to latest') or diag $err;
is(in_sandbox($a2_conn, $items_sum), $src_sum2, '... has the rows of the newest snapshot');
# the first snapshot is retired, and dropped once no copy reads it
ok(poll_value($node,
		"SELECT count(*) FROM pgsandbox.sandbox WHERE kind = 'snapshot' AND status = 'ready'",
		'1', 60) eq '1', 'the first snapshot is dropped');
($ret, $out, $err) = as_user('alice', "SELECT pgsandbox.reset('$a2')");
is($ret, 0, 'a reset to a start that is gone') or diag $err;
like($err, qr/no longer serves/, '... says so, and copies the current snapshot');
is(in_sandbox($a2_conn, $items_sum), $src_sum2, '... whose rows it has');
$node->safe_psql('postgres', qq{SELECT pgsandbox.drop_snapshot('app'); SELECT pgsandbox.drop('$a2')});

# ---------------------------------------------------------------------------
# a reset that fails leaves the sandbox as it was
# ---------------------------------------------------------------------------

in_sandbox($a1_conn, q{UPDATE items SET v = 'kept' WHERE id = 2});
my $a1_sum = in_sandbox($a1_conn, $items_sum);
$node->safe_psql('postgres', 'ALTER DATABASE app RENAME TO app_away');
($ret, $out, $err) = as_user('alice', "SELECT pgsandbox.reset('$a1', 'latest')");
isnt($ret, 0, 'a reset whose source is unreachable fails');
like($err, qr/could not connect to source "app"|pg_dump of source "app" failed/, '... saying why');
is(in_sandbox($a1_conn, $items_sum), $a1_sum, 'the sandbox keeps its data, and its login');
is(in_sandbox($a1_conn, 'INSERT INTO items VALUES (1001, $$x$$); SELECT 1'), '1', '... and is writable');
is(sandbox_leftovers($node, "${a1}_reset"), '0|0', 'the new database is gone');
ok(wait_for_event($a1, 'reset_failed'), 'a reset_failed event is recorded');
is($node->safe_psql('postgres',
		"SELECT reset_started_at IS NULL FROM pgsandbox.sandbox WHERE name = '$a1'"), 't',
	'the sandbox is no longer marked');
is(untracked_sandboxes($node), '0', 'nothing is left untracked');
$node->safe_psql('postgres', 'ALTER DATABASE app_away RENAME TO app');

# ---------------------------------------------------------------------------
# races: a drop and the reaper during a reset
# ---------------------------------------------------------------------------

my ($b1, $b1_conn) = clone_as('bob', q{'app', schema_only => false});
in_sandbox($b1_conn, 'DELETE FROM items');
my $lock = lock_app();
my $bg = start_psql($node, "dbname=postgres user=bob password=$pw{bob}",
	"SELECT pgsandbox.reset('$b1', 'latest')");
ok(marked($b1), 'the reset has begun, held by the lock');
ok(scalar(wait_for_clone_children($node, 60, 'pg_dump')), '... its pg_dump waiting for the lock');
# the dump is filled as a role of its own: the sandbox's credentials, which
# its owner knows, do not open the database being filled
is($node->safe_psql('postgres',
		"SELECT d.datdba = s.reset_role AND r.rolname = '${b1}_reset'"
		  . " FROM pgsandbox.sandbox s JOIN pg_database d ON d.datname = '${b1}_reset'"
		  . " JOIN pg_roles r ON r.oid = s.reset_role WHERE s.name = '$b1'"),
	't', 'the new database belongs to a reset role of its own, recorded');
(my $lret, undef, my $lerr) = sandbox_psql($node, replace_dbname($b1_conn, "${b1}_reset"), 'SELECT 1');
isnt($lret, 0, 'the sandbox role cannot log into the database being filled');
like($lerr, qr/may connect only to its own database/, '... the login check says so');
($ret, $out, $err) = as_user('bob', "SELECT pgsandbox.drop('$b1')");
isnt($ret, 0, 'a drop during the reset is refused');
like($err, qr/55006.*is being reset or saved/s, '... with 55006');
($ret, $out, $err) = as_user('bob', "SELECT pgsandbox.save('$b1', 'x')");
like($err, qr/55006/, 'so is a save');
# the reaper wants it now, but waits for the reset
$node->safe_psql('postgres',
	"UPDATE pgsandbox.sandbox SET expires_at = now() - interval '1 second' WHERE name = '$b1'");
unlock_app($lock);
my ($bret, $bout, $berr) = finish_psql($bg);
is($bret, 0, 'the reset ends well') or diag $berr;
ok(wait_for_event($b1, 'expire'), 'then the reaper expires the sandbox');
is($node->safe_psql('postgres',
		"SELECT string_agg(action, ',' ORDER BY id) FROM pgsandbox.event"
		  . " WHERE sandbox = '$b1' AND action IN ('reset', 'expire', 'drop')"),
	'reset,expire', 'first the reset, then the expiry');
is(sandbox_leftovers($node, $b1) . ' ' . sandbox_leftovers($node, "${b1}_old")
	  . ' ' . sandbox_leftovers($node, "${b1}_reset"),
	'0|0 0|0 0|0', 'and nothing of it is left, the reset role neither');

# ---------------------------------------------------------------------------
# a kill -9 of the clone worker, and an immediate shutdown, in a reset
# ---------------------------------------------------------------------------

for my $how ('kill -9 of the clone worker', 'immediate shutdown')
{
	my ($c, $c_conn) = clone_as('carol', q{'app', schema_only => false});
	in_sandbox($c_conn, q{UPDATE items SET v = 'before the crash' WHERE id < 50});
	my $c_sum = in_sandbox($c_conn, $items_sum);
	my $l = lock_app();
	my $r = start_psql($node, "dbname=postgres user=carol password=$pw{carol}",
		"SELECT pgsandbox.reset('$c', 'latest')");
	ok(marked($c), "$how: the reset has begun");
	my ($wpid) = wait_for_clone_children($node, 60, 'pg_dump');
	ok($wpid, "$how: its pg_dump waits for the lock");
	is($node->safe_psql('postgres', "SELECT count(*) FROM pg_database WHERE datname = '${c}_reset'"),
		'1', "$how: the new database is being filled beside the sandbox");
	if ($how =~ /kill/)
	{
		kill 'KILL', $wpid;
	}
	else
	{
		$node->stop('immediate');
		$node->start;
	}
	finish_psql($r);
	finish_psql($l);
	ok(wait_for_event($c, 'cleanup'), "$how: the restart cleans up the reset");
	is(in_sandbox($c_conn, $items_sum), $c_sum,
		"$how: the old data is under the name, and the old credentials log in");
	is(sandbox_leftovers($node, "${c}_reset"), '0|0', "$how: the new database is gone");
	is($node->safe_psql('postgres',
			"SELECT status || ' ' || (reset_started_at IS NULL) FROM pgsandbox.sandbox WHERE name = '$c'"),
		'ready true', "$how: the sandbox is ready and no longer marked");
	is(untracked_sandboxes($node), '0', "$how: nothing is left untracked");
	$node->safe_psql('postgres', "SELECT pgsandbox.drop('$c')");
}

# ---------------------------------------------------------------------------
# saves
# ---------------------------------------------------------------------------

in_sandbox($a1_conn, q{
DELETE FROM items WHERE id > 150;
CREATE TABLE fixture (note text);
INSERT INTO fixture VALUES ('the bug''s state');
});
my $saved_sum = in_sandbox($a1_conn, $items_sum);
($ret, $out, $err) = as_user('alice', "SELECT pgsandbox.save('$a1', 'bug 42')");
is($ret, 0, 'alice saves her sandbox') or diag $err;
my $save = $out;
like($save, qr/^sbx_[a-z0-9]{8}$/, '... and gets the save\'s name');
like($node->safe_psql('postgres',
		"SELECT detail FROM pgsandbox.events WHERE sandbox = '$a1' AND action = 'save'"),
	qr/^saved as "$save" \(label "bug 42"\), \d+ bytes, in [0-9.]+ s; 0 sessions ended$/,
	'the save event names it and the sessions ended');
is($node->safe_psql('postgres',
		"SELECT NOT d.datallowconn AND d.datdba = 10 AND NOT r.rolcanlogin"
		  . " FROM pg_database d JOIN pg_roles r ON r.rolname = d.datname WHERE d.datname = '$save'"),
	't', 'the save is locked: closed, owned by the bootstrap superuser, its role NOLOGIN');
is(in_sandbox($a1_conn, 'SELECT count(*) FROM fixture'), '1', 'the sandbox is usable after the save');

in_sandbox($a1_conn, 'DROP TABLE fixture; DELETE FROM items');
for my $round (1, 2)
{
	($ret, $out, $err) = as_user('alice', "SELECT pgsandbox.reset('$a1', target => 'bug 42')");
	is($ret, 0, "reset to the save, round $round") or diag $err;
	is(in_sandbox($a1_conn, $items_sum), $saved_sum, "... brings its rows back");
	is(in_sandbox($a1_conn, 'SELECT note FROM fixture'), "the bug's state", '... and its table');
	in_sandbox($a1_conn, 'DELETE FROM fixture');
}

my ($fs, $fs_conn) = clone_as('alice', "from_save => '$save'");
is(in_sandbox($fs_conn, $items_sum), $saved_sum, 'a clone of the save starts from its state');
is(in_sandbox($fs_conn, 'SELECT note FROM fixture'), "the bug's state", '... with its table');
is($node->safe_psql('postgres', "SELECT method FROM pgsandbox.sandboxes WHERE name = '$fs'"),
	'save', '... recorded as copied from a save');
($ret, $out, $err) = as_user('alice', "SELECT pgsandbox.reset('$fs')");
is($ret, 0, 'its reset to start') or diag $err;
like($err, qr/now holds a copy of save "$save"/, '... copies the save again');

($ret, $out) = as_user('bob', 'SELECT count(*) FROM pgsandbox.saves');
is($out, '0', 'bob does not see alice\'s save');
($ret, $out, $err) = as_user('bob', "SELECT * FROM pgsandbox.clone(from_save => '$save')");
like($err, qr/42704.*save "$save" does not exist/s, 'bob cannot clone it');

# a save of a masked sandbox holds no real value
my ($m, $m_conn) = clone_as('alice', q{'hr', schema_only => false});
is(in_sandbox($m_conn, q{SELECT count(*) FROM people WHERE email LIKE '%REAL-SECRET%'}), '0',
	'the masked sandbox holds no real value');
($ret, $out, $err) = as_user('alice', "SELECT pgsandbox.save('$m', 'masked')");
my $msave = $out;
is($node->safe_psql('postgres', "SELECT masked FROM pgsandbox.saves WHERE name = '$msave'"),
	't', 'its save is marked masked');
$node->safe_psql('postgres', "SELECT pgsandbox.drop('$fs')");
my ($mc, $mc_conn) = clone_as('alice', "from_save => '$msave'");
is(in_sandbox($mc_conn,
		q{SELECT count(*) FILTER (WHERE email LIKE '%REAL-SECRET%') || ' of ' || count(*) FROM people}),
	'0 of 50', 'a clone of the save holds no real value either');
is($node->safe_psql('postgres', "SELECT masked FROM pgsandbox.sandboxes WHERE name = '$mc'"),
	't', '... and is marked masked');
$node->safe_psql('postgres', q{SELECT pgsandbox.exclude_data('hr', 'public.nothing_here')});
($ret, $out, $err) = as_user('alice', "SELECT * FROM pgsandbox.clone(from_save => '$msave')");
like($err, qr/55000.*save "$msave" can no longer be copied/s,
	'once the source\'s rules change, the save is not copied any more');
($ret, $out, $err) = as_user('alice', "SELECT pgsandbox.reset('$m', 'masked')");
like($err, qr/55000.*can no longer be copied/s, '... nor reset to');
$node->safe_psql('postgres', "SELECT pgsandbox.drop('$mc'); SELECT pgsandbox.drop('$m')");

# quotas count saves: carol may own 6 sandboxes and saves
my ($q, $q_conn) = clone_as('carol', q{'app'});
my ($q2) = clone_as('carol', q{'app'});
for my $i (1 .. 4)
{
	($ret, $out, $err) = as_user('carol', "SELECT pgsandbox.save('$q', 'q$i')");
	is($ret, 0, "carol's save $i") or diag $err;
}
($ret, $out, $err) = as_user('carol', "SELECT pgsandbox.save('$q', 'q5')");
like($err, qr/53400.*too many sandboxes for role "carol"/s, 'a save past the quota is refused');
($ret, $out, $err) = as_user('carol', "SELECT * FROM pgsandbox.clone('app')");
like($err, qr/53400/, 'so is a clone: the saves count');
my $q1 = $node->safe_psql('postgres', "SELECT name FROM pgsandbox.saves WHERE label = 'q1'");
($ret, $out, $err) = as_user('carol', "SELECT pgsandbox.drop_save('$q1')");
is($ret, 0, 'carol drops a save') or diag $err;
ok(wait_for_event($q1, 'drop'), '... which goes');
($ret, $out, $err) = as_user('carol', "SELECT pgsandbox.save('$q', 'q5')");
is($ret, 0, 'and may save again') or diag $err;

# dropping a sandbox drops its saves
my @q_saves = split /\n/, $node->safe_psql('postgres',
	"SELECT name FROM pgsandbox.saves WHERE sandbox = '$q' ORDER BY name");
is(scalar @q_saves, 4, 'carol\'s sandbox has four saves');
$node->safe_psql('postgres', "SELECT pgsandbox.drop('$q')");
for my $s (@q_saves)
{
	ok(wait_for_event($s, 'drop'), "save $s is dropped with its sandbox");
	is(sandbox_leftovers($node, $s), '0|0', '... its database and role gone');
}
is(untracked_sandboxes($node), '0', 'nothing is left untracked');

$node->stop;
done_testing();
