
# 005_restart_and_kill.pl: clones interrupted by a crash or a killed process.
#
# (a) an immediate shutdown in the middle of a clone: after the restart the
#     lifecycle worker finds the row left 'cloning', drops what it made and
#     records a 'cleanup' event; an archive left in pgsandbox_tmp goes too;
# (b) pg_dump killed with SIGKILL: the clone fails and says so;
# (c) the clone worker terminated with pg_terminate_backend;
# (d) the lifecycle worker terminated: it comes back, answers the waiting
#     caller with an error and cleans up;
# (e) a ready sandbox whose database is gone is finished off at restart.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $node = sandbox_node('restart');
my $su = superuser_name();

make_slow_source($node, 'slow', 20000, 2);
make_slow_source($node, 'slowext', 20000, 2, 'CREATE EXTENSION hstore');
$node->safe_psql('postgres', "SELECT pgsandbox.add_source('slow', 'dbname=slow', true)");
$node->safe_psql('postgres', "SELECT pgsandbox.add_source('slowext', 'dbname=slowext', true)");

# Start a clone of $source and wait until it runs @programs.  Returns the
# psql handle, the sandbox name, the clone worker's pid and its children.
sub start_clone
{
	my ($source, $what, @programs) = @_;
	my $h = start_psql($node, $node->connstr('postgres') . " application_name=caller",
		"SELECT name FROM pgsandbox.clone('$source', schema_only => false)");
	poll_value($node,
		"SELECT count(*) FROM pgsandbox.sandboxes WHERE status = 'cloning'", '1', 30);
	my $name = $node->safe_psql('postgres',
		"SELECT name FROM pgsandbox.sandboxes WHERE status = 'cloning'");
	like($name, qr/^sbx_/, "$what: clone started");
	my ($wpid, @kids) = wait_for_clone_children($node, 30, @programs);
	ok(defined $wpid, "$what: clone worker runs " . join(' and ', @programs))
	  or diag explain \@kids;
	return ($h, $name, $wpid, @kids);
}

sub events_of
{
	my ($name) = @_;
	return $node->safe_psql('postgres',
		"SELECT string_agg(action || ':' || actor, ',' ORDER BY at) FROM pgsandbox.events WHERE sandbox = '$name'"
	);
}

# ---------------------------------------------------------------------------
# (a) immediate shutdown while pg_dump | pg_restore runs
# ---------------------------------------------------------------------------

my ($h, $name, $wpid, @kids) = start_clone('slow', 'crash', 'pg_dump', 'pg_restore');
my @pids = grep { defined } ($wpid, map { $_->[0] } @kids);
$node->stop('immediate');
my ($ret, $out, $err) = finish_psql($h);
isnt($ret, 0, 'crash: the waiting caller gets an error');
ok(wait_until(sub { !grep { process_alive($_) } @pids }, 30),
	'crash: clone worker, pg_dump and pg_restore died with the server')
  or diag "still alive: " . join(' ', grep { process_alive($_) } @pids);

$node->start;
check_clone_cleaned_up($node, $name, 'crash', 60);
is(events_of($name), "clone:$su,cleanup:pgsandbox worker",
	'crash: the worker records a cleanup event');
like( $node->safe_psql('postgres', "SELECT error FROM pgsandbox.sandboxes WHERE name = '$name'"),
	qr/restart/, 'crash: the error says a restart interrupted the clone');

# ---------------------------------------------------------------------------
# (a') the same while pg_restore reads an archive in pgsandbox_tmp
# ---------------------------------------------------------------------------

($h, $name, $wpid, @kids) = start_clone('slowext', 'crash with archive', 'pg_restore');
@pids = grep { defined } ($wpid, map { $_->[0] } @kids);
is_deeply([ tmp_entries($node) ], [$name], 'crash with archive: the archive is in pgsandbox_tmp');
$node->stop('immediate');
finish_psql($h);
is_deeply([ tmp_entries($node) ], [$name], 'crash with archive: the archive outlives the crash');
$node->start;
check_clone_cleaned_up($node, $name, 'crash with archive', 60, @pids);
is(events_of($name), "clone:$su,cleanup:pgsandbox worker",
	'crash with archive: the worker records a cleanup event');

# ---------------------------------------------------------------------------
# (b) pg_dump killed with SIGKILL
# ---------------------------------------------------------------------------

($h, $name, $wpid, @kids) = start_clone('slow', 'kill pg_dump', 'pg_dump', 'pg_restore');
@pids = grep { defined } ($wpid, map { $_->[0] } @kids);
my ($dump) = grep { $_->[1] =~ m{(?:^|/)pg_dump\s} } @kids;
ok(kill('KILL', $dump->[0]), 'kill pg_dump: SIGKILL sent to pg_dump');
($ret, $out, $err) = finish_psql($h);
isnt($ret, 0, 'kill pg_dump: the clone call fails');
like($err, qr/pg_dump of source "slow" failed/, 'kill pg_dump: the error names pg_dump');
like($err, qr/signal 9/, 'kill pg_dump: the error names the signal');
check_clone_cleaned_up($node, $name, 'kill pg_dump', 30, @pids);
like( $node->safe_psql('postgres', "SELECT error FROM pgsandbox.sandboxes WHERE name = '$name'"),
	qr/pg_dump.*signal 9/s, 'kill pg_dump: the error column names pg_dump and the signal');
is(events_of($name), "clone:$su,failed:$su", 'kill pg_dump: events record the failure');

# ---------------------------------------------------------------------------
# (c) the clone worker terminated
# ---------------------------------------------------------------------------

($h, $name, $wpid, @kids) = start_clone('slow', 'terminate clone worker', 'pg_dump', 'pg_restore');
@pids = grep { defined } ($wpid, map { $_->[0] } @kids);
is( $node->safe_psql('postgres',
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'pgsandbox clone'"),
	't', 'terminate clone worker: pg_terminate_backend succeeds');
($ret, $out, $err) = finish_psql($h);
isnt($ret, 0, 'terminate clone worker: the clone call fails');
like($err, qr/clone worker/, 'terminate clone worker: the error says the clone worker stopped');
check_clone_cleaned_up($node, $name, 'terminate clone worker', 30, @pids);
is(events_of($name), "clone:$su,failed:$su", 'terminate clone worker: events record the failure');

# ---------------------------------------------------------------------------
# (d) the lifecycle worker terminated in the middle of a clone
# ---------------------------------------------------------------------------

($h, $name, $wpid, @kids) = start_clone('slow', 'terminate lifecycle worker', 'pg_dump', 'pg_restore');
@pids = grep { defined } ($wpid, map { $_->[0] } @kids);
my $old_worker = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'pgsandbox worker'");
is( $node->safe_psql('postgres', "SELECT pg_terminate_backend($old_worker)"),
	't', 'terminate lifecycle worker: pg_terminate_backend succeeds');
($ret, $out, $err) = finish_psql($h);
isnt($ret, 0, 'terminate lifecycle worker: the clone call fails');
check_clone_cleaned_up($node, $name, 'terminate lifecycle worker', 60, @pids);
is(events_of($name), "clone:$su,cleanup:pgsandbox worker",
	'terminate lifecycle worker: the restarted worker records a cleanup event');
my $new_worker = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'pgsandbox worker'");
like($new_worker, qr/^\d+$/, 'terminate lifecycle worker: a new worker runs');
isnt($new_worker, $old_worker, 'terminate lifecycle worker: ... in a new process');

# the worker serves clones again
$node->safe_psql('postgres', 'CREATE DATABASE small');
$node->safe_psql('small', 'CREATE TABLE s (id int); INSERT INTO s VALUES (1), (2)');
$node->safe_psql('postgres', "SELECT pgsandbox.add_source('small', 'dbname=small', true)");
($ret, $out, $err) = $node->psql('postgres',
	"SELECT name FROM pgsandbox.clone('small', schema_only => false)");
is($ret, 0, 'a clone after all that succeeds') or diag $err;
is($node->safe_psql($out || 'postgres', 'SELECT count(*) FROM s'), '2', '... with its rows');
is(sandbox_leftovers($node), '1|1', 'only that sandbox\'s database and role exist');

# ---------------------------------------------------------------------------
# (e) a ready sandbox whose database vanished (a drop cut short): the worker
#     finishes the drop when it starts
# ---------------------------------------------------------------------------

my $vanished = $out || 'sbx_none';
$node->safe_psql('postgres', "DROP DATABASE $vanished");
is(sandbox_leftovers($node, $vanished), '0|1', 'vanished database: only the role is left');
$node->restart;
is(poll_value($node, "SELECT status FROM pgsandbox.sandboxes WHERE name = '$vanished'",
		'dropped', 30),
	'dropped', 'vanished database: the sandbox is marked dropped after the restart');
is(sandbox_leftovers($node, $vanished), '0|0', 'vanished database: its role is dropped too');
is(events_of($vanished), "clone:$su,ready:$su,cleanup:pgsandbox worker",
	'vanished database: the worker records a cleanup event');

$node->stop;
done_testing();
