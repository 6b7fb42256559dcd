# 029_protection.pl: protect() and unprotect().
#
# The reaper runs every second.  A protected sandbox outlives its expiry,
# the reaper and gc(), and is reaped once its protection ends; unprotect()
# ends it at once; drop() still drops it.  Only the owner or an admin may
# protect a sandbox, and not beyond pgsandbox.max_protect; each call is an
# event.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;
use Time::HiRes qw(time sleep);

my $su = superuser_name();
my $node = sandbox_node('protect', "pgsandbox.gc_interval = 1\n");
$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql('app', 'CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t SELECT generate_series(1, 10)');
$node->safe_psql('postgres', q{
SELECT pgsandbox.add_source('app', 'dbname=app');
CREATE ROLE alice LOGIN PASSWORD 'AlicePw123' IN ROLE pgsandbox_user;
CREATE ROLE bob LOGIN PASSWORD 'BobPw12345' IN ROLE pgsandbox_user;
SELECT pgsandbox.grant_source('app', 'alice');
SELECT pgsandbox.grant_source('app', 'bob');
});

# SQL as alice or bob: (exit code, stdout, stderr), with SQLSTATEs
sub as_user
{
	my ($user, $sql) = @_;
	my %pw = (alice => 'AlicePw123', bob => 'BobPw12345');
	return sandbox_psql($node, "dbname=postgres user=$user password=$pw{$user}",
		"\\set VERBOSITY verbose\n$sql");
}

sub as_alice
{
	my ($ret, $out, $err) = as_user('alice', $_[0]);
	die "as alice: $err" if $ret != 0;
	return $out;
}

sub sq { return $node->safe_psql('postgres', $_[0]); }

sub events_of
{
	my ($name) = @_;
	return sq("SELECT string_agg(action || ':' || actor, ',' ORDER BY at) FROM pgsandbox.events WHERE sandbox = '$name'");
}

sub clone_ttl
{
	return as_alice("SELECT name FROM pgsandbox.clone('app', ttl => '$_[0]')");
}

# a protected sandbox outlives its expiry, the reaper and gc()
my $a = clone_ttl('2 seconds');
# protected well past its expiry and the checks below, which a slow machine may stretch
my $until = as_alice("SELECT pgsandbox.protect('$a', now() + interval '12 seconds')");
is(sq("SELECT protected_until = '$until' FROM pgsandbox.sandboxes WHERE name = '$a'"), 't',
	'protect() returns the moment, and the sandboxes view shows it');
is(events_of($a), 'clone:alice,ready:alice,protect:alice', 'protect() is an event');
like(sq("SELECT detail FROM pgsandbox.events WHERE sandbox = '$a' AND action = 'protect'"),
	qr/^protected until /, 'which says until when');

my ($ret, $out, $err) = as_user('bob', "SELECT pgsandbox.protect('$a', now() + interval '1 hour')");
like($err, qr/42704: sandbox "$a" does not exist/, 'another pgsandbox_user cannot protect it');
($ret, $out, $err) = as_user('bob', "SELECT pgsandbox.unprotect('$a')");
like($err, qr/42704: sandbox "$a" does not exist/, 'nor unprotect it');
($ret, $out, $err) = as_user('alice', "SELECT pgsandbox.protect('$a', now() + interval '8 days')");
like($err, qr/22023: protection must not last longer than pgsandbox.max_protect/,
	'protection beyond pgsandbox.max_protect is refused');
is(sq("SELECT protected_until = '$until' FROM pgsandbox.sandboxes WHERE name = '$a'"), 't',
	'and changes nothing');

my $expiry = sq("SELECT extract(epoch FROM expires_at) FROM pgsandbox.sandboxes WHERE name = '$a'");
my $wait = $expiry + 0.5 - time();
sleep($wait) if $wait > 0;
is(sq(q{SELECT count(*) FROM pgsandbox.gc()}), '0', 'gc() leaves the expired, protected sandbox out');
# a few passes of the reaper (every second) after its expiry
$wait = $expiry + 2.5 - time();
sleep($wait) if $wait > 0;
is(sq("SELECT status FROM pgsandbox.sandboxes WHERE name = '$a'"), 'ready',
	'the protected sandbox outlives its expiry and the reaper');
is(poll_value($node, "SELECT status FROM pgsandbox.sandboxes WHERE name = '$a'", 'dropped', 30),
	'dropped', 'once its protection ends, the reaper drops it');
is(sq("SELECT dropped_at >= protected_until FROM pgsandbox.sandboxes WHERE name = '$a'"), 't',
	'after the protection\'s end');
is(events_of($a), 'clone:alice,ready:alice,protect:alice,expire:pgsandbox worker',
	'as an expiry');
is(sandbox_leftovers($node, $a), '0|0', 'with its database and role');

# unprotect() ends the protection at once
# long enough for protect() to come before the reaper
my $b = clone_ttl('5 seconds');
as_alice("SELECT pgsandbox.protect('$b', now() + interval '1 hour')");
as_alice("SELECT pgsandbox.unprotect('$b')");
is(sq("SELECT protected_until IS NULL FROM pgsandbox.sandboxes WHERE name = '$b'"), 't',
	'unprotect() clears the protection');
is(poll_value($node, "SELECT status FROM pgsandbox.sandboxes WHERE name = '$b'", 'dropped', 20),
	'dropped', 'and the reaper drops the sandbox at its expiry');
is(events_of($b), 'clone:alice,ready:alice,protect:alice,unprotect:alice,expire:pgsandbox worker',
	'both calls are events');

# drop() by its owner still drops a protected sandbox; an admin may protect
my $c = clone_ttl('1 hour');
sq("SELECT pgsandbox.protect('$c', now() + interval '1 day')");
is(events_of($c), "clone:alice,ready:alice,protect:$su", 'an admin may protect another\'s sandbox');
as_alice("SELECT pgsandbox.drop('$c')");
is(sq("SELECT status FROM pgsandbox.sandboxes WHERE name = '$c'"), 'dropped',
	'drop() by its owner drops a protected sandbox');
is(sandbox_leftovers($node, $c), '0|0', 'with its database and role');

$node->stop;
done_testing();
