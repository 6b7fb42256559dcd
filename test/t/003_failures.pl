
# 003_failures.pl: clones that fail are reported and leave nothing behind.
#
# Each failure must reach the caller as an error, mark the sandbox 'failed'
# with the reason, log a 'failed' event, and drop the database and role it
# had created.  A password in the source's connection string must appear
# in none of the messages, the catalog, or the server log.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $node = sandbox_node('failures');
my $su = superuser_name();
my $source_pw = 'S3cretSourcePw';

# Run a clone that must fail; check the common outcome and return the
# error text and the catalog row's error column.
sub failed_clone
{
	my ($source, $what, $schema_only) = @_;
	$schema_only //= 'true';
	my $names_sql = "SELECT coalesce(string_agg(name, ','), '') FROM pgsandbox.sandboxes";
	my %before = map { $_ => 1 } split /,/, $node->safe_psql('postgres', $names_sql);

	my ($ret, $out, $err) = $node->psql('postgres',
		"SELECT name FROM pgsandbox.clone('$source', schema_only => $schema_only)");
	isnt($ret, 0, "$what: clone fails");
	is($out, '', "$what: no sandbox is returned");

	my @new = grep { !$before{$_} } split /,/, $node->safe_psql('postgres', $names_sql);
	is(scalar @new, 1, "$what: one sandbox row was recorded");
	my $name = $new[0] // 'sbx_none';
	my ($status, $error) = split /\|/,
	  $node->safe_psql('postgres',
		"SELECT status, coalesce(error, '') FROM pgsandbox.sandboxes WHERE name = '$name'"),
	  2;
	is($status, 'failed', "$what: sandbox is marked failed");
	isnt($error, '', "$what: the failure's reason is recorded");
	is( $node->safe_psql('postgres',
			"SELECT string_agg(action || ':' || actor, ',' ORDER BY at) FROM pgsandbox.events WHERE sandbox = '$name'"),
		"clone:$su,failed:$su",
		"$what: events record the clone and its failure");
	is(sandbox_leftovers($node, $name), '0|0', "$what: its database and role are gone");
	is(sandbox_leftovers($node), '0|0', "$what: no sbx_ database or role exists at all");
	my @left = tmp_entries($node);
	is(scalar @left, 0, "$what: nothing is left in pgsandbox_tmp") or diag "@left";
	ok(wait_until(sub { !processes_matching(qr/\Q$name\E/) }, 10),
		"$what: no process names the sandbox")
	  or diag explain [ processes_matching(qr/\Q$name\E/) ];
	is($node->safe_psql('postgres',
			"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pgsandbox clone'"),
		'0', "$what: no clone worker remains");
	return ($err, $error, $name);
}

# ---------------------------------------------------------------------------
# Unreachable source with a password in its connection string
# ---------------------------------------------------------------------------

# log_statement = all (set by the test framework) would log the administrator's
# own add_source() call with its argument; that is PostgreSQL logging a
# statement, not pgsandbox, so this one statement is kept out of the log.
$node->safe_psql('postgres',
	    "SET log_statement = 'none'; SELECT pgsandbox.add_source('dead',"
	  . " 'host=127.0.0.1 port=1 dbname=x password=$source_pw connect_timeout=2', allow_data => true)"
);
is( $node->safe_psql('postgres',
		"SELECT host, port, dbname FROM pgsandbox.sources WHERE name = 'dead'"),
	'127.0.0.1|1|x', 'unreachable source is listed');

my ($err, $error) = failed_clone('dead', 'unreachable source', 'false');
like($err, qr/could not connect to source "dead"/, 'unreachable source: the error says so');
unlike($err, qr/\Q$source_pw\E/, 'unreachable source: the error does not show the password');
unlike($error, qr/\Q$source_pw\E/, 'unreachable source: the error column does not show the password');
unlike(
	$node->safe_psql('postgres', "SELECT string_agg(coalesce(detail, ''), E'\\n') FROM pgsandbox.events"),
	qr/\Q$source_pw\E/,
	'unreachable source: no event shows the password');

# ---------------------------------------------------------------------------
# pg_restore fails: an operator family, which only a superuser may create
# (event triggers are left out instead: 019_fidelity.pl)
# ---------------------------------------------------------------------------

$node->safe_psql('postgres', 'CREATE DATABASE evt');
$node->safe_psql(
	'evt', q{
CREATE TABLE t (id int PRIMARY KEY);
INSERT INTO t SELECT generate_series(1, 10);
CREATE OPERATOR FAMILY evt_fam USING btree;
});
$node->safe_psql('postgres', "SELECT pgsandbox.add_source('evt', 'dbname=evt', true)");

($err, $error) = failed_clone('evt', 'operator family');
like($err, qr/pg_restore/, 'operator family: the error names pg_restore');
like($err, qr/must be superuser to create an operator family/,
	"operator family: the error shows pg_restore's reason");
like($error, qr/pg_restore/, 'operator family: the error column names pg_restore');

# the same with an extension, so the archive goes through pgsandbox_tmp
$node->safe_psql('postgres', 'CREATE DATABASE evtext');
$node->safe_psql(
	'evtext', q{
CREATE EXTENSION hstore;
CREATE TABLE t (id int PRIMARY KEY, h hstore);
INSERT INTO t SELECT g, hstore('k', g::text) FROM generate_series(1, 10) g;
CREATE OPERATOR FAMILY evt_fam USING btree;
});
$node->safe_psql('postgres', "SELECT pgsandbox.add_source('evtext', 'dbname=evtext', true)");
($err, $error) = failed_clone('evtext', 'operator family with an extension', 'false');
like($err, qr/pg_restore/, 'operator family with an extension: the error names pg_restore');
ok(-d $node->data_dir . '/pgsandbox_tmp',
	'operator family with an extension: the archive went through pgsandbox_tmp');

# ---------------------------------------------------------------------------
# pg_restore fails early while pg_dump still streams rows: the error must
# name pg_restore, whose failure is the cause, not pg_dump, which only lost
# its reader.
# ---------------------------------------------------------------------------

$node->safe_psql('postgres', 'CREATE DATABASE internalfn');
$node->safe_psql(
	'internalfn', q{
CREATE FUNCTION my_abs(int) RETURNS int AS 'int4abs' LANGUAGE internal IMMUTABLE STRICT;
CREATE TABLE big (id int PRIMARY KEY, payload text);
INSERT INTO big SELECT g, repeat(md5(g::text), 4) FROM generate_series(1, 60000) g;
});
$node->safe_psql('postgres',
	"SELECT pgsandbox.add_source('internalfn', 'dbname=internalfn', true)");
($err, $error) = failed_clone('internalfn', 'internal function with data', 'false');
like($err, qr/pg_restore into sandbox/,
	'internal function with data: the error says pg_restore failed');
like($err, qr/permission denied for language internal/,
	"internal function with data: the error shows pg_restore's reason");

# ---------------------------------------------------------------------------
# pg_dump fails: the source role may not read a table
# ---------------------------------------------------------------------------

$node->safe_psql('postgres', 'CREATE DATABASE locked');
$node->safe_psql(
	'locked', q{
CREATE TABLE open_t (id int);
CREATE TABLE closed_t (id int);
REVOKE ALL ON closed_t FROM PUBLIC;
GRANT SELECT ON open_t TO PUBLIC;
});
$node->safe_psql('postgres',
	"SET log_statement = 'none'; CREATE ROLE reader LOGIN PASSWORD 'ReaderPw99'");
$node->safe_psql('postgres',
	    "SET log_statement = 'none'; SELECT pgsandbox.add_source('locked',"
	  . " 'dbname=locked user=reader password=ReaderPw99')");
($err, $error) = failed_clone('locked', 'unreadable table');
like($err, qr/pg_dump of source "locked" failed/, 'unreadable table: the error names pg_dump');
like($err, qr/permission denied for table closed_t/,
	"unreadable table: the error shows pg_dump's reason");
unlike($err . $error, qr/ReaderPw99/, 'unreadable table: the password is not shown');

# ---------------------------------------------------------------------------
# pg_dump cannot be found: bin_dir points to an empty directory
# ---------------------------------------------------------------------------

my $empty = PostgreSQL::Test::Utils::tempdir();
$node->safe_psql('postgres', "ALTER SYSTEM SET pgsandbox.bin_dir = '$empty'");
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
ok(wait_until(sub { $node->safe_psql('postgres', 'SHOW pgsandbox.bin_dir') eq $empty }, 30),
	'bin_dir setting reloaded');

($err, $error) = failed_clone('evt', 'empty bin_dir');
like($err, qr/could not find pg_dump in "\Q$empty\E"/,
	'empty bin_dir: the error says pg_dump could not be found');
like($error, qr/could not find pg_dump/, 'empty bin_dir: the error column says so too');

$node->safe_psql('postgres', 'ALTER SYSTEM RESET pgsandbox.bin_dir');
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
ok(wait_until(sub { $node->safe_psql('postgres', 'SHOW pgsandbox.bin_dir') eq '' }, 30),
	'bin_dir reset');

# ---------------------------------------------------------------------------
# a pg_restore that says much before it fails: its first lines reach the
# caller, each cut where long, and what is left out is counted
# ---------------------------------------------------------------------------

my $noisy = PostgreSQL::Test::Utils::tempdir();
chmod 0755, $noisy;
symlink($node->config_data('--bindir') . '/pg_dump', "$noisy/pg_dump") or die "symlink: $!";
open my $wrapper, '>', "$noisy/pg_restore" or die $!;
print $wrapper "#!/bin/sh\ncat > /dev/null\n"
  . "for i in 1 2 3 4 5 6 7 8 9; do printf 'line %s %0500d\\n' \$i 0 >&2; done\nexit 1\n";
close $wrapper;
chmod 0755, "$noisy/pg_restore";
$node->safe_psql('postgres', 'CREATE DATABASE noisy');
$node->safe_psql('postgres', "SELECT pgsandbox.add_source('noisy', 'dbname=noisy')");
set_bin_dir($node, $noisy);
($err, $error) = failed_clone('noisy', 'a pg_restore that says much');
like($err, qr/pg_restore exited with code 1\.\nline 1 0{293} \[and 207 bytes more, cut\]\n/,
	'a pg_restore that says much: its first line reaches the caller, cut and saying so');
like($err, qr/\nline 6 0{293} \[and 207 bytes more, cut\]\n\(and 3 more lines of pg_restore's output, left out\)/,
	'a pg_restore that says much: six lines, then how many were left out');
unlike($err, qr/line 7/, 'a pg_restore that says much: the seventh line is not shown');
like($error, qr/\(and 3 more lines of pg_restore's output, left out\)/,
	'a pg_restore that says much: the error column counts them too');
set_bin_dir($node, '');

# after all these failures, a clone still works
$node->safe_psql('postgres', 'CREATE DATABASE fine');
$node->safe_psql('fine', 'CREATE TABLE ok_t (id int); INSERT INTO ok_t VALUES (1)');
$node->safe_psql('postgres', "SELECT pgsandbox.add_source('fine', 'dbname=fine', true)");
my ($ret, $out);
($ret, $out, $err) = $node->psql('postgres',
	"SELECT name FROM pgsandbox.clone('fine', schema_only => false)");
is($ret, 0, 'a good clone still succeeds after the failures') or diag $err;
is($node->safe_psql($out || 'postgres', 'SELECT count(*) FROM ok_t'), '1', '... with its row');

# the source passwords never reached the server log
my $log = slurp_file($node->logfile);
unlike($log, qr/\Q$source_pw\E/, 'the server log does not contain the unreachable source\'s password');
unlike($log, qr/ReaderPw99/, 'the server log does not contain the reader\'s password');

$node->stop;
done_testing();
