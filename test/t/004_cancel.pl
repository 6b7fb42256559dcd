
# 004_cancel.pl: a caller who stops waiting stops the clone.
#
# statement_timeout, pg_cancel_backend and pg_terminate_backend of the
# waiting caller must each end the clone: the caller gets its error at
# once, and the worker kills pg_dump and pg_restore, drops the database and
# the role, marks the sandbox failed and empties pgsandbox_tmp.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;
use Time::HiRes qw(time);

my $node = sandbox_node('cancel');

# The name of the one sandbox being cloned, once its row exists.
sub cloning_name
{
	my $name = poll_value($node,
		"SELECT count(*) = 1 FROM pgsandbox.sandboxes WHERE status = 'cloning'", 't', 30);
	return $node->safe_psql('postgres',
		"SELECT name FROM pgsandbox.sandboxes WHERE status = 'cloning'");
}

# ---------------------------------------------------------------------------
# statement_timeout during a clone of 3 million rows
# ---------------------------------------------------------------------------

$node->safe_psql('postgres', 'CREATE DATABASE big');
$node->safe_psql('big',
	'CREATE TABLE big AS SELECT g AS id, md5(g::text) AS t FROM generate_series(1, 3000000) g');
$node->safe_psql('postgres', "SELECT pgsandbox.add_source('big', 'dbname=big', true)");

my $t0 = time();
my $h = start_psql($node, $node->connstr('postgres'),
	"SET statement_timeout = '1s'",
	"SELECT name FROM pgsandbox.clone('big', schema_only => false)");
my $name = cloning_name();
like($name, qr/^sbx_/, 'statement_timeout: the clone started');
# pg_dump usually starts well within the second; if the machine is so slow
# that the timeout comes first, the processes are simply not watched
my ($wpid, @kids) = wait_for_clone_children($node, 5, 'pg_dump');
my @pids = grep { defined } ($wpid, map { $_->[0] } @kids);
note 'watching clone worker and children: ' . join(' ', map { $_->[1] } @kids);
my ($ret, $out, $err) = finish_psql($h);
my $elapsed = time() - $t0;
isnt($ret, 0, 'statement_timeout: the clone call fails');
like($err, qr/canceling statement due to statement timeout/,
	'statement_timeout: the caller is told it timed out');
is($out, '', 'statement_timeout: no sandbox is returned');
cmp_ok($elapsed, '<', 15, 'statement_timeout: the caller returns promptly');
check_clone_cleaned_up($node, $name, 'statement_timeout', 30, @pids);
is( $node->safe_psql('postgres',
		"SELECT string_agg(action, ',' ORDER BY at) FROM pgsandbox.events WHERE sandbox = '$name'"),
	'clone,failed', 'statement_timeout: events record the clone and its failure');

# ---------------------------------------------------------------------------
# pg_cancel_backend of the waiting caller, in the middle of pg_dump | pg_restore
# ---------------------------------------------------------------------------

make_slow_source($node, 'slow', 20000, 2);
$node->safe_psql('postgres', "SELECT pgsandbox.add_source('slow', 'dbname=slow', true)");

# Start a clone of $source from a session named $app, wait until it runs
# the given programs, and return (handle, sandbox name, pids to watch).
sub start_clone
{
	my ($source, $app, @programs) = @_;
	my $h = start_psql($node, $node->connstr('postgres') . " application_name=$app",
		"SELECT name FROM pgsandbox.clone('$source', schema_only => false)");
	my $name = cloning_name();
	my ($wpid, @kids) = wait_for_clone_children($node, 30, @programs);
	ok(defined $wpid, "$app: clone worker runs " . join(' and ', @programs))
	  or diag explain \@kids;
	return ($h, $name, grep { defined } ($wpid, map { $_->[0] } @kids));
}

my ($h2, $name2, @pids2) = start_clone('slow', 'cancelme', 'pg_dump', 'pg_restore');
is( $node->safe_psql('postgres',
		"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'cancelme'"),
	't', 'pg_cancel_backend: cancel sent to the caller');
($ret, $out, $err) = finish_psql($h2);
isnt($ret, 0, 'pg_cancel_backend: the clone call fails');
like($err, qr/canceling statement due to user request/,
	'pg_cancel_backend: the caller is told it was canceled');
check_clone_cleaned_up($node, $name2, 'pg_cancel_backend', 30, @pids2);
like( $node->safe_psql('postgres',
		"SELECT error FROM pgsandbox.sandboxes WHERE name = '$name2'"),
	qr/cancel/, 'pg_cancel_backend: the error says the clone was canceled');

# ---------------------------------------------------------------------------
# pg_terminate_backend of the waiting caller
# ---------------------------------------------------------------------------

my ($h3, $name3, @pids3) = start_clone('slow', 'terminateme', 'pg_dump', 'pg_restore');
is( $node->safe_psql('postgres',
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'terminateme'"),
	't', 'pg_terminate_backend: caller terminated');
($ret, $out, $err) = finish_psql($h3);
isnt($ret, 0, 'pg_terminate_backend: the clone call fails');
check_clone_cleaned_up($node, $name3, 'pg_terminate_backend', 30, @pids3);

# ---------------------------------------------------------------------------
# Cancel while pg_restore reads an archive in pgsandbox_tmp (a source with
# an extension)
# ---------------------------------------------------------------------------

make_slow_source($node, 'slowext', 20000, 2, 'CREATE EXTENSION hstore');
$node->safe_psql('postgres', "SELECT pgsandbox.add_source('slowext', 'dbname=slowext', true)");

my ($h4, $name4, @pids4) = start_clone('slowext', 'cancelarchive', 'pg_restore');
is_deeply([ tmp_entries($node) ], [$name4], 'archive: the archive is in pgsandbox_tmp while pg_restore runs');
is( $node->safe_psql('postgres',
		"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'cancelarchive'"),
	't', 'archive: cancel sent to the caller');
($ret, $out, $err) = finish_psql($h4);
like($err, qr/canceling statement due to user request/, 'archive: the caller is told it was canceled');
check_clone_cleaned_up($node, $name4, 'archive', 30, @pids4);

# the worker still serves clones afterwards
$node->safe_psql('postgres', 'CREATE DATABASE small');
$node->safe_psql('small', 'CREATE TABLE s (id int); INSERT INTO s VALUES (1), (2)');
$node->safe_psql('postgres', "SELECT pgsandbox.add_source('small', 'dbname=small', true)");
($ret, $out, $err) = $node->psql('postgres',
	"SELECT name FROM pgsandbox.clone('small', schema_only => false)");
is($ret, 0, 'a clone after the cancellations succeeds') or diag $err;
is($node->safe_psql($out || 'postgres', 'SELECT count(*) FROM s'), '2', '... with its rows');

$node->stop;
done_testing();
