# 017_sandbox_traps.pl: a sandbox role that lays traps in its own database
# for the superuser sessions pgsandbox opens there (an operator of its own
# first in the database's search_path, a read-only default, a prepared
# transaction that DROP DATABASE refuses) gains nothing: the sandbox is
# dropped, no trap fires, nothing is left.
use strict;
use warnings FATAL => 'all';
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $node = sandbox_node('traps',
	"pgsandbox.gc_interval = 3600\nmax_prepared_transactions = 5\n");
$node->safe_psql('postgres', q{
CREATE DATABASE src;
SELECT pgsandbox.add_source('src', 'dbname=src');
});
my ($name, $conninfo) = split /\|/,
  $node->safe_psql('postgres', "SELECT name, conninfo FROM pgsandbox.clone('src')");
like($name, qr/^sbx_[a-z0-9]{8}$/, 'a sandbox');

my ($rc, $out, $err) = sandbox_psql($node, $conninfo, qq{
CREATE FUNCTION public.trap(name, name) RETURNS boolean LANGUAGE plpgsql AS \$\$
BEGIN
	RAISE WARNING 'trap fired';
	EXECUTE 'ALTER ROLE $name SUPERUSER';
	RETURN \$1 OPERATOR(pg_catalog.=) \$2;
END \$\$;
CREATE OPERATOR public.= (LEFTARG = name, RIGHTARG = name, FUNCTION = public.trap);
ALTER DATABASE $name SET search_path = public, pg_catalog;
ALTER DATABASE $name SET default_transaction_read_only = on;
ALTER DATABASE $name SET statement_timeout = 1;
});
is($rc, 0, 'the sandbox role lays its traps') or diag $err;
# The session's own options outrank the database's settings from its first
# statement on; a SET would itself run under the 1 ms timeout, which a busy
# machine exceeds.
($rc, $out, $err) = sandbox_psql($node,
	"$conninfo options='-c statement_timeout=0 -c default_transaction_read_only=off'",
	"BEGIN; CREATE TABLE held (i int); PREPARE TRANSACTION 'held';");
is($rc, 0, 'and leaves a prepared transaction behind') or diag $err;
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_prepared_xacts WHERE database = '$name'"),
	'1', 'the prepared transaction is there');

my $supers = $node->safe_psql('postgres', 'SELECT count(*) FROM pg_roles WHERE rolsuper');
($rc, $out, $err) = $node->psql('postgres', "SELECT pgsandbox.drop('$name')");
is($rc, 0, 'drop() succeeds') or diag $err;
is($node->safe_psql('postgres', "SELECT status FROM pgsandbox.sandboxes WHERE name = '$name'"),
	'dropped', 'the sandbox is dropped');
is(sandbox_leftovers($node, $name), '0|0', 'its database and role are gone');
is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '0',
	'its prepared transaction was rolled back');
is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_roles WHERE rolsuper'), $supers,
	'no role became superuser');
unlike(slurp_file($node->logfile), qr/WARNING:\s+trap fired/, 'no trap fired');

$node->stop;
done_testing();
