# 042_alerts.pl: the alert rules (metrics/alerts.yml).  promtool checks them
# and runs their unit tests (metrics/alerts_test.yml), every series they
# read is one metrics/postgres_exporter.yaml serves, and the two series made
# for them (0.11) say what they must on a running server: whether the worker
# runs, and how long a scheduled snapshot's refresh is overdue.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $top = "$FindBin::RealBin/../..";

# ---------------------------------------------------------------------------
# promtool, where it is installed (test/install-deps.sh installs Debian's
# prometheus on the host; the chroots of other majors have none)
# ---------------------------------------------------------------------------
my ($promtool) = grep { -x $_ } ('/usr/bin/promtool', '/usr/local/bin/promtool');
SKIP:
{
	skip 'promtool is not installed', 2 unless $promtool;
	my ($out, $err);
	my $ok = IPC::Run::run([ $promtool, 'check', 'rules', "$top/metrics/alerts.yml" ], '>', \$out, '2>', \$err);
	ok($ok, 'promtool check rules accepts metrics/alerts.yml') or diag "$out\n$err";
	$ok = IPC::Run::run([ $promtool, 'test', 'rules', "$top/metrics/alerts_test.yml" ], '>', \$out, '2>', \$err);
	ok($ok, 'promtool test rules passes metrics/alerts_test.yml') or diag "$out\n$err";
}

# every series an alert reads is one the exporter serves: <entry>_<column>
# for each column of metrics/postgres_exporter.yaml that is not a label
sub slurp
{
	my ($file) = @_;
	open my $fh, '<', $file or die "could not read $file: $!";
	local $/;
	return scalar <$fh>;
}
my %served;
my $entry;
foreach my $line (split /\n/, slurp("$top/metrics/postgres_exporter.yaml"))
{
	$entry = $1 if $line =~ /^(pgsandbox_\w+):\s*$/;
	$served{"${entry}_$1"} = 1
	  if defined $entry && $line =~ /^\s+- (\w+): \{usage: "(?:GAUGE|COUNTER)"/;
}
my %read;
foreach my $line (split /\n/, slurp("$top/metrics/alerts.yml"))
{
	next unless $line =~ /^\s+(expr:|pgsandbox_|and )/;
	$read{$_} = 1 foreach $line =~ /\b(pgsandbox_\w+?)(?=[{\[\s)]|$)/g;
}
ok(scalar(keys %read) >= 7, 'the rules read ' . join(', ', sort keys %read));
is(join(', ', grep { !$served{$_} } sort keys %read), '', 'every series they read is one the exporter serves');

# ---------------------------------------------------------------------------
# the series made for them, on a running server
# ---------------------------------------------------------------------------
my $node = sandbox_node('alerts');
sub sq { return $node->safe_psql('postgres', $_[0]); }
sub metric
{
	my ($name, $labels) = @_;
	return sq("SELECT string_agg(value::text, ',') FROM pgsandbox.metrics WHERE name = '$name'"
		  . ($labels ? " AND labels = '$labels'" : ''));
}

ok(wait_until(sub { metric('pgsandbox_worker_up') eq '1' }, 60), 'pgsandbox_worker_up is 1 while the worker runs');

# the worker gone: ended (pg_terminate_backend waits for it to exit), and
# read in the same transaction, well within the 5 s before the postmaster
# starts it again
my $pid = sq("SELECT pid FROM pg_stat_activity WHERE backend_type = 'pgsandbox worker'");
is( sq( "BEGIN; SELECT pg_terminate_backend($pid, 30000);"
		  . " SELECT value FROM pgsandbox.metrics WHERE name = 'pgsandbox_worker_up'; COMMIT"),
	"t\n0", 'and 0 when the worker is gone');
ok(wait_until(sub { metric('pgsandbox_worker_up') eq '1' }, 60), 'and 1 again once it runs');

# a scheduled snapshot: on time, then overdue by the time since the run its
# schedule set after the snapshot's data
$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql('app', 'CREATE TABLE t (id int PRIMARY KEY)');
sq(q{SELECT pgsandbox.add_source('app', 'dbname=app')});
sq(q{SELECT pgsandbox.schedule_snapshot('app', '3600 seconds', schema_only => true)});
sq(q{SELECT pgsandbox.snapshot('app', schema_only => true)});
my $labels = '{"source": "app", "schema_only": "true"}';
is(metric('pgsandbox_snapshot_overdue_seconds', $labels), '0', 'a snapshot just taken is not overdue');
sq(q{UPDATE pgsandbox.sandbox SET data_as_of = now() - interval '3 hours'
	WHERE kind = 'snapshot' AND status = 'ready' AND source = 'app'});
my $overdue = metric('pgsandbox_snapshot_overdue_seconds', $labels);
ok($overdue >= 7200 && $overdue < 7300,
	"data 3 hours old, on a schedule of an hour, is 2 hours overdue ($overdue s)");
is(sq("SELECT count(*) FROM pgsandbox.metrics WHERE name = 'pgsandbox_snapshot_overdue_seconds'"),
	'1', 'only a scheduled snapshot has the series');

# a member of pg_monitor reads both
$node->safe_psql('postgres', q{CREATE ROLE watcher LOGIN PASSWORD 'WatcherPw1' IN ROLE pg_monitor});
my ($ret, $out, $err) = sandbox_psql($node, 'dbname=postgres user=watcher password=WatcherPw1',
	"SELECT count(*) FROM pgsandbox.metrics WHERE name IN ('pgsandbox_worker_up', 'pgsandbox_snapshot_overdue_seconds')");
is($out, '2', 'a member of pg_monitor reads them') or diag $err;

$node->stop;
done_testing();
