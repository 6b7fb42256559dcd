
# 001_clone.pl: what a clone contains, who owns it, and who may log in.
#
# A source with tables in two schemas, a view, a materialized view,
# functions, an enum, a trigger, foreign keys, indexes, comments, sequences
# and 1000 rows is cloned with and without data.  The clone must match the
# source object for object and row for row, belong to the sandbox role,
# and be reachable only with the password pgsandbox returned.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SandboxTest;
use Test::More;

my $node = sandbox_node('clone');
my $su = superuser_name();

$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql(
	'app', q{
CREATE SCHEMA billing;
CREATE TYPE public.order_state AS ENUM ('new', 'paid', 'shipped');
CREATE TABLE public.customers (
	id serial PRIMARY KEY,
	name text NOT NULL,
	email text NOT NULL UNIQUE,
	created_at timestamptz NOT NULL DEFAULT '2024-01-01 00:00:00+00'
);
CREATE TABLE public.orders (
	id bigserial PRIMARY KEY,
	customer_id int NOT NULL REFERENCES public.customers (id),
	state public.order_state NOT NULL DEFAULT 'new',
	amount numeric(10,2) NOT NULL CHECK (amount >= 0),
	note text
);
CREATE INDEX orders_customer_idx ON public.orders (customer_id);
CREATE INDEX customers_lower_name_idx ON public.customers (lower(name));
CREATE SEQUENCE billing.invoice_no_seq START 1000;
CREATE TABLE billing.invoices (
	invoice_no bigint PRIMARY KEY,
	order_id bigint NOT NULL REFERENCES public.orders (id) ON DELETE CASCADE,
	issued date NOT NULL,
	data jsonb
);
CREATE VIEW public.customer_totals AS
	SELECT c.id, c.name, sum(o.amount) AS total
	  FROM public.customers c JOIN public.orders o ON o.customer_id = c.id
	 GROUP BY c.id, c.name;
CREATE MATERIALIZED VIEW public.state_counts AS
	SELECT state, count(*) AS n FROM public.orders GROUP BY state;
CREATE FUNCTION public.order_total(cid int) RETURNS numeric
	LANGUAGE sql STABLE
	AS $$ SELECT coalesce(sum(amount), 0) FROM public.orders WHERE customer_id = cid $$;
CREATE FUNCTION billing.next_invoice() RETURNS bigint
	LANGUAGE plpgsql
	AS $$ BEGIN RETURN nextval('billing.invoice_no_seq'); END $$;
CREATE FUNCTION public.orders_note_default() RETURNS trigger
	LANGUAGE plpgsql
	AS $$ BEGIN NEW.note := coalesce(NEW.note, 'none'); RETURN NEW; END $$;
CREATE TRIGGER orders_note BEFORE INSERT ON public.orders
	FOR EACH ROW EXECUTE FUNCTION public.orders_note_default();
COMMENT ON SCHEMA billing IS 'Money matters';
COMMENT ON TABLE public.customers IS 'People who buy things';
COMMENT ON COLUMN public.customers.email IS 'Where receipts go';
COMMENT ON TABLE billing.invoices IS 'Issued invoices';
COMMENT ON COLUMN billing.invoices.issued IS 'Day of issue';
COMMENT ON VIEW public.customer_totals IS 'Spend per customer';
COMMENT ON FUNCTION public.order_total(int) IS 'Sum of one customer''s orders';
COMMENT ON SEQUENCE billing.invoice_no_seq IS 'Invoice numbers';

INSERT INTO public.customers (name, email)
	SELECT 'Customer ' || g, 'c' || g || '@example.com' FROM generate_series(1, 200) g;
INSERT INTO public.orders (customer_id, state, amount, note)
	SELECT 1 + g % 200, (ARRAY['new', 'paid', 'shipped'])[1 + g % 3]::public.order_state,
		   (g * 7 % 1000) / 10.0, CASE WHEN g % 4 = 0 THEN NULL ELSE 'note ' || g END
	  FROM generate_series(1, 600) g;
INSERT INTO billing.invoices
	SELECT billing.next_invoice(), id, date '2024-01-01' + (id % 365)::int,
		   jsonb_build_object('order', id, 'tags', jsonb_build_array('a', id % 5))
	  FROM public.orders WHERE id % 3 = 0;
REFRESH MATERIALIZED VIEW public.state_counts;
});

my @tables = qw(public.customers public.orders billing.invoices public.state_counts);

# Everything that describes the schema, as one string to compare.
my $schema_sql = q{
SELECT string_agg(x, E'\n' ORDER BY x) FROM (
	SELECT 'rel ' || n.nspname || '.' || c.relname || ' ' || c.relkind::text AS x
	  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	 WHERE n.nspname IN ('public', 'billing')
	UNION ALL
	SELECT 'col ' || table_schema || '.' || table_name || '.' || column_name || ' '
		   || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '-')
	  FROM information_schema.columns WHERE table_schema IN ('public', 'billing')
	UNION ALL
	SELECT 'con ' || conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid)
	  FROM pg_constraint WHERE connamespace IN ('public'::regnamespace, 'billing'::regnamespace)
	UNION ALL
	SELECT 'idx ' || indexdef FROM pg_indexes WHERE schemaname IN ('public', 'billing')
	UNION ALL
	SELECT 'fn ' || pg_get_functiondef(p.oid)
	  FROM pg_proc p WHERE pronamespace IN ('public'::regnamespace, 'billing'::regnamespace)
	UNION ALL
	SELECT 'view ' || c.oid::regclass || ' ' || pg_get_viewdef(c.oid)
	  FROM pg_class c WHERE c.relkind IN ('v', 'm')
	   AND c.relnamespace IN ('public'::regnamespace, 'billing'::regnamespace)
	UNION ALL
	SELECT 'trg ' || pg_get_triggerdef(t.oid) FROM pg_trigger t WHERE NOT t.tgisinternal
	UNION ALL
	SELECT 'enum ' || enumtypid::regtype || ' ' || enumlabel || ' ' || enumsortorder
	  FROM pg_enum
	UNION ALL
	SELECT 'comment ' || pg_describe_object(classoid, objoid, objsubid) || ' = ' || description
	  FROM pg_description WHERE objoid >= 16384
) s};

sub data_fingerprint
{
	my ($connstr_db) = @_;
	my $sql = join(
		"\nUNION ALL\n",
		map {
			"SELECT '$_ ' || count(*) || ' ' || coalesce(md5(string_agg(t::text, '|' ORDER BY t::text)), '-') FROM $_ t"
		} @tables);
	$sql .= "\nUNION ALL\nSELECT 'seq ' || last_value || ' ' || is_called FROM billing.invoice_no_seq";
	$sql .= "\nUNION ALL\nSELECT 'seq ' || last_value || ' ' || is_called FROM public.customers_id_seq";
	return $node->safe_psql($connstr_db, $sql);
}

my $source_schema = $node->safe_psql('app', $schema_sql);
my $source_data = data_fingerprint('app');
like($source_data, qr/public\.customers 200 .*public\.orders 600 .*billing\.invoices 200 /s,
	'source holds 1000 rows');

$node->safe_psql('postgres',
	"SELECT pgsandbox.add_source('app', 'dbname=app', allow_data => true)");
$node->safe_psql('postgres',
	"SELECT pgsandbox.add_source('app_schema', 'dbname=app')");
is( $node->safe_psql('postgres',
		"SELECT name, allow_data, dbname FROM pgsandbox.sources ORDER BY name"),
	"app|t|app\napp_schema|f|app",
	'sources view lists both sources without their conninfo');

# ---------------------------------------------------------------------------
# Clone with data
# ---------------------------------------------------------------------------

my $row = $node->safe_psql('postgres',
	q{SELECT name, conninfo, expires_at - now() BETWEEN interval '119 minutes' AND interval '121 minutes'
	    FROM pgsandbox.clone('app', schema_only => false, ttl => '2 hours',
	                         labels => '{"team": "qa", "ticket": 42}')});
my ($name, $conninfo, $expiry_ok) = split /\|/, $row;
like($name, qr/^sbx_[a-z0-9]{8}$/, 'sandbox name is sbx_ and 8 characters');
my $host = $node->host;
my $port = $node->port;
like(
	$conninfo,
	qr/^host=\Q$host\E port=$port dbname=$name user=$name password=[A-Za-z0-9]{32}$/,
	'conninfo names the server, the sandbox database and role, and a 32-character password'
);
is($expiry_ok, 't', 'expires_at is now() + ttl');

is( $node->safe_psql('postgres',
		"SELECT source, schema_only, status, labels, ready_at IS NOT NULL, dropped_at IS NULL,"
		  . " size_bytes > 0, error IS NULL FROM pgsandbox.sandboxes WHERE name = '$name'"),
	'app|f|ready|{"team": "qa", "ticket": 42}|t|t|t|t',
	'catalog row is ready, with labels and size');
is( $node->safe_psql('postgres',
		"SELECT string_agg(action || ':' || actor, ',' ORDER BY at) FROM pgsandbox.events WHERE sandbox = '$name'"),
	"clone:$su,ready:$su",
	'events record the clone and its readiness, by the caller');

is($node->safe_psql($name, $schema_sql), $source_schema,
	'clone has the same tables, columns, constraints, indexes, functions, views, triggers, types and comments');
is(data_fingerprint($name), $source_data,
	'clone has the same rows (count and md5 of every table) and sequence positions');

# ownership: every relation, function, type and the schema belong to the role
my $owned = $node->safe_psql(
	$name, qq{
SELECT (SELECT count(*) FROM pg_class c
		 WHERE c.relnamespace IN ('public'::regnamespace, 'billing'::regnamespace)
		   AND c.relowner <> '$name'::regrole),
	   (SELECT count(*) FROM pg_class c
		 WHERE c.relnamespace IN ('public'::regnamespace, 'billing'::regnamespace)
		   AND c.relowner = '$name'::regrole),
	   (SELECT count(*) FROM pg_proc
		 WHERE pronamespace IN ('public'::regnamespace, 'billing'::regnamespace)
		   AND proowner <> '$name'::regrole),
	   (SELECT count(*) FROM pg_proc
		 WHERE pronamespace IN ('public'::regnamespace, 'billing'::regnamespace)
		   AND proowner = '$name'::regrole),
	   (SELECT count(*) FROM pg_type
		 WHERE typnamespace IN ('public'::regnamespace, 'billing'::regnamespace)
		   AND typowner <> '$name'::regrole),
	   (SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'billing'),
	   (SELECT datdba::regrole::text FROM pg_database WHERE datname = current_database())
});
my ($rel_other, $rel_mine, $fn_other, $fn_mine, $typ_other, $nsp_owner, $db_owner) =
  split /\|/, $owned;
is($rel_other, 0, 'no relation in the clone belongs to another role');
my $source_rels = $node->safe_psql('app',
	"SELECT count(*) FROM pg_class WHERE relnamespace IN ('public'::regnamespace, 'billing'::regnamespace)");
cmp_ok($source_rels, '>=', 14, 'source has 14 tables, views, sequences and indexes');
is($rel_mine, $source_rels, 'the sandbox role owns every one of them in the clone');
is($fn_other, 0, 'no function in the clone belongs to another role');
is($fn_mine, 3, 'the sandbox role owns the three functions');
is($typ_other, 0, 'no type in the clone belongs to another role');
is($nsp_owner, $name, 'schema billing belongs to the sandbox role');
is($db_owner, $name, 'the database belongs to the sandbox role');

# the role and its login
my ($ret, $out, $err) = sandbox_psql($node, $conninfo,
	"SELECT current_user, current_database(), (SELECT count(*) FROM billing.invoices);"
	  . " INSERT INTO public.customers (name, email) VALUES ('new', 'new\@example.com') RETURNING id;"
	  . " INSERT INTO public.orders (customer_id, amount) VALUES (1, 1) RETURNING note;");
is($ret, 0, 'the returned conninfo logs in') or diag $err;
is($out, "$name|$name|200\n201\nnone",
	'logged in as the sandbox role, reads its data, sequences and triggers work');

($ret, $out, $err) = sandbox_psql($node,
	replace_password($conninfo, 'WrongPassword0000000000000000000'), 'SELECT 1');
isnt($ret, 0, 'a wrong password is refused');
like($err, qr/password authentication failed for user "$name"/,
	'refusal is a password authentication failure');

is( $node->safe_psql('postgres',
		"SELECT rolcanlogin, rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolbypassrls,"
		  . " rolinherit, pg_has_role('$name', 'pgsandbox_sandbox', 'MEMBER'),"
		  . " (SELECT rolcanlogin FROM pg_roles WHERE rolname = 'pgsandbox_sandbox')"
		  . " FROM pg_roles WHERE rolname = '$name'"),
	't|f|f|f|f|f|t|t|f',
	'role logs in, has no special attributes and belongs to the NOLOGIN group pgsandbox_sandbox');
is( $node->safe_psql('postgres',
		"SELECT rolpassword LIKE 'SCRAM-SHA-256\$%' FROM pg_authid WHERE rolname = '$name'"),
	't', 'the role has a SCRAM secret');

is( $node->safe_psql('postgres',
		"SELECT has_database_privilege('public', '$name', 'CONNECT'),"
		  . " EXISTS (SELECT 1 FROM pg_database d, aclexplode(d.datacl) a"
		  . "          WHERE d.datname = '$name' AND a.grantee = 0)"),
	'f|f', 'PUBLIC has no privilege on the sandbox database');

# another login role may log in elsewhere, but not into the sandbox
$node->safe_psql('postgres', "CREATE ROLE alice LOGIN PASSWORD 'AlicePw123'");
my $port_host = "host=$host port=$port user=alice password=AlicePw123";
($ret, $out, $err) = sandbox_psql($node, "$port_host dbname=app", 'SELECT current_user');
is($out, 'alice', 'another role logs into the source database');
($ret, $out, $err) = sandbox_psql($node, "$port_host dbname=$name", 'SELECT current_user');
isnt($ret, 0, 'another role cannot connect to the sandbox database');
like($err, qr/permission denied for database "$name"/, '... for lack of CONNECT');

# the sandbox role cannot reach pgsandbox itself
($ret, $out, $err) = sandbox_psql($node,
	"host=$host port=$port dbname=postgres user=$name password="
	  . ($conninfo =~ /password=(\S+)/)[0],
	'SELECT conninfo FROM pgsandbox.source');
isnt($ret, 0, 'the sandbox role cannot read source connection strings');
unlike($out, qr/dbname=app/, '... none is shown');
like($err, qr/permission denied|may connect only to its own database/,
	'... refused by a privilege check or the login check');

# ---------------------------------------------------------------------------
# Default clone: schema only
# ---------------------------------------------------------------------------

my ($name2, $conninfo2) = split /\|/,
  $node->safe_psql('postgres', "SELECT name, conninfo FROM pgsandbox.clone('app')");
like($name2, qr/^sbx_[a-z0-9]{8}$/, 'default clone has a sandbox name');
isnt($name2, $name, 'and a new one');
is( $node->safe_psql('postgres',
		"SELECT schema_only, status FROM pgsandbox.sandboxes WHERE name = '$name2'"),
	't|ready', 'default clone is schema only and ready');
is($node->safe_psql($name2, $schema_sql), $source_schema,
	'schema-only clone has the whole schema');
is( $node->safe_psql($name2,
		"SELECT (SELECT count(*) FROM public.customers) + (SELECT count(*) FROM public.orders)"
		  . " + (SELECT count(*) FROM billing.invoices)"),
	'0', 'schema-only clone has no rows');
($ret, $out, $err) = sandbox_psql($node, $conninfo2, 'SELECT current_user');
is($out, $name2, 'schema-only clone logs in with its conninfo');

# one sandbox role cannot enter another sandbox
my $other = $conninfo2;
$other =~ s/dbname=\S+/dbname=$name/;
($ret, $out, $err) = sandbox_psql($node, $other, 'SELECT 1');
isnt($ret, 0, 'a sandbox role cannot connect to another sandbox');
like($err, qr/permission denied for database "$name"|may connect only to its own database/,
	'... for lack of CONNECT or by the login check');

# ---------------------------------------------------------------------------
# Refusals change nothing
# ---------------------------------------------------------------------------

my $count_sql =
  "SELECT (SELECT count(*) FROM pg_database) || '|' || (SELECT count(*) FROM pg_roles)"
  . " || '|' || (SELECT count(*) FROM pgsandbox.sandboxes) || '|' || (SELECT count(*) FROM pgsandbox.events)";
my $before = $node->safe_psql('postgres', $count_sql);

($ret, $out, $err) = $node->psql('postgres',
	"SELECT * FROM pgsandbox.clone('app_schema', schema_only => false)");
isnt($ret, 0, 'data clone of a source without allow_data fails');
like($err, qr/source "app_schema" does not allow copying data/, '... saying why');
is($node->safe_psql('postgres', $count_sql), $before,
	'... and creates no database, role, sandbox row or event');

($ret, $out, $err) =
  $node->psql('postgres', "SELECT * FROM pgsandbox.clone('nosuchsource')");
isnt($ret, 0, 'clone of an unknown source fails');
like($err, qr/source "nosuchsource" does not exist/, '... saying why');
is($node->safe_psql('postgres', $count_sql), $before, '... and creates nothing');

# ---------------------------------------------------------------------------
# The source is untouched
# ---------------------------------------------------------------------------

is($node->safe_psql('app', $schema_sql), $source_schema, 'source schema unchanged');
is(data_fingerprint('app'), $source_data, 'source data unchanged');

$node->stop;
done_testing();
