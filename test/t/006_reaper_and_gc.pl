
# 006_reaper_and_gc.pl: expiry, extend(), gc() and drop().
#
# Node "reaper" runs the reaper every second: an expired sandbox is dropped
# by the worker, an extended one lives on.  Node "gc" runs it hourly, so
# gc(), extend() and drop() can be watched without the reaper racing them;
# at the end its gc_interval is lowered by a reload, which must take effect
# without waiting out the hour.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;
use Time::HiRes qw(time sleep);

my $su = superuser_name();

sub setup_source
{
	my ($node) = @_;
	$node->safe_psql('postgres', 'CREATE DATABASE app');
	$node->safe_psql('app',
		'CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t SELECT generate_series(1, 10)');
	$node->safe_psql('postgres', "SELECT pgsandbox.add_source('app', 'dbname=app', true)");
	return;
}

sub clone
{
	my ($node, $ttl) = @_;
	my $row = $node->safe_psql('postgres',
		"SELECT name, conninfo, expires_at FROM pgsandbox.clone('app', schema_only => false, ttl => '$ttl')"
	);
	return split /\|/, $row;
}

sub status_of
{
	my ($node, $name) = @_;
	return $node->safe_psql('postgres',
		"SELECT status FROM pgsandbox.sandboxes WHERE name = '$name'");
}

sub events_of
{
	my ($node, $name) = @_;
	return $node->safe_psql('postgres',
		"SELECT string_agg(action || ':' || actor, ',' ORDER BY at) FROM pgsandbox.events WHERE sandbox = '$name'"
	);
}

# ---------------------------------------------------------------------------
# The reaper
# ---------------------------------------------------------------------------

my $node = sandbox_node('reaper', "pgsandbox.gc_interval = 1\n");
setup_source($node);

my ($exp, $exp_conninfo) = clone($node, '2 seconds');
my ($keep, $keep_conninfo) = clone($node, '3 seconds');
my $keep_first_expiry = $node->safe_psql('postgres',
	"SELECT extract(epoch FROM expires_at) FROM pgsandbox.sandboxes WHERE name = '$keep'");
# (a CTE, so that BETWEEN does not call extend() twice)
my ($extended, $new_expiry) = split /\|/, $node->safe_psql('postgres',
	"WITH e AS MATERIALIZED (SELECT pgsandbox.extend('$keep', '1 hour') AS x)"
	  . " SELECT x - now() BETWEEN interval '59 minutes' AND interval '61 minutes', x FROM e");
is($extended, 't', 'extend() returns now() + ttl');
is( $node->safe_psql('postgres',
		"SELECT expires_at = '$new_expiry' FROM pgsandbox.sandboxes WHERE name = '$keep'"),
	't', 'extend() returns the new expires_at');
is( $node->safe_psql('postgres',
		"SELECT expires_at - now() > interval '59 minutes' FROM pgsandbox.sandboxes WHERE name = '$keep'"),
	't', 'extend() moves expires_at');
is(events_of($node, $keep), "clone:$su,ready:$su,extend:$su", 'extend() is recorded');

my $t0 = time();
is(poll_value($node, "SELECT status FROM pgsandbox.sandboxes WHERE name = '$exp'", 'dropped', 15),
	'dropped', 'an expired sandbox is dropped by the reaper');
note sprintf('reaped after %.1f s', time() - $t0);
is(sandbox_leftovers($node, $exp), '0|0', 'its database and role are gone');
is( $node->safe_psql('postgres',
		"SELECT dropped_at IS NOT NULL AND dropped_at >= expires_at FROM pgsandbox.sandboxes WHERE name = '$exp'"),
	't', 'dropped_at is set, after the expiry');
is(events_of($node, $exp), "clone:$su,ready:$su,expire:pgsandbox worker",
	"the drop is an 'expire' event by the pgsandbox worker");
my ($ret, $out, $err) = sandbox_psql($node, $exp_conninfo, 'SELECT 1');
isnt($ret, 0, 'the expired sandbox\'s conninfo no longer logs in');

# a ttl shorter than the clone itself: the reaper leaves a sandbox alone
# while it is being cloned, and its time counts from when it is ready
make_slow_source($node, 'slowapp', 1000, 2);
$node->safe_psql('postgres', "SELECT pgsandbox.add_source('slowapp', 'dbname=slowapp', true)");
($ret, $out, $err) = $node->psql('postgres',
	"SELECT name FROM pgsandbox.clone('slowapp', schema_only => false, ttl => '1 second')");
is($ret, 0, 'a clone that takes longer than its ttl succeeds') or diag $err;
my $short = $out || 'sbx_none';
is( $node->safe_psql('postgres',
		"SELECT ready_at - created_at > interval '1 second', expires_at - ready_at"
		  . " FROM pgsandbox.sandboxes WHERE name = '$short'"),
	't|00:00:01', '... its ttl counts from when it became ready');
is(poll_value($node, "SELECT status FROM pgsandbox.sandboxes WHERE name = '$short'", 'dropped', 15),
	'dropped', '... and the reaper drops it once that has passed');
is(events_of($node, $short), "clone:$su,ready:$su,expire:pgsandbox worker",
	'... recorded as clone, ready, expire');

# the extended sandbox outlives its first expiry and a few reaper passes
my $wait = $keep_first_expiry + 2.5 - time();
sleep($wait) if $wait > 0;
is(status_of($node, $keep), 'ready', 'the extended sandbox is still ready after its first expiry');
($ret, $out, $err) = sandbox_psql($node, $keep_conninfo, 'SELECT count(*) FROM t');
is($out, '10', 'the extended sandbox still works');
$node->stop;

# ---------------------------------------------------------------------------
# gc(), extend(), drop() without the reaper
# ---------------------------------------------------------------------------

$node = sandbox_node('gc',
	    "pgsandbox.gc_interval = 3600\npgsandbox.default_ttl = 7200\npgsandbox.max_ttl = 86400\n"
	  . "max_prepared_transactions = 4\n");
setup_source($node);

my ($g1) = clone($node, '1 hour');
my ($g2, $g2_conninfo) = clone($node, '1 hour');

# default and maximum ttl
is( $node->safe_psql('postgres',
		"SELECT expires_at - now() BETWEEN interval '119 minutes' AND interval '121 minutes'"
		  . " FROM pgsandbox.clone('app')"),
	't', 'without ttl, a sandbox gets pgsandbox.default_ttl');
($ret, $out, $err) =
  $node->psql('postgres', "SELECT * FROM pgsandbox.clone('app', ttl => '2 days')");
isnt($ret, 0, 'a ttl beyond pgsandbox.max_ttl is refused');
like($err, qr/max_ttl/, '... naming max_ttl');
($ret, $out, $err) = $node->psql('postgres', "SELECT pgsandbox.extend('$g1', '2 days')");
isnt($ret, 0, 'extend() beyond pgsandbox.max_ttl is refused');

# expire g1 by extending it by one second
$node->safe_psql('postgres', "SELECT pgsandbox.extend('$g1', '1 second')");
is(poll_value($node,
		"SELECT expires_at <= now() FROM pgsandbox.sandboxes WHERE name = '$g1'", 't', 10),
	't', 'g1 expired');

is($node->safe_psql('postgres', 'SELECT name, dropped FROM pgsandbox.gc(dry_run => true)'),
	"$g1|f", 'gc(dry_run) lists the expired sandbox and drops nothing');
is(status_of($node, $g1), 'ready', '... g1 is still ready');
is(sandbox_leftovers($node, $g1), '1|1', '... g1 still has its database and role');

is($node->safe_psql('postgres', 'SELECT name, dropped FROM pgsandbox.gc()'),
	"$g1|t", 'gc() drops the expired sandbox');
is(status_of($node, $g1), 'dropped', '... g1 is dropped');
is(sandbox_leftovers($node, $g1), '0|0', '... its database and role are gone');
is(events_of($node, $g1), "clone:$su,ready:$su,extend:$su,expire:$su",
	"... recorded as an 'expire' by the caller of gc()");
is(status_of($node, $g2), 'ready', 'gc() leaves a live sandbox alone');
is(sandbox_leftovers($node, $g2), '1|1', '... with its database and role');
is($node->safe_psql('postgres', 'SELECT count(*) FROM pgsandbox.gc()'), '0',
	'a second gc() finds nothing');

# drop() ends the sandbox's sessions first
my $session = start_psql($node, $g2_conninfo . ' application_name=sandbox_user',
	'SELECT pg_sleep(120)');
is(poll_value($node,
		"SELECT count(*) FROM pg_stat_activity WHERE datname = '$g2' AND usename = '$g2'",
		'1', 30),
	'1', 'a session of the sandbox role is open');
($ret, $out, $err) = $node->psql('postgres', "SELECT pgsandbox.drop('$g2')", timeout => 60);
is($ret, 0, 'drop() of a sandbox in use succeeds') or diag $err;
my ($sret, $sout, $serr) = finish_psql($session);
isnt($sret, 0, 'the sandbox session was ended');
like($serr, qr/terminat/, '... by termination');
is(status_of($node, $g2), 'dropped', 'the sandbox is dropped');
is(sandbox_leftovers($node, $g2), '0|0', 'its database and role are gone');
is(events_of($node, $g2), "clone:$su,ready:$su,drop:$su", "'drop' event by the caller");

# drop() of a sandbox holding a prepared transaction
my ($g4, $g4_conninfo) = clone($node, '1 hour');
($ret, $out, $err) = sandbox_psql($node, $g4_conninfo,
	"BEGIN; INSERT INTO t VALUES (100); PREPARE TRANSACTION 'held_by_sandbox';");
is($ret, 0, 'the sandbox role prepares a transaction') or diag $err;
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_prepared_xacts WHERE database = '$g4'"),
	'1', 'the prepared transaction exists');
($ret, $out, $err) = $node->psql('postgres', "SELECT pgsandbox.drop('$g4')", timeout => 60);
is($ret, 0, 'drop() of a sandbox with a prepared transaction succeeds') or diag $err;
is(status_of($node, $g4), 'dropped', '... the sandbox is dropped');
is(sandbox_leftovers($node, $g4), '0|0', '... its database and role are gone');
is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '0',
	'... and no prepared transaction is left');

# refusals: nothing is dropped
$node->safe_psql('postgres',
	"SELECT pgsandbox.add_source('dead', 'host=127.0.0.1 port=1 dbname=x connect_timeout=2')");
$node->psql('postgres', "SELECT * FROM pgsandbox.clone('dead')");
my $failed = $node->safe_psql('postgres',
	"SELECT name FROM pgsandbox.sandboxes WHERE status = 'failed'");
like($failed, qr/^sbx_[a-z0-9]{8}$/, 'a failed sandbox exists');
$node->safe_psql('postgres', 'CREATE ROLE sbx_fake0001 LOGIN');
$node->safe_psql('postgres', 'CREATE DATABASE sbx_fake0001 OWNER sbx_fake0001');

my $count_sql =
  "SELECT (SELECT count(*) FROM pg_database) || '|' || (SELECT count(*) FROM pg_roles)"
  . " || '|' || (SELECT string_agg(name || ':' || status, ',' ORDER BY name) FROM pgsandbox.sandboxes)";
my $before = $node->safe_psql('postgres', $count_sql);
my %seen;
for my $target (grep { !$seen{$_}++ } 'postgres', 'template1', $g1, $failed, 'sbx_nosuch01',
	'sbx_fake0001', $su, 'pgsandbox_sandbox')
{
	($ret, $out, $err) = $node->psql('postgres', "SELECT pgsandbox.drop('$target')");
	isnt($ret, 0, "drop('$target') fails");
	like($err, qr/does not exist/, "drop('$target') says no such sandbox exists");
}
is($node->safe_psql('postgres', $count_sql), $before,
	'no database, role or sandbox changed by the refused drops');
($ret, $out, $err) = $node->psql('postgres', "SELECT pgsandbox.extend('$g1', '1 hour')");
isnt($ret, 0, 'extend() of a dropped sandbox fails');
($ret, $out, $err) = $node->psql('postgres', "SELECT pgsandbox.extend('$failed', '1 hour')");
isnt($ret, 0, 'extend() of a failed sandbox fails');

# lowering gc_interval by a reload takes effect without waiting out the hour
$node->safe_psql('postgres', 'ALTER SYSTEM SET pgsandbox.gc_interval = 1');
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
ok(wait_until(sub { $node->safe_psql('postgres', 'SHOW pgsandbox.gc_interval') eq '1s' }, 30),
	'gc_interval reloaded');
my ($g3) = clone($node, '2 seconds');
is(poll_value($node, "SELECT status FROM pgsandbox.sandboxes WHERE name = '$g3'", 'dropped', 15),
	'dropped', 'after gc_interval is lowered by a reload, the reaper drops an expired sandbox');

$node->stop;
done_testing();
