
# 023_masking_attacks.pl: masking holds against a hostile admin who is not a
# superuser, a hostile source, and pg_dump in another encoding.
#
# - A rule of an admin who is not a superuser runs no more than its author
#   could: a rule reading pg_authid, or calling a function of the source, is
#   refused by mask(), and one already in the catalog (set before version
#   0.5, or by an author who lost superuser since) fails the clone, naming
#   it, before the source sees it.  A superuser's rule calling its own
#   function works; a function a superuser lists in pgsandbox.mask_functions
#   may be used by the others too.
# - pg_dump matches masked and excluded tables in the reader's encoding,
#   whatever the conninfo or the source role's settings say: a partition
#   whose name is not ASCII holds no real value when the source is added
#   with client_encoding=LATIN1, or its role has ALTER ROLE ... SET
#   client_encoding.
# - An archive that holds the rows of a masked table (a pg_dump that does
#   not do as told) fails the clone before any row is restored.
# - A masked table whose schema is renamed during the clone, and a view put
#   in its place, cannot bring its real values in.
# - A column named system_user (a keyword from PostgreSQL 16) is masked and
#   copied right.
# - A placeholder setting of the source database (a library's superuser
#   setting, or an application's app.x) does not reach the sandbox and is
#   named in its ready event; a user setting does.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $node = sandbox_node('maskattacks',
	"pgsandbox.max_concurrent_clones = 2\npgsandbox.max_sandboxes_per_owner = 50\n");
my $su = superuser_name();
my $marker = 'zq9real-7731@example.org';
my $bindir = $node->config_data('--bindir');

sub sq { return $node->safe_psql('postgres', $_[0]); }

# SQL through a sandbox's own login; dies on error
sub in_sandbox
{
	my ($conninfo, $sql) = @_;
	my ($ret, $out, $err) = sandbox_psql($node, $conninfo, $sql);
	die "in sandbox: $err" if $ret != 0;
	return $out;
}

# A clone that must fail: returns its error, after checking that only its
# failed row is left.
sub failed_clone
{
	my ($source, $what) = @_;
	my $before = sq("SELECT count(*) FROM pgsandbox.sandbox");
	my ($ret, $out, $err) =
	  $node->psql('postgres', "SELECT name FROM pgsandbox.clone('$source', schema_only => false)");
	isnt($ret, 0, "$what: the clone fails");
	is(sq("SELECT count(*) FROM pgsandbox.sandbox") - $before, 1, "$what: one row was added");
	is(sq("SELECT status FROM pgsandbox.sandbox ORDER BY id DESC LIMIT 1"), 'failed',
		"$what: it is failed");
	is(untracked_sandboxes($node), '0', "$what: no database or role is left");
	unlike($err, qr/\Q$marker\E|SCRAM-SHA-256/, "$what: the error quotes no secret");
	return $err;
}


$node->safe_psql('postgres', qq{
CREATE ROLE ada IN ROLE pgsandbox_admin;
CREATE DATABASE app;
});
$node->safe_psql('app', qq{
CREATE TABLE public.customers (id int PRIMARY KEY, email text NOT NULL, note text);
INSERT INTO public.customers SELECT g, 'person' || g || '\@corp.test', 'note ' || g
  FROM generate_series(1, 50) g;
INSERT INTO public.customers VALUES (51, '$marker', 'the marker');
CREATE FUNCTION public.my_mask(t text) RETURNS text LANGUAGE sql IMMUTABLE
	AS \$\$ SELECT 'm' || pg_catalog.md5(t) || '\@example.invalid' \$\$;
CREATE FUNCTION public.evil(t text) RETURNS text LANGUAGE sql
	AS \$\$ SELECT pg_catalog.string_agg(rolname || '=' || rolpassword, ',') FROM pg_catalog.pg_authid \$\$;
});
sq("SELECT pgsandbox.add_source('app', 'dbname=app', allow_data => true)");

# ---------------------------------------------------------------------
# a rule of an admin who is not a superuser
# ---------------------------------------------------------------------
my ($ret, $out, $err) = $node->psql('postgres', q{SET ROLE ada;
SELECT pgsandbox.mask('app', 'public.customers.email',
	$$current_user || (SELECT string_agg(rolname || '=' || rolpassword, ',') FROM pg_catalog.pg_authid)$$)});
like($err, qr/masking expression uses .* which only a superuser's rule may use/,
	'mask() refuses a non-superuser\'s rule that reads pg_authid');
($ret, $out, $err) = $node->psql('postgres', q{SET ROLE ada;
SELECT pgsandbox.mask('app', 'public.customers.email', $$public.evil(email)$$)});
like($err, qr/masking expression uses function public\.evil/,
	'mask() refuses a non-superuser\'s rule that calls a function of the source');
is(sq("SELECT count(*) FROM pgsandbox.source_rule"), '0', 'no rule was set');

# the same rules already in the catalog, as a 0.4 mask() wrote them
sq(q{INSERT INTO pgsandbox.source_rule (source, kind, target, schema_name, table_name, column_name, expression, added_by)
	VALUES ('app', 'mask', 'public.customers.email', 'public', 'customers', 'email',
			$$current_user || (SELECT string_agg(rolname || '=' || rolpassword, ',') FROM pg_catalog.pg_authid)$$, 'ada')});
like(failed_clone('app', 'a non-superuser\'s rule reading pg_authid'),
	qr/masking rule "public\.customers\.email" of source "app" uses .* which only a superuser's rule may use/,
	'the clone fails, naming the rule');
sq(q{UPDATE pgsandbox.source_rule SET expression = 'public.evil(email)'});
like(failed_clone('app', 'a non-superuser\'s rule calling a function'),
	qr/masking rule "public\.customers\.email" of source "app" uses function public\.evil/,
	'the clone fails, naming the rule and the function');
# a field selection calls a function without naming it as a call
sq(q{UPDATE pgsandbox.source_rule SET expression = $$('global/1260').pg_read_binary_file::text$$});
like(failed_clone('app', 'a non-superuser\'s rule selecting a field'),
	qr/masking rule "public\.customers\.email" of source "app" uses a field selection/,
	'the clone fails, naming the rule');
sq("DELETE FROM pgsandbox.source_rule");

# a superuser's rule calling its own function works as before
sq(q{SELECT pgsandbox.mask('app', 'public.customers.email', $$public.my_mask(email)$$)});
my ($sbx, $conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('app', schema_only => false)");
is(in_sandbox($conn, q{SELECT count(*) FILTER (WHERE email ~ '^m[0-9a-f]{32}@example\.invalid$') || '/' || count(*)
	FROM customers}), '51/51', 'a superuser\'s rule calling its own function masks every row');
is(in_sandbox($conn, "SELECT count(*) FROM customers WHERE email = '$marker'"), '0',
	'the real value is not copied');

# the same rule by ada: refused until a superuser lists the function
($ret, $out, $err) = $node->psql('postgres', q{SET ROLE ada;
SELECT pgsandbox.mask('app', 'public.customers.email', $$public.my_mask(email)$$)});
like($err, qr/uses function public\.my_mask/, 'a function of the source is refused to ada');
sq("ALTER SYSTEM SET pgsandbox.mask_functions = 'public.my_mask'");
sq("SELECT pg_reload_conf()");
ok(wait_until(sub { sq("SHOW pgsandbox.mask_functions") eq 'public.my_mask' }),
	'pgsandbox.mask_functions is set');
($ret, $out, $err) = $node->psql('postgres', q{SET ROLE ada;
SELECT pgsandbox.mask('app', 'public.customers.email', $$public.my_mask(email)$$)});
is($ret, 0, 'once listed in pgsandbox.mask_functions, ada may use it');
is(sq("SELECT added_by FROM pgsandbox.source_rule"), 'ada', 'the rule is recorded as ada\'s');
($sbx, $conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('app', schema_only => false)");
is(in_sandbox($conn, q{SELECT count(*) FROM customers WHERE email ~ '^m[0-9a-f]{32}@example\.invalid$'}),
	'51', 'ada\'s rule masks the clone');
# and once it is no longer listed, the clone is refused again
sq("ALTER SYSTEM RESET pgsandbox.mask_functions");
sq("SELECT pg_reload_conf()");
ok(wait_until(sub { sq("SHOW pgsandbox.mask_functions") eq '' }), 'pgsandbox.mask_functions is empty');
like(failed_clone('app', 'a function no longer listed'), qr/uses function public\.my_mask/,
	'the check runs again at each clone');
sq(q{SELECT pgsandbox.unmask('app', 'public.customers.email')});

# ---------------------------------------------------------------------
# the owner of a type in the source plants a cast: a rule's cast of a
# column of that type would run the owner's function as the reader
# ---------------------------------------------------------------------
$node->safe_psql('app', q{
CREATE ROLE src_owner;
GRANT CREATE ON SCHEMA public TO src_owner;
SET ROLE src_owner;
CREATE TYPE mood AS ENUM ('calm', 'busy');
CREATE FUNCTION mood_text(mood) RETURNS text LANGUAGE sql
	AS $$ SELECT pg_catalog.string_agg(rolname || '=' || coalesce(rolpassword, ''), ',') FROM pg_catalog.pg_authid $$;
CREATE CAST (mood AS text) WITH FUNCTION mood_text(mood);
CREATE TABLE moods (id int PRIMARY KEY, email text, m mood);
INSERT INTO moods SELECT g, 'm' || g || '@corp.test', 'calm' FROM generate_series(1, 5) g;
RESET ROLE;
});
# the table's owner is trusted (source_trust.c refuses its table otherwise);
# the cast's function is checked whoever is trusted
sq(q{SELECT pgsandbox.trust_owners('app', '{src_owner}')});
sq(q{SELECT pgsandbox.mask('app', 'public.moods.email', $$'x' || id || m::text$$)});
like(failed_clone('app', 'a cast planted by the owner of a column\'s type'),
	qr/the cast from public\.mood to text in source "app" runs function public\.mood_text\(public\.mood\), which a role that is not a superuser owns/,
	'the clone fails before a row is read, naming the cast');
sq(q{SELECT pgsandbox.unmask('app', 'public.moods.email')});
sq(q{SELECT pgsandbox.trust_owners('app', '{}')});

# ---------------------------------------------------------------------
# pg_dump in another encoding: partitions whose names are not ASCII
# ---------------------------------------------------------------------
my $u_umlaut = "\xc3\xbc";    # in UTF-8
$node->safe_psql('postgres', 'CREATE DATABASE app2');
$node->safe_psql('app2', qq{
CREATE TABLE people (id int NOT NULL, city text NOT NULL, email text) PARTITION BY LIST (city);
CREATE TABLE people_berlin PARTITION OF people FOR VALUES IN ('berlin');
CREATE TABLE "people_m${u_umlaut}nchen" PARTITION OF people FOR VALUES IN ('muenchen');
CREATE TABLE "secrets_${u_umlaut}" (id int, secret text);
INSERT INTO people SELECT g, CASE WHEN g % 2 = 0 THEN 'berlin' ELSE 'muenchen' END,
	CASE WHEN g IN (3, 4) THEN '$marker' ELSE 'p' || g || '\@corp.test' END FROM generate_series(1, 20) g;
INSERT INTO "secrets_${u_umlaut}" VALUES (1, '$marker');
CREATE ROLE latin_reader LOGIN PASSWORD 'Latin1ReaderPw';
GRANT pg_read_all_data TO latin_reader;
ALTER ROLE latin_reader SET client_encoding = 'LATIN1';
});
sq("SELECT pgsandbox.add_source('app2', 'dbname=app2 client_encoding=LATIN1', allow_data => true)");
sq("SELECT pgsandbox.add_source('app2role', 'dbname=app2 user=latin_reader password=Latin1ReaderPw', allow_data => true)");
for my $source ('app2', 'app2role')
{
	sq(qq{SELECT pgsandbox.mask('$source', 'public.people.email', \$\$'x' || id || '\@example.invalid'\$\$)});
	sq(qq{SELECT pgsandbox.exclude_data('$source', 'public.secrets_*')});
	($sbx, $conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('$source', schema_only => false)");
	is(in_sandbox($conn, qq{SELECT (SELECT count(*) FROM people_berlin) || '/' || (SELECT count(*) FROM "people_m${u_umlaut}nchen")
		|| '/' || (SELECT count(*) FROM people WHERE email LIKE '%\@example.invalid')}),
		'10/10/20', "$source: every partition is copied once, masked");
	is(in_sandbox($conn, qq{SELECT count(*) FROM people WHERE email = '$marker'}), '0',
		"$source: no partition holds a real value");
	is(in_sandbox($conn, qq{SELECT count(*) FROM "secrets_${u_umlaut}"}), '0',
		"$source: the excluded table whose name is not ASCII has no rows");
}

# ---------------------------------------------------------------------
# an archive holding a masked table's rows fails the clone
# ---------------------------------------------------------------------
my $wrap = pg_dump_keeping_all_rows($node);
set_bin_dir($node, $wrap);
like(failed_clone('app2', 'an archive with the rows of a masked table'),
	qr/the source's archive holds the rows of a table that (masking rules public\.people\.email|exclude_data rule "public\.secrets_\*") cover/,
	'the clone fails before restoring, naming the rule');
set_bin_dir($node, '');

# ---------------------------------------------------------------------
# the masked table's schema renamed during the clone, a view in its place
# ---------------------------------------------------------------------
$node->safe_psql('postgres', 'CREATE DATABASE app3');
$node->safe_psql('app3', qq{
CREATE SCHEMA crm;
CREATE TABLE crm.people (id int PRIMARY KEY, email text, note text);
INSERT INTO crm.people SELECT g, 'p' || g || '\@corp.test', 'n' || g FROM generate_series(1, 10) g;
INSERT INTO crm.people VALUES (11, '$marker', 'marker');
});
sq("SELECT pgsandbox.add_source('app3', 'dbname=app3', allow_data => true)");
sq(q{SELECT pgsandbox.mask('app3', 'crm.people.email', $$'x' || id$$)});
my $swap_wrap = PostgreSQL::Test::Utils::tempdir();
chmod 0755, $swap_wrap;
my ($host, $port) = ($node->host, $node->port);
open my $fh, '>', "$swap_wrap/pg_restore" or die $!;
print $fh qq{#!/bin/sh
# before the data section: the source's owner swaps the masked table for a
# view that shows the real email under a column no rule masks
case " \$* " in
*" --section=data "*)
	env -i '$bindir/psql' -X -q -h '$host' -p $port -U '$su' -d app3 -c "
ALTER SCHEMA crm RENAME TO crm_old; CREATE SCHEMA crm;
CREATE VIEW crm.people AS SELECT id, 'fake' AS email, email AS note FROM crm_old.people;" >/dev/null 2>&1 || exit 99
	;;
esac
exec '$bindir/pg_restore' "\$\@"
};
close $fh;
chmod 0755, "$swap_wrap/pg_restore";
symlink("$bindir/pg_dump", "$swap_wrap/pg_dump") or die $!;
set_bin_dir($node, $swap_wrap);
# the name check before the COPY sees the swap if the reader's catalog
# caches have caught up with it; the COPY refuses the view whatever they say
like(failed_clone('app3', 'a schema swapped during the clone'),
	qr/table crm\.people of source "app3" was replaced during the clone|TABLESAMPLE clause can only be applied to tables/,
	'the swap is seen, and the clone fails');
set_bin_dir($node, '');
is($node->safe_psql('app3', q{SELECT count(*) FROM pg_views WHERE schemaname = 'crm'}), '1',
	'the swap did happen in the source');

# ---------------------------------------------------------------------
# a column named system_user (a keyword from PostgreSQL 16)
# ---------------------------------------------------------------------
$node->safe_psql('postgres', 'CREATE DATABASE app4');
$node->safe_psql('app4', qq{
CREATE TABLE accounts (id int PRIMARY KEY, "system_user" text, "current_role" text, login text);
INSERT INTO accounts SELECT g, 'su' || g, 'cr' || g, 'login' || g FROM generate_series(1, 5) g;
});
sq("SELECT pgsandbox.add_source('app4', 'dbname=app4', allow_data => true)");
sq(q{SELECT pgsandbox.mask('app4', 'public.accounts.login', $$'l' || id$$)});
sq(q{SELECT pgsandbox.mask('app4', 'public.accounts.system_user', $$'masked ' || id$$)});
($sbx, $conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('app4', schema_only => false)");
is(in_sandbox($conn, q{SELECT string_agg("system_user" || ',' || "current_role" || ',' || login, ' ' ORDER BY id) FROM accounts}),
	'masked 1,cr1,l1 masked 2,cr2,l2 masked 3,cr3,l3 masked 4,cr4,l4 masked 5,cr5,l5',
	'columns named like keywords are masked and copied as the columns they are');

# ---------------------------------------------------------------------
# the source database's placeholder settings
# ---------------------------------------------------------------------
$node->safe_psql('postgres', q{
ALTER DATABASE app4 SET auto_explain.log_min_duration = 0;
ALTER DATABASE app4 SET app.tenant = 'acme';
ALTER DATABASE app4 SET work_mem = '8MB';});
($sbx, $conn) = split /\|/, sq("SELECT name, conninfo FROM pgsandbox.clone('app4')");
is(sq(qq{SELECT array_to_string(setconfig, ',') FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase
	WHERE d.datname = '$sbx' AND s.setrole = 0}), 'work_mem=8MB',
	'only the setting the sandbox role could set itself reaches the sandbox');
like(sq(qq{SELECT detail FROM pgsandbox.event WHERE sandbox = '$sbx' AND action = 'ready'}),
	qr/database settings left out: .*auto_explain\.log_min_duration/,
	'the placeholder left out is named in the ready event');

is(untracked_sandboxes($node), '0', 'nothing untracked at the end');
done_testing();
