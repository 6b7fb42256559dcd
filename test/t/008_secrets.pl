
# 008_secrets.pl: passwords stay out of logs, pg_stat_activity and ps.
#
# The source is reached as a role that must give its password, so a clone
# that succeeds proves the password was handed on.  With log_statement =
# all and log_min_messages = debug1, after a successful clone and failing
# ones, neither the sandbox's password nor a source's password may be in
# the server log, the catalog, pg_stat_activity or any process's command
# line while the clone runs.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $node = sandbox_node('secrets', "log_statement = all\nlog_min_messages = debug1\n");

my $source_pw = 'SrcPw4Secret7Xq';
my $dead_pw = 'DeadPw9Hidden3Zk';
my $wrong_pw = 'WrongPw2Hidden8Rv';

# Statements that carry a password on purpose are the administrator's own;
# log_statement would log them as PostgreSQL logs any statement, so they
# run with log_statement off.  Everything pgsandbox does is logged.
sub quiet_psql
{
	my ($sql) = @_;
	return $node->safe_psql('postgres', "SET log_statement = 'none'; $sql");
}

quiet_psql("CREATE ROLE srcuser LOGIN PASSWORD '$source_pw'");
$node->safe_psql('postgres', 'GRANT pg_read_all_data TO srcuser');
make_slow_source($node, 'slowsrc', 1500, 2);
quiet_psql("SELECT pgsandbox.add_source('sec', 'dbname=slowsrc user=srcuser password=$source_pw', true)");
quiet_psql("SELECT pgsandbox.add_source('dead', 'host=127.0.0.1 port=1 dbname=x user=srcuser password=$dead_pw connect_timeout=2', true)");
quiet_psql("SELECT pgsandbox.add_source('wrong', 'dbname=slowsrc user=srcuser password=$wrong_pw', true)");

is( $node->safe_psql('postgres',
		"SELECT string_agg(name || ':' || coalesce(\"user\", '-'), ',' ORDER BY name) FROM pgsandbox.sources"),
	'dead:srcuser,sec:srcuser,wrong:srcuser', 'sources show their user');
unlike($node->safe_psql('postgres', 'SELECT * FROM pgsandbox.sources'),
	qr/\Q$source_pw\E|\Q$dead_pw\E|\Q$wrong_pw\E/, 'the sources view shows no password');

# ---------------------------------------------------------------------------
# A successful clone, watched while it runs
# ---------------------------------------------------------------------------

my $h = start_psql($node, $node->connstr('postgres'),
	"SELECT name, conninfo FROM pgsandbox.clone('sec', schema_only => false)");
my (@activity, @ps, @cmdlines);
my $saw_children = 0;
wait_until(
	sub {
		push @activity,
		  $node->safe_psql('postgres',
			"SELECT string_agg(a::text, E'\\n') FROM pg_stat_activity a WHERE pid <> pg_backend_pid()"
		  );
		my $ps = `ps -eo pid,args`;
		push @ps, $ps;
		for my $w (clone_worker_pids($node))
		{
			my @kids = child_processes($w);
			$saw_children++ if grep { $_->[1] =~ m{pg_restore\s} } @kids;
			push @cmdlines, map { $_->[1] } @kids;
		}
		$h->{run}->pump_nb;
		return !$h->{run}->pumpable;
	},
	120);
my ($ret, $out, $err) = finish_psql($h);
is($ret, 0, 'clone of a password-protected source succeeds') or diag $err;
my ($name, $conninfo) = split /\|/, $out;
$conninfo //= '';
my ($sandbox_pw) = $conninfo =~ /password=([A-Za-z0-9]{32})/;
ok(defined $sandbox_pw, 'the conninfo carries the sandbox password');
$sandbox_pw //= 'no password returned';
cmp_ok($saw_children, '>', 0, 'pg_restore was seen running during the clone');
ok(scalar(grep { /pgsandbox clone|pgsandbox: dumping/ } @activity),
	'pg_stat_activity showed the clone at work');

($ret, $out, $err) = sandbox_psql($node, $conninfo, 'SELECT count(*) FROM slow');
is($out, '1500', 'the sandbox logs in with its password and holds the rows');

for my $secret ([ 'the sandbox password', $sandbox_pw ], [ 'the source password', $source_pw ])
{
	my ($what, $pw) = @$secret;
	is(scalar(grep { /\Q$pw\E/ } @activity), 0, "pg_stat_activity never showed $what");
	is(scalar(grep { /\Q$pw\E/ } @ps), 0, "ps never showed $what");
	is(scalar(grep { /\Q$pw\E/ } @cmdlines), 0, "no child's command line held $what");
}

# ---------------------------------------------------------------------------
# Failing clones
# ---------------------------------------------------------------------------

($ret, $out, $err) = $node->psql('postgres', "SELECT * FROM pgsandbox.clone('dead', schema_only => false)");
isnt($ret, 0, 'clone of an unreachable source fails');
unlike($err, qr/\Q$dead_pw\E/, '... without showing its password');

($ret, $out, $err) = $node->psql('postgres', "SELECT * FROM pgsandbox.clone('wrong')");
isnt($ret, 0, 'clone of a source with a wrong password fails');
like($err, qr/password authentication failed/, '... because the password is wrong');
unlike($err, qr/\Q$wrong_pw\E/, '... without showing it');

is( $node->safe_psql('postgres', "SELECT count(*) FROM pgsandbox.sandboxes WHERE status = 'failed'"),
	'2', 'both failures are recorded');
my $catalog = $node->safe_psql('postgres',
	    "SELECT string_agg(s::text, E'\\n') FROM pgsandbox.sandboxes s"
	  . " UNION ALL SELECT string_agg(e::text, E'\\n') FROM pgsandbox.events e");

# ---------------------------------------------------------------------------
# Nothing leaked
# ---------------------------------------------------------------------------

my $log = slurp_file($node->logfile);
like($log, qr/sandbox "$name" is ready/, 'the log covers the clone');
for my $secret (
	[ 'the sandbox password', $sandbox_pw ],
	[ 'the source password', $source_pw ],
	[ 'the unreachable source\'s password', $dead_pw ],
	[ 'the wrong password', $wrong_pw ])
{
	my ($what, $pw) = @$secret;
	unlike($log, qr/\Q$pw\E/, "the server log does not contain $what");
	unlike($catalog, qr/\Q$pw\E/, "the sandboxes and events views do not contain $what");
}

$node->stop;
done_testing();
