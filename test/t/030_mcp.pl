# 030_mcp.pl: pgsandbox driven end to end through a real Postgres MCP server
# (mcp-postgres-server, over stdio, with the official MCP client SDK), the
# way an agent uses it: logged into the admin database as an ordinary
# pgsandbox_user role.  The agent's side is test/mcp/e2e.mjs; this file
# makes the cluster, the source and the role, runs it, and checks from the
# superuser's side what it did.
use strict;
use warnings;
use FindBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $mcp_dir = "$FindBin::RealBin/../mcp";
if (!-d "$mcp_dir/node_modules/mcp-postgres-server")
{
	BAIL_OUT("test/mcp/node_modules is missing: run 'npm ci' in test/mcp (test/run-tests.sh does)");
}

my $super = scalar getpwuid($<);
my $node = PostgreSQL::Test::Cluster->new('mcp');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'pgsandbox'
pgsandbox.gc_interval = 3600
});
# passwords are really checked for everyone but the superuser
open(my $hba, '>', $node->data_dir . '/pg_hba.conf') or die $!;
print $hba "local all $super trust\nlocal all all scram-sha-256\n";
close($hba);
$node->start;

my $orders = 40;
$node->safe_psql('postgres', qq{
CREATE DATABASE shop;
CREATE EXTENSION pgsandbox;
SELECT pgsandbox.add_source('shop', 'dbname=shop', allow_data => true);
CREATE ROLE mcp_agent LOGIN PASSWORD 'agent-Pw-7d1f' IN ROLE pgsandbox_user;
SELECT pgsandbox.grant_source('shop', 'mcp_agent');
});
$node->safe_psql('shop', qq{
CREATE TABLE customer (id int PRIMARY KEY, email text NOT NULL UNIQUE);
CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL REFERENCES customer,
                     amount numeric(10,2) NOT NULL);
CREATE VIEW big_orders AS SELECT * FROM orders WHERE amount > 100;
INSERT INTO customer SELECT g, 'c' || g || '\@example.com' FROM generate_series(1, 5) g;
INSERT INTO orders SELECT g, 1 + g % 5, g * 7.5 FROM generate_series(1, $orders) g;
});
my $source_before = $node->safe_psql('shop',
	'SELECT md5(string_agg(o::text, \',\' ORDER BY id)) FROM orders o');

local $ENV{PGSANDBOX_HOST} = $node->host;
local $ENV{PGSANDBOX_PORT} = $node->port;
local $ENV{PGSANDBOX_DB} = 'postgres';
local $ENV{PGSANDBOX_USER} = 'mcp_agent';
local $ENV{PGSANDBOX_PASSWORD} = 'agent-Pw-7d1f';
local $ENV{PGSANDBOX_SOURCE} = 'shop';
local $ENV{PGSANDBOX_ORDERS} = $orders;

my ($stdout, $stderr) = ('', '');
my $ok = IPC::Run::run([ 'node', "$mcp_dir/e2e.mjs" ], '>', \$stdout, '2>', \$stderr,
	IPC::Run::timeout(600));
note $stdout;
note "stderr: $stderr" if $stderr ne '';
ok($ok, 'the MCP end-to-end run passed every check');
my @failed = grep { /^not ok/ } split /\n/, $stdout;
is(scalar @failed, 0, 'no failed check') or diag join("\n", @failed);
my ($planned) = $stdout =~ /^1\.\.(\d+)$/m;
cmp_ok($planned // 0, '>=', 20, 'the run made all its checks');

# from the superuser's side
my ($sbx) = $stdout =~ /^# sandbox (sbx_[a-z0-9]{8})$/m;
ok(defined $sbx, 'the run named its sandbox');
$sbx //= 'none';
is($node->safe_psql('postgres', "SELECT status || ' ' || (owner_oid = 'mcp_agent'::regrole) FROM pgsandbox.sandbox WHERE name = '$sbx'"),
	'dropped true', 'the sandbox was the agent\'s and is dropped');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_database WHERE datname = '$sbx'"),
	'0', 'its database is gone');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_roles WHERE rolname = '$sbx'"),
	'0', 'its role is gone');
is($node->safe_psql('postgres', "SELECT string_agg(action, ',' ORDER BY id) FROM pgsandbox.event WHERE sandbox = '$sbx'"),
	'clone,ready,save,reset,reset,drop', 'the events tell the whole story');
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pgsandbox.sandbox s JOIN pg_database d ON d.datname = s.name"
		  . " WHERE s.kind = 'save'"),
	'its save is dropped with it');
is($node->safe_psql('shop', 'SELECT md5(string_agg(o::text, \',\' ORDER BY id)) FROM orders o'),
	$source_before, 'the source is unchanged');
is($node->safe_psql('shop', "SELECT count(*) FROM pg_class WHERE relname IN ('refunds', 'orders_status')"),
	'0', 'the migration did not touch the source');

$node->stop;
done_testing();
