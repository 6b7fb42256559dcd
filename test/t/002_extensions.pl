
# 002_extensions.pl: cloning a source that uses extensions.
#
# pgcrypto, hstore and citext live in public, postgres_fdw in its own
# schema "fdw".  A table uses citext and hstore columns and a pgcrypto
# default.  The clone worker creates the extensions as superuser and
# restores the rest, through an archive in $PGDATA/pgsandbox_tmp, as the
# sandbox role; the archive must be gone afterwards.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $node = sandbox_node('ext');

$node->safe_psql('postgres', 'CREATE DATABASE extsrc');
$node->safe_psql(
	'extsrc', q{
CREATE EXTENSION pgcrypto;
CREATE EXTENSION hstore;
CREATE EXTENSION citext;
CREATE SCHEMA fdw;
CREATE EXTENSION postgres_fdw SCHEMA fdw;
CREATE TABLE public.accounts (
	id int PRIMARY KEY,
	email citext NOT NULL UNIQUE,
	attrs hstore,
	token text NOT NULL DEFAULT encode(gen_random_bytes(8), 'hex'),
	pw_hash text
);
CREATE INDEX accounts_attrs_idx ON public.accounts USING gin (attrs);
CREATE TABLE fdw.settings (k citext PRIMARY KEY, v text);
COMMENT ON TABLE public.accounts IS 'Accounts with extension types';
COMMENT ON COLUMN public.accounts.token IS 'Random token from pgcrypto';
COMMENT ON TABLE fdw.settings IS 'A table in the extension''s schema';
INSERT INTO public.accounts (id, email, attrs, pw_hash)
	SELECT g, 'User' || g || '@Example.COM',
		   hstore(ARRAY['color', 'size'], ARRAY['c' || g % 7, (g % 3)::text]),
		   crypt('pw' || g, gen_salt('md5'))
	  FROM generate_series(1, 300) g;
INSERT INTO fdw.settings VALUES ('Mode', 'test'), ('Level', '3');
});

my $ext_sql = q{
SELECT string_agg(e.extname || '@' || n.nspname, ',' ORDER BY e.extname)
  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace};
my $data_sql = q{
SELECT (SELECT count(*) || ' ' || md5(string_agg(a::text, '|' ORDER BY a.id)) FROM public.accounts a)
	|| ' ' || (SELECT count(*) || ' ' || md5(string_agg(s::text, '|' ORDER BY s.k)) FROM fdw.settings s)};
my $types_sql = q{
SELECT string_agg(attrelid::regclass || '.' || attname || ':' || format_type(atttypid, atttypmod)
				  || ':' || coalesce(pg_get_expr(d.adbin, d.adrelid), '-'), ',' ORDER BY attrelid::regclass::text, attnum)
  FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
 WHERE attrelid IN ('public.accounts'::regclass, 'fdw.settings'::regclass) AND attnum > 0};
my $comment_sql = q{
SELECT string_agg(pg_describe_object(classoid, objoid, objsubid) || '=' || description, ','
				  ORDER BY objoid::regclass::text, objsubid)
  FROM pg_description
 WHERE classoid = 'pg_class'::regclass
   AND objoid IN ('public.accounts'::regclass, 'fdw.settings'::regclass)};
my $index_sql = q{
SELECT string_agg(indexdef, ',' ORDER BY indexdef) FROM pg_indexes
 WHERE schemaname IN ('public', 'fdw')};

my $source_ext = $node->safe_psql('extsrc', $ext_sql);
is($source_ext, 'citext@public,hstore@public,pgcrypto@public,plpgsql@pg_catalog,postgres_fdw@fdw',
	'source has the four extensions');
my $source_data = $node->safe_psql('extsrc', $data_sql);
my $source_types = $node->safe_psql('extsrc', $types_sql);
my $source_comments = $node->safe_psql('extsrc', $comment_sql);
my $source_indexes = $node->safe_psql('extsrc', $index_sql);

$node->safe_psql('postgres',
	"SELECT pgsandbox.add_source('ext', 'dbname=extsrc', allow_data => true)");

my ($ret, $out, $err) = $node->psql('postgres',
	"SELECT name, conninfo FROM pgsandbox.clone('ext', schema_only => false)");
is($ret, 0, 'clone of a source with extensions succeeds') or diag $err;
my ($name, $conninfo) = split /\|/, $out;
like($name // '', qr/^sbx_[a-z0-9]{8}$/, 'clone returned a sandbox name');
$name //= 'sbx_none';

is( $node->safe_psql('postgres',
		"SELECT status, error IS NULL FROM pgsandbox.sandboxes WHERE name = '$name'"),
	'ready|t', 'sandbox is ready');
is($node->safe_psql($name, $ext_sql), $source_ext,
	'the clone has the same extensions in the same schemas');
is($node->safe_psql($name, $types_sql), $source_types,
	'columns keep their citext and hstore types and the pgcrypto default');
is($node->safe_psql($name, $data_sql), $source_data, 'the clone has the same rows');
is($node->safe_psql($name, $comment_sql), $source_comments,
	'table and column comments are kept');
is($node->safe_psql($name, $index_sql), $source_indexes, 'indexes are kept');
is( $node->safe_psql($name,
		"SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'fdw'"),
	$name, 'schema fdw belongs to the sandbox role');
is( $node->safe_psql($name,
		"SELECT count(*) FROM pg_class WHERE relnamespace IN ('public'::regnamespace, 'fdw'::regnamespace)"
		  . " AND relkind IN ('r', 'i') AND relowner <> '$name'::regrole"),
	'0', 'tables and indexes belong to the sandbox role');

# the extensions work for the sandbox role
($ret, $out, $err) = sandbox_psql($node, $conninfo, q{
SELECT count(*) FROM public.accounts WHERE email = 'USER7@EXAMPLE.COM';
SELECT attrs -> 'color' FROM public.accounts WHERE id = 9;
SELECT pw_hash = crypt('pw5', pw_hash) FROM public.accounts WHERE id = 5;
INSERT INTO public.accounts (id, email) VALUES (1000, 'new@example.com') RETURNING length(token);
SELECT v FROM fdw.settings WHERE k = 'MODE';
SELECT current_user;
});
is($ret, 0, 'the sandbox role uses its tables') or diag $err;
is($out, "1\nc2\nt\n16\ntest\n$name",
	'citext compares case-insensitively, hstore and pgcrypto work, default fills a token');

# the archive is gone
my @left = tmp_entries($node);
is(scalar @left, 0, 'nothing is left in $PGDATA/pgsandbox_tmp') or diag "@left";

# a schema-only clone of the same source
($ret, $out, $err) = $node->psql('postgres', "SELECT name FROM pgsandbox.clone('ext')");
is($ret, 0, 'schema-only clone of a source with extensions succeeds') or diag $err;
my $name2 = $out || 'sbx_none';
is($node->safe_psql($name2, $ext_sql), $source_ext, 'schema-only clone has the extensions');
is($node->safe_psql($name2, $types_sql), $source_types, 'schema-only clone has the columns');
is($node->safe_psql($name2, 'SELECT count(*) FROM public.accounts'), '0',
	'schema-only clone has no rows');
@left = tmp_entries($node);
is(scalar @left, 0, 'nothing is left in $PGDATA/pgsandbox_tmp') or diag "@left";

# the source is untouched
is($node->safe_psql('extsrc', $data_sql), $source_data, 'source data unchanged');
is($node->safe_psql('extsrc', $ext_sql), $source_ext, 'source extensions unchanged');

$node->stop;
done_testing();
