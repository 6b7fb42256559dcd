# 034_worker_locks.pl: no role can stall the lifecycle worker.  Hostile
# sandbox roles and login roles hold locks on sandbox roles and databases
# (prepared transactions, transactions left open, default privileges,
# settings in another database) while the worker expires, drops, resets,
# saves and makes read-only.  In each case: another user's clone is served
# within seconds; a step that is blocked is recorded with what blocked it;
# once the trick ends the step finishes by itself; nothing is left
# untracked; no row is ready without its database.  And scheduled snapshot
# builds get their share while callers keep the queue full.
#
# Every hold is released by the test itself (an advisory lock it keeps, a
# session it ends), and every wait is for an event row or a catalog state.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;
use Time::HiRes qw(time);

my $node = sandbox_node('locks',
	    "pgsandbox.gc_interval = 1\nmax_prepared_transactions = 10\n"
	  . "pgsandbox.lock_timeout = 500\npgsandbox.size_check_interval = 1\n"
	  . "pgsandbox.max_sandbox_size = '12MB'\nrestart_after_crash = on\n"
	  . "pgsandbox.max_sandboxes_per_owner = 30\npgsandbox.max_sandboxes = 60\n");

$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql('app', q{
CREATE TABLE items (id int PRIMARY KEY, v text NOT NULL);
INSERT INTO items SELECT g, md5(g::text) FROM generate_series(1, 200) g;
});
$node->safe_psql('postgres', q{
SELECT pgsandbox.add_source('app', 'dbname=app', allow_data => true);
CREATE ROLE alice LOGIN PASSWORD 'AlicePw123' IN ROLE pgsandbox_user;
CREATE ROLE bob LOGIN PASSWORD 'BobPw12345' IN ROLE pgsandbox_user;
CREATE ROLE carol LOGIN PASSWORD 'CarolPw123';
GRANT CREATE ON SCHEMA public TO carol;
SELECT pgsandbox.grant_source('app', r) FROM unnest(ARRAY['alice', 'bob']::regrole[]) r;
});
my %pw = (alice => 'AlicePw123', bob => 'BobPw12345', carol => 'CarolPw123');

sub as_user
{
	my ($user, $sql) = @_;
	return sandbox_psql($node, "dbname=postgres user=$user password=$pw{$user}",
		"\\set VERBOSITY verbose\n$sql");
}

# a new data clone of app for $user: (name, conninfo)
sub clone_as
{
	my ($user) = @_;
	my ($ret, $out, $err) = as_user($user,
		"SELECT name || ' ' || conninfo FROM pgsandbox.clone('app', schema_only => false)");
	die "clone as $user failed: $err" if $ret != 0;
	return split / /, $out, 2;
}

sub in_sandbox
{
	my ($conninfo, $sql) = @_;
	my ($ret, $out, $err) = sandbox_psql($node, $conninfo, $sql);
	die "in sandbox: $err" if $ret != 0;
	return $out;
}

sub events_of
{
	my ($name, $action) = @_;
	return $node->safe_psql('postgres',
		"SELECT string_agg(detail, E'\\n' ORDER BY at) FROM pgsandbox.events"
		  . " WHERE sandbox = '$name' AND action = '$action'");
}

sub wait_for_event
{
	my ($name, $action) = @_;
	return poll_value($node,
		"SELECT count(*) > 0 FROM pgsandbox.events WHERE sandbox = '$name' AND action = '$action'",
		't', 90) eq 't';
}

# Bob's clone while a trick is in place: served, and within seconds.
sub bob_is_served
{
	my ($what) = @_;
	my $start = time();
	my ($ret, $out, $err) = as_user('bob', "SELECT name FROM pgsandbox.clone('app')");
	my $took = time() - $start;
	is($ret, 0, "$what: another user's clone is served") or diag $err;
	cmp_ok($took, '<', 15, "$what: ... within seconds (took " . sprintf('%.1f', $took) . " s)");
	as_user('bob', "SELECT pgsandbox.drop('$out')") if $ret == 0;
}

# what no row may ever be: ready without its database; and nothing untracked
sub consistent
{
	my ($what) = @_;
	is($node->safe_psql('postgres', q{
SELECT count(*) FROM pgsandbox.sandbox s
 WHERE s.status = 'ready'
   AND NOT EXISTS (SELECT 1 FROM pg_database d WHERE d.datname = s.name)}),
		'0', "$what: no row is ready without its database");
	is(poll_value($node, q{
SELECT count(*) FROM (
	SELECT datname FROM pg_database WHERE datname LIKE 'sbx\_%'
	EXCEPT SELECT name FROM pgsandbox.sandbox WHERE status IN ('cloning', 'ready', 'dropping')
	UNION ALL
	SELECT rolname FROM pg_roles WHERE rolname LIKE 'sbx\_%'
	EXCEPT SELECT name FROM pgsandbox.sandbox WHERE status IN ('cloning', 'ready', 'dropping')) x},
			'0', 60),
		'0', "$what: nothing is left untracked");
	is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '0',
		"$what: no prepared transaction is left");
}

# A session that takes an advisory lock (to hold others back) and keeps it
# until it is ended; returns its pid.
sub hold_barrier
{
	my ($key) = @_;
	my $h = start_psql($node, 'dbname=postgres application_name=barrier' . $key,
		"SELECT pg_advisory_lock($key)", 'SELECT pg_sleep(600)');
	ok(wait_until(sub {
			$node->safe_psql('postgres',
				"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = $key AND granted") eq '1';
		}), "barrier $key is held");
	return $h;
}

sub release_barrier
{
	my ($key, $h) = @_;
	$node->safe_psql('postgres',
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'barrier$key'");
	finish_psql($h);
}

# Wait until a session of application $app waits for advisory lock $key,
# having done all before it.
sub waits_at_barrier
{
	my ($key) = @_;
	return wait_until(sub {
			$node->safe_psql('postgres',
				"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = $key AND NOT granted") eq '1';
		}, 30);
}

# ---------------------------------------------------------------------------
# 1. a sandbox role's prepared ALTER ROLE on itself, at its expiry and again
#    after a restart: the worker rolls it back and drops the sandbox
# ---------------------------------------------------------------------------

my ($a1, $a1_conn) = clone_as('alice');
in_sandbox($a1_conn,
	"BEGIN; ALTER ROLE CURRENT_USER PASSWORD 'SomethingElse1'; PREPARE TRANSACTION 'trap';");
is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '1',
	'trick 1: the sandbox role holds its own role in a prepared transaction');
bob_is_served('trick 1, before expiry');
$node->safe_psql('postgres', "UPDATE pgsandbox.sandbox SET expires_at = now() WHERE name = '$a1'");
ok(wait_for_event($a1, 'expire'), 'trick 1: the expired sandbox is dropped all the same');
is(sandbox_leftovers($node, $a1), '0|0', 'trick 1: its database and role are gone');
bob_is_served('trick 1, after expiry');
consistent('trick 1');

# again, across an immediate restart: the worker must not hang on it
my ($a2, $a2_conn) = clone_as('alice');
in_sandbox($a2_conn,
	"BEGIN; ALTER ROLE CURRENT_USER PASSWORD 'SomethingElse1'; PREPARE TRANSACTION 'trap2';");
$node->safe_psql('postgres', "UPDATE pgsandbox.sandbox SET expires_at = now() + interval '2 s' WHERE name = '$a2'");
$node->stop('immediate');
$node->start;
ok(wait_for_event($a2, 'expire'), 'trick 1 after a restart: the expired sandbox is dropped');
bob_is_served('trick 1, after a restart');
consistent('trick 1 after a restart');

# ---------------------------------------------------------------------------
# 2. settings in another owner's database: refused to a sandbox role; held
#    by a prepared transaction of a login role, rolled back at the drop
# ---------------------------------------------------------------------------

my ($a3, $a3_conn) = clone_as('alice');
my ($b1, $b1_conn) = clone_as('bob');
my ($ret, $out, $err) = sandbox_psql($node, $a3_conn,
	"\\set VERBOSITY verbose\nALTER ROLE CURRENT_USER IN DATABASE $b1 SET work_mem = '1MB'");
isnt($ret, 0, 'trick 2: a sandbox role may not give itself settings in another database');
like($err, qr/42501: a sandbox role may not change settings in another database/,
	'trick 2: ... with 42501 and a clear message');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase WHERE d.datname = '$b1'"),
	'0', 'trick 2: ... and nothing was set');
in_sandbox($a3_conn, "ALTER ROLE CURRENT_USER IN DATABASE $a3 SET work_mem = '2MB'");
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase WHERE d.datname = '$a3'"),
	'1', 'trick 2: settings in its own database are still allowed');

# any login role may set itself something in any database it can name
($ret, $out, $err) = sandbox_psql($node, "dbname=postgres user=carol password=$pw{carol}",
	"BEGIN; ALTER ROLE carol IN DATABASE $b1 SET work_mem = '1MB'; PREPARE TRANSACTION 'x';");
is($ret, 0, "trick 2: a login role holds bob's database in a prepared transaction") or diag $err;
($ret, $out, $err) = as_user('bob', "SELECT pgsandbox.drop('$b1')");
is($ret, 0, "trick 2: bob's drop() succeeds") or diag $err;
is($node->safe_psql('postgres', "SELECT status FROM pgsandbox.sandboxes WHERE name = '$b1'"),
	'dropped', 'trick 2: bob\'s sandbox is dropped');
is(sandbox_leftovers($node, $b1), '0|0', 'trick 2: its database and role are gone');
bob_is_served('trick 2');
as_user('alice', "SELECT pgsandbox.drop('$a3')");
consistent('trick 2');

# ---------------------------------------------------------------------------
# 3. no prepared transaction: a transaction left open by the sandbox role
#    on its own database (save) and on its own role (drop)
# ---------------------------------------------------------------------------

my ($a4, $a4_conn) = clone_as('alice');
my $open = start_psql($node, $a4_conn, 'BEGIN',
	"GRANT CONNECT ON DATABASE $a4 TO PUBLIC", 'SELECT pg_sleep(600)');
ok(wait_until(sub {
		$node->safe_psql('postgres',
			"SELECT count(*) FROM pg_stat_activity WHERE datname = '$a4' AND query LIKE '%pg_sleep%'") eq '1';
	}), 'trick 3: the sandbox role holds its database\'s row in an open transaction');
($ret, $out, $err) = as_user('alice', "SELECT pgsandbox.save('$a4', 'before')");
is($ret, 0, 'trick 3: save() succeeds all the same') or diag $err;
($ret) = finish_psql($open);
isnt($ret, 0, 'trick 3: ... having ended the session that held the row');
is($node->safe_psql('postgres', "SELECT count(*) FROM pgsandbox.saves WHERE sandbox = '$a4' AND status = 'ready'"),
	'1', 'trick 3: the save is ready');
is(in_sandbox($a4_conn, 'SELECT count(*) FROM items'), '200', 'trick 3: the sandbox is open again');

$open = start_psql($node, $a4_conn, 'BEGIN',
	"ALTER ROLE CURRENT_USER PASSWORD 'SomethingElse2'", 'SELECT pg_sleep(600)');
ok(wait_until(sub {
		$node->safe_psql('postgres',
			"SELECT count(*) FROM pg_stat_activity WHERE datname = '$a4' AND query LIKE '%pg_sleep%'") eq '1';
	}), 'trick 3: the sandbox role holds its own role in an open transaction');
($ret, $out, $err) = as_user('alice', "SELECT pgsandbox.drop('$a4')");
is($ret, 0, 'trick 3: drop() succeeds all the same') or diag $err;
finish_psql($open);
is(sandbox_leftovers($node, $a4), '0|0', 'trick 3: its database and role are gone');
bob_is_served('trick 3');
consistent('trick 3');

# ---------------------------------------------------------------------------
# 4 and 7. the read-only switch against a prepared transaction that holds
#    the database and wrote; COMMIT PREPARED in a read-only sandbox
# ---------------------------------------------------------------------------

my ($a5, $a5_conn) = clone_as('alice');
in_sandbox($a5_conn, qq{
CREATE TABLE grow (i int, pad text);
BEGIN;
ALTER DATABASE $a5 SET work_mem = '1MB';
INSERT INTO grow SELECT g, repeat('p', 100) FROM generate_series(1, 1000) g;
PREPARE TRANSACTION 'ro';
});
# grown in a session that stays: a database in use is measured at every pass
my $grower = start_psql($node, $a5_conn,
	'INSERT INTO grow SELECT g, repeat(md5(g::text), 30) FROM generate_series(1, 8000) g',
	'SELECT pg_sleep(600)');
ok(wait_for_event($a5, 'read_only'), 'trick 4: the sandbox that grew is made read-only');
($ret) = finish_psql($grower);
isnt($ret, 0, 'trick 4: ... and the session that grew it was ended');
is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '0',
	'trick 4: the prepared transaction that held its database was rolled back');
is(in_sandbox($a5_conn, 'SELECT count(*) FROM grow'), '8000',
	'trick 4/7: what it had prepared was never committed');
($ret, $out, $err) = sandbox_psql($node, $a5_conn, 'INSERT INTO grow VALUES (0)');
isnt($ret, 0, 'trick 4: writes are refused');

# a transaction prepared in it (here by the superuser, who may write) is
# not committed by the sandbox role
$node->safe_psql($a5,
	"SET pgsandbox.read_only = off; BEGIN READ WRITE; INSERT INTO grow VALUES (-1); PREPARE TRANSACTION 'late';");
($ret, $out, $err) = sandbox_psql($node, $a5_conn, "\\set VERBOSITY verbose\nCOMMIT PREPARED 'late'");
like($err, qr/25006: cannot commit a prepared transaction in a read-only sandbox/,
	'trick 7: COMMIT PREPARED is refused in a read-only sandbox');
$node->safe_psql($a5, "ROLLBACK PREPARED 'late'");
is(in_sandbox($a5_conn, 'SELECT count(*) FROM grow WHERE i = -1'), '0',
	'trick 7: what it wrote never reached the sandbox');
bob_is_served('trick 4');
as_user('alice', "SELECT pgsandbox.drop('$a5')");
consistent('trick 4');

# ---------------------------------------------------------------------------
# 6. any login role names a sandbox role in default privileges: held open,
#    the drop of the role is blocked (recorded with what blocked it) but the
#    row is dropped, the role left without login; once committed, the role
#    is dropped by the worker all the same
# ---------------------------------------------------------------------------

my ($a6, $a6_conn) = clone_as('alice');
my $barrier = hold_barrier(6);
my $carol = start_psql($node, "dbname=postgres user=carol password=$pw{carol}",
	'BEGIN', "ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO $a6",
	'SELECT pg_advisory_lock(6)', 'COMMIT');
ok(waits_at_barrier(6), 'trick 6: a login role holds the sandbox role in an open transaction');
($ret, $out, $err) = as_user('alice', "SELECT pgsandbox.drop('$a6')");
is($ret, 0, 'trick 6: drop() returns') or diag $err;
is($node->safe_psql('postgres', "SELECT status FROM pgsandbox.sandboxes WHERE name = '$a6'"),
	'dropped', 'trick 6: the sandbox is dropped: its database is gone');
is(sandbox_leftovers($node, $a6), '0|1', 'trick 6: its role is left for now');
is($node->safe_psql('postgres', "SELECT rolcanlogin FROM pg_roles WHERE rolname = '$a6'"), 'f',
	'trick 6: ... without login');
like(events_of($a6, 'blocked'), qr/^drop the role of: .*lock timeout.*; held by session \d+ of role carol in database postgres/m,
	'trick 6: the blocked step is recorded with what blocked it');
bob_is_served('trick 6, while held');
release_barrier(6, $barrier);
($ret, $out, $err) = finish_psql($carol);
is($ret, 0, 'trick 6: the login role commits its default privileges') or diag $err;
ok(wait_for_event($a6, 'cleanup'), 'trick 6: the worker then drops the role by itself');
is(sandbox_leftovers($node, $a6), '0|0', 'trick 6: nothing is left');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_default_acl WHERE defaclrole = 'carol'::regrole"),
	'0', 'trick 6: the default privileges naming it went with it');
consistent('trick 6');

# ---------------------------------------------------------------------------
# 5. a reset whose role someone names in default privileges: the reset ends,
#    its mark is cleared, the role is dropped once let go
# ---------------------------------------------------------------------------

my ($a7, $a7_conn) = clone_as('alice');
# hold the reset's pg_dump on app, so that its role exists while it waits
my $applock = start_psql($node, 'dbname=app', 'BEGIN',
	'LOCK TABLE items IN ACCESS EXCLUSIVE MODE', 'SELECT pg_sleep(600)');
ok(wait_until(sub {
		$node->safe_psql('app',
			"SELECT count(*) FROM pg_locks WHERE relation = 'items'::regclass AND mode = 'AccessExclusiveLock' AND granted") eq '1';
	}), 'trick 5: app is locked');
my $reset = start_psql($node, "dbname=postgres user=alice password=$pw{alice}",
	"SELECT pgsandbox.reset('$a7', 'latest')");
ok(wait_until(sub {
		$node->safe_psql('postgres', "SELECT count(*) FROM pg_roles WHERE rolname = '${a7}_reset'") eq '1';
	}, 60), "trick 5: the reset's role exists");
$barrier = hold_barrier(5);
$carol = start_psql($node, "dbname=postgres user=carol password=$pw{carol}",
	'BEGIN', "ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO ${a7}_reset",
	'SELECT pg_advisory_lock(5)', 'COMMIT');
ok(waits_at_barrier(5), "trick 5: a login role holds the reset's role");
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'app' AND query LIKE '%pg_sleep%'");
finish_psql($applock);
($ret, $out, $err) = finish_psql($reset);
is($ret, 0, 'trick 5: the reset succeeds') or diag $err;
is(poll_value($node, "SELECT reset_started_at IS NULL FROM pgsandbox.sandbox WHERE name = '$a7'", 't'),
	't', 'trick 5: the mark is cleared');
is($node->safe_psql('postgres', "SELECT rolcanlogin FROM pg_roles WHERE rolname = '${a7}_reset'"), 'f',
	"trick 5: the reset's role is left without login");
ok(wait_for_event("${a7}_reset", 'blocked'), "trick 5: dropping the reset's role is blocked");
like(events_of("${a7}_reset", 'blocked'), qr/held by session \d+ of role carol/,
	'trick 5: ... and recorded with what blocked it');
bob_is_served('trick 5');
release_barrier(5, $barrier);
finish_psql($carol);
ok(wait_for_event("${a7}_reset", 'cleanup'), "trick 5: the worker drops the reset's role by itself");
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_roles WHERE rolname = '${a7}_reset'"), '0',
	"trick 5: the reset's role is gone");
($ret, $out, $err) = as_user('alice', "SELECT pgsandbox.drop('$a7')");
is($ret, 0, 'trick 5: the sandbox can be dropped') or diag $err;
consistent('trick 5');

# ---------------------------------------------------------------------------
# a drop blocked before its database goes: the row is 'dropping' (not
# live), and the worker finishes it once the lock is let go
# ---------------------------------------------------------------------------

my ($a8, $a8_conn) = clone_as('alice');
$barrier = hold_barrier(8);
$carol = start_psql($node, "dbname=postgres user=carol password=$pw{carol}",
	'BEGIN', "ALTER ROLE carol IN DATABASE $a8 SET work_mem = '1MB'",
	'SELECT pg_advisory_lock(8)', 'COMMIT');
ok(waits_at_barrier(8), "a login role holds the sandbox's database in an open transaction");
my $live_before = $node->safe_psql('postgres',
	"SELECT count(*) FROM pgsandbox.sandbox WHERE owner_oid = 'alice'::regrole AND status IN ('cloning', 'ready')");
($ret, $out, $err) = as_user('alice', "SELECT pgsandbox.drop('$a8')");
isnt($ret, 0, 'a drop blocked on the database is reported to its caller');
like($err, qr/55P03: could not drop sandbox "\Q$a8\E" now: another session holds a lock it needs/,
	'... with 55P03');
like($err, qr/session \d+ of role carol in database postgres/, '... naming what holds it');
is($node->safe_psql('postgres', "SELECT status FROM pgsandbox.sandboxes WHERE name = '$a8'"),
	'dropping', 'the row is dropping');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM pgsandbox.sandbox WHERE owner_oid = 'alice'::regrole AND status IN ('cloning', 'ready')"),
	$live_before - 1, '... and no longer counts as live');
bob_is_served('a blocked drop');
release_barrier(8, $barrier);
finish_psql($carol);
ok(wait_for_event($a8, 'drop'), 'the worker finishes the drop by itself');
is($node->safe_psql('postgres', "SELECT status FROM pgsandbox.sandboxes WHERE name = '$a8'"),
	'dropped', 'the row is dropped');
is(sandbox_leftovers($node, $a8), '0|0', 'its database and role are gone');
consistent('a blocked drop');

# doctor() lists what keeps failing, and is clear once it is over
like($node->safe_psql('postgres', q{SELECT detail FROM pgsandbox.doctor() WHERE "check" = 'no step is blocked'}),
	qr/^No step of the worker/, 'doctor(): no step is blocked now');

# ---------------------------------------------------------------------------
# 8. scheduled snapshot builds are not starved by callers who keep the
#    queue full
# ---------------------------------------------------------------------------

$node->safe_psql('postgres', q{
SELECT pgsandbox.drop(name) FROM pgsandbox.sandboxes WHERE status = 'ready';
SELECT pgsandbox.snapshot('app');
SELECT pgsandbox.schedule_snapshot('app', '10 seconds');
});
my $script = $node->basedir . '/callers.sql';
open my $fh, '>', $script or die $!;
print $fh "SELECT pgsandbox.drop(name) FROM pgsandbox.clone('app', fresh => true);\n";
close $fh;
my $builds_before = $node->safe_psql('postgres',
	"SELECT count(*) FROM pgsandbox.sandbox WHERE kind = 'snapshot'");
my $load_start = $node->safe_psql('postgres', 'SELECT now()');
my ($stdout, $stderr) = ('', '');
my $load = IPC::Run::start(
	[ $node->installed_command('pgbench'), '-n', '-c', '20', '-j', '2', '-T', '40',
	  '-f', $script, '-h', $node->host, '-p', $node->port, 'postgres' ],
	'<', '/dev/null', '>', \$stdout, '2>', \$stderr, IPC::Run::timeout(300));
$load->finish;
my $builds = $node->safe_psql('postgres',
	"SELECT count(*) FROM pgsandbox.sandbox WHERE kind = 'snapshot' AND created_at >= '$load_start'"
	  . " AND created_at < '$load_start'::timestamptz + interval '40 s'");
like($stdout, qr/number of transactions actually processed: [1-9]/,
	'fairness: 20 callers kept the queue full for 40 s') or diag $stderr;
cmp_ok($builds, '>=', 2, "fairness: scheduled snapshot builds began while they did ($builds in 40 s)");
$node->safe_psql('postgres', "SELECT pgsandbox.schedule_snapshot('app', NULL)");
consistent('fairness');

$node->stop;
done_testing();
