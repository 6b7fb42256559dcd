
# 032_operations.pl: idle expiry, the disk budget and read-only sandboxes,
# and the metrics, scraped through Debian's prometheus-postgres-exporter.
#
# The reaper runs every second and sizes are measured every second.  Every
# wait is for an event row, a log line or a count that only grows; a
# sandbox that must outlive its idle timeout is checked only after another
# one made after it has been reaped, which proves the reaper looked at it.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use POSIX qw(ceil floor);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;
use Time::HiRes qw(time sleep);

my $su = superuser_name();
my $top = "$FindBin::RealBin/../..";

# a node with a source "app" (schema and a few rows), and alice and bob
sub ops_node
{
	my ($name, $conf) = @_;
	my $node = sandbox_node($name,
		"pgsandbox.gc_interval = 1\npgsandbox.size_check_interval = 1\n" . ($conf // ''));
	$node->safe_psql('postgres', 'CREATE DATABASE app');
	$node->safe_psql('app',
		'CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 10) g');
	$node->safe_psql('postgres', q{
SELECT pgsandbox.add_source('app', 'dbname=app', allow_data => true);
CREATE ROLE alice LOGIN PASSWORD 'AlicePw123' IN ROLE pgsandbox_user;
CREATE ROLE bob LOGIN PASSWORD 'BobPw12345' IN ROLE pgsandbox_user;
SELECT pgsandbox.grant_source('app', 'alice');
SELECT pgsandbox.grant_source('app', 'bob');
});
	return $node;
}

# SQL as alice or bob: (exit code, stdout, stderr), with SQLSTATEs
sub as_user
{
	my ($node, $user, $sql) = @_;
	my %pw = (alice => 'AlicePw123', bob => 'BobPw12345');
	return sandbox_psql($node, "dbname=postgres user=$user password=$pw{$user}",
		"\\set VERBOSITY verbose\n$sql");
}

# a new sandbox of app: (name, conninfo)
sub clone_app
{
	my ($node, $args) = @_;
	my $out = $node->safe_psql('postgres',
		"SELECT name || ' ' || conninfo FROM pgsandbox.clone('app'" . ($args // '') . ')');
	return split / /, $out, 2;
}

sub wait_for_event
{
	my ($node, $name, $action) = @_;
	return poll_value($node,
		"SELECT count(*) > 0 FROM pgsandbox.events WHERE sandbox = '$name' AND action = '$action'",
		't', 60) eq 't';
}

sub status_of
{
	my ($node, $name) = @_;
	return $node->safe_psql('postgres', "SELECT status FROM pgsandbox.sandboxes WHERE name = '$name'");
}

# ---------------------------------------------------------------------------
# idle expiry
# ---------------------------------------------------------------------------

my $node = ops_node('idle', "pgsandbox.default_idle_timeout = '1h'\n");

# the setting is the default; 0 turns idle expiry off; a negative one is refused
my ($dflt) = clone_app($node);
my ($never) = clone_app($node, ", idle_timeout => '0'");
is( $node->safe_psql('postgres',
		"SELECT string_agg(coalesce(idle_timeout::text, 'none'), ',' ORDER BY created_at) FROM pgsandbox.sandboxes"
		  . " WHERE name IN ('$dflt', '$never')"),
	'01:00:00,none',
	'pgsandbox.default_idle_timeout applies when clone() is given none, and 0 means none');
my ($ret, $out, $err) = as_user($node, 'alice', "SELECT pgsandbox.clone('app', idle_timeout => '-1 minute')");
like($err, qr/22023: idle_timeout must not be negative/, 'a negative idle_timeout is refused with 22023');
is($node->safe_psql('postgres', "SELECT count(*) FROM pgsandbox.sandbox"), '2', 'and nothing was made');

# A and B idle after 6 s; B has a session open.  C is made once B's
# session is visible: when C is reaped, B's time has passed too.
my ($a_name) = clone_app($node, ", idle_timeout => '6 s'");
my ($b_name, $b_conninfo) = clone_app($node, ", idle_timeout => '6 s'");
my $b_session = start_psql($node, $b_conninfo, 'SELECT pg_sleep(40)');
ok( poll_value($node, "SELECT count(*) FROM pg_stat_activity WHERE datname = '$b_name'", '1', 30) eq '1',
	'a session is open in B');
my ($c_name) = clone_app($node, ", idle_timeout => '6 s'");

ok(wait_for_event($node, $a_name, 'expire'), 'A, idle for its idle_timeout, is reaped');
ok(wait_for_event($node, $c_name, 'expire'), 'so is C, made after B\'s session opened');
like(
	$node->safe_psql('postgres', "SELECT detail FROM pgsandbox.events WHERE sandbox = '$a_name' AND action = 'expire'"),
	qr/^idle since \S+ \S+ \(idle_timeout 00:00:06\)$/,
	'the event says it was idle, since when, and its idle timeout');
is(sandbox_leftovers($node, $a_name), '0|0', 'its database and role are gone');
is(status_of($node, $b_name), 'ready', 'B, with a session open, is not reaped');

$node->safe_psql('postgres', "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '$b_name'");
finish_psql($b_session);
ok(wait_for_event($node, $b_name, 'expire'), 'once its session ends, B is reaped as idle');

# D is logged into just before its timeout (the login is only in shared
# memory: the catalog learns of it once a minute); E, made right after D
# and never used, shows when D's first timeout has passed.
my ($d_name, $d_conninfo) = clone_app($node, ", idle_timeout => '10 s'");
my ($e_name) = clone_app($node, ", idle_timeout => '10 s'");
my $d_ready = $node->safe_psql('postgres', "SELECT extract(epoch FROM ready_at) FROM pgsandbox.sandboxes WHERE name = '$d_name'");
my $now = $node->safe_psql('postgres', 'SELECT extract(epoch FROM now())');
sleep($d_ready + 6 - $now) if $d_ready + 6 > $now;
my $login = $node->safe_psql('postgres', 'SELECT extract(epoch FROM clock_timestamp())');
($ret, $out, $err) = sandbox_psql($node, $d_conninfo, 'SELECT count(*) FROM t');
is($ret, 0, 'D is logged into before its idle timeout') or diag $err;
ok($login < $d_ready + 10, 'and the login came in time (' . sprintf('%.1f', $login - $d_ready) . ' s after it was ready)');
ok(wait_for_event($node, $e_name, 'expire'), 'E, made after D and never used, is reaped');
is(status_of($node, $d_name), 'ready', 'D, logged into just before its timeout, lives on');
ok(wait_for_event($node, $d_name, 'expire'), 'and is reaped once idle for its timeout after that login');
my $d_detail = $node->safe_psql('postgres',
	"SELECT extract(epoch FROM substring(detail FROM '^idle since (.*) \\(')::timestamptz) FROM pgsandbox.events"
	  . " WHERE sandbox = '$d_name' AND action = 'expire'");
ok($d_detail >= $login - 1, 'its event counts from the login, not from when it was made');

# protection holds against idle expiry too
my ($f_name) = clone_app($node, ", idle_timeout => '3 s'");
$node->safe_psql('postgres', "SELECT pgsandbox.protect('$f_name', now() + interval '1 hour')");
my ($g_name) = clone_app($node, ", idle_timeout => '3 s'");
ok(wait_for_event($node, $g_name, 'expire'), 'an idle sandbox made after a protected one is reaped');
is(status_of($node, $f_name), 'ready', 'the protected one is not');

# a pool member that was never handed out is never idle
$node->safe_psql('postgres', "SELECT pgsandbox.snapshot('app', schema_only => true)");
$node->safe_psql('postgres', "ALTER SYSTEM SET pgsandbox.default_idle_timeout = '2s'");
$node->reload;
is(poll_value($node, 'SHOW pgsandbox.default_idle_timeout', '2s'), '2s', 'new sessions see a default idle timeout of 2 s');
$node->safe_psql('postgres', "SELECT pgsandbox.set_pool('app', 1, schema_only => true)");
ok(poll_value($node, 'SELECT ready FROM pgsandbox.pools', '1', 60) eq '1', 'a pool member is ready');
my $member = $node->safe_psql('postgres', "SELECT name FROM pgsandbox.sandbox WHERE kind = 'pool' AND status = 'ready'");
my ($h_name) = clone_app($node, ", idle_timeout => '2 s', fresh => true");
ok(wait_for_event($node, $h_name, 'expire'), 'a sandbox idle for 2 s is reaped');
is($node->safe_psql('postgres', "SELECT status FROM pgsandbox.sandbox WHERE name = '$member'"),
	'ready', 'the pool member, older and never handed out, is not');
my ($handed) = clone_app($node, ", schema_only => true");
is($handed, $member, 'it is handed out');
is($node->safe_psql('postgres', "SELECT idle_timeout FROM pgsandbox.sandboxes WHERE name = '$handed'"),
	'00:00:02', 'with the default idle timeout');
ok(wait_for_event($node, $handed, 'expire'), 'and once handed out and left idle, it is reaped');
$node->stop;

# ---------------------------------------------------------------------------
# the disk budget
# ---------------------------------------------------------------------------

$node = ops_node('budget');
$node->safe_psql('postgres', 'CREATE DATABASE big');
$node->safe_psql('big',
	"CREATE TABLE filler AS SELECT g, repeat(md5(g::text), 8) AS x FROM generate_series(1, 150000) g");
$node->safe_psql('postgres', q{SELECT pgsandbox.add_source('big', 'dbname=big', allow_data => true)});

# E: what a schema-only sandbox of app takes; the budgets are set in E's
my ($probe) = clone_app($node);
my $e_bytes = $node->safe_psql('postgres', "SELECT pg_database_size('$probe')");
$node->safe_psql('postgres', "SELECT pgsandbox.drop('$probe')");
my $e_mb = $e_bytes / (1024 * 1024);
my $per_owner = floor(2.5 * $e_mb);
my $total = floor(5.5 * $e_mb);
my $per_sandbox = ceil(1.5 * $e_mb);
note sprintf('a sandbox takes %.1f MB: budgets of %d MB per owner, %d MB in all, %d MB per sandbox',
	$e_mb, $per_owner, $total, $per_sandbox);
# max_sandbox_size is set once the sandbox has grown (below): a measure
# taken while the statement that grows it still runs would end that session
# and roll the statement back
$node->append_conf('postgresql.conf',
	"pgsandbox.max_size_per_owner = '${per_owner}MB'\npgsandbox.max_total_size = '${total}MB'\n");
$node->restart;

sub counts
{
	return $node->safe_psql('postgres', 'SELECT count(*) FROM pgsandbox.sandbox') . '|' . sandbox_leftovers($node);
}

($ret, $out, $err) = as_user($node, 'alice', "SELECT name || ' ' || conninfo FROM pgsandbox.clone('app')");
my ($a1_name, $a1_conninfo) = split / /, $out, 2;
($ret, $out, $err) = as_user($node, 'alice', "SELECT name FROM pgsandbox.clone('app')");
my $a2_name = $out;
my $before = counts();
($ret, $out, $err) = as_user($node, 'alice', "SELECT name FROM pgsandbox.clone('app')");
like($err, qr/53100: a new sandbox would pass the disk budget of role "alice"/,
	'a third sandbox of alice would pass max_size_per_owner: refused with 53100');
like($err, qr/DETAIL:  It needs about \d+ [kM]B; the role's sandboxes take \d+ MB of the $per_owner MB pgsandbox.max_size_per_owner allows\./,
	'and the detail gives the figures');
is(counts(), $before, 'nothing was made, nor recorded');
($ret, $out, $err) = as_user($node, 'bob', "SELECT name FROM pgsandbox.clone('app')");
is($ret, 0, 'bob, with a budget of his own, clones') or diag $err;
my $b1_name = $out;

$before = counts();
($ret, $out, $err) = sandbox_psql($node, 'dbname=postgres',
	"\\set VERBOSITY verbose\nSELECT pgsandbox.clone('big', schema_only => false)");
like($err, qr/53100: a new sandbox would pass pgsandbox's disk budget/,
	'a data clone of a source larger than what is left is refused with 53100');
like($err, qr/DETAIL:  It needs about \d+ MB; pgsandbox's databases take \d+ MB of the $total MB pgsandbox.max_total_size allows\./,
	'with the figures');
is(counts(), $before, 'and leaves nothing behind');

# a sandbox grown past max_sandbox_size turns read-only: it grows, with
# the growth committed, while a session of its role stays open, and then the
# limit is set
($ret, $out, $err) = sandbox_psql($node, $a1_conninfo,
	"CREATE SEQUENCE grow_seq;\n"
	  . "CREATE TABLE grow AS SELECT g, repeat(md5(g::text), 8) AS x FROM generate_series(1, 25000) g");
is($ret, 0, 'the sandbox grows') or diag $err;
my $grower = start_psql($node, $a1_conninfo, q{SELECT pg_sleep(60) FROM pg_class WHERE relname = 'grow'});
is(poll_value($node,
		"SELECT count(*) FROM pg_stat_activity WHERE datname = '$a1_name' AND query LIKE 'SELECT pg_sleep(60)%'",
		'1', 60),
	'1', 'a session of its role is open in it');
$node->append_conf('postgresql.conf', "pgsandbox.max_sandbox_size = '${per_sandbox}MB'\n");
$node->reload;
ok(wait_for_event($node, $a1_name, 'read_only'), 'a sandbox that grew past max_sandbox_size is made read-only');
like(
	$node->safe_psql('postgres', "SELECT detail FROM pgsandbox.events WHERE sandbox = '$a1_name' AND action = 'read_only'"),
	qr/^grew to \d+ MB, past pgsandbox.max_sandbox_size \($per_sandbox MB\): writes are refused from now on$/,
	'the event names the limit and the size');
($ret, $out, $err) = finish_psql($grower);
like($err, qr/terminating connection due to administrator command/, 'the session that grew it was ended');

sub in_a1
{
	my ($sql) = @_;
	return sandbox_psql($node, $a1_conninfo, "\\set VERBOSITY verbose\n$sql");
}
($ret, $out, $err) = in_a1('SELECT count(*) FROM grow');
is($out, '25000', 'it stays readable, with what was written');
($ret, $out, $err) = in_a1("INSERT INTO grow VALUES (0, 'x')");
like($err, qr/25006: cannot execute INSERT in a read-only transaction/, 'a write fails with 25006');
($ret, $out, $err) = in_a1("SET default_transaction_read_only = off;\nINSERT INTO grow VALUES (0, 'x')");
like($err, qr/25006/, 'also after SET default_transaction_read_only = off');
($ret, $out, $err) = in_a1("BEGIN READ WRITE;\nINSERT INTO grow VALUES (0, 'x')");
like($err, qr/25006/, 'and in a transaction begun READ WRITE');
($ret, $out, $err) = in_a1("ALTER DATABASE $a1_name RESET default_transaction_read_only");
like($err, qr/25006/, 'its owner cannot reset the database\'s setting');
($ret, $out, $err) = in_a1("SET pgsandbox.read_only = off");
like($err, qr/42501: permission denied to set parameter "pgsandbox.read_only"/, 'nor turn pgsandbox.read_only off');
($ret, $out, $err) = in_a1("ALTER DATABASE $a1_name RESET ALL;\nINSERT INTO grow VALUES (0, 'x')");
like($err, qr/25006/, 'nor RESET ALL its way out');

# writes that run no statement of their own are refused at commit
($ret, $out, $err) = in_a1("SET default_transaction_read_only = off;\n"
	  . "DO \$\$DECLARE x bigint; BEGIN COMMIT; x := nextval('grow_seq'); END\$\$");
like($err, qr/25006/, 'nor a PL/pgSQL assignment in a transaction a COMMIT began');
($ret, $out, $err) = in_a1("SELECT lo_from_bytea(0, 'abc')");
like($err, qr/25006/, 'nor a large object (PostgreSQL 15 lets read-only transactions write them)');
($ret, $out, $err) = in_a1("VACUUM FULL grow");
like($err, qr/25006: cannot commit a transaction that wrote to a read-only sandbox/,
	'nor VACUUM FULL, which rewrites the table');
($ret, $out, $err) = in_a1("SELECT (SELECT count(*) FROM pg_largeobject_metadata) || '|' || (SELECT count(*) FROM grow)");
is($out, '0|25000', 'none of them left anything: no large object, the rows as they were');
as_user($node, 'alice', "SELECT pgsandbox.extend('$a1_name', '2 hours')");
($ret, $out, $err) = in_a1("INSERT INTO grow VALUES (0, 'x')");
like($err, qr/25006/, 'extend() does not make it writable again');
is( $node->safe_psql('postgres',
		"SELECT read_only_at IS NOT NULL FROM pgsandbox.sandboxes WHERE name = '$a1_name'"),
	't', 'the sandboxes view shows when it became read-only');
($ret, $out, $err) = sandbox_psql($node, "dbname=$a2_name user=$su",
	"CREATE TABLE ok_here (id int); INSERT INTO ok_here VALUES (1); SELECT count(*) FROM ok_here");
is($out, '1', 'another sandbox stays writable');

# a pool fill that would pass the budget is held back, and resumes when
# space is freed.  The budget counts sizes as last measured: a pass that
# measured the read-only sandbox while VACUUM FULL held its second copy of
# the table counts that copy until the next pass, so wait for the figures
# to come down to what the databases take
my $recorded_sql = q{SELECT bool_and(s.size_bytes <= pg_database_size(s.db_oid) * 1.1)
  FROM pgsandbox.sandbox s WHERE s.status = 'ready'};
is(poll_value($node, $recorded_sql, 't', 60), 't', 'the budget counts what the sandboxes take now')
  or diag $node->safe_psql('postgres',
	q{SELECT name, size_bytes, pg_database_size(db_oid) FROM pgsandbox.sandbox WHERE status = 'ready'});
$node->safe_psql('postgres', "SELECT pgsandbox.snapshot('app', schema_only => true)");
$node->safe_psql('postgres', "SELECT pgsandbox.set_pool('app', 2, schema_only => true)");
ok( $node->wait_for_log(qr/pool of source "app" is not filled: a member would pass pgsandbox.max_total_size/),
	'a pool fill that would pass the budget is held back');
is($node->safe_psql('postgres', 'SELECT ready || \'|\' || filling FROM pgsandbox.pools'),
	'0|0', 'and nothing was made for it');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pgsandbox.sandbox WHERE kind = 'pool' AND status = 'failed'"),
	'0', 'nor failed');
as_user($node, 'bob', "SELECT pgsandbox.drop('$b1_name')");
as_user($node, 'alice', "SELECT pgsandbox.drop('$a2_name')");
is(poll_value($node, 'SELECT ready FROM pgsandbox.pools', '2', 120), '2',
	'once sandboxes are dropped, the pool fills');
ok( $node->safe_psql('postgres',
		"SELECT value <= $total * 1024 * 1024 FROM pgsandbox.metrics WHERE name = 'pgsandbox_budget_used_bytes' AND labels ->> 'scope' = 'total'") eq 't',
	'within the budget');
$before = counts();
($ret, $out, $err) = sandbox_psql($node, 'dbname=postgres',
	"\\set VERBOSITY verbose\nSELECT pgsandbox.snapshot('app')");
like($err, qr/53100: a new snapshot would pass pgsandbox's disk budget/,
	'a snapshot build that would pass it is refused too');
is(counts(), $before, 'and makes nothing');
$node->stop;

# ---------------------------------------------------------------------------
# metrics, through postgres_exporter
# ---------------------------------------------------------------------------

$node = ops_node('metrics');
$node->safe_psql('postgres', q{SELECT pgsandbox.add_source('gone', 'dbname=no_such_database')});
clone_app($node) for 1 .. 3;
($ret, $out, $err) = sandbox_psql($node, 'dbname=postgres', "SELECT pgsandbox.clone('gone')");
isnt($ret, 0, 'a clone of a source that cannot be reached fails');

sub metric
{
	my ($name, $labels) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(sum(value), 0) FROM pgsandbox.metrics WHERE name = '$name' AND labels \@> '$labels'");
}
is(metric('pgsandbox_clones_total', '{"outcome": "ok"}'), '3', 'the view counts three clones');
is(metric('pgsandbox_clones_total', '{"outcome": "failed"}'), '1', 'and one failure');
is(metric('pgsandbox_clone_failures_total', '{"cause": "source_unreachable"}'), '1', 'by its cause');
is(metric('pgsandbox_clone_duration_seconds_count', '{"method": "dump"}'), '3', 'the latency histogram counts three');
is(metric('pgsandbox_clone_duration_seconds_bucket', '{"method": "dump", "le": "+Inf"}'), '3', 'its +Inf bucket too');
is(metric('pgsandbox_sandboxes_live', '{"kind": "sandbox", "status": "ready"}'), '3', 'three sandboxes are live');

# counters are kept in the catalog: a restart keeps them
$node->restart;
is(metric('pgsandbox_clones_total', '{"outcome": "ok"}'), '3', 'a restart keeps the counters');

# who may read them
($ret, $out, $err) = as_user($node, 'alice', 'SELECT count(*) FROM pgsandbox.metrics');
like($err, qr/permission denied/, 'a pgsandbox_user may not read the metrics');
$node->safe_psql('postgres', q{CREATE ROLE watcher LOGIN PASSWORD 'WatcherPw1' IN ROLE pg_monitor});
($ret, $out, $err) = sandbox_psql($node, 'dbname=postgres user=watcher password=WatcherPw1',
	"SELECT value FROM pgsandbox.metrics WHERE name = 'pgsandbox_queue_requests' AND labels ->> 'state' = 'pending'");
is($out, '0', 'a member of pg_monitor may') or diag $err;

my $exporter = '/usr/bin/prometheus-postgres-exporter';
SKIP:
{
	skip "prometheus-postgres-exporter is not installed ($exporter)", 8 unless -x $exporter;

	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $dsn = 'host=' . $node->host . ' port=' . $node->port . " user=watcher password=WatcherPw1 dbname=postgres sslmode=disable";
	my ($eout, $eerr) = ('', '');
	my $h = IPC::Run::start(
		[
			$exporter, "--extend.query-path=$top/metrics/postgres_exporter.yaml",
			"--web.listen-address=127.0.0.1:$port", '--disable-default-metrics',
			'--disable-settings-metrics'
		],
		'<', '/dev/null', '>', \$eout, '2>', \$eerr,
		init => sub { $ENV{DATA_SOURCE_NAME} = $dsn; });
	my $scrape = '';
	wait_until(
		sub {
			$scrape = `curl -s --max-time 5 http://127.0.0.1:$port/metrics`;
			return $scrape =~ /^pgsandbox_clones_total/m;
		},
		60);
	$h->kill_kill;
	$h->finish;

	my %series;
	foreach my $line (split /\n/, $scrape)
	{
		next unless $line =~ /^(pgsandbox_\w+)(\{[^}]*\})?\s+(\S+)$/;
		my ($name, $labels, $value) = ($1, $2 // '', $3);
		$labels =~ s/,?server="[^"]*"//;
		$labels =~ s/\{,/{/;
		$labels = '' if $labels eq '{}';
		$series{"$name$labels"} = $value;
	}
	ok(scalar(keys %series) > 20, 'the exporter serves pgsandbox_ series (' . scalar(keys %series) . ')')
	  or diag "scrape:\n$scrape\nexporter:\n$eerr";
	is($series{'pgsandbox_clones_total{method="dump",outcome="ok"}'}, '3', 'pgsandbox_clones_total reads 3 clones');
	is($series{'pgsandbox_clones_total{method="dump",outcome="failed"}'}, '1', 'and 1 failure');
	is($series{'pgsandbox_clone_failures_total{cause="source_unreachable"}'}, '1', 'by cause');
	is($series{'pgsandbox_clone_duration_seconds_count{method="dump"}'}, '3', 'the histogram\'s count');
	is($series{'pgsandbox_clone_duration_seconds_bucket{le="+Inf",method="dump"}'}, '3', 'and its +Inf bucket');
	is($series{'pgsandbox_sandboxes_live{kind="sandbox",status="ready"}'}, '3', 'live sandboxes');

	# every series the view has, the exporter serves with the same value;
	# those that count sessions (the free slots, a sandbox's sessions) move
	# with every backend that starts or ends between the two reads, an
	# autovacuum worker's too, so of them only that the exporter serves them
	my %volatile = map { $_ => 1 } qw(pgsandbox_connection_slots_free pgsandbox_sandbox_sessions);
	my $rows = $node->safe_psql('postgres', q{
SELECT name || '{' || coalesce((SELECT string_agg(format('%s="%s"', key, value), ',' ORDER BY key)
                                  FROM jsonb_each_text(labels)), '') || '}' || ' ' || value
  FROM pgsandbox.metrics
 WHERE name NOT IN ('pgsandbox_snapshot_oldest_age_seconds')});
	my @mismatch;
	foreach my $row (split /\n/, $rows)
	{
		my ($key, $value) = split / /, $row;
		$key =~ s/\{\}$//;
		(my $name = $key) =~ s/\{.*//;
		push @mismatch, "$key: view $value, exporter " . ($series{$key} // 'none')
		  unless defined $series{$key}
		  && ($volatile{$name} || abs($series{$key} - $value) <= 1e-6 * (1 + abs($value)));
	}
	is(join("\n", @mismatch), '', 'every series of the view matches what the exporter serves');
}
$node->stop;

done_testing();
