
# 045_tenant_limits.pl: one sandbox cannot take what every other tenant
# needs (hooks/tenant_limits.c, worker/tenants.c).
#
# On a server of 30 connections, with caps set low: a sandbox at its cap of
# sessions, and one whose clone asked for fewer, are refused more (53300),
# while another owner clones, logs in, prepares a transaction and drops;
# sandbox sessions together at the reserved line are refused, while a clone
# under way completes and an admin logs in; temp_file_limit stops a spill
# and the session goes on, and the role cannot raise it; a sandbox's share
# of prepared transactions, and the worker rolling back one past its age;
# the worker ending a session whose transaction is past its age; the
# settings every new role is given, a name that is no setting refused, and
# one the role cannot raise; refusals written as one event a minute and
# counted in the metrics; doctor()'s count of slots.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $node = sandbox_node('tenants',
	"max_connections = 30\nmax_prepared_transactions = 8\n"
	  . "pgsandbox.max_connections_per_sandbox = 4\n"
	  . "pgsandbox.reserved_connections = 8\n"
	  . "pgsandbox.sandbox_temp_file_limit = '1MB'\n"
	  . "pgsandbox.max_transaction_age = 0\n"
	  . "pgsandbox.max_prepared_age = 0\n"
	  . "pgsandbox.max_sandboxes_per_owner = 20\n");
my $su = superuser_name();

sub sq { return $node->safe_psql('postgres', $_[0]); }

# ALTER SYSTEM SET $setting, reload, and wait until this backend reads
# $expected (by default the value as written, unquoted)
sub reload_with
{
	my ($setting, $expected) = @_;
	sq("ALTER SYSTEM SET $setting");
	sq('SELECT pg_reload_conf()');
	my ($name) = $setting =~ /^(\S+)/;
	if (!defined $expected)
	{
		($expected) = $setting =~ /=\s*(.*)$/;
		$expected =~ s/^'|'$//g;
	}
	ok(wait_until(sub { sq("SELECT current_setting('$name')") eq $expected }), "$name is $expected");
}

sub in_sandbox
{
	my ($conninfo, $sql) = @_;
	my ($ret, $out, $err) = sandbox_psql($node, $conninfo, $sql);
	die "in sandbox: $err" if $ret != 0;
	return $out;
}

# the sessions of role $name now open
sub sessions_of
{
	my ($name) = @_;
	return sq("SELECT count(*) FROM pg_stat_activity WHERE usename = '$name'");
}

# Whether a background psql still runs (a refused login ends it at once).
sub session_alive
{
	my ($h) = @_;
	eval { $h->{run}->pump_nb; };
	return $h->{run}->pumpable;
}

# Open a session of a sandbox that stays until ended; returns its handle
# once it is in (it printed "in") or was refused.  The wait opens no
# connection, so that the slots counted are the test's own sessions only.
sub hold_session
{
	my ($name, $conninfo) = @_;
	my $h = start_psql($node, $conninfo, 'SET statement_timeout = 0', q{SELECT 'in'},
		'SELECT pg_sleep(170)');
	wait_until(sub { !session_alive($h) || $h->{stdout} =~ /^in$/m });
	return $h;
}

sub end_sessions
{
	my ($name, @handles) = @_;
	sq("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '$name'");
	finish_psql($_) for @handles;
	ok(wait_until(sub { sessions_of($name) eq '0' }), "the sessions of $name are gone");
}

$node->safe_psql('postgres', q{
CREATE ROLE bob LOGIN PASSWORD 'bob-pw-4411' IN ROLE pgsandbox_user;
CREATE DATABASE src;});
$node->safe_psql('src', q{CREATE TABLE t (id int PRIMARY KEY, v text);
INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 1000) g;});
sq(q{SELECT pgsandbox.add_source('src', 'dbname=src', allow_data => true);
SELECT pgsandbox.grant_source('src', 'bob');});

sub clone_as
{
	my ($role, $args) = @_;
	$args //= '';
	my $out = $node->safe_psql('postgres',
		"SET ROLE $role; SELECT name, conninfo FROM pgsandbox.clone('src', schema_only => false$args)");
	return split /\|/, $out;
}

my ($a_name, $a_conn) = clone_as($su);
is(in_sandbox($a_conn, 'SELECT count(*) FROM t'), '1000', 'sandbox A is cloned');

# ---------------------------------------------------------------------
# a sandbox at its cap of sessions; another owner is served
# ---------------------------------------------------------------------
my @held;
push @held, hold_session($a_name, $a_conn) for 1 .. 4;
is(sessions_of($a_name), '4', 'A has 4 sessions, its cap');
is(sq("SELECT sessions || '/' || connection_limit FROM pgsandbox.sandboxes WHERE name = '$a_name'"),
	'4/4', 'the sandboxes view shows its sessions and its cap');
my ($ret, $out, $err) = sandbox_psql($node, $a_conn, 'SELECT 1');
isnt($ret, 0, 'a fifth login is refused');
like($err, qr/too many connections for sandbox "$a_name"/, 'naming the sandbox');
like($err, qr/may have 4 \(pgsandbox\.max_connections_per_sandbox\)/, 'and the setting');
is(sessions_of($a_name), '4', 'A still has 4 sessions');
# a burst, as a client retrying in a loop: 20 refusals in all
for (1 .. 19) { sandbox_psql($node, $a_conn, 'SELECT 1'); }

my ($b_name, $b_conn) = clone_as('bob');
is(in_sandbox($b_conn, 'SELECT count(*) FROM t'), '1000', 'another owner clones meanwhile');
is(in_sandbox($b_conn, q{BEGIN; CREATE TABLE two(); PREPARE TRANSACTION 'b1'; SELECT 'prepared'}),
	'prepared', 'and prepares a transaction');
in_sandbox($b_conn, q{ROLLBACK PREPARED 'b1'});
$node->safe_psql('postgres', "SET ROLE bob; SELECT pgsandbox.drop('$b_name')");
is(sq("SELECT status FROM pgsandbox.sandbox WHERE name = '$b_name'"), 'dropped', 'and drops');

# a clone that asked for fewer sessions
my ($c_name, $c_conn) = clone_as('bob', ', connection_limit => 2');
my @c_held = map { hold_session($c_name, $c_conn) } 1 .. 2;
($ret, $out, $err) = sandbox_psql($node, $c_conn, 'SELECT 1');
like($err, qr/too many connections for sandbox "$c_name".*may have 2 \(the connection_limit of its clone\)/s,
	'a clone\'s connection_limit caps it lower');
is(sq("SELECT rolconnlimit FROM pg_roles WHERE rolname = '$c_name'"), '2',
	'the role carries it as its CONNECTION LIMIT');
end_sessions($c_name, @c_held);
($ret, $out, $err) = sandbox_psql($node, $c_conn, "ALTER ROLE $c_name CONNECTION LIMIT 50");
like($err, qr/permission denied/, 'which the role cannot raise');
($ret, $out, $err) = $node->psql('postgres',
	"SELECT * FROM pgsandbox.clone('src', connection_limit => 0)");
like($err, qr/connection_limit must be at least 1/, 'a connection_limit of 0 is refused');

# ---------------------------------------------------------------------
# all sandboxes together at the reserved line
# ---------------------------------------------------------------------
reload_with('pgsandbox.max_connections_per_sandbox = -1');
my $refused_at;
for my $i (1 .. 30)
{
	my $h = hold_session($a_name, $a_conn);
	if (!session_alive($h))
	{
		my ($r, $o, $e) = finish_psql($h);
		$refused_at = $e;
		last;
	}
	push @held, $h;
}
like($refused_at // '', qr/remaining connection slots are reserved for pgsandbox and its callers/,
	'sandbox logins stop at the reserved slots');
my $free = sq(q{SELECT value FROM pgsandbox.metrics WHERE name = 'pgsandbox_connection_slots_free'});
cmp_ok($free, '<=', 8 + 1, "the metrics see the slots at the line ($free free)");
is(sq('SELECT 1'), '1', 'an admin still logs in');
my ($d_name, $d_conn) = clone_as('bob');
ok($d_name =~ /^sbx_/, 'a clone under way is not refused its restore session, and completes');
is(sq("SELECT status FROM pgsandbox.sandbox WHERE name = '$d_name'"), 'ready', 'it is ready');
($ret, $out, $err) = sandbox_psql($node, $d_conn, 'SELECT 1');
like($err, qr/reserved for pgsandbox/, 'but its own login waits for a free slot too');
end_sessions($a_name, @held);
@held = ();
is(in_sandbox($d_conn, 'SELECT count(*) FROM t'), '1000', 'once slots are free, it logs in');
reload_with('pgsandbox.max_connections_per_sandbox = 4');

# ---------------------------------------------------------------------
# temporary files
# ---------------------------------------------------------------------
($ret, $out, $err) = sandbox_psql($node, $a_conn, q{SET work_mem = '64kB';
SELECT count(*) FROM (SELECT g, md5(g::text) FROM generate_series(1, 200000) g ORDER BY 2) s;});
like($err, qr/temporary file size exceeds "?temp_file_limit"? \(1024kB\)/,
	'a sort spilling past temp_file_limit fails with PostgreSQL\'s error');
is(in_sandbox($a_conn, 'SELECT count(*) FROM t'), '1000', 'and the sandbox answers the next query');
($ret, $out, $err) = sandbox_psql($node, $a_conn, q{SET temp_file_limit = '10GB'});
like($err, qr/permission denied to set parameter "temp_file_limit"/, 'the role cannot raise it');
ok(sq("SELECT temp_bytes FROM pgsandbox.sandboxes WHERE name = '$a_name'") > 0,
	'the sandboxes view shows the temporary bytes it wrote');

# ---------------------------------------------------------------------
# prepared transactions
# ---------------------------------------------------------------------
in_sandbox($a_conn, qq{BEGIN; CREATE TABLE p$_(); PREPARE TRANSACTION 'a$_'}) for 1 .. 2;
($ret, $out, $err) = sandbox_psql($node, $a_conn,
	q{BEGIN; CREATE TABLE p3(); PREPARE TRANSACTION 'a3'});
like($err, qr/this sandbox already holds 2 prepared transactions/,
	'a third PREPARE TRANSACTION is refused (a quarter of max_prepared_transactions = 8)');
like($err, qr/pgsandbox\.max_prepared_per_sandbox/, 'naming the setting');
is(sq("SELECT string_agg(gid, ',' ORDER BY gid) FROM pg_prepared_xacts WHERE database = '$a_name'"),
	'a1,a2', 'nothing more was prepared');
is(in_sandbox($d_conn, q{BEGIN; CREATE TABLE x(); PREPARE TRANSACTION 'd1'; SELECT 1}), '1',
	'another sandbox may still prepare');
reload_with("pgsandbox.max_prepared_age = '2s'");
ok(wait_until(sub {
	sq("SELECT count(*) FROM pgsandbox.events WHERE sandbox = '$a_name' AND action = 'prepared_rolled_back'") eq '2' }, 60),
	'the worker logs rolling back the two that grew old');
ok(wait_until(sub { sq("SELECT count(*) FROM pg_prepared_xacts WHERE database IN ('$a_name', '$d_name')") eq '0' }, 60),
	'and they are gone, in both sandboxes');
like(sq("SELECT detail FROM pgsandbox.events WHERE sandbox = '$a_name' AND action = 'prepared_rolled_back' ORDER BY at LIMIT 1"),
	qr/prepared transaction 'a[12]'.*older than pgsandbox\.max_prepared_age/, 'each event names its gid');
reload_with('pgsandbox.max_prepared_age = 0');

# ---------------------------------------------------------------------
# a transaction left open
# ---------------------------------------------------------------------
reload_with("pgsandbox.max_transaction_age = '2s'");
my $open = start_psql($node, $d_conn, 'BEGIN', 'SELECT pg_catalog.txid_current()', 'SELECT pg_sleep(170)');
ok(wait_until(sub {
	sq("SELECT count(*) FROM pgsandbox.events WHERE sandbox = '$d_name' AND action = 'session_ended'") eq '1' }, 60),
	'the worker ends a session whose transaction is past its age');
my ($oret, $oout, $oerr) = finish_psql($open);
isnt($oret, 0, 'the session was terminated');
like(sq("SELECT detail FROM pgsandbox.events WHERE sandbox = '$d_name' AND action = 'session_ended'"),
	qr/its transaction was open since .* longer than pgsandbox\.max_transaction_age/, 'the event says why');
is(in_sandbox($d_conn, 'SELECT 1'), '1', 'a new session works');
reload_with('pgsandbox.max_transaction_age = 0');

# ---------------------------------------------------------------------
# the settings every new sandbox role gets
# ---------------------------------------------------------------------
($ret, $out, $err) = $node->psql('postgres',
	q{ALTER SYSTEM SET pgsandbox.sandbox_settings = 'no_such_setting = 1'});
like($err, qr/invalid value for parameter "pgsandbox.sandbox_settings".*"no_such_setting" is not a setting of this server/s,
	'a name that is no setting is refused');
($ret, $out, $err) = $node->psql('postgres',
	q{ALTER SYSTEM SET pgsandbox.sandbox_settings = 'statement_timeout'});
like($err, qr/is not of the form name = value/, 'so is an item without a value');
reload_with(q{pgsandbox.sandbox_settings = 'statement_timeout = ''3s'', work_mem = ''2MB'''},
	q{statement_timeout = '3s', work_mem = '2MB'});
my ($e_name, $e_conn) = clone_as('bob');
is(in_sandbox($e_conn, 'SHOW statement_timeout') . ' ' . in_sandbox($e_conn, 'SHOW work_mem'),
	'3s 2MB', 'a new sandbox role has the listed settings');
is(in_sandbox($e_conn, q{SET statement_timeout = '1h'; SHOW statement_timeout}), '1h',
	'it may change one any user may set');
is(in_sandbox($e_conn, 'SHOW temp_file_limit'), '1MB', 'and has pgsandbox\'s temp_file_limit');
is(in_sandbox($a_conn, 'SHOW statement_timeout'), '0', 'an existing sandbox keeps what it had');
sq("SELECT * FROM pgsandbox.reset('$a_name', 'start')");
is(in_sandbox($a_conn, 'SHOW statement_timeout'), '3s', 'until it is reset');
reload_with(q{pgsandbox.sandbox_settings = ''}, '');

# ---------------------------------------------------------------------
# refusals: one event a minute per sandbox, and the metrics
# ---------------------------------------------------------------------
# another burst against A's cap
@held = map { hold_session($a_name, $a_conn) } 1 .. 4;
for (1 .. 10) { sandbox_psql($node, $a_conn, 'SELECT 1'); }
end_sessions($a_name, @held);
# every refusal so far: A's cap 20 + 10, C's 1; the reserve: A's 1, D's 1;
# A's third PREPARE TRANSACTION
ok(wait_until(sub {
	sq(q{SELECT string_agg(labels ->> 'limit' || '=' || value, ',' ORDER BY labels ->> 'limit')
		   FROM pgsandbox.metrics WHERE name = 'pgsandbox_refusals_total'})
	  eq 'prepared_transactions=1,reserved_slots=2,sandbox_sessions=31' }, 150),
	'the metrics count every refusal, by cap');
my @refused = split /\n/, sq("SELECT extract(epoch FROM at)::int || ' ' || detail FROM pgsandbox.events"
	  . " WHERE sandbox = '$a_name' AND action = 'refused' ORDER BY at");
my ($logins, $cap, $reserve, $close) = (0, 0, 0, 0);
for my $i (0 .. $#refused)
{
	my ($at, $detail) = $refused[$i] =~ /^(\d+) (.*)$/;
	$logins += $1 if $detail =~ /^(\d+) logins? refused/;
	$cap += $1 if $detail =~ /(\d+) past its cap of sessions/;
	$reserve += $1 if $detail =~ /(\d+) in the slots reserved/;
	$close++ if $i > 0 && $at - ($refused[ $i - 1 ] =~ /^(\d+)/)[0] < 59;
}
is("$logins/$cap/$reserve", '31/30/1', 'A\'s events count its 31 refused logins, 30 at its cap and 1 at the reserve');
cmp_ok(scalar(@refused), '<', 31, 'in fewer events than refusals (' . scalar(@refused) . ')');
is($close, 0, 'no two of them within a minute');
like($refused[0], qr/pgsandbox\.max_connections_per_sandbox = 4/, 'naming the setting');

# ---------------------------------------------------------------------
# doctor()
# ---------------------------------------------------------------------
is(sq(q{SELECT ok FROM pgsandbox.doctor() WHERE "check" = 'max_connections holds the reserved slots and the clones'}),
	't', 'doctor(): 30 connections hold the reserve and the clones');
reload_with('pgsandbox.reserved_connections = 25');
like(sq(q{SELECT ok || ' ' || detail FROM pgsandbox.doctor() WHERE "check" = 'max_connections holds the reserved slots and the clones'}),
	qr/^false max_connections is 30; \d+ are needed/, 'and says when they do not fit');

$node->stop;
done_testing();
