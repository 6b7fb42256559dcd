
# 012_doctor.pl: pgsandbox.doctor() finds what an administrator must fix.
#
# A healthy node passes every check.  Then each check that can be made to
# fail is made to fail, one at a time, and must say so (with the others
# still passing) and recover when the cause is removed: a source that
# cannot be reached or refuses its password, pgsandbox.bin_dir without
# pg_dump and pg_restore, pg_hba.conf lines that let sandbox roles in
# without a password, a database owned by a sandbox role behind
# pgsandbox's back, a ready sandbox whose database was dropped by hand,
# max_worker_processes too low for max_concurrent_clones, a worker that
# cannot start, and pgsandbox missing from shared_preload_libraries.
# Details never show a source's password.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use File::Temp qw(tempdir);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $su = superuser_name();
my $reader_pw = 'ReaderPw4Doc';
my $dead_pw = 'DeadPw8Doc';
my $wrong_pw = 'WrongPw6Doc';

my $node = PostgreSQL::Test::Cluster->new('doctor');
$node->init;
$node->append_conf('postgresql.conf',
	    "shared_preload_libraries = 'pgsandbox'\n"
	  . "max_worker_processes = 16\n"
	  . "password_encryption = 'scram-sha-256'\n"
	  . "pgsandbox.gc_interval = 3600\n");
my $hba_file = $node->data_dir . '/pg_hba.conf';
my @good_hba = ("local all $su trust", 'local all all scram-sha-256');

sub write_hba
{
	my (@lines) = @_;
	open my $hba, '>', $hba_file or die $!;
	print $hba "$_\n" for @lines;
	close $hba;
}
write_hba(@good_hba);
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION pgsandbox');

# doctor() as a hash: check => "ok|detail"
sub doctor
{
	my ($role) = @_;
	my $sql = "SELECT string_agg(\"check\" || E'\\t' || ok || E'\\t' || detail, E'\\n' ORDER BY \"check\") FROM pgsandbox.doctor()";
	$sql = "SET ROLE $role; $sql" if defined $role;
	my %d;
	for my $line (split /\n/, $node->safe_psql('postgres', $sql))
	{
		my ($check, $ok, $detail) = split /\t/, $line, 3;
		$d{$check} = { ok => $ok, detail => $detail };
	}
	return \%d;
}

# names of the failing checks but those in @except, sorted
sub failing
{
	my ($d, @except) = @_;
	my %skip = map { $_ => 1 } @except;
	return join(', ', sort grep { !$skip{$_} && $d->{$_}{ok} ne 'true' } keys %$d);
}

# Wait until every check in @failing fails and every check in @passing
# passes (settings reach backends after a reload); returns doctor()'s rows.
sub doctor_until
{
	my ($failing, $passing) = @_;
	my $d;
	wait_until(
		sub {
			$d = doctor();
			return 0 if grep { ($d->{$_}{ok} // '') ne 'false' } @$failing;
			return 0 if grep { ($d->{$_}{ok} // '') ne 'true' } @$passing;
			return 1;
		},
		20);
	return $d;
}

# The check $check fails and every other passes.
sub only_failing
{
	my ($d, $check, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	is($d->{$check}{ok}, 'false', "$what: \"$check\" fails");
	is(failing($d, $check), '', "$what: every other check passes");
}

$node->safe_psql('postgres', "SET log_statement = 'none'; CREATE ROLE reader LOGIN PASSWORD '$reader_pw'");
$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql('src', 'CREATE TABLE t (id int); GRANT SELECT ON t TO reader');
$node->safe_psql('postgres',
	"SELECT pgsandbox.add_source('src', 'dbname=src user=reader password=$reader_pw')");
my ($kept) = split /\|/, $node->safe_psql('postgres', "SELECT name, conninfo FROM pgsandbox.clone('src')");
my ($doomed) = split /\|/, $node->safe_psql('postgres', "SELECT name, conninfo FROM pgsandbox.clone('src')");
is(sandbox_leftovers($node), '2|2', 'two sandboxes made');

# ---------------------------------------------------------------------------
# healthy
# ---------------------------------------------------------------------------

my $d = doctor_until([], ['worker running']);
is(failing($d), '', 'a healthy node passes every check');
is( join(', ', sort keys %$d),
	join(', ',
		sort 'loaded at server start',
		'worker running',
		'max_worker_processes',
		'pg_dump found',
		'pg_restore found',
		'source "src" can be dumped',
		'source "src" is not read as a superuser',
		'max_connections holds the reserved slots and the clones',
		'no database directory is orphaned',
		'pg_hba.conf asks sandbox roles for their password',
		'every sandbox database is tracked',
		'every ready sandbox has its database',
		'every sandbox role is tracked',
		'every snapshot is locked',
		'pools are full',
		'no step is blocked'),
	'doctor() runs every check');
# the source is the test's own server, whatever its major
my $major = $node->pg_version->major;
like($d->{'source "src" can be dumped'}{detail}, qr/runs PostgreSQL \Q$major\E\b/, 'the source\'s server version is read');
like($d->{'pg_dump found'}{detail}, qr{/pg_dump, version \Q$major\E\b}, 'pg_dump\'s version is read');
unlike(join("\n", map { $_->{detail} } values %$d), qr/\Q$reader_pw\E/, 'no detail shows the source\'s password');

$node->safe_psql('postgres', 'CREATE ROLE ada LOGIN IN ROLE pgsandbox_admin; CREATE ROLE ann LOGIN IN ROLE pgsandbox_user');
my $as_ada = doctor('ada');
is(join(', ', map { "$_=$as_ada->{$_}{ok}" } sort keys %$as_ada),
	join(', ', map { "$_=$d->{$_}{ok}" } sort keys %$d),
	'an admin that is not a superuser runs doctor() too, with the same results');
my ($ret, $out, $err) = $node->psql('postgres', 'SET ROLE ann; SELECT * FROM pgsandbox.doctor()');
like($err, qr/permission denied for function doctor/, 'a pgsandbox_user may not run doctor()');

# ---------------------------------------------------------------------------
# sources that cannot be dumped
# ---------------------------------------------------------------------------

$node->safe_psql('postgres',
	    "SET log_statement = 'none';"
	  . "SELECT pgsandbox.add_source('dead', 'host=127.0.0.1 port=1 dbname=src user=reader password=$dead_pw');"
	  . "SELECT pgsandbox.add_source('wrongpw', 'dbname=src user=reader password=$wrong_pw');");
$d = doctor();
is($d->{'source "dead" can be dumped'}{ok} . $d->{'source "wrongpw" can be dumped'}{ok}, 'falsefalse',
	'sources that cannot be reached or refuse their password fail their checks');
is(failing($d, 'source "dead" can be dumped', 'source "wrongpw" can be dumped'), '',
	'... and every other check passes');
like($d->{'source "dead" can be dumped'}{detail}, qr/^Cannot connect: .*(refused|127\.0\.0\.1)/,
	'an unreachable source: the detail says it cannot connect');
like($d->{'source "wrongpw" can be dumped'}{detail}, qr/password authentication failed for user "reader"/,
	'a source with a wrong password: the detail says so');
unlike(join("\n", map { $_->{detail} } values %$d), qr/\Q$dead_pw\E|\Q$wrong_pw\E|\Q$reader_pw\E/,
	'no detail shows a source\'s password');
$node->safe_psql('postgres', "SELECT pgsandbox.remove_source('dead'); SELECT pgsandbox.remove_source('wrongpw')");

# ---------------------------------------------------------------------------
# bin_dir without pg_dump and pg_restore
# ---------------------------------------------------------------------------

my $empty = tempdir(CLEANUP => 1);
$node->safe_psql('postgres', "ALTER SYSTEM SET pgsandbox.bin_dir = '$empty'; SELECT pg_reload_conf()");
$d = doctor_until([ 'pg_dump found', 'pg_restore found' ], []);
is($d->{'pg_dump found'}{ok} . $d->{'pg_restore found'}{ok}, 'falsefalse',
	'bin_dir without the programs: pg_dump found and pg_restore found fail');
is(failing($d, 'pg_dump found', 'pg_restore found'), '', '... and every other check passes');
like($d->{'pg_dump found'}{detail}, qr/^\Q$empty\E\/pg_dump is not an executable file; set pgsandbox\.bin_dir/,
	'... naming the path it looked at');

# what doctor() warns of: a clone now fails and leaves nothing
($ret, $out, $err) = $node->psql('postgres', "SELECT name FROM pgsandbox.clone('src')");
isnt($ret, 0, 'with the programs missing a clone fails');
is(sandbox_leftovers($node), '2|2', '... and leaves no database or role');

$node->safe_psql('postgres', 'ALTER SYSTEM RESET pgsandbox.bin_dir; SELECT pg_reload_conf()');
$d = doctor_until([], [ 'pg_dump found', 'pg_restore found' ]);
is($d->{'pg_dump found'}{ok} . $d->{'pg_restore found'}{ok}, 'truetrue', 'bin_dir reset: the programs are found again');

# ---------------------------------------------------------------------------
# pg_hba.conf (doctor() reads the file, as pg_hba_file_rules does)
# ---------------------------------------------------------------------------

my $hba_check = 'pg_hba.conf asks sandbox roles for their password';
for my $case (
	[ 'local all all trust', 1 ],
	[ 'local all +pgsandbox_sandbox trust', 1 ],
	[ 'local all sbx_abcd1234 trust', 1 ],
	[ 'host all all 0.0.0.0/0 trust', 1 ],
	[ 'local all reader,all trust', 1 ],
	[ 'local all reader trust', 0 ],
	[ 'local all +pgsandbox_sandbox scram-sha-256', 0 ],
	[ 'local all all peer', 0 ],
	[ 'local all all bogus-method', 1 ])
{
	my ($line, $bad) = @$case;
	write_hba($good_hba[0], $line, $good_hba[1]);
	$d = doctor();
	is($d->{$hba_check}{ok}, $bad ? 'false' : 'true', "pg_hba.conf line '$line': " . ($bad ? 'flagged' : 'not flagged'));
	like($d->{$hba_check}{detail}, qr/^line 2 /, '... naming line 2') if $bad;
}

# pg_hba.conf is read top down: the first line that matches decides
for my $case (
	[ [ 'local all +pgsandbox_sandbox scram-sha-256', 'local all all trust' ], 0 ],
	[ [ 'local all all trust', 'local all +pgsandbox_sandbox scram-sha-256' ], 1 ],
	[ [ 'local all all md5', 'local all +pgsandbox_sandbox trust' ], 0 ],
	[ [ 'local all +pgsandbox_sandbox reject', 'local all all trust' ], 0 ],
	[ [ 'local src +pgsandbox_sandbox scram-sha-256', 'local all all trust' ], 1 ],
	[ [ 'local all +pgsandbox_sandbox scram-sha-256', 'host all all 127.0.0.1/32 trust' ], 1 ],
	[ [ 'host all all 0.0.0.0/0 scram-sha-256', 'host all all 127.0.0.1/32 trust' ], 1 ],
	[ [ 'host all all 127.0.0.1/32 scram-sha-256', 'host all all 127.0.0.1/32 trust' ], 0 ],
	[ [ 'local all +pgsandbox_sandbox peer', 'local all all trust' ], 1 ])
{
	my ($lines, $bad) = @$case;
	write_hba($good_hba[0], @$lines, $good_hba[1]);
	$d = doctor();
	is($d->{$hba_check}{ok}, $bad ? 'false' : 'true',
		"pg_hba.conf '" . join(' / ', @$lines) . "': " . ($bad ? 'flagged' : 'not flagged'));
}

# a pg_hba.conf of before 0.12, which lets local roles in by peer only: a
# clone read as pgsandbox_reader fails, and its error names the line to add
write_hba($good_hba[0], 'local all +pgsandbox_sandbox scram-sha-256', 'local all all peer');
$node->reload;
$node->safe_psql('postgres', "SELECT pgsandbox.add_source('bypeer', 'dbname=src')");
($ret, $out, $err) = $node->psql('postgres', "SELECT pgsandbox.clone('bypeer')");
like($err, qr/could not connect to source "bypeer"/, 'a pg_hba.conf without the reader\'s line: the clone fails');
like($err, qr/pg_hba\.conf needs a line "local all pgsandbox_reader scram-sha-256" above any line that matches every role/,
	'and its error names the line to add');
is($node->safe_psql('postgres',
		"SELECT error ~ 'local all pgsandbox_reader scram-sha-256' FROM pgsandbox.sandboxes WHERE source = 'bypeer'"),
	't', 'so does the sandbox\'s recorded error');
write_hba($good_hba[0], 'local all +pgsandbox_sandbox scram-sha-256', 'local all pgsandbox_reader scram-sha-256',
	'local all all peer');
$node->reload;
($ret, $out, $err) = $node->psql('postgres', "SELECT name FROM pgsandbox.clone('bypeer')");
is($ret, 0, 'with the line added, it clones') or diag $err;
$node->safe_psql('postgres', "SELECT pgsandbox.drop('$out')") if $ret == 0;
$node->safe_psql('postgres', "SELECT pgsandbox.remove_source('bypeer')");
write_hba(@good_hba);
$node->reload;

# ---------------------------------------------------------------------------
# databases of sandbox roles that pgsandbox does not know
# ---------------------------------------------------------------------------

$node->safe_psql('postgres', "CREATE DATABASE orphan_db OWNER $kept");
$d = doctor();
only_failing($d, 'every sandbox database is tracked', 'a database made for a sandbox role by hand');
like($d->{'every sandbox database is tracked'}{detail}, qr/: orphan_db\. /, '... by name');

$node->safe_psql('postgres',
	'CREATE ROLE sbx_rogue1 LOGIN IN ROLE pgsandbox_sandbox; CREATE DATABASE sbx_rogue1 OWNER sbx_rogue1');
$d = doctor();
like($d->{'every sandbox database is tracked'}{detail}, qr/: orphan_db, sbx_rogue1\. /,
	'a sandbox-like database and role made by hand are flagged too');
($ret, $out, $err) = $node->psql('postgres', "SELECT pgsandbox.drop('sbx_rogue1')");
like($err, qr/sandbox "sbx_rogue1" does not exist/, 'pgsandbox refuses to drop what it did not make');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_database WHERE datname = 'sbx_rogue1'"),
	'1', '... and the database is still there');
$node->safe_psql('postgres', 'DROP DATABASE orphan_db');
$node->safe_psql('postgres', 'DROP DATABASE sbx_rogue1');
$node->safe_psql('postgres', 'DROP ROLE sbx_rogue1');
is(failing(doctor()), '', 'once they are dropped every check passes');
is(doctor()->{'every sandbox database is tracked'}{ok}, 'true', '... the database check included');

# ---------------------------------------------------------------------------
# a ready sandbox whose database was dropped by hand; too few worker
# processes
# ---------------------------------------------------------------------------

$node->safe_psql('postgres', "DROP DATABASE $doomed WITH (FORCE)");
$d = doctor();
only_failing($d, 'every ready sandbox has its database', 'a ready sandbox without its database');
like($d->{'every ready sandbox has its database'}{detail}, qr/: \Q$doomed\E\. /, '... by name');

# at the restart the worker finishes the drop
$node->append_conf('postgresql.conf', "max_worker_processes = 2\n");
$node->restart;
is(poll_value($node, "SELECT status FROM pgsandbox.sandboxes WHERE name = '$doomed'", 'dropped'),
	'dropped', 'after a restart the worker marks it dropped');
$d = doctor_until([], [ 'every ready sandbox has its database', 'worker running' ]);
only_failing($d, 'max_worker_processes', 'max_worker_processes = 2 with max_concurrent_clones = 2');
like($d->{max_worker_processes}{detail}, qr/max_worker_processes is 2; 4 are needed/, '... with what is needed');

# with one clone at a time, doctor()'s verdict must match what happens:
# the logical replication launcher takes a worker slot too
$node->safe_psql('postgres', 'ALTER SYSTEM SET pgsandbox.max_concurrent_clones = 1; SELECT pg_reload_conf()');
ok($node->poll_query_until('postgres', "SELECT current_setting('pgsandbox.max_concurrent_clones')", '1'),
	'max_concurrent_clones = 1 reloaded');
$d = doctor();
my $left = sandbox_leftovers($node);
($ret, $out, $err) = $node->psql('postgres', "SELECT name FROM pgsandbox.clone('src')");
my $verdict = $d->{max_worker_processes}{ok};
is($verdict, $ret == 0 ? 'true' : 'false',
	'max_worker_processes = 2, max_concurrent_clones = 1: doctor() passes the check exactly when a clone can start')
  or diag "doctor: $d->{max_worker_processes}{detail}\nclone: " . ($ret == 0 ? 'succeeded' : $err);
$node->safe_psql('postgres', "SELECT pgsandbox.drop('$out')") if $ret == 0;
is(sandbox_leftovers($node), $left, '... and a clone that could not start left nothing');

# ---------------------------------------------------------------------------
# a worker that cannot start; pgsandbox not preloaded
# ---------------------------------------------------------------------------

$node->append_conf('postgresql.conf', "pgsandbox.database = 'nosuchdb'\nmax_worker_processes = 16\n");
$node->restart;
$node->wait_for_log(qr/database "nosuchdb" does not exist/);
$d = doctor();
only_failing($d, 'worker running', 'a worker that cannot connect to its database');
like($d->{'worker running'}{detail}, qr/No pgsandbox worker runs for database "nosuchdb"/, '... naming the database');

$node->append_conf('postgresql.conf', "shared_preload_libraries = ''\npgsandbox.database = 'postgres'\n");
$node->restart;
($ret, $out, $err) = $node->psql('postgres',
	"SELECT \"check\" || '=' || ok || ': ' || detail FROM pgsandbox.doctor()");
is($out,
	'loaded at server start=false: pgsandbox is not in shared_preload_libraries: add it and restart the server.',
	'without shared_preload_libraries doctor() says so, and only that')
  or diag $err;

$node->stop;
done_testing();
