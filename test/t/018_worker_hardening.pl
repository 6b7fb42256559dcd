
# 018_worker_hardening.pl: the lifecycle worker survives what a busy
# server does to it, and says what it does.
#
# (a) pg_cancel_backend of the worker during a data clone: the worker
#     stays (same pid) and the clone completes with all its rows;
# (b) a drop whose role cannot go yet (it owns something in another
#     database, which pgsandbox does not drop) still drops the sandbox and
#     leaves the role without login; an error while serving one request (a
#     drop held by a lock on its database) goes to that caller; the worker
#     stays and serves the next;
# (c) the worker reports its table statistics: pg_stat_user_tables counts
#     the catalog's inserts and updates, so autovacuum sees them;
# (d) between requests the worker is idle with no query text, and a crash
#     log after kill -9 of the idle worker names no stale activity;
# (e) reconciliation at start finishes the drop left 'dropping'; a role
#     left behind is logged, retried by later passes, and dropped once it
#     can be;
# (f) the reaper drops many expired sandboxes, one a pass.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $node = sandbox_node('harden', "pgsandbox.gc_interval = 3600\nrestart_after_crash = on\n");

sub worker_pid
{
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'pgsandbox worker'");
}

sub status_of
{
	my ($name) = @_;
	return $node->safe_psql('postgres',
		"SELECT status FROM pgsandbox.sandbox WHERE name = '$name'");
}

make_slow_source($node, 'slow', 3000, 1);
$node->safe_psql('postgres', q{
SELECT pgsandbox.add_source('slow', 'dbname=slow', allow_data => true);
CREATE DATABASE small;
SELECT pgsandbox.add_source('small', 'dbname=small');
});
$node->safe_psql('small', 'CREATE TABLE t (id int PRIMARY KEY)');

# ---------------------------------------------------------------------------
# (a) cancel the worker in the middle of a data clone
# ---------------------------------------------------------------------------

my $wpid = worker_pid();
like($wpid, qr/^\d+$/, 'the worker runs');
my $h = start_psql($node, $node->connstr('postgres'),
	"SELECT name || ' ' || conninfo FROM pgsandbox.clone('slow', schema_only => false)");
is(poll_value($node, "SELECT count(*) FROM pgsandbox.sandbox WHERE status = 'cloning'", '1', 30),
	'1', '(a) a data clone is under way');
for (1 .. 3)
{
	is($node->safe_psql('postgres', "SELECT pg_cancel_backend($wpid)"), 't',
		'(a) the worker is sent a cancel');
	sleep 1;
}
is(worker_pid(), $wpid, '(a) the worker is still the same process');
my ($ret, $out, $err) = finish_psql($h);
is($ret, 0, '(a) the clone in flight completes') or diag $err;
my ($slow_name, $slow_conninfo) = split / /, $out, 2;
my (undef, $rows) = sandbox_psql($node, $slow_conninfo // '', 'SELECT count(*) FROM slow');
is($rows, '3000', '(a) with every row of its source');
is(worker_pid(), $wpid, '(a) and the worker never restarted');

# ---------------------------------------------------------------------------
# (b) a role that cannot go yet; an error while serving a drop goes to its
#     caller only
# ---------------------------------------------------------------------------

my $a = $node->safe_psql('postgres', "SELECT name FROM pgsandbox.clone('small')");
my $b = $node->safe_psql('postgres', "SELECT name FROM pgsandbox.clone('small')");
# an object in another database owned by a's role: pgsandbox did not make it
$node->safe_psql('small', "CREATE TABLE keep_a (); ALTER TABLE keep_a OWNER TO $a");
($ret, $out, $err) = $node->psql('postgres', "SELECT pgsandbox.drop('$a')");
is($ret, 0, '(b) the drop of a sandbox whose role owns something elsewhere returns') or diag $err;
is(status_of($a), 'dropped', '(b) the sandbox is dropped');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_database WHERE datname = '$a'"),
	'0', '(b) its database is gone');
is($node->safe_psql('postgres', "SELECT string_agg(rolcanlogin::text, ',') FROM pg_roles WHERE rolname = '$a'"),
	'false', '(b) its role is left, without login');
is($node->safe_psql('small', "SELECT count(*) FROM pg_class WHERE relname = 'keep_a'"), '1',
	'(b) and what it owns elsewhere is not dropped');
like($node->safe_psql('postgres',
		"SELECT string_agg(detail, E'\n') FROM pgsandbox.events WHERE sandbox = '$a' AND action = 'blocked'"),
	qr/cannot be dropped because some objects depend on it/, '(b) the event log says why');

# a session holds b's database: its drop is given up and its caller told
my $hold = start_psql($node, 'dbname=small', 'BEGIN',
	"ALTER ROLE CURRENT_USER IN DATABASE $b SET work_mem = '1MB'", 'SELECT pg_sleep(600)');
ok(wait_until(sub {
		$node->safe_psql('postgres',
			"SELECT count(*) FROM pg_locks l JOIN pg_database d ON l.classid = 'pg_database'::regclass"
			  . " AND l.objid = d.oid WHERE d.datname = '$b' AND l.granted") eq '1';
	}), '(b) a session holds b\'s database');
($ret, $out, $err) = $node->psql('postgres', "SELECT pgsandbox.drop('$b')");
isnt($ret, 0, '(b) a drop that cannot finish now fails');
like($err, qr/could not drop sandbox "\Q$b\E" now: another session holds a lock it needs/,
	'(b) its caller is told why');
is(worker_pid(), $wpid, '(b) the worker is still the same process');
is(status_of($b), 'dropping', '(b) the sandbox is dropping');
my $c = $node->safe_psql('postgres', "SELECT name FROM pgsandbox.clone('small')");
is(status_of($c), 'ready', '(b) the next request is served');
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'small' AND query LIKE '%pg_sleep%'");
finish_psql($hold);

# ---------------------------------------------------------------------------
# (c) statistics of the catalog tables
# ---------------------------------------------------------------------------

is( poll_value(
		$node,
		"SELECT bool_and(n_tup_ins > 0) FROM pg_stat_user_tables"
		  . " WHERE relid IN ('pgsandbox.sandbox'::regclass, 'pgsandbox.event'::regclass,"
		  . "                 'pgsandbox.sandbox_secret'::regclass)",
		't', 30),
	't', '(c) pg_stat_user_tables counts the inserts into sandbox, event and sandbox_secret');
is( poll_value(
		$node,
		"SELECT n_tup_upd > 0 FROM pg_stat_user_tables WHERE relid = 'pgsandbox.sandbox'::regclass",
		't', 30),
	't', '(c) and the updates of sandbox');

# ---------------------------------------------------------------------------
# (d) idle between requests
# ---------------------------------------------------------------------------

is( poll_value(
		$node,
		"SELECT state || '|' || query FROM pg_stat_activity WHERE backend_type = 'pgsandbox worker'",
		'idle|', 10),
	'idle|', '(d) the worker reports itself idle, with no query text');

# ---------------------------------------------------------------------------
# (e) reconciliation row by row
# ---------------------------------------------------------------------------

# b's drop was given up; a's role is left behind
my $offset = -s $node->logfile;
# kill -9 of the idle worker: the postmaster restarts the cluster
kill 'KILL', $wpid;
ok( wait_until(
		sub {
			my $p = eval { worker_pid() } // '';
			return $p =~ /^\d+$/ && $p ne $wpid;
		},
		60),
	'(d) the killed worker comes back');
my $log = slurp_file($node->logfile, $offset);
like($log, qr/\Q(PID $wpid) was terminated by signal 9\E/, '(d) the crash is logged');
unlike($log, qr/Failed process was running: pgsandbox/,
	'(d) without a stale activity of the idle worker');

is(poll_value($node, "SELECT status FROM pgsandbox.sandbox WHERE name = '$b'", 'dropped', 30),
	'dropped', '(e) the drop left dropping is finished at start');
is( $node->safe_psql('postgres', "SELECT count(*) FROM pg_roles WHERE rolname = '$b'"),
	'0', '(e) its role is gone');
ok( wait_until(sub { slurp_file($node->logfile, $offset) =~ /could not drop role "\Q$a\E" yet/ }, 30),
	'(e) the role left behind is tried again, and what keeps it is logged');
like($node->safe_psql('postgres', q{SELECT detail FROM pgsandbox.doctor() WHERE "check" = 'no step is blocked'}),
	qr/\Q$a\E \(a role left without login, to drop/, '(e) doctor() lists it');

# once its role can go, a later pass drops it
$node->safe_psql('small', 'DROP TABLE keep_a');
$node->safe_psql('postgres', 'ALTER SYSTEM SET pgsandbox.gc_interval = 1; SELECT pg_reload_conf()');
is(poll_value($node, "SELECT count(*) FROM pg_roles WHERE rolname = '$a'", '0', 60),
	'0', '(e) the role left behind is dropped by a later pass');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pgsandbox.event WHERE sandbox = '$a' AND action = 'cleanup'"),
	'1', '(e) the event log records the clean-up');

# ---------------------------------------------------------------------------
# (f) the reaper drops many expired sandboxes, one a pass, over several
#     passes of the loop
# ---------------------------------------------------------------------------

$node->safe_psql('postgres', 'ALTER SYSTEM SET pgsandbox.gc_interval = 1; SELECT pg_reload_conf()');
my @short = map {
	$node->safe_psql('postgres', "SELECT name FROM pgsandbox.clone('small', ttl => '1 second')")
} 1 .. 6;
my $list = join(', ', map { "'$_'" } @short);
is( poll_value(
		$node, "SELECT count(*) FROM pgsandbox.sandbox WHERE name IN ($list) AND status = 'dropped'",
		'6', 60),
	'6', '(f) six sandboxes that expired together are all dropped by the reaper');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pgsandbox.event WHERE sandbox IN ($list) AND action = 'expire'"),
	'6', '(f) each with its expire event');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_database WHERE datname IN ($list)"),
	'0', '(f) and its database');

# the worker still clones
is(status_of($node->safe_psql('postgres', "SELECT name FROM pgsandbox.clone('small')")),
	'ready', 'after all this, a clone still succeeds');

$node->stop;
done_testing();
