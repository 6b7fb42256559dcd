
# 010_access.pl: who may clone what, who sees and touches which sandbox,
# and how many sandboxes there may be.
#
# Every role logs in as itself (pg_hba.conf trusts the test roles; sandbox
# roles must give their password).  Checked:
# - the group roles pgsandbox_admin, pgsandbox_user and pgsandbox_sandbox,
#   made only if missing, and nothing of the extension open to PUBLIC;
# - a pgsandbox_user clones only the sources granted to it or to a group it
#   is in (nested too); an unregistered, withheld or data-less source is
#   refused with 42501 and changes nothing; an admin clones every source;
# - the views show a pgsandbox_user only its own rows, also to a leaky
#   function of its own; another owner's sandbox cannot be dropped,
#   extended or reaped by gc(), exactly as if it did not exist (42704);
# - pgsandbox.max_sandboxes_per_owner and pgsandbox.max_sandboxes refuse a
#   clone with 53400 before anything is made.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $su = superuser_name();
my @people = qw(alice bob carl dave ada nobody);

my $node = PostgreSQL::Test::Cluster->new('access');
$node->init;
$node->append_conf('postgresql.conf',
	    "shared_preload_libraries = 'pgsandbox'\n"
	  . "max_connections = 40\n"
	  . "max_worker_processes = 16\n"
	  . "password_encryption = 'scram-sha-256'\n"
	  . "pgsandbox.gc_interval = 3600\n");
{
	open my $hba, '>', $node->data_dir . '/pg_hba.conf' or die $!;
	print $hba "local all $su trust\n";
	print $hba "local all " . join(',', @people) . " trust\n";
	print $hba "local all all scram-sha-256\n";
	close $hba;
}
$node->start;

# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

# one superuser session for the checks, to spare a connection per query
my $session = $node->background_psql('postgres', on_error_stop => 0);

sub sq
{
	my ($sql) = @_;
	return $session->query_safe($sql);
}

# psql in "postgres" logged in as $role, errors with their SQLSTATE
sub as_role
{
	my ($role, $sql) = @_;
	return $node->psql('postgres', $sql,
		extra_params => [ '-U', $role, '-v', 'VERBOSITY=verbose' ]);
}

sub sqlstate
{
	my ($err) = @_;
	return $err =~ /(?:ERROR|FATAL):\s+([0-9A-Z]{5}):/ ? $1 : 'none';
}

# Everything a refused call must leave as it was.
sub snapshot
{
	return sq(q{
SELECT (SELECT count(*) FROM pg_database) || ' dbs | ' ||
       (SELECT count(*) FROM pg_roles) || ' roles | sandbox ' ||
       (SELECT count(*) || ':' || coalesce(md5(string_agg(s::text, ',' ORDER BY id)), '')
          FROM pgsandbox.sandbox s) || ' | events ' ||
       (SELECT count(*) FROM pgsandbox.event) || ' | source ' ||
       (SELECT count(*) || ':' || coalesce(md5(string_agg(s::text, ',' ORDER BY name)), '')
          FROM pgsandbox.source s) || ' | grants ' ||
       (SELECT count(*) || ':' || coalesce(md5(string_agg(g::text, ',' ORDER BY source, grantee)), '')
          FROM pgsandbox.source_grant g)});
}

# $sql run by $role must fail with $state and a message matching $re, and
# change nothing.  Returns the error text.
sub refused
{
	my ($role, $sql, $state, $re, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $before = snapshot();
	my ($ret, $out, $err) = as_role($role, $sql);
	is(sqlstate($err), $state, "$what: fails with $state") or diag "ret=$ret out=$out err=$err";
	like($err, $re, "$what: says why");
	is(snapshot(), $before, "$what: changes nothing");
	return $err;
}

# A clone by $role that must succeed; returns (name, conninfo).
sub clone_ok
{
	my ($role, $args, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my ($ret, $out, $err) =
	  as_role($role, "SELECT name, conninfo FROM pgsandbox.clone($args)");
	is($ret, 0, "$what: clone succeeds") or diag $err;
	my ($name, $conninfo) = split /\|/, $out, 2;
	return ($name // 'sbx_none', $conninfo // '');
}

sub status_of
{
	my ($name) = @_;
	return sq("SELECT coalesce((SELECT status || ':' || owner FROM pgsandbox.sandboxes WHERE name = '$name'), 'none')"
	);
}

# ---------------------------------------------------------------------------
# install: group roles made if missing, nothing open to PUBLIC
# ---------------------------------------------------------------------------

# pgsandbox_user exists before the extension, with a member: it is kept
sq('CREATE ROLE pgsandbox_user NOLOGIN; CREATE ROLE alice LOGIN IN ROLE pgsandbox_user');
my $user_oid = sq("SELECT oid FROM pg_roles WHERE rolname = 'pgsandbox_user'");
sq('CREATE EXTENSION pgsandbox');
# (pgsandbox_reader's LOGIN is the worker's to give, at its next pass,
# which may come before this look or after it: checked below)
is( sq("SELECT string_agg(rolname || ':' || (rolcanlogin AND rolname <> 'pgsandbox_reader') || rolsuper || rolcreatedb || rolcreaterole || rolbypassrls, ',' ORDER BY rolname)"
		  . " FROM pg_roles WHERE rolname LIKE 'pgsandbox\\_%'"),
	'pgsandbox_admin:falsefalsefalsefalsefalse,pgsandbox_live:falsefalsefalsefalsetrue,pgsandbox_reader:falsefalsefalsefalsetrue,pgsandbox_sandbox:falsefalsefalsefalsefalse,pgsandbox_user:falsefalsefalsefalsefalse',
	'three privilege-less NOLOGIN group roles exist, and pgsandbox_reader and pgsandbox_live, which bypass row-level security only');
ok(wait_until(sub { sq("SELECT rolcanlogin FROM pg_roles WHERE rolname = 'pgsandbox_reader'") eq 't' }, 60),
	'the worker gives pgsandbox_reader its login');
is(sq(q{SELECT string_agg(b.rolname, ',') FROM pg_auth_members m JOIN pg_roles b ON b.oid = m.roleid
	 WHERE m.member = 'pgsandbox_reader'::regrole}), 'pg_read_all_data',
	'pgsandbox_reader is a member of pg_read_all_data alone');
is(sq("SELECT oid FROM pg_roles WHERE rolname = 'pgsandbox_user'"),
	$user_oid, 'an existing pgsandbox_user is kept, not recreated');
is(sq("SELECT pg_has_role('alice', 'pgsandbox_user', 'MEMBER')"),
	't', '... with its members');

sq(q{
CREATE ROLE bob LOGIN IN ROLE pgsandbox_user;
CREATE ROLE team NOLOGIN;
CREATE ROLE subteam NOLOGIN IN ROLE team;
CREATE ROLE carl LOGIN IN ROLE pgsandbox_user, team;
CREATE ROLE dave LOGIN IN ROLE pgsandbox_user, subteam;
CREATE ROLE ada LOGIN IN ROLE pgsandbox_admin;
CREATE ROLE nobody LOGIN;
});

# nobody stands for PUBLIC: it has no grant of its own
is( sq("SELECT coalesce(string_agg(proname, ','), '') FROM pg_proc"
		  . " WHERE pronamespace = 'pgsandbox'::regnamespace AND has_function_privilege('nobody', oid, 'EXECUTE')"),
	'', 'PUBLIC may execute no function of pgsandbox');
is( sq("SELECT coalesce(string_agg(relname, ','), '') FROM pg_class"
		  . " WHERE relnamespace = 'pgsandbox'::regnamespace AND relkind IN ('r', 'v', 'S')"
		  . " AND has_table_privilege('nobody', oid, 'SELECT,INSERT,UPDATE,DELETE,TRUNCATE,REFERENCES,TRIGGER')"),
	'', 'PUBLIC may use no table, view or sequence of pgsandbox');
is(sq("SELECT has_schema_privilege('nobody', 'pgsandbox', 'USAGE')"),
	'f', 'PUBLIC has no usage on schema pgsandbox');
is( sq("SELECT has_schema_privilege('pgsandbox_sandbox', 'pgsandbox', 'USAGE')"),
	'f', 'sandbox roles have no usage on schema pgsandbox');
my $exec_sql = "SELECT string_agg(f || ':' || has_function_privilege('%s', ('pgsandbox.' || f)::regproc, 'EXECUTE'), ',' ORDER BY f)"
  . " FROM unnest(ARRAY['clone', 'drop', 'extend', 'gc', 'add_source', 'remove_source', 'grant_source', 'revoke_source', 'doctor']) f";
is(sq(sprintf($exec_sql, 'bob')),
	'add_source:false,clone:true,doctor:false,drop:true,extend:true,gc:true,grant_source:false,remove_source:false,revoke_source:false',
	'a pgsandbox_user may clone, drop, extend and gc, but not manage sources or run doctor()');
is(sq(sprintf($exec_sql, 'ada')),
	'add_source:true,clone:true,doctor:true,drop:true,extend:true,gc:true,grant_source:true,remove_source:true,revoke_source:true',
	'a pgsandbox_admin may execute every function of the SQL reference');
is( sq("SELECT coalesce(string_agg(relname, ','), '') FROM pg_class"
		  . " WHERE relnamespace = 'pgsandbox'::regnamespace AND relkind IN ('r', 'v', 'S', 'm')"
		  . " AND has_table_privilege('bob', oid, 'INSERT,UPDATE,DELETE,TRUNCATE,REFERENCES,TRIGGER')"),
	'', 'a pgsandbox_user may write to no table, view or sequence of pgsandbox');
is( sq("SELECT string_agg(r || ':' || has_table_privilege('bob', ('pgsandbox.' || r)::regclass, 'SELECT'), ',' ORDER BY r)"
		  . " FROM unnest(ARRAY['source', 'sandbox', 'event', 'source_grant', 'source_grants', 'sources', 'sandboxes', 'events']) r"),
	'event:false,events:true,sandbox:false,sandboxes:true,source:false,source_grant:false,source_grants:false,sources:true',
	'a pgsandbox_user reads the views, not the tables behind them nor the grants');
for my $r ([ 'alice', 'f' ], [ 'ada', 't' ], [ $su, 't' ])
{
	my ($role, $expected) = @$r;
	my ($ret, $out) = as_role($role, 'SELECT pgsandbox._caller_is_admin()');
	is($out, $expected, "$role is " . ($expected eq 't' ? '' : 'not ') . 'an admin');
}

# ---------------------------------------------------------------------------
# sources and grants
# ---------------------------------------------------------------------------

sq('CREATE DATABASE app');
$node->safe_psql('app', 'CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 3) g');
sq(q{
SELECT pgsandbox.add_source('app', 'dbname=app');
SELECT pgsandbox.add_source('appdata', 'dbname=app', allow_data => true);
SELECT pgsandbox.add_source('other', 'dbname=app', allow_data => true);
SELECT pgsandbox.grant_source('app', 'alice');
SELECT pgsandbox.grant_source('app', 'bob');
SELECT pgsandbox.grant_source('appdata', 'team');
SELECT pgsandbox.grant_source('app', 'nobody');
});

my ($ret, $out, $err) = as_role('alice', 'SELECT string_agg(name, \',\' ORDER BY name) FROM pgsandbox.sources');
is($out, 'app', 'alice sees only the source granted to her');
($ret, $out, $err) = as_role('carl', 'SELECT string_agg(name, \',\' ORDER BY name) FROM pgsandbox.sources');
is($out, 'appdata', 'carl sees the source granted to his group');
($ret, $out, $err) = as_role('ada', 'SELECT string_agg(name, \',\' ORDER BY name) FROM pgsandbox.sources');
is($out, 'app,appdata,other', 'an admin sees every source');

my ($alice1, $alice1_ci) = clone_ok('alice', "'app'", 'alice, granted source');
is(status_of($alice1), 'ready:alice', 'the sandbox is ready and owned by alice');
is( sq("SELECT string_agg(action || ':' || actor, ',' ORDER BY at) FROM pgsandbox.events WHERE sandbox = '$alice1'"),
	'clone:alice,ready:alice', 'the events name alice as the actor');
is( sq("SELECT requested_by || ':' || (owner_oid = 'alice'::regrole) FROM pgsandbox.sandbox WHERE name = '$alice1'"),
	'alice:true', 'the catalog records alice\'s role as the owner');

my $e1 = refused('alice', "SELECT * FROM pgsandbox.clone('other')",
	'42501', qr/permission denied for source "other"/, 'alice, a source not granted to her');
my $e2 = refused('alice', "SELECT * FROM pgsandbox.clone('nosuch')",
	'42501', qr/permission denied for source "nosuch"/, 'alice, an unregistered source');
s/"(other|nosuch)"/"X"/g for $e1, $e2;
is($e2, $e1, 'an unregistered source and a withheld one get the same answer');
refused('alice', "SELECT * FROM pgsandbox.clone('app', schema_only => false)",
	'42501', qr/source "app" does not allow copying data/, 'alice, data from a source without allow_data');
refused('alice', "SELECT * FROM pgsandbox.clone('appdata')",
	'42501', qr/permission denied for source "appdata"/, 'alice, a source granted to a group she is not in');
refused('nobody', "SELECT * FROM pgsandbox.clone('app')",
	'42501', qr/permission denied for schema pgsandbox/, 'a role outside pgsandbox_user, even with a grant');
refused('nobody', "SELECT count(*) FROM pgsandbox.sandboxes",
	'42501', qr/permission denied for schema pgsandbox/, 'a role outside pgsandbox_user reading the views');

my ($carl1, $carl1_ci) = clone_ok('carl', "'appdata', schema_only => false", 'carl, source granted to his group, with data');
($ret, $out, $err) = sandbox_psql($node, $carl1_ci, 'SELECT count(*) FROM t');
is($out, '3', 'carl\'s sandbox holds the rows, and its role logs in with its password');
my ($dave1) = clone_ok('dave', "'appdata'", 'dave, source granted to a group his group is in');
is(status_of($dave1), 'ready:dave', 'dave\'s sandbox is ready and his');
my ($ada1) = clone_ok('ada', "'other'", 'an admin, a source granted to no one');
refused('ada', "SELECT * FROM pgsandbox.clone('nosuch')",
	'42704', qr/source "nosuch" does not exist/, 'an admin, an unregistered source');

# a revoked grant and a left group close the source again
sq("SELECT pgsandbox.revoke_source('appdata', 'team')");
refused('carl', "SELECT * FROM pgsandbox.clone('appdata')",
	'42501', qr/permission denied for source "appdata"/, 'carl after the grant to his group is revoked');
sq("SELECT pgsandbox.grant_source('appdata', 'team')");
($ret, $out, $err) = as_role('carl', "SELECT count(*) FROM pgsandbox.clone('appdata')");
is($out, '1', 'carl clones again once the grant is back') or diag $err;
sq('REVOKE team FROM carl');
refused('carl', "SELECT * FROM pgsandbox.clone('appdata')",
	'42501', qr/permission denied for source "appdata"/, 'carl after leaving the group');

# ---------------------------------------------------------------------------
# visibility: each pgsandbox_user sees its own rows only
# ---------------------------------------------------------------------------

my ($bob1) = clone_ok('bob', "'app'", 'bob, granted source');
my %all_rows;
for my $who (qw(alice bob carl dave))
{
	my $expected = sq("SELECT string_agg(name, ',' ORDER BY name) FROM pgsandbox.sandbox WHERE requested_by = '$who'");
	($ret, $out, $err) = as_role($who, "SELECT string_agg(name, ',' ORDER BY name) FROM pgsandbox.sandboxes");
	is($out, $expected, "$who sees exactly its own sandboxes");
	$expected = sq("SELECT count(*) FROM pgsandbox.event e JOIN pgsandbox.sandbox s ON s.name = e.sandbox WHERE s.requested_by = '$who'"
	);
	($ret, $out, $err) = as_role($who,
		"SELECT count(*) || ':' || count(*) FILTER (WHERE sandbox IN (SELECT name FROM pgsandbox.sandboxes)) FROM pgsandbox.events");
	is($out, "$expected:$expected", "$who sees exactly the events of its own sandboxes");
}
my $total = sq('SELECT count(*) || \':\' || (SELECT count(*) FROM pgsandbox.event) FROM pgsandbox.sandbox');
($ret, $out, $err) = as_role('ada', 'SELECT count(*) || \':\' || (SELECT count(*) FROM pgsandbox.events) FROM pgsandbox.sandboxes');
is($out, $total, 'an admin sees every sandbox and every event');

# a function of bob's own, cheap enough to be run first, sees only his rows
($ret, $out, $err) = as_role(
	'bob', q{
CREATE FUNCTION pg_temp.peek(text) RETURNS boolean LANGUAGE plpgsql COST 0.0000001 AS
$$ BEGIN RAISE NOTICE 'peek %', $1; RETURN true; END $$;
SELECT count(*) FROM pgsandbox.sandboxes WHERE pg_temp.peek(name);
SELECT count(*) FROM pgsandbox.events WHERE pg_temp.peek(sandbox);
SELECT count(*) FROM pgsandbox.sources WHERE pg_temp.peek(name);
});
is($ret, 0, 'bob runs a leaky function over the views') or diag $err;
my @peeked = $err =~ /peek (\S+)/g;
ok(scalar(grep { $_ eq $bob1 } @peeked), 'the leaky function saw bob\'s own sandbox');
is(join(',', sort grep { $_ ne $bob1 && $_ ne 'app' } @peeked),
	'', 'the leaky function saw no other owner\'s sandbox and no other source');

# the views cannot be written through
for my $dml (
	"UPDATE pgsandbox.sandboxes SET expires_at = now() + interval '100 years'",
	"DELETE FROM pgsandbox.events",
	"INSERT INTO pgsandbox.sources (name) VALUES ('mine')")
{
	refused('bob', $dml, '42501', qr/permission denied for view/, "bob: $dml");
}

# ---------------------------------------------------------------------------
# another owner's sandbox does not exist for bob
# ---------------------------------------------------------------------------

my $alice_exp = sq("SELECT expires_at FROM pgsandbox.sandbox WHERE name = '$alice1'");
my $d1 = refused('bob', "SELECT pgsandbox.drop('$alice1')",
	'42704', qr/sandbox "$alice1" does not exist/, 'bob drops alice\'s sandbox');
my $d2 = refused('bob', "SELECT pgsandbox.drop('sbx_zz9zz9zz')",
	'42704', qr/sandbox "sbx_zz9zz9zz" does not exist/, 'bob drops a sandbox that never was');
s/sbx_\w+/NAME/g for $d1, $d2;
s/LOCATION:.*//s for $d1, $d2;
is($d1, $d2, 'another owner\'s sandbox and a missing one get the same answer');
refused('bob', "SELECT pgsandbox.extend('$alice1', '20 hours')",
	'42704', qr/sandbox "$alice1" does not exist/, 'bob extends alice\'s sandbox');
# nor can he work inside it
for my $call ("run_sql('%s', 'SELECT 1')", "describe_schema('%s')", "schema_diff('%s')")
{
	(my $fn = $call) =~ s/\(.*//;
	my $e_other = refused('bob', 'SELECT pgsandbox.' . sprintf($call, $alice1),
		'42704', qr/sandbox "$alice1" does not exist/, "bob calls $fn on alice's sandbox");
	my $e_none = refused('bob', 'SELECT pgsandbox.' . sprintf($call, 'sbx_zz9zz9zz'),
		'42704', qr/sandbox "sbx_zz9zz9zz" does not exist/, "bob calls $fn on a sandbox that never was");
	s/sbx_\w+/NAME/g for $e_other, $e_none;
	s/LOCATION:.*//s for $e_other, $e_none;
	is($e_other, $e_none, "$fn: another owner's sandbox and a missing one get the same answer");
	($ret, $out, $err) = as_role('alice', 'SELECT pgsandbox.' . sprintf($call, $alice1) . ' IS NOT NULL');
	is($out, 't', "alice calls $fn on her own sandbox") or diag $err;
}
is(status_of($alice1), 'ready:alice', 'alice\'s sandbox is still ready');
is(sq("SELECT expires_at FROM pgsandbox.sandbox WHERE name = '$alice1'"),
	$alice_exp, 'its expiry is unchanged');
($ret, $out, $err) = sandbox_psql($node, $alice1_ci, 'SELECT current_user');
is($out, $alice1, 'alice\'s sandbox still logs in');

# a superuser that SET ROLE bob acts as bob
($ret, $out, $err) = $node->psql('postgres', "SET ROLE bob; SELECT pgsandbox.drop('$alice1')",
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
is(sqlstate($err), '42704', 'a superuser session after SET ROLE bob cannot drop alice\'s sandbox');
is(status_of($alice1), 'ready:alice', '... and it stays ready');

# ... and a sandbox it asks for is bob's
($ret, $out, $err) = $node->psql('postgres', "SET ROLE bob; SELECT name FROM pgsandbox.clone('app')");
is($ret, 0, 'a superuser session after SET ROLE bob clones') or diag $err;
is(status_of($out), 'ready:bob', '... and the sandbox is bob\'s');
is(sq("SELECT (owner_oid = 'bob'::regrole) || ':' || requested_by FROM pgsandbox.sandbox WHERE name = '$out'"),
	'true:bob', '... in the catalog too');

# gc() of a pgsandbox_user reaps its own expired sandboxes only
my ($alice_short) = clone_ok('alice', "'app', ttl => '1 second'", 'alice, a short-lived sandbox');
ok( $node->poll_query_until('postgres',
		"SELECT expires_at < now() FROM pgsandbox.sandbox WHERE name = '$alice_short'"),
	'alice\'s short-lived sandbox expires');
($ret, $out, $err) = as_role('bob', 'SELECT count(*) FROM pgsandbox.gc()');
is($out, '0', 'bob\'s gc() finds nothing to reap');
($ret, $out, $err) = as_role('bob', "SELECT pgsandbox._drop_expired('$alice_short')");
is($out, 'f', 'bob calling _drop_expired() on alice\'s expired sandbox drops nothing') or diag $err;
is(status_of($alice_short), 'ready:alice', 'alice\'s expired sandbox survives bob\'s gc()');
($ret, $out, $err) = as_role('alice', 'SELECT name || \':\' || dropped FROM pgsandbox.gc()');
is($out, "$alice_short:true", 'alice\'s gc() drops it');
is(status_of($alice_short), 'dropped:alice', 'it is dropped');
is(sandbox_leftovers($node, $alice_short), '0|0', 'its database and role are gone');

# an admin that is not a superuser drops and extends anyone's
($ret, $out, $err) = as_role('ada', "SELECT pgsandbox.extend('$bob1', '2 hours') > now()");
is($out, 't', 'an admin extends bob\'s sandbox') or diag $err;
($ret, $out, $err) = as_role('ada', "SELECT pgsandbox.drop('$bob1')");
is($ret, 0, 'an admin drops bob\'s sandbox') or diag $err;
is(status_of($bob1), 'dropped:bob', 'bob\'s sandbox is dropped, still listed as his');
is( sq("SELECT actor FROM pgsandbox.events WHERE sandbox = '$bob1' AND action = 'drop'"),
	'ada', 'the drop event names the admin');

# removing a source: sandboxes made from it stay, new clones are refused
sq("SELECT pgsandbox.remove_source('app')");
is(sq("SELECT count(*) FROM pgsandbox.source_grant WHERE source = 'app'"),
	'0', 'removing a source removes its grants');
refused('alice', "SELECT * FROM pgsandbox.clone('app')",
	'42501', qr/permission denied for source "app"/, 'alice, a removed source');
is(status_of($alice1), 'ready:alice', 'alice\'s sandbox of the removed source stays');

# ---------------------------------------------------------------------------
# quotas
# ---------------------------------------------------------------------------

for my $n (split /\n/, sq("SELECT name FROM pgsandbox.sandbox WHERE status = 'ready'"))
{
	sq("SELECT pgsandbox.drop('$n')");
}
is(sq("SELECT count(*) FROM pgsandbox.sandbox WHERE status IN ('cloning', 'ready')"),
	'0', 'no live sandbox before the quota tests');
sq(q{
SELECT pgsandbox.add_source('app', 'dbname=app');
SELECT pgsandbox.grant_source('app', 'alice');
SELECT pgsandbox.grant_source('app', 'bob');
ALTER SYSTEM SET pgsandbox.max_sandboxes_per_owner = 2;
ALTER SYSTEM SET pgsandbox.max_sandboxes = 3;
SELECT pg_reload_conf();
});
ok($node->poll_query_until('postgres',
		"SELECT current_setting('pgsandbox.max_sandboxes_per_owner') || current_setting('pgsandbox.max_sandboxes')", '23'),
	'the quotas are reloaded');

my ($qa1) = clone_ok('alice', "'app'", 'alice\'s first sandbox under the quota');
my ($qa2) = clone_ok('alice', "'app'", 'alice\'s second sandbox under the quota');
refused('alice', "SELECT * FROM pgsandbox.clone('app')",
	'53400', qr/too many sandboxes for role "alice".*\n.*max_sandboxes_per_owner/,
	'alice\'s third sandbox, over max_sandboxes_per_owner');
my ($qb1) = clone_ok('bob', "'app'", 'bob\'s first sandbox, the third of the cluster');
refused('bob', "SELECT * FROM pgsandbox.clone('app')",
	'53400', qr/too many sandboxes\n.*pgsandbox\.max_sandboxes allows/,
	'bob\'s second sandbox, over max_sandboxes');
refused($su, "SELECT * FROM pgsandbox.clone('app')",
	'53400', qr/too many sandboxes/, 'a superuser\'s clone, over max_sandboxes');

# failed and dropped sandboxes do not count
($ret, $out, $err) = as_role('alice', "SELECT pgsandbox.drop('$qa1')");
is($ret, 0, 'alice drops one of hers') or diag $err;
my ($qa3) = clone_ok('alice', "'app'", 'alice clones again after a drop');
is( sq("SELECT string_agg(requested_by || ':' || status, ',' ORDER BY id) FROM pgsandbox.sandbox"
		  . " WHERE name IN ('$qa1', '$qa2', '$qb1', '$qa3')"),
	'alice:dropped,alice:ready,bob:ready,alice:ready', 'the quota sandboxes are as expected');
is( sq("SELECT count(*) FROM pg_database WHERE datname LIKE 'sbx\\_%'") . '|' .
	  sq("SELECT count(*) FROM pg_roles WHERE rolname LIKE 'sbx\\_%'"),
	'3|3', 'exactly the three live sandboxes have a database and a role');

$session->quit;
$node->stop;
done_testing();
