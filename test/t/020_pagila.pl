
# 020_pagila.pl: a real sample database (pagila: 21 tables, a partitioned
# table, views, a materialized view, domains, an enum, an aggregate, SQL
# and PL/pgSQL functions, triggers, a full-text index) cloned with data and
# compared with its source object by object and row by row.
#
# The pagila files are not part of pgsandbox: test/run-tests.sh hands them
# over in PGSANDBOX_PAGILA_DIR when the checkout sits beside them
# (../shared/data/pagila); without them the test is skipped.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $dir = $ENV{PGSANDBOX_PAGILA_DIR} // '';
plan skip_all => 'pagila is not at hand (set PGSANDBOX_PAGILA_DIR)'
  unless -r "$dir/pagila-schema.sql" && -r "$dir/pagila-data.sql";

my $node = sandbox_node('pagila', "pgsandbox.gc_interval = 3600\n");
$node->safe_psql('postgres', 'CREATE DATABASE pagila');
# pagila's objects belong to the role "postgres"
$node->safe_psql('postgres',
	q{DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'postgres') THEN CREATE ROLE postgres; END IF; END$$});
foreach my $file ('pagila-schema.sql', 'pagila-data.sql')
{
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run(
		[
			$node->installed_command('psql'), '-XAtq', '-v', 'ON_ERROR_STOP=1',
			'-d', $node->connstr('pagila'), '-f', "$dir/$file"
		],
		'<', '/dev/null', '>', \$out, '2>', \$err);
	ok($ok, "the source loads $file") or diag $err;
}
# pagila leaves its materialized view empty: fill it, so that the clone
# must carry it filled
$node->safe_psql('pagila', 'REFRESH MATERIALIZED VIEW rental_by_category');
$node->safe_psql('postgres', "SELECT pgsandbox.add_source('pagila', 'dbname=pagila', allow_data => true)");

my ($ret, $out, $err) = $node->psql('postgres',
	"SELECT name || ' ' || conninfo FROM pgsandbox.clone('pagila', schema_only => false)");
is($ret, 0, 'pagila clones with its data') or diag $err;
my ($name, $conninfo) = split / /, $out, 2;

# run the same query in the source (as superuser) and in the sandbox (as its role)
sub both
{
	my ($sql) = @_;
	my (undef, $mine, $e) = sandbox_psql($node, $conninfo, $sql);
	diag $e if $e;
	return ($node->safe_psql('pagila', $sql), $mine);
}

# the objects, kind by kind
my %kinds = (
	'tables and partitions' => "SELECT string_agg(relname || ':' || relkind::text, ',' ORDER BY relname) FROM pg_class"
	  . " WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p')",
	'views and materialized views' => "SELECT string_agg(relname || ':' || md5(pg_get_viewdef(oid)), ',' ORDER BY relname)"
	  . " FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind IN ('v', 'm')",
	'indexes' => "SELECT string_agg(pg_get_indexdef(indexrelid), ',' ORDER BY indexrelid::regclass::text)"
	  . " FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid WHERE c.relnamespace = 'public'::regnamespace",
	'constraints' => "SELECT string_agg(conname || ' ' || pg_get_constraintdef(oid), ',' ORDER BY conname, conrelid::regclass::text)"
	  . " FROM pg_constraint WHERE connamespace = 'public'::regnamespace",
	'functions' => "SELECT string_agg(oid::regprocedure::text || ':' || md5(prosrc), ',' ORDER BY oid::regprocedure::text)"
	  . " FROM pg_proc WHERE pronamespace = 'public'::regnamespace",
	'triggers' => "SELECT string_agg(pg_get_triggerdef(oid), ',' ORDER BY tgname, tgrelid::regclass::text)"
	  . " FROM pg_trigger WHERE NOT tgisinternal",
	'types' => "SELECT string_agg(typname || ':' || typtype::text, ',' ORDER BY typname) FROM pg_type"
	  . " WHERE typnamespace = 'public'::regnamespace AND typtype IN ('d', 'e', 'c')"
	  . " AND (typrelid = 0 OR (SELECT relkind FROM pg_class WHERE oid = typrelid) = 'c')",
	'enum values' => "SELECT string_agg(enumlabel, ',' ORDER BY enumsortorder) FROM pg_enum",
	'sequences' => "SELECT string_agg(relname, ',' ORDER BY relname) FROM pg_class"
	  . " WHERE relnamespace = 'public'::regnamespace AND relkind = 'S'",
	'sequence values' => "SELECT string_agg(sequencename || ':' || last_value, ',' ORDER BY sequencename) FROM pg_sequences",
	'the encoding and collation' => "SELECT pg_encoding_to_char(encoding) || datcollate FROM pg_database WHERE datname = current_database()",
);
foreach my $kind (sort keys %kinds)
{
	my ($source, $sandbox) = both($kinds{$kind});
	isnt($source, '', "the source has $kind");
	is($sandbox, $source, "the sandbox has the same $kind");
}

# the rows, table by table, compared by their text
my @tables = split /\n/, $node->safe_psql('pagila',
	"SELECT quote_ident(relname) FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'r' ORDER BY 1");
cmp_ok(scalar(@tables), '>=', 20, 'pagila has its tables (and partitions)');
foreach my $t (@tables)
{
	my ($source, $sandbox) = both("SELECT count(*) || ':' || md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM $t t");
	is($sandbox, $source, "table $t: the same rows");
}

# it works, as the sandbox role
my ($source, $sandbox) = both('SELECT inventory_in_stock(1), count(*) FROM rental_by_category');
is($sandbox, $source, 'a PL/pgSQL function and the materialized view answer as in the source');
my ($r2, $fts) = sandbox_psql($node, $conninfo,
	"SELECT count(*) FROM film WHERE fulltext @@ to_tsquery('english', 'drama')");
is($fts, $node->safe_psql('pagila', "SELECT count(*) FROM film WHERE fulltext @@ to_tsquery('english', 'drama')"),
	'the full-text search answers as in the source');

# and schema_diff sees nothing
is( $node->safe_psql('postgres', "SELECT pgsandbox.schema_diff('$name')"),
	'{"added": [], "changed": [], "dropped": []}', 'schema_diff right after the clone is empty');

# ---------------------------------------------------------------------------
# a reduced clone: 10% of the customers, with each one's rentals and
# payments (pagila declares the payments' keys on each partition)
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', q{
SELECT pgsandbox.subset('pagila', 'public.customer', '10%');
SELECT pgsandbox.follow('pagila', 'public.rental');
SELECT pgsandbox.follow('pagila', 'public.payment');});
my ($rname, $rconn) = split /\|/, $node->safe_psql('postgres',
	"SELECT name, conninfo FROM pgsandbox.clone('pagila', schema_only => false)");
ok($rname, 'a 10% subset of the customers, following rentals and payments, clones');
# (the payments of the partitions that declare the key to customer: pagila's
# last partition declares none, and a key says which rows refer to what)
my $per_customer = q{SELECT count(*) || ' ' || md5(string_agg(c.customer_id || ':'
	|| (SELECT count(*) FROM rental r WHERE r.customer_id = c.customer_id) || ':'
	|| (SELECT count(*) FROM payment p WHERE p.customer_id = c.customer_id
		AND p.tableoid IN (SELECT conrelid FROM pg_constraint WHERE contype = 'f'
			AND confrelid = 'customer'::regclass)), ',' ORDER BY c.customer_id)) FROM customer c};
my ($rret, $kept) = sandbox_psql($node, $rconn, $per_customer);
my ($ids) = (sandbox_psql($node, $rconn, 'SELECT string_agg(customer_id::text, \',\') FROM customer'))[1];
is($kept, $node->safe_psql('pagila', $per_customer =~ s/FROM customer c\}?$/FROM customer c WHERE c.customer_id IN ($ids)/r),
	'each kept customer has all its rentals and payments');
is((sandbox_psql($node, $rconn, q{SELECT count(*) FROM payment_p2022_07}))[1], '0',
	'a partition that declares no key to the customers keeps no followed row');
my $count = (split / /, $kept)[0];
ok($count > 20 && $count < 120, "about a tenth of the 599 customers are kept ($count)");
my $fk_q = q{SELECT count(*) FROM pg_constraint WHERE contype = 'f'};
is((sandbox_psql($node, $rconn, $fk_q))[1], $node->safe_psql('pagila', $fk_q),
	'every foreign key of pagila exists in the reduced sandbox');
is((sandbox_psql($node, $rconn, q{SELECT count(*) FROM rental r WHERE NOT EXISTS
	(SELECT 1 FROM customer c WHERE c.customer_id = r.customer_id)}))[1], '0',
	'no rental of a customer left out');

$node->stop;
done_testing();
