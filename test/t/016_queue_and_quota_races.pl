
# 016_queue_and_quota_races.pl: access and quotas hold for requests that
# wait, and for many requests at once.
#
# - With pgsandbox.max_concurrent_clones = 1 and a slow clone holding the
#   slot, three clones wait in the queue: alice's of source B, bob's of
#   source C and the superuser's of source D.  Then B and D are removed and
#   bob's grant on C is revoked.  When their turn comes each must fail
#   (42501 for the pgsandbox_users, 42704 for the superuser) and create no
#   catalog row, database or role.
# - Twenty clone() calls by one owner at once, with
#   pgsandbox.max_sandboxes_per_owner = 10: exactly ten sandboxes are made,
#   exactly ten calls fail with the quota's 53400, and nothing else is left.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $su = superuser_name();

my $node = PostgreSQL::Test::Cluster->new('races');
$node->init;
$node->append_conf('postgresql.conf',
	    "shared_preload_libraries = 'pgsandbox'\n"
	  . "max_connections = 60\n"
	  . "max_worker_processes = 16\n"
	  . "password_encryption = 'scram-sha-256'\n"
	  . "pgsandbox.gc_interval = 3600\n"
	  . "pgsandbox.max_concurrent_clones = 1\n");
{
	open my $hba, '>', $node->data_dir . '/pg_hba.conf' or die $!;
	print $hba "local all $su trust\n";
	print $hba "local all alice,bob trust\n";
	print $hba "local all all scram-sha-256\n";
	close $hba;
}
$node->start;
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION pgsandbox;
CREATE ROLE alice LOGIN IN ROLE pgsandbox_user;
CREATE ROLE bob LOGIN IN ROLE pgsandbox_user;
CREATE DATABASE app;
});
$node->safe_psql('app', 'CREATE TABLE t (id int PRIMARY KEY, v text)');
# the restore of each row sleeps 2 ms inside a sandbox: about 4 s in all
make_slow_source($node, 'slowdb', 2000, 2);
$node->safe_psql(
	'postgres', q{
SELECT pgsandbox.add_source('slow', 'dbname=slowdb', allow_data => true);
SELECT pgsandbox.add_source(s, 'dbname=app') FROM unnest(ARRAY['B', 'C', 'D', 'tiny']) s;
SELECT pgsandbox.grant_source('B', 'alice');
SELECT pgsandbox.grant_source('C', 'bob');
SELECT pgsandbox.grant_source('tiny', 'alice');
});

sub counts
{
	return $node->safe_psql('postgres',
		    "SELECT (SELECT count(*) FROM pg_database) || ' dbs, ' || (SELECT count(*) FROM pg_roles) || ' roles, '"
		  . " || (SELECT count(*) FROM pgsandbox.sandbox) || ' sandbox rows'");
}

# ---------------------------------------------------------------------------
# sources withdrawn while clones wait in the queue
# ---------------------------------------------------------------------------

my $before = counts();
my $slow = start_psql($node, $node->connstr('postgres'),
	"SELECT name FROM pgsandbox.clone('slow', schema_only => false)");
is( poll_value($node,
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pgsandbox clone'", '1'),
	'1', 'the slow clone runs and holds the only clone slot');

my %waiting = (
	alice => start_psql($node, 'dbname=postgres user=alice', '\set VERBOSITY verbose',
		"SELECT name FROM pgsandbox.clone('B')"),
	bob => start_psql($node, 'dbname=postgres user=bob', '\set VERBOSITY verbose',
		"SELECT name FROM pgsandbox.clone('C')"),
	$su => start_psql($node, "dbname=postgres user=$su", '\set VERBOSITY verbose',
		"SELECT name FROM pgsandbox.clone('D')"));
is( poll_value($node,
		"SELECT string_agg(usename, ',' ORDER BY usename) FROM pg_stat_activity"
		  . " WHERE query LIKE 'SELECT name FROM pgsandbox.clone(''_'')' AND wait_event = 'Extension'",
		join(',', sort keys %waiting)),
	join(',', sort keys %waiting), 'three callers wait for their clones');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pgsandbox.sandbox WHERE source IN ('B', 'C', 'D')"),
	'0', 'the waiting clones have not begun');

$node->safe_psql('postgres',
	"SELECT pgsandbox.remove_source('B'); SELECT pgsandbox.remove_source('D'); SELECT pgsandbox.revoke_source('C', 'bob')");
is( $node->safe_psql('postgres',
		"SELECT status FROM pgsandbox.sandbox WHERE source = 'slow'"),
	'cloning', 'the slow clone was still running when the sources were withdrawn');

my ($ret, $out, $err) = finish_psql($slow);
is($ret, 0, 'the slow clone succeeds') or diag $err;
my %expect = (
	alice => [ '42501', qr/permission denied for source "B"/ ],
	bob => [ '42501', qr/permission denied for source "C"/ ],
	$su => [ '42704', qr/source "D" does not exist/ ]);
for my $who (sort keys %waiting)
{
	($ret, $out, $err) = finish_psql($waiting{$who});
	my ($state, $re) = @{ $expect{$who} };
	isnt($ret, 0, "$who: the queued clone fails");
	like($err, qr/ERROR:\s+$state:/, "$who: with $state");
	like($err, $re, "$who: saying why");
	is($out, '', "$who: no sandbox is returned");
}
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pgsandbox.sandbox WHERE source IN ('B', 'C', 'D')"),
	'0', 'the refused clones left no catalog row');
my ($dbs, $roles, $rows) = $before =~ /(\d+) dbs, (\d+) roles, (\d+) sandbox rows/;
is(counts(), ($dbs + 1) . ' dbs, ' . ($roles + 1) . ' roles, ' . ($rows + 1) . ' sandbox rows',
	'only the slow clone made a database, a role and a row');

# ---------------------------------------------------------------------------
# twenty clones at once against a quota of ten
# ---------------------------------------------------------------------------

$node->safe_psql('postgres',
	    'ALTER SYSTEM SET pgsandbox.max_concurrent_clones = 2;'
	  . ' ALTER SYSTEM SET pgsandbox.max_sandboxes_per_owner = 10; SELECT pg_reload_conf()');
ok( $node->poll_query_until('postgres',
		"SELECT current_setting('pgsandbox.max_concurrent_clones') || '/' || current_setting('pgsandbox.max_sandboxes_per_owner')",
		'2/10'),
	'two clones at a time, ten sandboxes per owner');

$before = counts();
my @h = map {
	start_psql($node, "dbname=postgres user=alice application_name=caller$_",
		'\set VERBOSITY verbose', "SELECT name FROM pgsandbox.clone('tiny')")
} 1 .. 20;
my (@made, @quota, @other);
for my $i (0 .. $#h)
{
	($ret, $out, $err) = finish_psql($h[$i]);
	if ($ret == 0 && $out =~ /^sbx_[a-z0-9]{8}$/)
	{
		push @made, $out;
	}
	elsif ($err =~ /ERROR:\s+53400:\s+too many sandboxes for role "alice"/)
	{
		push @quota, $i;
	}
	else
	{
		push @other, "caller $i: ret=$ret out=$out err=$err";
	}
}
is(scalar @made, 10, 'exactly ten of twenty clones succeed');
is(scalar @quota, 10, 'exactly ten fail with the quota\'s 53400');
is(join("\n", @other), '', 'no call ends any other way');
my %distinct = map { $_ => 1 } @made;
is(scalar keys %distinct, 10, 'the ten sandboxes have ten names');

($dbs, $roles, $rows) = $before =~ /(\d+) dbs, (\d+) roles, (\d+) sandbox rows/;
is(counts(), ($dbs + 10) . ' dbs, ' . ($roles + 10) . ' roles, ' . ($rows + 10) . ' sandbox rows',
	'ten databases, ten roles and ten catalog rows were made, nothing for the refused calls');
is( $node->safe_psql('postgres',
		"SELECT string_agg(DISTINCT status || ':' || requested_by, ',') || ' ' || count(*) FROM pgsandbox.sandbox WHERE source = 'tiny'"),
	'ready:alice 10', 'all ten are ready and alice\'s');
is( $node->safe_psql('postgres',
		"SELECT string_agg(name, ',' ORDER BY name) FROM pgsandbox.sandbox WHERE source = 'tiny'"),
	join(',', sort @made), 'the ready sandboxes are the ones the callers got');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_database d JOIN pgsandbox.sandbox s ON s.db_oid = d.oid AND s.name = d.datname WHERE s.source = 'tiny'"),
	'10', 'each has its database');

$node->stop;
done_testing();
