
# 055_role_switch.pl: the rules a sandbox role is held to hold whatever role
# its session becomes (hooks/login_check.c).
#
# A sandbox role may become pgsandbox_sandbox, its group, or
# pg_database_owner, since it owns its database, by SET ROLE or by
# set_config('role', ...); neither is a sandbox role.  Switched so, it tries
# what a sandbox role may not do: a PREPARE TRANSACTION past its share, ALTER
# ROLE ... IN DATABASE another sandbox's database, a GRANT, default
# privileges and a policy for another sandbox role.  Each is refused and
# changes nothing.  Beside each, what it may do still works, as itself and
# switched: preparing within its share, settings in its own database, grants
# and policies for PUBLIC and for itself.  A superuser's session that becomes
# a sandbox role is held to that role's rules too.  Both sandboxes then drop
# cleanly.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

# a sandbox's share of prepared transactions is then 2
my $node = sandbox_node('role_switch',
	"pgsandbox.gc_interval = 3600\nmax_prepared_transactions = 8\n");
$node->safe_psql('postgres', q{
CREATE DATABASE src;
SELECT pgsandbox.add_source('src', 'dbname=src');
});
$node->safe_psql('src', 'CREATE TABLE t (id int PRIMARY KEY)');

my (%name, %conn);
for my $k ('a', 'b')
{
	($name{$k}, $conn{$k}) = split /\|/,
	  $node->safe_psql('postgres', "SELECT name, conninfo FROM pgsandbox.clone('src')");
}
my ($sa, $sb) = ($name{a}, $name{b});
like("$sa $sb", qr/^sbx_[a-z0-9]{8} sbx_[a-z0-9]{8}$/, 'two sandboxes made');

# Run $sql in sandbox a as its role, after $switch (a statement with its
# terminator, or a psql command).  Returns (exit code, stdout, stderr).
sub switched
{
	my ($switch, $sql) = @_;
	return sandbox_psql($node, $conn{a}, "\\set VERBOSITY verbose\n$switch\n$sql");
}

sub refused
{
	my ($label, $switch, $sql, $expected) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my ($ret, $out, $err) = switched($switch, $sql);
	isnt($ret, 0, "$label: refused");
	like($err, $expected, "$label: ... by the sandbox's rule");
	return;
}

sub allowed
{
	my ($label, $switch, $sql) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my ($ret, $out, $err) = switched($switch, $sql);
	is($ret, 0, "$label: allowed") or diag $err;
	return $out;
}

# a query on the catalogs of sandbox a's database, as the superuser
sub in_a { return $node->safe_psql($sa, $_[0]); }

# the settings pg_db_role_setting holds in database $db for role $role
sub settings_in
{
	my ($db, $role) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase"
		  . " WHERE d.datname = '$db'" . (defined $role ? " AND s.setrole = '$role'::regrole" : ''));
}

my $prepared = "SELECT string_agg(gid, ',' ORDER BY gid) FROM pg_prepared_xacts WHERE database = '$sa'";
my $grant_refused = qr/42501: a sandbox role may not grant privileges to another sandbox role/;
my $policy_refused = qr/42501: a sandbox role may not name another sandbox role in a policy/;
my $setting_refused = qr/42501: a sandbox role may not change settings in another database/;
my $prepare_refused = qr/53400: this sandbox already holds 2 prepared transactions/;

# ---------------------------------------------------------------------
# as itself: its share of prepared transactions, its own settings
# ---------------------------------------------------------------------
allowed("prepare 'a$_' as itself", 'RESET ROLE;', "BEGIN; PREPARE TRANSACTION 'a$_';") for 1 .. 2;
is($node->safe_psql('postgres', $prepared), 'a1,a2', 'its share of 2 is prepared');
refused('a third PREPARE TRANSACTION as itself', 'RESET ROLE;',
	"BEGIN; PREPARE TRANSACTION 'a3';", $prepare_refused);
allowed('settings in its own database, as itself', 'RESET ROLE;',
	"ALTER ROLE CURRENT_USER IN DATABASE $sa SET work_mem = '2MB';");
is(settings_in($sa, $sa), '1', '... are set');

# a schema where pgsandbox_sandbox may make tables (pg_database_owner owns
# public)
allowed('a schema for its group', 'RESET ROLE;',
	'CREATE SCHEMA grp; GRANT USAGE, CREATE ON SCHEMA grp TO pgsandbox_sandbox;');

# ---------------------------------------------------------------------
# the same session, switched
# ---------------------------------------------------------------------
my @switches = (
	[ 'SET ROLE pgsandbox_sandbox', 'SET ROLE pgsandbox_sandbox;', 'pgsandbox_sandbox', 'grp' ],
	[ 'SET ROLE pg_database_owner', 'SET ROLE pg_database_owner;', 'pg_database_owner', 'public' ],
	[
		q{set_config('role', 'pg_database_owner', false)},
		q{SELECT set_config('role', 'pg_database_owner', false) \g /dev/null},
		'pg_database_owner', 'public'
	]);

my $i = 0;
foreach my $s (@switches)
{
	my ($how, $switch, $role, $schema) = @$s;
	my $tab = "$schema.t" . ++$i;

	my ($ret, $out, $err) = switched($switch, 'SELECT current_user');
	if ($role eq 'pgsandbox_sandbox' && $node->pg_version >= 16)
	{
		# the membership is granted WITH SET FALSE from PostgreSQL 16 on
		like($err, qr/permission denied to set role "pgsandbox_sandbox"/,
			"$how: PostgreSQL refuses the switch itself");
		next;
	}
	is($out, $role, "$how: the session becomes $role") or diag $err;
	allowed("$how: a table of its own", $switch, "CREATE TABLE $tab (id int);");
	is(in_a("SELECT tableowner FROM pg_tables WHERE schemaname || '.' || tablename = '$tab'"),
		$role, "$how: ... owned by $role");

	# prepared transactions: its share is full
	refused("$how: PREPARE TRANSACTION past its share", $switch,
		"BEGIN; PREPARE TRANSACTION 'x$i';", $prepare_refused);
	is($node->safe_psql('postgres', $prepared), 'a1,a2', "$how: ... prepared nothing");

	# settings in another sandbox's database
	refused("$how: ALTER ROLE CURRENT_USER IN DATABASE <other sandbox>", $switch,
		"ALTER ROLE CURRENT_USER IN DATABASE $sb SET work_mem = '1MB';", $setting_refused);
	refused("$how: ALTER ROLE <itself> IN DATABASE <other sandbox>", $switch,
		"ALTER ROLE $sa IN DATABASE $sb SET work_mem = '1MB';", $setting_refused);
	is(settings_in($sb), '0', "$how: ... set nothing there");
	allowed("$how: settings in its own database", $switch,
		"ALTER ROLE CURRENT_USER IN DATABASE $sa SET work_mem = '2MB';");
	is(settings_in($sa, $role), '1', "$how: ... are set");

	# a table's privileges
	refused("$how: GRANT to another sandbox role", $switch,
		"GRANT SELECT ON $tab TO $sb;", $grant_refused);
	is(in_a("SELECT relacl IS NULL FROM pg_class WHERE oid = '$tab'::regclass"),
		't', "$how: ... the table's privileges are untouched");
	allowed("$how: GRANT to PUBLIC and to itself", $switch,
		"GRANT SELECT ON $tab TO PUBLIC; GRANT INSERT ON $tab TO $sa;");
	is( in_a("SELECT string_agg(g || ' ' || p, ',' ORDER BY g, p) FROM ("
			  . "SELECT CASE x.grantee WHEN 0 THEN 'PUBLIC' ELSE x.grantee::regrole::text END AS g,"
			  . " x.privilege_type AS p FROM pg_class c, aclexplode(c.relacl) x"
			  . " WHERE c.oid = '$tab'::regclass AND x.grantee <> c.relowner) s"),
		"PUBLIC SELECT,$sa INSERT", "$how: ... are granted");

	# default privileges
	refused("$how: ALTER DEFAULT PRIVILEGES for another sandbox role", $switch,
		"ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO $sb;", $grant_refused);
	is(in_a("SELECT count(*) FROM pg_default_acl d, aclexplode(d.defaclacl) x WHERE x.grantee = '$sb'::regrole"),
		'0', "$how: ... no default privilege names the other");
	allowed("$how: default privileges for itself", $switch,
		"ALTER DEFAULT PRIVILEGES IN SCHEMA $schema GRANT SELECT ON TABLES TO $sa;");
	is( in_a("SELECT count(*) FROM pg_default_acl d, aclexplode(d.defaclacl) x"
			  . " WHERE d.defaclrole = '$role'::regrole AND x.grantee = '$sa'::regrole"),
		'1', "$how: ... are set");

	# row-level security policies
	refused("$how: CREATE POLICY for another sandbox role", $switch,
		"CREATE POLICY p$i ON $tab TO $sb USING (true);", $policy_refused);
	allowed("$how: CREATE POLICY for itself", $switch,
		"CREATE POLICY mine$i ON $tab TO $sa USING (true);");
	refused("$how: ALTER POLICY to another sandbox role", $switch,
		"ALTER POLICY mine$i ON $tab TO $sb;", $policy_refused);
	is( in_a("SELECT string_agg(p.polname || ' ' || r::regrole::text, ',')"
			  . " FROM pg_policy p, unnest(p.polroles) r WHERE p.polrelid = '$tab'::regclass"),
		"mine$i $sa", "$how: ... only its own policy, for itself, is there");

	# the next switch may make its table in the same schema, as the same
	# role: leave it no default privilege of this one's
	allowed("$how: its default privileges taken back", $switch,
		"ALTER DEFAULT PRIVILEGES IN SCHEMA $schema REVOKE SELECT ON TABLES FROM $sa;");
}

is(in_a("SELECT count(*) FROM pg_class c, aclexplode(c.relacl) x WHERE x.grantee = '$sb'::regrole"),
	'0', 'no relation of sandbox a grants anything to sandbox b');
is(in_a("SELECT count(*) FROM pg_policy p, unnest(p.polroles) r WHERE r = '$sb'::regrole"),
	'0', 'no policy of sandbox a names sandbox b');

# a superuser's session that becomes the sandbox role keeps its rules
my ($ret, $out, $err) = $node->psql($sa,
	"\\set VERBOSITY verbose\nSET ROLE $sa;\nALTER ROLE CURRENT_USER IN DATABASE $sb SET work_mem = '1MB';");
like($err, $setting_refused, 'a superuser acting as the sandbox role is held to its rules');
is(settings_in($sb), '0', '... and set nothing');

# ---------------------------------------------------------------------
# its prepared transactions are still its own to finish
# ---------------------------------------------------------------------
allowed('COMMIT PREPARED its own', 'RESET ROLE;', "COMMIT PREPARED 'a1'; COMMIT PREPARED 'a2';");
is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '0',
	'no prepared transaction is left');

foreach my $name ($sa, $sb)
{
	$node->safe_psql('postgres', "SELECT pgsandbox.drop('$name')");
	is($node->safe_psql('postgres', "SELECT status FROM pgsandbox.sandboxes WHERE name = '$name'"),
		'dropped', "$name is dropped");
}
is(untracked_sandboxes($node), '0', 'their databases and roles are gone');

# ---------------------------------------------------------------------
# from 16 on, a sandbox role made before SET FALSE loses SET at the
# worker's next start
# ---------------------------------------------------------------------
if ($node->pg_version >= 16)
{
	$node->safe_psql('postgres', 'CREATE ROLE sbx_old0001 LOGIN IN ROLE pgsandbox_sandbox');
	my $set_option = q{SELECT set_option FROM pg_auth_members
		WHERE member = 'sbx_old0001'::regrole AND roleid = 'pgsandbox_sandbox'::regrole};
	is($node->safe_psql('postgres', $set_option), 't', 'an old sandbox role may SET ROLE its group');
	my $offset = -s $node->logfile;
	$node->restart;
	ok($node->wait_for_log(qr/pgsandbox: 1 sandbox role may no longer SET ROLE pgsandbox_sandbox/,
			$offset), 'the worker\'s start withdraws it, and says so');
	is($node->safe_psql('postgres', $set_option), 'f', '... from the membership itself');
	$node->safe_psql('postgres', 'DROP ROLE sbx_old0001');
}

$node->stop;
done_testing();
