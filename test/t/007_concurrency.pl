
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

$node->stop;
done_testing();
