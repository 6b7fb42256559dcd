
# 007_concurrency.pl: many callers at once, and clone() in a transaction.
#
# Five sessions ask for a clone at the same moment with
# pgsandbox.max_concurrent_clones = 2: all five must succeed with the
# source's content, and never more than two clone workers may run at once.
# A clone asked for inside a transaction that rolls back stays: the catalog
# and the sandbox belong to the worker.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = sandbox_node('concurrency', "pgsandbox.max_concurrent_clones = 2\n");

# each clone takes about 1.5 s to restore 700 slow rows
make_slow_source($node, 'slow', 700, 2);
$node->safe_psql('postgres', "SELECT pgsandbox.add_source('slow', 'dbname=slow', true)");
my $content_sql =
  "SELECT count(*) || ' ' || md5(string_agg(s::text, '|' ORDER BY id)) FROM slow s";
my $source_content = $node->safe_psql('slow', $content_sql);

my $t0 = time();
my @h = map {
	start_psql($node, $node->connstr('postgres') . " application_name=caller$_",
		"SELECT name, conninfo FROM pgsandbox.clone('slow', schema_only => false, labels => '{\"n\": $_}')"
	  )
} 1 .. 5;

# watch the clone workers and the 'cloning' rows until all five are done
my ($max_workers, $max_cloning, $samples) = (0, 0, 0);
my $done = wait_until(
	sub {
		my ($workers, $cloning, $finished) = split /\|/,
		  $node->safe_psql('postgres',
			    "SELECT (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pgsandbox clone'),"
			  . " (SELECT count(*) FROM pgsandbox.sandboxes WHERE status = 'cloning'),"
			  . " (SELECT count(*) FROM pgsandbox.sandboxes WHERE status IN ('ready', 'failed'))");
		$samples++;
		$max_workers = $workers if $workers > $max_workers;
		$max_cloning = $cloning if $cloning > $max_cloning;
		return $finished == 5;
	},
	120);
ok($done, 'all five clones finished');
note sprintf('five clones took %.1f s; %d samples', time() - $t0, $samples);
cmp_ok($max_workers, '<=', 2, 'never more than max_concurrent_clones clone workers at once');
cmp_ok($max_cloning, '<=', 2, 'never more than max_concurrent_clones sandboxes cloning at once');
is($max_workers, 2, 'two clones did run at the same time');

my %names;
for my $i (1 .. 5)
{
	my ($ret, $out, $err) = finish_psql($h[ $i - 1 ]);
	is($ret, 0, "caller $i: clone succeeded") or diag $err;
	my ($name, $conninfo) = split /\|/, $out;
	$name //= "none$i";
	$names{$name} = 1;
	is( $node->safe_psql('postgres',
			"SELECT status, labels->>'n' FROM pgsandbox.sandboxes WHERE name = '$name'"),
		"ready|$i", "caller $i: its own sandbox is ready");
	my ($r, $content, $e) = sandbox_psql($node, $conninfo // '', $content_sql);
	is($content, $source_content, "caller $i: the sandbox role reads the source's rows");
}
is(scalar keys %names, 5, 'five different sandboxes');
is(sandbox_leftovers($node), '5|5', 'five sandbox databases and roles');

# ---------------------------------------------------------------------------
# clone() inside a transaction that rolls back
# ---------------------------------------------------------------------------

my ($ret, $out, $err) = $node->psql('postgres',
	"BEGIN; SELECT name, conninfo FROM pgsandbox.clone('slow', schema_only => false); ROLLBACK;");
is($ret, 0, 'clone() inside a transaction block succeeds') or diag $err;
my ($name, $conninfo) = split /\|/, $out;
$name //= 'none';
is( $node->safe_psql('postgres', "SELECT status FROM pgsandbox.sandboxes WHERE name = '$name'"),
	'ready', 'after ROLLBACK the sandbox is still ready');
is( $node->safe_psql('postgres',
		"SELECT string_agg(action, ',' ORDER BY at) FROM pgsandbox.events WHERE sandbox = '$name'"),
	'clone,ready', 'after ROLLBACK its events are still there');
is(sandbox_leftovers($node, $name), '1|1', 'after ROLLBACK its database and role exist');
my ($r, $content, $e) = sandbox_psql($node, $conninfo // '', $content_sql);
is($content, $source_content, 'after ROLLBACK the sandbox logs in and holds the rows');

# a failing statement after the clone in the same transaction
($ret, $out, $err) = $node->psql('postgres',
	"BEGIN; SELECT name FROM pgsandbox.clone('slow'); SELECT 1/0; COMMIT;",
	on_error_stop => 0);
like($err, qr/division by zero/, 'the transaction around a clone fails afterwards');
my ($name2) = split /\n/, $out;
$name2 //= 'none';
is( $node->safe_psql('postgres', "SELECT status FROM pgsandbox.sandboxes WHERE name = '$name2'"),
	'ready', 'the sandbox made in the failed transaction is ready');
is(sandbox_leftovers($node, $name2), '1|1', '... with its database and role');

# ---------------------------------------------------------------------------
# While both clone slots are busy
# ---------------------------------------------------------------------------

make_slow_source($node, 'slower', 20000, 2);
$node->safe_psql('postgres', "SELECT pgsandbox.add_source('slower', 'dbname=slower', true)");
my @long = map {
	start_psql($node, $node->connstr('postgres') . " application_name=long$_",
		"SELECT name FROM pgsandbox.clone('slower', schema_only => false)")
} 1 .. 2;
# both made their databases (a clone worker makes it first) and are filling them
is(poll_value($node,
		"SELECT (SELECT count(*) FROM pgsandbox.sandboxes WHERE status = 'cloning') || '|' ||"
		  . " (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pgsandbox clone') || '|' ||"
		  . " (SELECT count(*) FROM pgsandbox.progress WHERE phase = 'restoring')",
		'2|2|2', 30),
	'2|2|2', 'two long clones occupy both slots');
my @cloning = split /\n/, $node->safe_psql('postgres',
	"SELECT name FROM pgsandbox.sandboxes WHERE status = 'cloning' ORDER BY name");

my $count_sql =
  "SELECT (SELECT count(*) FROM pg_database) || '|' || (SELECT count(*) FROM pg_roles)"
  . " || '|' || (SELECT count(*) FROM pgsandbox.sandboxes) || '|' || (SELECT count(*) FROM pgsandbox.events)";
my $before = $node->safe_psql('postgres', $count_sql);
($ret, $out, $err) = $node->psql('postgres',
	"SET statement_timeout = '1s'; SELECT * FROM pgsandbox.clone('slow');");
like($err, qr/canceling statement due to statement timeout/,
	'a third clone waits for a slot until its statement_timeout');
is($node->safe_psql('postgres', $count_sql), $before,
	'... and, canceled while waiting, creates nothing');

($ret, $out, $err) = $node->psql('postgres', "SELECT pgsandbox.drop('$cloning[0]')");
like($err, qr/still being cloned/, 'drop() of a sandbox being cloned is refused');
($ret, $out, $err) = $node->psql('postgres', "SELECT pgsandbox.extend('$cloning[0]', '1 hour')");
isnt($ret, 0, 'extend() of a sandbox being cloned is refused');

my $victim = (sort keys %names)[0];
$t0 = time();
($ret, $out, $err) = $node->psql('postgres', "SELECT pgsandbox.drop('$victim')");
is($ret, 0, 'drop() of a ready sandbox works while both slots are busy') or diag $err;
cmp_ok(time() - $t0, '<', 10, '... without waiting for the clones');
is(sandbox_leftovers($node, $victim), '0|0', '... its database and role are gone');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pgsandbox.sandboxes WHERE status = 'cloning'"),
	'2', 'the long clones still run');

is( $node->safe_psql('postgres',
		"SELECT count(*) FILTER (WHERE pg_cancel_backend(pid)) FROM pg_stat_activity"
		  . " WHERE application_name IN ('long1', 'long2')"),
	'2', 'the long clones are canceled');
for my $i (0 .. 1)
{
	($ret, $out, $err) = finish_psql($long[$i]);
	like($err, qr/canceling statement due to user request/, "long clone $i: its caller was canceled");
}
for my $n (@cloning)
{
	is(poll_value($node, "SELECT status FROM pgsandbox.sandboxes WHERE name = '$n'", 'failed', 30),
		'failed', "$n: failed");
	is(sandbox_leftovers($node, $n), '0|0', "$n: its database and role are gone");
}

($ret, $out, $err) = $node->psql('postgres',
	"SELECT name FROM pgsandbox.clone('slow', schema_only => false)");
is($ret, 0, 'a clone after all that succeeds') or diag $err;
is($node->safe_psql($out || 'postgres', 'SELECT count(*) FROM slow'), '700', '... with its rows');

$node->stop;
done_testing();
