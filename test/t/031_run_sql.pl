# 031_run_sql.pl: run_sql logs into the sandbox for real as its role, caps
# the rows it returns, and stops the sandbox's query when its caller is
# cancelled or the statement outlives its timeout.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;
use Time::HiRes qw(time);

my $node = sandbox_node('run_sql', "pgsandbox.gc_interval = 3600\n");
$node->safe_psql('postgres', q{
CREATE DATABASE src;
SELECT pgsandbox.add_source('src', 'dbname=src', allow_data => true);
CREATE ROLE agent LOGIN PASSWORD 'agent-pw-31' IN ROLE pgsandbox_user;
SELECT pgsandbox.grant_source('src', 'agent');
});
$node->safe_psql('src', 'CREATE TABLE n AS SELECT g FROM generate_series(1, 5000) g');

my $agent = $node->connstr('postgres') . " user=agent password=agent-pw-31";
my ($rc, $sbx, $err) = sandbox_psql($node, $agent,
	"SELECT name FROM pgsandbox.clone('src', schema_only => false)");
is($rc, 0, 'the agent clones') or diag $err;

# the row cap: 1000 rows at most, all counted
my $res = $node->safe_psql('postgres', qq{
SELECT r->'results'->0->>'row_count', jsonb_array_length(r->'results'->0->'rows'),
       r->'results'->0->>'truncated', r->'results'->0->'rows'->0->>0,
       r->'results'->0->'rows'->999->>0
  FROM pgsandbox.run_sql('$sbx', 'SELECT g FROM n ORDER BY g', row_limit => 1000) r});
is($res, '5000|1000|true|1|1000', 'row_limit 1000 returns the first 1000 of 5000 rows and says it truncated');

# a real login as the sandbox role: seen as such by the server
my $h = start_psql($node, $agent,
	"SELECT pgsandbox.run_sql('$sbx', 'SELECT pg_sleep(3)')");
ok( wait_until(sub {
		$node->safe_psql('postgres', qq{
SELECT count(*) FROM pg_stat_activity
 WHERE datname = '$sbx' AND usename = '$sbx'
   AND application_name = 'pgsandbox' AND query LIKE '%pg_sleep(3)%'}) eq '1';
	}, 20),
	'the SQL runs in a session logged in as the sandbox role');
($rc, $res, $err) = finish_psql($h);
is($rc, 0, 'that run_sql returns') or diag $err;
like($res, qr/"error": null/, 'without an error');

# the caller is cancelled: the sandbox's query stops too
my $t0;
$h = start_psql($node, $agent, "SET statement_timeout = '1s'",
	"SELECT pgsandbox.run_sql('$sbx', 'SELECT pg_sleep(120)', timeout => '10min')");
($rc, $res, $err) = finish_psql($h);
isnt($rc, 0, 'the cancelled caller fails');
like($err, qr/statement timeout/, 'with its statement timeout');
ok( wait_until(sub {
		$node->safe_psql('postgres', qq{
SELECT count(*) FROM pg_stat_activity
 WHERE datname = '$sbx' AND query LIKE '%pg_sleep(120)%' AND state = 'active'}) eq '0';
	}, 15),
	'and the sandbox no longer runs its query');

# a COPY TO STDOUT whose rows come slowly: the caller's cancel is served
# while it reads them, not once the COPY ends (20 s later)
$t0 = time;
$h = start_psql($node, $agent, "SET statement_timeout = '1s'",
	"SELECT pgsandbox.run_sql('$sbx', 'COPY (SELECT g, pg_sleep(0.01) FROM generate_series(1, 2000) g) TO STDOUT', timeout => '10min')");
($rc, $res, $err) = finish_psql($h);
isnt($rc, 0, 'a caller cancelled during COPY TO STDOUT fails');
like($err, qr/statement timeout/, '... with its statement timeout');
cmp_ok(time - $t0, '<', 8, '... at once, not when the COPY ends');

# the statement outlives its timeout
$t0 = time;
$res = $node->safe_psql('postgres', qq{
SELECT pgsandbox.run_sql('$sbx', 'SELECT pg_sleep(120)', timeout => '1s') -> 'error' ->> 'sqlstate'});
is($res, '57014', 'a statement past its timeout is cancelled');
cmp_ok(time - $t0, '<', 30, 'well before it would have ended');

# only the sandbox's owner and admins may use it
$node->safe_psql('postgres', "CREATE ROLE other LOGIN PASSWORD 'other-pw-31' IN ROLE pgsandbox_user");
my $other = $node->connstr('postgres') . " user=other password=other-pw-31";
($rc, $res, $err) = sandbox_psql($node, $other, "SELECT pgsandbox.run_sql('$sbx', 'SELECT 1')");
isnt($rc, 0, 'another user cannot run SQL in the sandbox');
like($err, qr/sandbox "\Q$sbx\E" does not exist/, 'it is told the sandbox does not exist');

$node->stop;
done_testing();
