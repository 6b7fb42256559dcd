
# 013_nonsuperuser_admin.pl: sources added by an admin that is not a
# superuser cannot borrow the server's identity.
#
# Such a source must carry a password and no keyword that makes the server
# read one of its files (service, passfile, sslcert, sslkey, sslrootcert,
# sslcrl, sslcrldir), in keyword/value and URI form; a pgsandbox_user may
# not add sources at all.  At clone time its connection must really have
# used the password: with pg_hba.conf trusting the source's role (so the
# password is never asked) the clone fails with "did not use its password"
# and leaves no database or role, whoever asks; once pg_hba.conf asks for
# the password, the same source clones, and a wrong password fails.  A
# superuser's source may rely on the server's identity.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use IO::Socket::UNIX;
use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $su = superuser_name();
my $reader_pw = 'ReaderPw3Adm';

my $node = PostgreSQL::Test::Cluster->new('nsadmin');
$node->init;
$node->append_conf('postgresql.conf',
	    "shared_preload_libraries = 'pgsandbox'\n"
	  . "max_worker_processes = 16\n"
	  . "password_encryption = 'scram-sha-256'\n"
	  . "pgsandbox.gc_interval = 3600\n");

sub write_hba
{
	my (@lines) = @_;
	open my $hba, '>', $node->data_dir . '/pg_hba.conf' or die $!;
	print $hba "$_\n" for @lines;
	close $hba;
}

# the server trusts 'reader': a connection as reader needs no password
write_hba("local all $su trust", 'local all ada,alice trust', 'local all reader trust',
	'local all all scram-sha-256');
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION pgsandbox');
$node->safe_psql('postgres', "SET log_statement = 'none'; CREATE ROLE reader LOGIN PASSWORD '$reader_pw'");
$node->safe_psql(
	'postgres', q{
CREATE ROLE ada LOGIN IN ROLE pgsandbox_admin;
CREATE ROLE alice LOGIN IN ROLE pgsandbox_user;
CREATE DATABASE src;
});
$node->safe_psql('src',
	'CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t SELECT generate_series(1, 10); GRANT SELECT ON t TO reader');

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

sub snapshot
{
	return $node->safe_psql('postgres',
		    "SELECT (SELECT count(*) FROM pg_database) || ' dbs, ' || (SELECT count(*) FROM pg_roles) || ' roles, '"
		  . " || (SELECT count(*) FROM pgsandbox.sandbox WHERE status IN ('cloning', 'ready')) || ' live, sources '"
		  . " || (SELECT coalesce(string_agg(name, ',' ORDER BY name), '') FROM pgsandbox.source)");
}

sub add_refused
{
	my ($role, $conninfo, $state, $re, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $before = snapshot();
	(my $lit = $conninfo) =~ s/'/''/g;
	my ($ret, $out, $err) = as_role($role, "SELECT pgsandbox.add_source('x', '$lit')");
	is(sqlstate($err), $state, "$what: refused with $state") or diag $err;
	like($err, $re, "$what: says why");
	is(snapshot(), $before, "$what: no source added");
}

# ---------------------------------------------------------------------------
# what a non-superuser admin may not add
# ---------------------------------------------------------------------------

my $no_pw = qr/a source added by a non-superuser must carry a password/;
add_refused('ada', 'dbname=src user=reader', '42501', $no_pw, 'admin, no password');
add_refused('ada', 'dbname=src user=reader password=', '42501', $no_pw, 'admin, empty password');
add_refused('ada', "dbname=src user=reader password=''", '42501', $no_pw, 'admin, quoted empty password');
add_refused('ada', 'postgresql://reader@/src', '42501', $no_pw, 'admin, URI without password');
for my $kw (qw(service passfile sslcert sslkey sslrootcert sslcrl sslcrldir))
{
	add_refused('ada', "dbname=src user=reader password=x $kw=/etc/postgresql-common/pg_service.conf",
		'42501', qr/only a superuser may add a source with connection option "$kw"/,
		"admin, $kw");
}
add_refused('ada', 'postgresql://reader:x@/src?service=mine',
	'42501', qr/connection option "service"/, 'admin, service in a URI');
add_refused('ada', 'postgresql:///src?user=reader&password=x&passfile=/etc/passwd',
	'42501', qr/connection option "passfile"/, 'admin, passfile in a URI');
add_refused('ada', 'dbname=src user=reader password=x replication=database',
	'22023', qr/connection option "replication" is not allowed/, 'admin, replication');

# a pgsandbox_user adds nothing, whatever the string
for my $ci ('dbname=src user=reader password=x options=\'-c default_transaction_read_only=off\'',
	'dbname=src dbname=postgres user=reader password=x',
	'service=mine password=x')
{
	add_refused('alice', $ci, '42501', qr/permission denied for (function add_source|schema pgsandbox)/,
		"pgsandbox_user, '$ci'");
}

# a superuser may name a service (the server's own file is its business)
my ($ret, $out, $err) = as_role($su, "SELECT pgsandbox.add_source('svc', 'service=nosuchservice dbname=src')");
is($ret, 0, 'a superuser may add a source with service') or diag $err;
$node->safe_psql('postgres', "SELECT pgsandbox.remove_source('svc')");

# ---------------------------------------------------------------------------
# what it may add, and what the clone checks
# ---------------------------------------------------------------------------

($ret, $out, $err) = as_role('ada',
	"SELECT pgsandbox.add_source('pw', 'dbname=src user=reader password=$reader_pw', allow_data => true)");
is($ret, 0, 'an admin adds a source with a password') or diag $err;
($ret, $out, $err) = as_role('ada',
	"SELECT pgsandbox.add_source('pwbad', 'dbname=src user=reader password=Not$reader_pw')");
is($ret, 0, 'an admin adds a source with a wrong password') or diag $err;
$node->safe_psql('postgres',
	"SELECT pgsandbox.add_source('su_nopw', 'dbname=src user=reader'); SELECT pgsandbox.grant_source('pw', 'alice')");
is( $node->safe_psql('postgres',
		"SELECT string_agg(name || ':' || require_password || ':' || added_by, ',' ORDER BY name) FROM pgsandbox.source"),
	"pw:true:ada,pwbad:true:ada,su_nopw:false:$su",
	'sources added by the admin must use their password, the superuser\'s need not');

# A clone that must fail and leave nothing but a failed row; returns the
# error text.
sub clone_fails
{
	my ($role, $source, $state, $re, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $before = snapshot();
	my $count_sql = "SELECT count(*) || ' rows, ' || count(*) FILTER (WHERE status = 'failed') || ' failed' FROM pgsandbox.sandbox";
	my ($rows, $failed) = $node->safe_psql('postgres', $count_sql) =~ /(\d+) rows, (\d+) failed/;
	my ($ret, $out, $err) = as_role($role, "SELECT name FROM pgsandbox.clone('$source')");
	is(sqlstate($err), $state, "$what: fails with $state") or diag $err;
	like($err, $re, "$what: says why");
	is(snapshot(), $before, "$what: no database, role or live sandbox is left");
	is($node->safe_psql('postgres', $count_sql), ($rows + 1) . ' rows, ' . ($failed + 1) . ' failed',
		"$what: one failed row records it");
	return $err;
}

my $unused = qr/the connection to source "pw" did not use its password/;
clone_fails('ada', 'pw', '42501', $unused, 'server trusts reader: the admin\'s clone');
clone_fails('alice', 'pw', '42501', $unused, 'server trusts reader: a pgsandbox_user\'s clone');
clone_fails($su, 'pw', '42501', $unused, 'server trusts reader: a superuser\'s clone of the admin\'s source');
like( $node->safe_psql('postgres', "SELECT error FROM pgsandbox.sandbox WHERE source = 'pw' ORDER BY id DESC LIMIT 1"),
	$unused, 'the failed row records why');

($ret, $out, $err) = as_role($su, "SELECT name FROM pgsandbox.clone('su_nopw')");
is($ret, 0, 'server trusts reader: the superuser\'s source without a password clones') or diag $err;

# doctor() connects as a clone does: the admin's source is refused for the
# same reason, the superuser's is fine
sub doctor_row
{
	my ($source) = @_;
	return $node->safe_psql('postgres',
		"SELECT ok || '|' || detail FROM pgsandbox.doctor() WHERE \"check\" = 'source \"$source\" can be dumped'");
}
like(doctor_row('pw'), qr/^false\|Cannot connect: the connection to source "pw" did not use its password/,
	'server trusts reader: doctor() finds the admin\'s source unusable, as a clone does');
like(doctor_row('su_nopw'), qr/^true\|/, 'server trusts reader: doctor() accepts the superuser\'s source');

# ---------------------------------------------------------------------------
# pg_hba.conf asks reader for its password
# ---------------------------------------------------------------------------

write_hba("local all $su trust", 'local all ada,alice trust', 'local all all scram-sha-256');
$node->reload;
ok( wait_until(
		sub {
			my ($r) = $node->psql('postgres', 'SELECT 1', extra_params => [ '-U', 'reader', '-w' ]);
			return $r != 0;
		}),
	'reader must now give its password');

($ret, $out, $err) = as_role('ada', "SELECT name, conninfo FROM pgsandbox.clone('pw', schema_only => false)");
is($ret, 0, 'password asked: the admin\'s source clones') or diag $err;
like(doctor_row('pw'), qr/^true\|/, 'password asked: doctor() finds the admin\'s source usable');
my (undef, $conninfo) = split /\|/, $out, 2;
my ($r2, $rows) = sandbox_psql($node, $conninfo // '', 'SELECT count(*) FROM t');
is($rows, '10', '... with its rows');
($ret, $out, $err) = as_role('alice', "SELECT name FROM pgsandbox.clone('pw')");
is($ret, 0, 'password asked: a pgsandbox_user clones the admin\'s source') or diag $err;
clone_fails('ada', 'pwbad', '08006', qr/password authentication failed for user "reader"/,
	'password asked: a source with a wrong password');
clone_fails($su, 'su_nopw', '08006', qr/no password supplied|password authentication failed/,
	'password asked: the superuser\'s source without a password');

# ---------------------------------------------------------------------------
# pgsandbox_reader is never borrowed
# ---------------------------------------------------------------------------

# An admin's source that names a password but no user would be completed
# with the reader's login, which reads every row: refused when added, in
# both forms.  One in the catalog from before is refused when cloned.
my $no_user = qr/a source added by a non-superuser must name its user/;
add_refused('ada', 'dbname=src password=x', '42501', $no_user, 'admin, a password and no user');
add_refused('ada', 'postgresql:///src?password=x', '42501', $no_user,
	'admin, a URI with a password and no user');
add_refused('ada', "dbname=src user='' password=x", '42501', $no_user, 'admin, an empty user');
$node->safe_psql('postgres',
	q{UPDATE pgsandbox.source SET conninfo = 'dbname=src password=x', "user" = NULL WHERE name = 'pwbad'});
clone_fails('ada', 'pwbad', '42501', qr/added by a non-superuser,? names no user/,
	'an admin\'s source from before, with no user');
like(doctor_row('pwbad'), qr/^false\|.*names no user/, 'doctor() finds it unusable, as a clone does');

# A source that names a port: pgsandbox connects where it says, to a
# socket of that port in the server's socket directory, where anyone may
# listen.  A listener there that asks for a password in clear hears
# neither the reader's login nor its password.
my $fake_port = PostgreSQL::Test::Cluster::get_free_port();
my $fake_path = $node->host . "/.s.PGSQL.$fake_port";
my $heard = $node->basedir . '/fake_server_heard';
my $listener = IO::Socket::UNIX->new(Type => SOCK_STREAM(), Local => $fake_path, Listen => 5)
  or die "could not listen on $fake_path: $!";
my $fake = fork();
die "fork: $!" unless defined $fake;
if ($fake == 0)
{
	# a server that asks each client for its password in clear, and writes
	# down the login and the password it is given; it leaves by _exit, so
	# that the test library's END blocks (which stop the nodes) and its
	# handlers of signals do not run in it
	open my $log, '>>', $heard or die $!;
	$log->autoflush(1);
	$SIG{$_} = sub { POSIX::_exit(0) } for qw(ALRM TERM INT);
	alarm 300;
	while (my $c = $listener->accept)
	{
		my ($len, $startup, $type, $pw) = ('', '', '', '');
		next unless read($c, $len, 4) == 4;
		read($c, $startup, unpack('N', $len) - 4);
		my %params = split /\0/, substr($startup, 4);
		print $log 'login ' . ($params{user} // '?') . "\n";
		print $c pack('aNN', 'R', 8, 3);	# AuthenticationCleartextPassword
		if (read($c, $type, 1) == 1 && $type eq 'p' && read($c, $len, 4) == 4)
		{
			read($c, $pw, unpack('N', $len) - 4);
			print $log "password $pw\n";
		}
		close $c;
	}
	POSIX::_exit(0);
}
close $listener;
$node->safe_psql('postgres',
	"SELECT pgsandbox.add_source('lure', 'dbname=src port=$fake_port connect_timeout=5', allow_data => true)");
my $before_lure = snapshot();
($ret, $out, $err) = as_role($su, "SELECT name FROM pgsandbox.clone('lure', schema_only => false)");
isnt($ret, 0, 'a superuser\'s source naming a port where another server listens: the clone fails');
doctor_row('lure');
is(snapshot(), $before_lure, '... and leaves no database or role');
my $what_it_heard = -e $heard ? PostgreSQL::Test::Utils::slurp_file($heard) : '';
like($what_it_heard, qr/^login /m, 'the listener was reached');
unlike($what_it_heard, qr/pgsandbox_reader/, 'but never as pgsandbox_reader');
unlike($what_it_heard, qr/^password /m, 'and was given no password');
kill 'TERM', $fake;
waitpid($fake, 0);
unlink $fake_path;

# The superuser's source of this cluster is still read as the reader, on
# the server's own socket, which the reader checks is served by the
# server's own OS user (requirepeer) before it gives its password.
$node->safe_psql('postgres', q{SELECT pgsandbox.add_source('plain', 'dbname=src', allow_data => true)});
($ret, $out, $err) = as_role($su, "SELECT name, conninfo FROM pgsandbox.clone('plain', schema_only => false)");
is($ret, 0, 'a superuser\'s source naming only its database clones') or diag $err;
(undef, $conninfo) = split /\|/, $out, 2;
(undef, $rows) = sandbox_psql($node, $conninfo // '', 'SELECT count(*) FROM t');
is($rows, '10', '... with its rows, read as pgsandbox_reader');

$node->stop;
done_testing();
