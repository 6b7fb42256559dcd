
# 024_membership_checks.pl: every check that asks "is this a sandbox role?"
# holds on the server's own major, however the membership was granted.
#
# A sandbox role is a direct member of pgsandbox_sandbox.  From PostgreSQL
# 16 on, pg_auth_members may hold one row per grantor for the same
# (member, role) pair, and its syscache is keyed (member, role, grantor):
# a lookup by (member, role) alone matched nothing there, and every sandbox
# role then passed for an ordinary one.  So each check is tried directly:
# the login check, the GRANT checks (role membership, privileges, default
# privileges) and the policy checks (CREATE and ALTER POLICY), and the login
# check again for a role whose membership comes from another grantor.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $node = sandbox_node('membership', "pgsandbox.gc_interval = 3600\n");
note('PostgreSQL ' . $node->pg_version);
$node->safe_psql('postgres', q{
CREATE DATABASE src;
SELECT pgsandbox.add_source('src', 'dbname=src');
CREATE ROLE plain LOGIN PASSWORD 'PlainPw1';
});
$node->safe_psql('src', 'CREATE TABLE t (id int PRIMARY KEY)');

my %sbx;
for my $k ('a', 'b')
{
	my ($name, $conninfo) = split /\|/,
	  $node->safe_psql('postgres', "SELECT name, conninfo FROM pgsandbox.clone('src')");
	$sbx{$k} = { name => $name, conninfo => $conninfo };
}
my ($sa, $sb) = ($sbx{a}{name}, $sbx{b}{name});
like("$sa $sb", qr/^sbx_[a-z0-9]{8} sbx_[a-z0-9]{8}$/, 'two sandboxes made');

# Run SQL in sandbox a as its role; returns stderr (empty on success).
sub as_a
{
	my ($sql) = @_;
	my ($ret, $out, $err) = sandbox_psql($node, $sbx{a}{conninfo}, $sql);
	return $ret == 0 ? '' : $err;
}

# the login check
my ($ret, $out, $err) = sandbox_psql($node, "dbname=postgres user=$sa password="
	  . ($sbx{a}{conninfo} =~ /password=(\S+)/)[0], 'SELECT 1');
isnt($ret, 0, 'login check: a sandbox role cannot connect to the admin database');
like($err, qr/sandbox role "\Q$sa\E" may connect only to its own database/, 'login check: ... refused by the check');
($ret, $out, $err) = sandbox_psql($node, $sbx{a}{conninfo}, 'SELECT current_user');
is($out, $sa, 'login check: it connects to its own database');

# GRANT: role memberships, privileges, default privileges
like(as_a("GRANT $sa TO plain"), qr/a sandbox role may not grant role memberships/,
	'GRANT check: no membership in itself to another role');
like(as_a("GRANT $sa TO $sb"), qr/a sandbox role may not grant role memberships/,
	'GRANT check: nor to another sandbox role');
like(as_a("GRANT SELECT ON t TO $sb"), qr/a sandbox role may not grant privileges to another sandbox role/,
	'GRANT check: no privilege to another sandbox role');
like(
	as_a("ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO $sb"),
	qr/a sandbox role may not grant privileges to another sandbox role/,
	'GRANT check: no default privilege for another sandbox role');
is(as_a("GRANT SELECT ON t TO plain"), '', 'GRANT check: a privilege to an ordinary role is allowed');

# policies
like(
	as_a("CREATE POLICY p ON t TO $sb USING (true)"),
	qr/a sandbox role may not name another sandbox role in a policy/,
	'policy check: CREATE POLICY cannot name another sandbox role');
is(as_a("CREATE POLICY mine ON t TO $sa USING (true)"), '', 'policy check: a policy for itself is allowed');
like(
	as_a("ALTER POLICY mine ON t TO $sb"),
	qr/a sandbox role may not name another sandbox role in a policy/,
	'policy check: ALTER POLICY cannot name another sandbox role');
is( $node->safe_psql($sa,
		"SELECT count(*) FROM pg_policy p, unnest(p.polroles) r WHERE r = '$sb'::regrole"),
	'0', 'no policy of sandbox a names sandbox b');

# A membership granted by another grantor: from 16 on it is a row of its
# own, and the check must find it whoever the grantor.
SKIP:
{
	skip 'one membership row per grantor comes with PostgreSQL 16', 3
	  unless $node->pg_version >= 16;
	$node->safe_psql('postgres', q{
CREATE ROLE other_grantor NOLOGIN;
GRANT pgsandbox_sandbox TO other_grantor WITH ADMIN OPTION;
CREATE ROLE granted_twice LOGIN PASSWORD 'TwicePw1';
GRANT pgsandbox_sandbox TO granted_twice;
GRANT pgsandbox_sandbox TO granted_twice GRANTED BY other_grantor;
});
	is( $node->safe_psql('postgres',
			"SELECT count(*) FROM pg_auth_members WHERE member = 'granted_twice'::regrole"),
		'2', 'a role is granted pgsandbox_sandbox by two grantors');
	$node->safe_psql('postgres', 'REVOKE pgsandbox_sandbox FROM granted_twice');
	is( $node->safe_psql('postgres',
			"SELECT pg_get_userbyid(grantor) FROM pg_auth_members WHERE member = 'granted_twice'::regrole"),
		'other_grantor', '... and keeps only the grant of the other grantor');
	($ret, $out, $err) = sandbox_psql($node, 'dbname=postgres user=granted_twice password=TwicePw1', 'SELECT 1');
	like($err, qr/sandbox role "granted_twice" may connect only to its own database/,
		'login check: that role is held by the check');
}

$node->stop;
done_testing();
