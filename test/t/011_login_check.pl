
# 011_login_check.pl: a sandbox role connects to its own database only.
#
# The login check runs after pg_hba.conf has let a connection in, so it
# must hold whatever pg_hba.conf says.  It is tried twice: first with the
# most permissive pg_hba.conf there is (trust for everyone), then with
# scram-sha-256 for every role but the test's superuser.  Each time a
# sandbox role (a direct member of pgsandbox_sandbox) must be refused by
# every database but its own:
# postgres (where pgsandbox's catalog lives), template1, template0, the
# source, another sandbox, a database that does not exist; while other
# roles, and the sandbox role in its own database, get in.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $su = superuser_name();

my $node = PostgreSQL::Test::Cluster->new('login');
$node->init;
$node->append_conf('postgresql.conf',
	    "shared_preload_libraries = 'pgsandbox'\n"
	  . "max_worker_processes = 16\n"
	  . "password_encryption = 'scram-sha-256'\n"
	  . "log_connections = on\n");
# From PostgreSQL 18, connect_fails(log_like => ...) waits for the DEBUG2
# lines of the backend's fork and exit before it reads the log: without
# them each refusal would wait out the whole timeout.
$node->append_conf('postgresql.conf', "log_min_messages = debug2\n")
  if $node->pg_version >= 18;

sub write_hba
{
	my (@lines) = @_;
	open my $hba, '>', $node->data_dir . '/pg_hba.conf' or die $!;
	print $hba "$_\n" for @lines;
	close $hba;
}

# the most permissive configuration: anyone, any database, no password
write_hba('local all all trust');
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION pgsandbox');

$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql('src', 'CREATE TABLE secret_stuff (id int); INSERT INTO secret_stuff VALUES (42)');
$node->safe_psql(
	'postgres', q{
SELECT pgsandbox.add_source('src', 'dbname=src', allow_data => true);
CREATE ROLE plain LOGIN PASSWORD 'PlainPw1';
CREATE ROLE mid NOLOGIN IN ROLE pgsandbox_sandbox;
CREATE ROLE sneaky LOGIN PASSWORD 'SneakyPw1' IN ROLE mid;
});

my %sbx;
for my $k ('a', 'b')
{
	my ($name, $conninfo) = split /\|/,
	  $node->safe_psql('postgres', "SELECT name, conninfo FROM pgsandbox.clone('src', schema_only => false)");
	my ($pw) = $conninfo =~ /password=(\S+)/;
	$sbx{$k} = { name => $name, pw => $pw };
}
my ($a_name, $a_pw) = ($sbx{a}{name}, $sbx{a}{pw});
my $b_name = $sbx{b}{name};
ok($a_name =~ /^sbx_[a-z0-9]{8}$/ && $b_name =~ /^sbx_[a-z0-9]{8}$/ && $a_name ne $b_name,
	'two sandboxes made');

my $refusal = sub { my ($role) = @_; qr/sandbox role "\Q$role\E" may connect only to its own database/ };

# Everything a sandbox role (given $pw, or none) must be refused, and the
# one place it may go.
sub check_confinement
{
	my ($phase, $pw) = @_;
	my $auth = defined $pw ? " password=$pw" : '';

	$node->connect_ok("dbname=$a_name user=$a_name$auth",
		"$phase: sandbox role connects to its own database",
		sql => 'SELECT current_user || \'@\' || current_database()',
		expected_stdout => qr/^\Q$a_name\E\@\Q$a_name\E$/);
	for my $db ('postgres', 'template1', 'template0', 'src', $b_name, 'nosuchdb')
	{
		$node->connect_fails("dbname=$db user=$a_name$auth",
			"$phase: sandbox role cannot connect to $db",
			expected_stderr => $refusal->($a_name),
			log_like => [ $refusal->($a_name) ]);
	}
	# only direct members are sandbox roles: a sandbox role may grant itself
	# to others (PostgreSQL 15 lets a role grant membership in itself), and
	# that must not lock them out; an indirect member is an ordinary role
	my $sneaky_auth = defined $pw ? ' password=SneakyPw1' : '';
	$node->connect_ok("dbname=postgres user=sneaky$sneaky_auth",
		"$phase: a member of pgsandbox_sandbox only through another group is not held by the check");
	$node->connect_fails("dbname=$a_name user=sneaky$sneaky_auth",
		"$phase: ... and has no CONNECT on a sandbox",
		expected_stderr => qr/permission denied for database "\Q$a_name\E"/);
	# others are not held by the check
	my $plain_auth = defined $pw ? ' password=PlainPw1' : '';
	$node->connect_ok("dbname=postgres user=plain$plain_auth",
		"$phase: a role outside pgsandbox_sandbox connects to postgres");
	$node->connect_fails("dbname=$a_name user=plain$plain_auth",
		"$phase: a role outside pgsandbox_sandbox cannot connect to a sandbox",
		expected_stderr => qr/permission denied for database "\Q$a_name\E"/);
	$node->connect_ok("dbname=$a_name user=$su",
		"$phase: the superuser connects to a sandbox");
}

check_confinement('trust everywhere', undef);

# inside its own database the role has nothing that reaches further
my ($ret, $out, $err) = sandbox_psql($node, "dbname=$a_name user=$a_name",
	"SELECT count(*) FROM secret_stuff; "
	  . "SELECT has_database_privilege('postgres', 'CONNECT'); "
	  . "SELECT count(*) FROM pg_namespace WHERE nspname = 'pgsandbox'; "
	  . "SELECT rolsuper OR rolcreatedb OR rolcreaterole OR rolreplication OR rolbypassrls FROM pg_roles WHERE rolname = current_user; "
	  . "SELECT string_agg(b.rolname, ',') FROM pg_auth_members m JOIN pg_roles b ON b.oid = m.roleid WHERE m.member = (SELECT oid FROM pg_roles WHERE rolname = current_user)");
is($out, "1\nt\n0\nf\npgsandbox_sandbox",
	'the sandbox role reads its copy, is a member of pgsandbox_sandbox only, has no attribute, and its CONNECT on postgres is stopped by the check alone')
  or diag $err;
($ret, $out, $err) = sandbox_psql($node, "dbname=$a_name user=$a_name", "SET ROLE $b_name");
like($err, qr/permission denied to set role "\Q$b_name\E"/, 'the sandbox role cannot become another sandbox role');
($ret, $out, $err) = sandbox_psql($node, "dbname=$a_name user=$a_name", "SET ROLE pgsandbox_admin");
like($err, qr/permission denied to set role "pgsandbox_admin"/, 'the sandbox role cannot become pgsandbox_admin');

# ---------------------------------------------------------------------------
# passwords asked of everyone but the superuser
# ---------------------------------------------------------------------------

write_hba("local all $su trust", 'local all all scram-sha-256');
$node->reload;
ok( wait_until(
		sub {
			my ($r) = $node->psql('postgres', 'SELECT 1', connstr => 'dbname=postgres user=plain', extra_params => ['-w']);
			return $r != 0;
		}),
	'pg_hba.conf now asks for passwords');

$node->connect_fails("dbname=$a_name user=$a_name password=wrong$a_pw",
	'scram: sandbox role with a wrong password is refused',
	expected_stderr => qr/password authentication failed for user "\Q$a_name\E"/);
check_confinement('scram', $a_pw);

# the sandbox role can be dropped only as pgsandbox does it: its database
# and role go, and with them any way in
$node->safe_psql('postgres', "SELECT pgsandbox.drop('$a_name')");
$node->connect_fails("dbname=$a_name user=$a_name password=$a_pw",
	'a dropped sandbox\'s credentials open nothing',
	expected_stderr => qr/password authentication failed|role "\Q$a_name\E" does not exist/);

$node->stop;
done_testing();
