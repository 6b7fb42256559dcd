# 035_budget_estimates.pl: what save() and a dump reset expect to take,
# checked against the disk budget, is what they will take: a save counts
# the sandbox as it is now, not as last measured, and a reset that dumps
# its source anew counts the source's size, not nothing.
#
# The sandboxes are measured only when they become ready (the measuring
# timer is set to an hour), so a stale measurement is certain, not a race.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $node = sandbox_node('budget',
	"pgsandbox.gc_interval = 3600\npgsandbox.size_check_interval = 3600\n");

$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql('app', q{
CREATE TABLE items (id int PRIMARY KEY, v text NOT NULL);
INSERT INTO items SELECT g, md5(g::text) FROM generate_series(1, 200) g;
});
$node->safe_psql('postgres', q{
SELECT pgsandbox.add_source('app', 'dbname=app', allow_data => true);
CREATE ROLE alice LOGIN PASSWORD 'AlicePw123' IN ROLE pgsandbox_user;
SELECT pgsandbox.grant_source('app', 'alice');
});

sub as_alice
{
	my ($sql) = @_;
	return sandbox_psql($node, 'dbname=postgres user=alice password=AlicePw123',
		"\\set VERBOSITY verbose\n$sql");
}

sub mb
{
	my ($sql, $db) = @_;
	return $node->safe_psql($db // 'postgres', "SELECT ($sql) / (1024 * 1024)");
}

my ($ret, $out, $err) = as_alice(
	"SELECT name || ' ' || conninfo FROM pgsandbox.clone('app', schema_only => false)");
is($ret, 0, 'a data clone') or diag $err;
my ($name, $conninfo) = split / /, $out, 2;
my $measured = mb("SELECT size_bytes FROM pgsandbox.sandbox WHERE name = '$name'");

# grow it by about 24 MB, unmeasured
($ret, $out, $err) = sandbox_psql($node, $conninfo,
	"CREATE TABLE pad AS SELECT g, repeat(md5(g::text), 24) AS p FROM generate_series(1, 30000) g");
is($ret, 0, 'the sandbox grows') or diag $err;
my $now = mb("SELECT pg_database_size('$name')");
cmp_ok($now, '>', $measured + 20, "it holds ${now} MB, measured at ${measured} MB");
is(mb("SELECT size_bytes FROM pgsandbox.sandbox WHERE name = '$name'"), $measured,
	'the catalog still has the old measurement');

# a budget that the save fits by the old measurement, not by the real size
my $budget = 2 * $measured + 6;
$node->safe_psql('postgres',
	"ALTER SYSTEM SET pgsandbox.max_size_per_owner = '${budget}MB'; SELECT pg_reload_conf()");
ok($node->poll_query_until('postgres',
		"SELECT current_setting('pgsandbox.max_size_per_owner') = '${budget}MB'"),
	"max_size_per_owner = ${budget} MB");
my $saves = $node->safe_psql('postgres', "SELECT count(*) FROM pgsandbox.sandbox WHERE kind = 'save'");
($ret, $out, $err) = as_alice("SELECT pgsandbox.save('$name', 'big')");
isnt($ret, 0, 'save() of a sandbox that grew past the budget is refused');
like($err, qr/53100/, '... with 53100');
is($node->safe_psql('postgres', "SELECT count(*) FROM pgsandbox.sandbox WHERE kind = 'save'"),
	$saves, '... and no save was made');

# ---------------------------------------------------------------------------
# a reset that dumps the source anew (no snapshot) after the source grew
# ---------------------------------------------------------------------------

$node->safe_psql('postgres',
	"ALTER SYSTEM RESET pgsandbox.max_size_per_owner; SELECT pg_reload_conf()");
ok($node->poll_query_until('postgres', "SELECT current_setting('pgsandbox.max_size_per_owner') = '0'"),
	'no budget');
as_alice("SELECT pgsandbox.drop('$name')");
($ret, $out, $err) = as_alice(
	"SELECT name || ' ' || conninfo FROM pgsandbox.clone('app', schema_only => false)");
($name, $conninfo) = split / /, $out, 2;
$measured = mb("SELECT size_bytes FROM pgsandbox.sandbox WHERE name = '$name'");
$node->safe_psql('app',
	"CREATE TABLE pad AS SELECT g, repeat(md5(g::text), 24) AS p FROM generate_series(1, 30000) g");
my $source = mb("SELECT pg_database_size('app')");
cmp_ok($source, '>', $measured + 20, "the source grew to $source MB; the sandbox holds $measured MB");
is($node->safe_psql('postgres', "SELECT count(*) FROM pgsandbox.sandbox WHERE kind = 'snapshot'"),
	'0', 'the source has no snapshot: a reset dumps it');

$budget = $measured + 8;
$node->safe_psql('postgres',
	"ALTER SYSTEM SET pgsandbox.max_size_per_owner = '${budget}MB'; SELECT pg_reload_conf()");
ok($node->poll_query_until('postgres',
		"SELECT current_setting('pgsandbox.max_size_per_owner') = '${budget}MB'"),
	"max_size_per_owner = ${budget} MB");
my $before = $node->safe_psql('postgres', "SELECT data_as_of FROM pgsandbox.sandbox WHERE name = '$name'");
($ret, $out, $err) = as_alice("SELECT pgsandbox.reset('$name', 'latest')");
isnt($ret, 0, 'a dump reset that would pass the budget is refused');
like($err, qr/53100/, '... with 53100');
is($node->safe_psql('postgres', "SELECT data_as_of FROM pgsandbox.sandbox WHERE name = '$name'"),
	$before, '... and the sandbox is as it was');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_database WHERE datname = '${name}_reset'"),
	'0', '... with nothing made beside it');

# with room, the same reset goes through
$node->safe_psql('postgres',
	"ALTER SYSTEM RESET pgsandbox.max_size_per_owner; SELECT pg_reload_conf()");
ok($node->poll_query_until('postgres', "SELECT current_setting('pgsandbox.max_size_per_owner') = '0'"),
	'no budget');
($ret, $out, $err) = as_alice("SELECT pgsandbox.reset('$name', 'latest')");
is($ret, 0, 'without the budget the reset succeeds') or diag $err;
is((sandbox_psql($node, $conninfo, 'SELECT count(*) FROM pad'))[1], '30000',
	'... and the sandbox holds the source as it is now');

$node->stop;
done_testing();
