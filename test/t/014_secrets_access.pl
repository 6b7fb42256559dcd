
# 014_secrets_access.pl: a pgsandbox_user never sees a password it was not
# given, and no one finds one where it should not be.
#
# A source reached as a role with a password (scram in pg_hba.conf) holds a
# million rows, so that a clone with data runs for a few seconds.  While a
# pgsandbox_user's clone of it runs, ps and pg_stat_activity are sampled
# again and again; afterwards the views the user may read (sources,
# sandboxes, events), the error messages of clones that fail (wrong
# password, unreachable source, pg_restore refusing an object), the server
# log (log_statement = all, log_min_messages = debug1) and the files of
# the data directory are searched.  Neither the source's password nor the
# sandbox's (shown once, in the returned conninfo) may appear in any of
# them; of the data files, only pgsandbox.sandbox_secret (owner-only, for
# run_sql) and the WAL may hold the sandbox's.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use File::Find;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;
use Time::HiRes qw(time usleep);

my $su = superuser_name();
my $source_pw = 'SrcPw5Kept9Away';
my $dead_pw = 'DeadPw2Kept7Away';
my $wrong_pw = 'WrongPw3Kept1Away';

my $node = PostgreSQL::Test::Cluster->new('secrets_access');
$node->init;
$node->append_conf('postgresql.conf',
	    "shared_preload_libraries = 'pgsandbox'\n"
	  . "max_worker_processes = 16\n"
	  . "password_encryption = 'scram-sha-256'\n"
	  . "log_statement = all\n"
	  . "log_min_messages = debug1\n"
	  . "pgsandbox.gc_interval = 3600\n");
{
	open my $hba, '>', $node->data_dir . '/pg_hba.conf' or die $!;
	print $hba "local all $su trust\n";
	print $hba "local all alice trust\n";
	print $hba "local all all scram-sha-256\n";
	close $hba;
}
$node->start;

# The statements that carry a password on purpose are the administrator's
# own; PostgreSQL would log them as any statement, so they run with
# log_statement off.  Everything else, pgsandbox's work included, is
# logged.
sub quiet_psql
{
	my ($sql) = @_;
	return $node->safe_psql('postgres', "SET log_statement = 'none'; $sql");
}

$node->safe_psql('postgres', 'CREATE EXTENSION pgsandbox');
quiet_psql("CREATE ROLE srcuser LOGIN PASSWORD '$source_pw'");
$node->safe_psql(
	'postgres', q{
GRANT pg_read_all_data TO srcuser;
CREATE ROLE alice LOGIN IN ROLE pgsandbox_user;
CREATE DATABASE big;
CREATE DATABASE evt;
});
$node->safe_psql('big',
	    'CREATE TABLE big (id int, payload text);'
	  . ' INSERT INTO big SELECT g, md5(g::text) FROM generate_series(1, 1000000) g;');
# an operator family: pg_restore, run as the sandbox role, must fail on it
$node->safe_psql(
	'evt', q{
CREATE TABLE t (id int);
CREATE OPERATOR FAMILY evt_fam USING btree;
});
quiet_psql("SELECT pgsandbox.add_source('sec', 'dbname=big user=srcuser password=$source_pw', true)");
quiet_psql("SELECT pgsandbox.add_source('evt', 'dbname=evt user=srcuser password=$source_pw')");
quiet_psql("SELECT pgsandbox.add_source('wrong', 'dbname=big user=srcuser password=$wrong_pw')");
quiet_psql(
	"SELECT pgsandbox.add_source('dead', 'host=127.0.0.1 port=1 dbname=big user=srcuser password=$dead_pw connect_timeout=2')"
);
$node->safe_psql('postgres',
	"SELECT pgsandbox.grant_source(s, 'alice') FROM unnest(ARRAY['sec', 'evt', 'wrong', 'dead']) s");

# ---------------------------------------------------------------------------
# alice's clone, watched while it runs
# ---------------------------------------------------------------------------

my $watch = $node->background_psql('postgres');
my $t0 = time();
my $h = start_psql($node, 'dbname=postgres user=alice',
	"SELECT name, conninfo FROM pgsandbox.clone('sec', schema_only => false)");
my (@ps, @activity);
my ($saw_dump, $saw_restore, $saw_sessions) = (0, 0, 0);
while (1)
{
	my $ps = `ps -eo args`;
	push @ps, $ps;
	$saw_dump++ if $ps =~ m{(^|/)pg_dump }m;
	$saw_restore++ if $ps =~ m{(^|/)pg_restore }m;
	my $act = $watch->query_safe(
		"SELECT string_agg(a::text, E'\\n') FROM pg_stat_activity a WHERE pid <> pg_backend_pid()");
	push @activity, $act;
	$saw_sessions++ if $act =~ /pg_dump|pg_restore/;
	$h->{run}->pump_nb;
	last unless $h->{run}->pumpable;
	last if time() - $t0 > 240;
	usleep(50_000);
}
my ($ret, $out, $err) = finish_psql($h);
is($ret, 0, 'alice clones the password-protected source with data') or diag $err;
note sprintf('the clone took %.1f s; %d samples', time() - $t0, scalar @ps);
my ($name, $conninfo) = split /\|/, $out, 2;
$name //= 'sbx_none';
$conninfo //= '';
my ($sandbox_pw) = $conninfo =~ /password=([A-Za-z0-9]{32})(?:\s|$)/;
ok(defined $sandbox_pw, 'the returned conninfo carries the sandbox password');
$sandbox_pw //= 'no password returned';
cmp_ok($saw_dump, '>', 1, 'ps showed pg_dump running in more than one sample');
cmp_ok($saw_restore, '>', 1, 'ps showed pg_restore running in more than one sample');
cmp_ok($saw_sessions, '>', 1, 'pg_stat_activity showed the dump and restore sessions in more than one sample');
$watch->quit;

my ($r, $count) = sandbox_psql($node, $conninfo, 'SELECT count(*) FROM big');
is($count, '1000000', 'the sandbox logs in with its password and holds the rows');
like( $node->safe_psql('postgres', "SELECT rolpassword FROM pg_authid WHERE rolname = '$name'"),
	qr/^SCRAM-SHA-256\$/, 'the server keeps only a SCRAM secret of the sandbox password');

# ---------------------------------------------------------------------------
# clones that fail, and what alice can read
# ---------------------------------------------------------------------------

# alice, who is no admin, gets the step that failed and its SQLSTATE, not
# what the servers said; an admin reads that in the sandboxes view
my @errors;
for my $case ([ 'wrong', qr/08006: could not connect to source "wrong"/ ],
	[ 'dead', qr/could not connect to source "dead"/ ],
	[ 'evt', qr/pg_restore into sandbox "sbx_\w+" failed/ ])
{
	my ($source, $re) = @$case;
	($ret, $out, $err) = $node->psql('postgres',
		"SELECT * FROM pgsandbox.clone('$source')",
		extra_params => [ '-U', 'alice', '-v', 'VERBOSITY=verbose' ]);
	like($err, $re, "alice's clone of '$source' fails, naming the step");
	like($err, qr/DETAIL:  What the servers said is shown to administrators only/,
		"alice's clone of '$source' says where the servers' words are");
	push @errors, $err;
}
unlike($errors[0], qr/password authentication/, 'alice does not read what the source said');
unlike($errors[2], qr/operator family/, 'nor what pg_restore said');
my $admin_view = $node->safe_psql('postgres',
	q{SELECT string_agg(error, ' ') FROM pgsandbox.sandboxes WHERE status = 'failed'});
like($admin_view, qr/password authentication failed/, 'an admin reads what the source said in the sandboxes view');
like($admin_view, qr/operator family/, 'and what pg_restore said');
is(sandbox_leftovers($node), '1|1', 'the failed clones left no database or role');

($ret, $out, $err) = $node->psql('postgres',
	    "SELECT row_to_json(s)::text FROM pgsandbox.sources s "
	  . "UNION ALL SELECT row_to_json(s)::text FROM pgsandbox.sandboxes s "
	  . "UNION ALL SELECT row_to_json(e)::text FROM pgsandbox.events e",
	extra_params => [ '-U', 'alice' ]);
is($ret, 0, 'alice reads the sources, sandboxes and events views') or diag $err;
like($out, qr/"user":"srcuser"/, 'the sources view shows the source\'s user');
like($out, qr/"status":"failed".*"error":"could not connect to source \\"wrong\\""/s,
	'the sandboxes view shows alice which step of her clones failed');
unlike($out, qr/password authentication failed/, 'and not what the source said');
my $views = $out;

# ---------------------------------------------------------------------------
# nothing leaked
# ---------------------------------------------------------------------------

my $log = slurp_file($node->logfile);
like($log, qr/sandbox "$name" is ready/, 'the log covers the clone');
like($log, qr/statement: SELECT name, conninfo FROM pgsandbox\.clone\('sec'/, 'the log holds the statements');
for my $secret (
	[ 'the sandbox password', $sandbox_pw ],
	[ 'the source password', $source_pw ],
	[ 'the wrong password', $wrong_pw ],
	[ 'the unreachable source\'s password', $dead_pw ])
{
	my ($what, $pw) = @$secret;
	is(scalar(grep { index($_, $pw) >= 0 } @ps), 0, "ps never showed $what");
	is(scalar(grep { index($_, $pw) >= 0 } @activity), 0, "pg_stat_activity never showed $what");
	is(index($views, $pw), -1, "the views alice reads do not show $what");
	is(scalar(grep { index($_, $pw) >= 0 } @errors), 0, "no error message shows $what");
	is(index($log, $pw), -1, "the server log does not contain $what");
}

# pgsandbox keeps the sandbox password for run_sql in pgsandbox.sandbox_secret
# (README), readable by the extension's owner only
($ret, $out, $err) = $node->psql('postgres', 'SELECT count(*) FROM pgsandbox.sandbox_secret',
	extra_params => [ '-U', 'alice' ]);
like($err, qr/permission denied for table sandbox_secret/, 'alice cannot read pgsandbox.sandbox_secret');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pgsandbox.sandbox_secret k JOIN pgsandbox.sandbox s ON s.id = k.sandbox_id"
		  . " WHERE s.name = '$name' AND k.password = '$sandbox_pw'"),
	'1', 'pgsandbox.sandbox_secret holds the ready sandbox\'s password');
is($node->safe_psql('postgres', 'SELECT count(*) FROM pgsandbox.sandbox_secret'),
	'1', '... and no secret of the failed clones');

# every file of the data directory but that table's and the WAL: the
# sandbox password was written nowhere else (not in another catalog, an
# index, the statistics, a temporary archive)
my %allowed;
for my $rel ('pgsandbox.sandbox_secret', 'pgsandbox.sandbox_secret_pkey')
{
	my $path = $node->safe_psql('postgres', "SELECT pg_relation_filepath('$rel')");
	$allowed{ $node->data_dir . "/$path" } = 1;
}
my $toast = $node->safe_psql('postgres',
	"SELECT coalesce(pg_relation_filepath(reltoastrelid), '') FROM pg_class WHERE oid = 'pgsandbox.sandbox_secret'::regclass");
$allowed{ $node->data_dir . "/$toast" } = 1 if $toast ne '';
$node->stop;
my @hits;
find(
	{
		no_chdir => 1,
		wanted => sub {
			my $f = $File::Find::name;
			return unless -f $f;
			return if $f =~ m{/pg_wal/};
			(my $main_fork = $f) =~ s/(_fsm|_vm|_init)?(\.\d+)?$//;
			return if $allowed{$main_fork};
			open my $fh, '<:raw', $f or return;
			local $/;
			my $data = <$fh>;
			close $fh;
			push @hits, $f if index($data, $sandbox_pw) >= 0;
		}
	},
	$node->data_dir);
is(join(', ', @hits), '', 'no other file of the data directory holds the sandbox password');

done_testing();
