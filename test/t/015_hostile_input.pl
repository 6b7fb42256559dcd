
# 015_hostile_input.pl: whatever a pgsandbox_user passes, the answer is a
# clear error or safely quoted storage, and nothing changes that should not.
#
# alice (a pgsandbox_user, logged in as herself) throws quotes, semicolons,
# backslashes, dollar quotes, unicode, 10,000-character strings, names of
# databases pgsandbox does not own, other owners' sandboxes, her own
# sandbox's name in upper case or with spaces, bad ttls and labels at
# clone, drop, extend and add_source.  Each refused call must carry the
# documented SQLSTATE and leave pg_database, pg_roles, pgsandbox.sandbox,
# pgsandbox.event, pgsandbox.source and pgsandbox.source_grant exactly as
# they were.  Labels that are accepted must come back unchanged from the
# sandboxes view.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use Encode qw(encode);
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $su = superuser_name();

my $node = PostgreSQL::Test::Cluster->new('hostile');
$node->init(extra => [ '--encoding=UTF8', '--locale=C' ]);
$node->append_conf('postgresql.conf',
	    "shared_preload_libraries = 'pgsandbox'\n"
	  . "max_worker_processes = 16\n"
	  . "password_encryption = 'scram-sha-256'\n"
	  . "pgsandbox.gc_interval = 3600\n"
	  . "pgsandbox.default_ttl = '3h'\n");
{
	open my $hba, '>', $node->data_dir . '/pg_hba.conf' or die $!;
	print $hba "local all $su trust\n";
	print $hba "local all alice,bob,ada trust\n";
	print $hba "local all all scram-sha-256\n";
	close $hba;
}
$node->start;
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION pgsandbox;
CREATE ROLE alice LOGIN IN ROLE pgsandbox_user;
CREATE ROLE bob LOGIN IN ROLE pgsandbox_user;
CREATE ROLE ada LOGIN IN ROLE pgsandbox_admin;
CREATE DATABASE app;
});
$node->safe_psql('app', 'CREATE TABLE t (id int)');
$node->safe_psql(
	'postgres', q{
SELECT pgsandbox.add_source('app', 'dbname=app');
SELECT pgsandbox.grant_source('app', 'alice');
SELECT pgsandbox.grant_source('app', 'bob');
});

my $session = $node->background_psql('postgres', on_error_stop => 0);

sub sq
{
	my ($sql) = @_;
	return $session->query_safe(encode('UTF-8', $sql));
}

sub as_role
{
	my ($role, $sql) = @_;
	return $node->psql('postgres', encode('UTF-8', $sql),
		extra_params => [ '-U', $role, '-v', 'VERBOSITY=verbose' ]);
}

sub sqlstate
{
	my ($err) = @_;
	return $err =~ /(?:ERROR|FATAL):\s+([0-9A-Z]{5}):/ ? $1 : 'none';
}

# SQL dollar-quoted literal of any string without the tag in it
sub lit
{
	my ($s) = @_;
	die "tag in string" if index($s, '$Q$') >= 0;
	return '$Q$' . $s . '$Q$';
}

sub snapshot
{
	return sq(q{
SELECT (SELECT count(*) || ':' || md5(string_agg(datname, ',' ORDER BY oid)) FROM pg_database) || ' | ' ||
       (SELECT count(*) || ':' || md5(string_agg(rolname, ',' ORDER BY oid)) FROM pg_roles) || ' | sandbox ' ||
       (SELECT count(*) || ':' || coalesce(md5(string_agg(s::text, ',' ORDER BY id)), '') FROM pgsandbox.sandbox s) || ' | event ' ||
       (SELECT count(*) || ':' || coalesce(md5(string_agg(e::text, ',' ORDER BY id)), '') FROM pgsandbox.event e) || ' | source ' ||
       (SELECT count(*) || ':' || coalesce(md5(string_agg(s::text, ',' ORDER BY name)), '') FROM pgsandbox.source s) || ' | grant ' ||
       (SELECT count(*) || ':' || coalesce(md5(string_agg(g::text, ',' ORDER BY source, grantee)), '') FROM pgsandbox.source_grant g)});
}

# $sql as $role fails with $state (and a message matching $re) and changes
# nothing
sub refused
{
	my ($role, $sql, $state, $re, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $before = snapshot();
	my ($ret, $out, $err) = as_role($role, $sql);
	is(sqlstate($err), $state, "$what: $state") or diag "ret=$ret out=$out err=" . substr($err, 0, 500);
	like($err, $re, "$what: clear message") if defined $re;
	is(snapshot(), $before, "$what: nothing changed");
}

sub clone_name
{
	my ($role, $args, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my ($ret, $out, $err) = as_role($role, "SELECT name FROM pgsandbox.clone($args)");
	is($ret, 0, "$what: clone succeeds") or diag substr($err, 0, 500);
	return $out;
}

my @nasty = (
	[ 'a quote and a statement', q{x'; DROP DATABASE postgres; --} ],
	[ 'a semicolon', 'a;b' ],
	[ 'a backslash', 'back\\slash\\' ],
	[ 'dollar quotes', '$$ DROP DATABASE app $$' ],
	[ 'a double quote', 'sbx_"x"' ],
	[ 'unicode', "\x{fc}n\x{ef}c\x{f8}d\x{e9}-\x{6e90}-\x{1F600}" ],
	[ '10,000 characters', 'a' x 10000 ],
	[ 'an empty string', '' ]);

# ---------------------------------------------------------------------------
# source names
# ---------------------------------------------------------------------------

for my $n (@nasty, [ 'the granted name in upper case', 'APP' ], [ 'the granted name with a trailing space', 'app ' ])
{
	my ($what, $v) = @$n;
	refused('alice', 'SELECT * FROM pgsandbox.clone(' . lit($v) . ')',
		'42501', qr/permission denied for source/, "alice clones a source named by $what");
}
for my $n (@nasty[ 0, 3, 6 ])
{
	my ($what, $v) = @$n;
	refused($su, 'SELECT * FROM pgsandbox.clone(' . lit($v) . ')',
		'42704', qr/source (".*" )?does not exist/s, "the superuser clones a source named by $what");
	refused('ada', 'SELECT pgsandbox.add_source(' . lit($v) . ", 'dbname=app')",
		'42602', qr/invalid source name/, "an admin adds a source named by $what");
	refused('ada', 'SELECT pgsandbox.remove_source(' . lit($v) . ')',
		'42704', qr/source (".*" )?does not exist/s, "an admin removes a source named by $what");
}
refused('alice', 'SELECT * FROM pgsandbox.clone(NULL)', '22004', qr/source must not be null/, 'alice clones NULL');

# add_source: a pgsandbox_user may not call it at all; an admin gets
# clear errors for strings that are not connection strings
for my $ci (q{dbname=app options='-c default_transaction_read_only=off'},
	'dbname=app dbname=postgres', 'service=pg_service dbname=app', q{dbname=app'; DROP DATABASE postgres; --})
{
	refused('alice', 'SELECT pgsandbox.add_source(\'mine\', ' . lit($ci) . ')',
		'42501', qr/permission denied/, "alice adds a source '$ci'");
}
refused('ada', q{SELECT pgsandbox.add_source('mine', } . lit('dbname=app service=pg_service password=x') . ')',
	'42501', qr/only a superuser may add a source with connection option "service"/,
	'a non-superuser admin adds a source with service');
refused($su, q{SELECT pgsandbox.add_source('mine', } . lit(q{dbname=app'; DROP DATABASE postgres; --}) . ')',
	'22023', qr/invalid source connection string/, 'a conninfo with a quote and a statement');
refused($su, q{SELECT pgsandbox.add_source('mine', } . lit('dbname=' . ('x' x 10000)) . ')',
	'22001', qr/source connection string is too long/, 'a 10,000-character conninfo');
refused($su, q{SELECT pgsandbox.add_source('mine', } . lit('dbname=app nosuchkeyword=1') . ')',
	'22023', qr/invalid connection option "nosuchkeyword"/, 'a conninfo with an unknown keyword');

# a second dbname: what the sources view shows is what is cloned
sq("SELECT pgsandbox.add_source('twodb', 'dbname=postgres dbname=app'); SELECT pgsandbox.grant_source('twodb', 'alice')");
is(sq("SELECT dbname FROM pgsandbox.sources WHERE name = 'twodb'"), 'app', 'with two dbnames the view shows the last');
my ($ret, $out, $err) = as_role('alice', "SELECT name, conninfo FROM pgsandbox.clone('twodb')");
my (undef, $twodb_ci) = split /\|/, $out, 2;
my ($r, $tables) = sandbox_psql($node, $twodb_ci // '', "SELECT string_agg(relname, ',') FROM pg_class WHERE relname = 't' AND relkind = 'r'");
is($tables, 't', '... and the clone copies that database');

# ---------------------------------------------------------------------------
# labels
# ---------------------------------------------------------------------------

my %labels = (
	q => q{x'; DROP DATABASE postgres; --},
	semi => 'a;b',
	bs => 'back\\slash\\',
	dollar => '$$ DROP DATABASE app $$',
	uni => "\x{fc}n\x{ef}c\x{f8}d\x{e9} \x{6e90} \x{1F600}",
	ctl => "tab\tnewline\nquote\"",
	q{k'ey;"} => { nested => [ 'x"y', 1, undef, JSON::PP::true, { '\\' => '$Q' } ] },
	long => 'z' x 3500);
my $labels_json = JSON::PP->new->canonical->encode(\%labels);
# and escapes, as a client may send them
$labels_json =~ s/\}$/, "esc": "\\u00e9\\ud83d\\ude00"}/;
$labels{esc} = "\x{e9}\x{1F600}";
my $lbl_sbx = clone_name('alice', "'app', labels => " . lit($labels_json),
	'labels with quotes, backslashes, dollar quotes, unicode and 3,500 characters');
is(sq("SELECT labels = " . lit($labels_json) . "::jsonb FROM pgsandbox.sandboxes WHERE name = '$lbl_sbx'"),
	't', 'the labels stored equal what was given');
($ret, $out, $err) = as_role('alice', "SELECT labels FROM pgsandbox.sandboxes WHERE name = '$lbl_sbx'");
my $back = eval { JSON::PP->new->utf8->decode($out) };
is_deeply($back, \%labels, 'alice reads them back from the sandboxes view exactly, value by value')
  or diag $err;
is(sq("SELECT count(*) FROM pg_database WHERE datname IN ('postgres', 'app')"), '2', 'postgres and app are still there');

refused('alice', "SELECT * FROM pgsandbox.clone('app', labels => " . lit('{"long": "' . ('a' x 10000) . '"}') . ')',
	'54000', qr/labels are too large/, 'labels with a 10,000-character value');
refused('alice', "SELECT * FROM pgsandbox.clone('app', labels => (SELECT jsonb_object_agg(g::text, repeat('x', 100)) FROM generate_series(1, 10000) g))",
	'54000', qr/labels are too large/, 'labels of 1 MB');
for my $bad ('[]', 'null', '"a string"', '42', '[{"a": 1}]')
{
	refused('alice', "SELECT * FROM pgsandbox.clone('app', labels => '$bad')",
		'22023', qr/labels must be a JSON object/, "labels $bad");
}
refused('alice', "SELECT * FROM pgsandbox.clone('app', labels => NULL)",
	'22004', qr/labels must not be null/, 'labels NULL');

# ---------------------------------------------------------------------------
# ttl
# ---------------------------------------------------------------------------

for my $ttl ('-1 hour', '0', '1000 years', '1 month -30 days', '1 day 1 second', '-178000000 years')
{
	refused('alice', "SELECT * FROM pgsandbox.clone('app', ttl => '$ttl')",
		'22023', qr/ttl must (be positive|not exceed pgsandbox\.max_ttl)/, "clone with ttl '$ttl'");
}
my $default_sbx = clone_name('alice', "'app', ttl => NULL", 'a NULL ttl');
is(sq("SELECT ttl || ' ' || (expires_at - ready_at) FROM pgsandbox.sandbox WHERE name = '$default_sbx'"),
	'03:00:00 03:00:00', 'a NULL ttl means pgsandbox.default_ttl');

for my $ttl ('-1 hour', '0', '1000 years', '1 month -30 days')
{
	refused('alice', "SELECT pgsandbox.extend('$default_sbx', '$ttl')",
		'22023', qr/ttl must (be positive|not exceed pgsandbox\.max_ttl)/, "extend with ttl '$ttl'");
}
refused('alice', "SELECT pgsandbox.extend('$default_sbx', NULL)",
	'22004', qr/ttl must not be null/, 'extend with a NULL ttl');

# the limits are the administrator's: a pgsandbox_user cannot move them
for my $guc ('pgsandbox.max_ttl', 'pgsandbox.max_sandboxes_per_owner', 'pgsandbox.bin_dir')
{
	refused('alice', "SET $guc = 1000", '55P02', qr/cannot be changed now/, "alice sets $guc");
}
refused('alice', "ALTER ROLE alice SET pgsandbox.max_sandboxes_per_owner = 1000",
	'55P02', qr/cannot be changed now/, 'alice sets her own quota on her role');

# ---------------------------------------------------------------------------
# drop and extend of what is not alice's live sandbox
# ---------------------------------------------------------------------------

my $bob_sbx = clone_name('bob', "'app'", 'bob\'s sandbox');
sq('CREATE ROLE sbx_fake0001 LOGIN IN ROLE pgsandbox_sandbox; CREATE DATABASE sbx_fake0001 OWNER sbx_fake0001');

my @not_hers = (
	[ 'postgres', 'postgres' ],
	[ 'template0', 'template0' ],
	[ 'template1', 'template1' ],
	[ 'the source database', 'app' ],
	[ 'a group role', 'pgsandbox_admin' ],
	[ 'bob\'s sandbox', $bob_sbx ],
	[ 'a sandbox-like database pgsandbox did not make', 'sbx_fake0001' ],
	[ 'her sandbox in upper case', uc $default_sbx ],
	[ 'her sandbox with a trailing space', "$default_sbx " ],
	[ 'her sandbox with a leading space', " $default_sbx" ],
	[ 'her sandbox with a newline', "$default_sbx\n" ],
	[ 'her sandbox with a wildcard', 'sbx\_%' ],
	@nasty);
for my $n (@not_hers)
{
	my ($what, $v) = @$n;
	refused('alice', 'SELECT pgsandbox.drop(' . lit($v) . ')',
		'42704', qr/sandbox (".*" )?does not exist/s, "alice drops $what");
	refused('alice', 'SELECT pgsandbox.extend(' . lit($v) . ", '1 hour')",
		'42704', qr/sandbox (".*" )?does not exist/s, "alice extends $what");
}
for my $v ('postgres', 'template1', 'sbx_fake0001', uc $default_sbx, "$default_sbx ")
{
	refused($su, 'SELECT pgsandbox.drop(' . lit($v) . ')',
		'42704', qr/sandbox ".*" does not exist/s, "the superuser drops '$v'");
}
refused('alice', 'SELECT pgsandbox.drop(NULL)', '22004', qr/sandbox name must not be null/, 'alice drops NULL');
refused('alice', 'SELECT * FROM pgsandbox.gc(NULL)', '22004', qr/dry_run must not be null/, 'gc(NULL)');
is(sq("SELECT string_agg(status, ',') FROM pgsandbox.sandbox WHERE name IN ('$default_sbx', '$bob_sbx')"),
	'ready,ready', 'alice\'s and bob\'s sandboxes are still ready');
is(sq("SELECT count(*) FROM pg_database WHERE datname IN ('postgres', 'template0', 'template1', 'app', 'sbx_fake0001', '$default_sbx', '$bob_sbx')"),
	'7', 'every database named is still there');

$session->quit;
$node->stop;
done_testing();
