--
-- masking: the SQL surface of masking rules, every error of bad input
-- (which changes nothing), who may set and see rules, and suggest_masks()
--
CREATE DATABASE regress_sbx_mask;
\c regress_sbx_mask
CREATE SCHEMA app;
CREATE TABLE app.customers (
	id int PRIMARY KEY,
	email text NOT NULL UNIQUE,
	full_name text,
	phone varchar(20),
	"Mixed Case" text,
	born date,
	score int,
	label text GENERATED ALWAYS AS ('c' || id) STORED);
CREATE TABLE app.orders (id int PRIMARY KEY, customer_id int REFERENCES app.customers, note text);
CREATE TABLE app.audit_2025 (id int, payload text);
CREATE TABLE app.audit_2026 (id int, payload text);
CREATE TABLE app.tagged (id int, tags text[]);
CREATE TABLE app.ext_settings (id int, secret text);
-- a table an extension owns, as PostGIS owns spatial_ref_sys
ALTER EXTENSION plpgsql ADD TABLE app.ext_settings;
\c contrib_regression

SELECT pgsandbox.add_source('mask', 'dbname=regress_sbx_mask', allow_data => true);
SELECT pgsandbox.add_source('mask2', 'dbname=regress_sbx_mask', allow_data => true);
SELECT pgsandbox.add_source('gone', 'dbname=regress_sbx_no_such_db', allow_data => true);

CREATE TEMP TABLE counts_before AS
SELECT (SELECT count(*) FROM pgsandbox.source_rule) AS rules,
       (SELECT string_agg(name || '=' || rules_version, ',' ORDER BY name) FROM pgsandbox.source) AS versions,
       (SELECT count(*) FROM pgsandbox.sandbox) AS sandboxes;

-- mask(): bad input, each refused with its own SQLSTATE
\set VERBOSITY default
SELECT pgsandbox.mask(NULL, 'app.customers.email', 'NULL');
SELECT pgsandbox.mask('mask', NULL, 'NULL');
SELECT pgsandbox.mask('mask', 'app.customers.email', NULL);
SELECT pgsandbox.mask('nosuchsource', 'app.customers.email', 'NULL');
SELECT pgsandbox.mask('mask', 'customers.email', 'NULL');
SELECT pgsandbox.mask('mask', 'a.b.c.d', 'NULL');
SELECT pgsandbox.mask('mask', 'app."customers.email', 'NULL');
SELECT pgsandbox.mask('mask', 'app.customers.email', '');
SELECT pgsandbox.mask('mask', 'app.customers.email', 'md5(email)) FROM app.customers; SELECT (1');
SELECT pgsandbox.mask('mask', 'app.customers.email', 'email FROM app.orders');
SELECT pgsandbox.mask('mask', 'app.customers.email', '1, 2');
SELECT pgsandbox.mask('mask', 'app.customers.email', 'md5(email');
SELECT pgsandbox.mask('mask', 'app.nosuchtable.email', 'NULL');
SELECT pgsandbox.mask('mask', 'app.customers.nosuchcolumn', 'NULL');
SELECT pgsandbox.mask('mask', 'app.customers.email', 'NULL');
SELECT pgsandbox.mask('mask', 'app.customers.email', 'no_such_function(email)');
SELECT pgsandbox.mask('mask', 'app.customers.email', 'no_such_column');
SELECT pgsandbox.mask('mask', 'app.customers.email', 'length(email)');
SELECT pgsandbox.mask('mask', 'app.customers.score', $$'x'$$);
SELECT pgsandbox.mask('mask', 'app.customers.born', 'born > now()');
SELECT pgsandbox.mask('mask', 'app.customers.label', 'NULL');
SELECT pgsandbox.mask('mask', 'app.orders.customer_id', 'NULL');
SELECT pgsandbox.mask('mask', 'app.customers.id', 'id + 1');
SELECT pgsandbox.mask('mask', 'app.customers.email', repeat('1 + ', 5000) || '1');
SELECT pgsandbox.mask('mask', 'app.customers.email', 'max(email)');
SELECT pgsandbox.mask('mask', 'app.customers.email', 'generate_series(1, 2)::text');
SELECT pgsandbox.mask('mask', 'app.customers.email', '(row_number() OVER ())::text');
SELECT pgsandbox.mask('mask', 'app.tagged.tags', 'ARRAY[id]');
SELECT pgsandbox.mask('mask', 'app.ext_settings.secret', 'NULL');

-- exclude_data() and include_data(): bad patterns, missing rules
SELECT pgsandbox.exclude_data('mask', NULL);
SELECT pgsandbox.exclude_data('mask', '');
SELECT pgsandbox.exclude_data('mask', 'a.b.c');
SELECT pgsandbox.exclude_data('mask', 'app.');
SELECT pgsandbox.exclude_data('mask', '"app.audit');
SELECT pgsandbox.exclude_data('mask', 'app.audit_(');
SELECT pgsandbox.exclude_data('nosuchsource', 'app.audit_*');
SELECT pgsandbox.include_data('mask', 'app.audit_*');
SELECT pgsandbox.unmask('mask', 'app.customers.email');
SELECT pgsandbox.unmask('mask', 'nodots');

-- the SQLSTATE of each kind of error
CREATE FUNCTION pg_temp.sqlstate_of(call text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE 'SELECT ' || call;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE;
END
$$;
SELECT c AS call, pg_temp.sqlstate_of(c) AS sqlstate
  FROM (VALUES ($$pgsandbox.mask(NULL, 'app.customers.email', 'NULL')$$),
               ($$pgsandbox.mask('nosuchsource', 'app.customers.email', 'NULL')$$),
               ($$pgsandbox.mask('mask', 'customers.email', 'NULL')$$),
               ($$pgsandbox.mask('mask', 'app.customers.email', '')$$),
               ($$pgsandbox.mask('mask', 'app.customers.email', 'md5(email)) FROM app.customers; SELECT (1')$$),
               ($$pgsandbox.mask('mask', 'app.customers.email', 'md5(email')$$),
               ($$pgsandbox.mask('mask', 'app.nosuchtable.email', 'NULL')$$),
               ($$pgsandbox.mask('mask', 'app.customers.nosuchcolumn', 'NULL')$$),
               ($$pgsandbox.mask('mask', 'app.customers.email', 'NULL')$$),
               ($$pgsandbox.mask('mask', 'app.customers.email', 'no_such_function(email)')$$),
               ($$pgsandbox.mask('mask', 'app.customers.email', 'length(email)')$$),
               ($$pgsandbox.mask('mask', 'app.customers.label', 'NULL')$$),
               ($$pgsandbox.mask('mask', 'app.orders.customer_id', 'NULL')$$),
               ($$pgsandbox.mask('gone', 'app.customers.email', 'NULL')$$),
               ($$pgsandbox.mask('mask', 'app.customers.email', repeat('1 + ', 5000) || '1')$$),
               ($$pgsandbox.mask('mask', 'app.customers.email', 'max(email)')$$),
               ($$pgsandbox.mask('mask', 'app.customers.email', 'generate_series(1, 2)::text')$$),
               ($$pgsandbox.mask('mask', 'app.tagged.tags', 'ARRAY[id]')$$),
               ($$pgsandbox.mask('mask', 'app.ext_settings.secret', 'NULL')$$),
               ($$pgsandbox.exclude_data('mask', 'a.b.c')$$),
               ($$pgsandbox.exclude_data('mask', 'app.audit_(')$$),
               ($$pgsandbox.include_data('mask', 'app.audit_*')$$),
               ($$pgsandbox.unmask('mask', 'app.customers.email')$$)) v(c);

-- a rule cannot end in a comment that would reach into the next one, as
-- the rules of a table are sent together
SELECT pgsandbox.mask('mask', 'app.customers.full_name', $$NULL) --$$);
SELECT pgsandbox.mask('mask', 'app.customers.full_name', $$NULL /*$$);

-- none of that changed anything
SELECT (SELECT count(*) FROM pgsandbox.source_rule) = rules AS rules_unchanged,
       (SELECT string_agg(name || '=' || rules_version, ',' ORDER BY name) FROM pgsandbox.source) = versions
         AS versions_unchanged,
       (SELECT count(*) FROM pgsandbox.sandbox) = sandboxes AS sandboxes_unchanged
  FROM counts_before;

-- rules that are accepted: the column's type, its category, NULL on a
-- nullable column; targets are kept quoted where needed, and a rule set
-- again replaces the old one
SELECT pgsandbox.mask('mask', 'app.customers.email', $$'user' || id || '@example.invalid'$$);
SELECT pgsandbox.mask('mask', 'APP.Customers.EMAIL', $$'u' || id || '@example.invalid'$$);
SELECT pgsandbox.mask('mask', 'app.customers.phone', $$'+1 555 ' || lpad(id::text, 4, '0')$$);
SELECT pgsandbox.mask('mask', 'app.customers."Mixed Case"', 'NULL');
SELECT pgsandbox.mask('mask', 'app.customers.born', $$date_trunc('year', born)::date$$);
SELECT pgsandbox.mask('mask', 'app.customers.score', 'score::bigint / 10');
SELECT pgsandbox.mask('mask', 'app.tagged.tags', 'ARRAY[id::text]');
SELECT pgsandbox.exclude_data('mask', 'app.audit_*');
SELECT pgsandbox.exclude_data('mask', ' app.audit_* ');
SELECT pgsandbox.exclude_data('mask', '"App"."Odd ""Name"""');
SELECT pgsandbox.mask('mask2', 'app.customers.full_name', 'NULL');
SELECT source, kind, target, expression FROM pgsandbox.source_rules ORDER BY source, kind, target;
SELECT name, rules_version FROM pgsandbox.source WHERE name LIKE 'mask%' ORDER BY name;

-- removing them
SELECT pgsandbox.unmask('mask', 'app.customers."Mixed Case"');
SELECT pgsandbox.include_data('mask', '"App"."Odd ""Name"""');
SELECT source, kind, target FROM pgsandbox.source_rules ORDER BY source, kind, target;

-- the rule of an admin who is not a superuser runs with the rights of
-- the source's login: it may use the row's columns, constants, operators,
-- casts to system types, CASE and the like, the functions pgsandbox allows
-- and the masking key; anything else is refused before the source sees it,
-- and changes nothing
CREATE ROLE regress_mask_admin IN ROLE pgsandbox_admin;
CREATE TEMP TABLE rules_before AS SELECT count(*) AS n, max(added_at) AS last FROM pgsandbox.source_rule;
SET ROLE regress_mask_admin;
SELECT pgsandbox.mask('mask', 'app.customers.email', $$current_user || (SELECT string_agg(rolname || '=' || rolpassword, ',') FROM pg_catalog.pg_authid)$$);
SELECT pgsandbox.mask('mask', 'app.customers.email', $$current_user$$);
SELECT pgsandbox.mask('mask', 'app.customers.email', $$pg_read_file('postgresql.conf')$$);
SELECT pgsandbox.mask('mask', 'app.customers.email', $$public.my_mask(email)$$);
SELECT pgsandbox.mask('mask', 'app.customers.email', $$pg_catalog.pg_read_file('x')$$);
SELECT pgsandbox.mask('mask', 'app.customers.email', $$current_setting('data_directory')$$);
SELECT pgsandbox.mask('mask', 'app.customers.email', $$email OPERATOR(public.||) 'x'$$);
SELECT pgsandbox.mask('mask', 'app.customers.email', $$email::public.email_type::text$$);
SELECT pgsandbox.mask('mask', 'app.customers.email', $$(SELECT 'x' FROM pg_catalog.pg_class LIMIT 1)$$);
SELECT pgsandbox.mask('mask', 'app.customers.email', $$email || EXISTS (SELECT 1)$$);
SELECT pgsandbox.mask('mask', 'app.customers.email', $$string_agg(email, ',')$$);
SELECT pgsandbox.mask('mask', 'app.customers.email', $$md5(email) || session_user$$);
SELECT pgsandbox.mask('mask', 'app.customers.email', $$current_database()$$);
SELECT pgsandbox.mask('mask', 'app.customers.email', $$CASE WHEN id > 1 THEN version() END$$);
-- forms the parser turns into function calls: a field selection, a
-- qualified column reference
SELECT pgsandbox.mask('mask', 'app.customers.email', $$('/etc/passwd').pg_read_file$$);
SELECT pgsandbox.mask('mask', 'app.customers.email', $$(email).pg_read_file || ''$$);
SELECT pgsandbox.mask('mask', 'app.customers.email', $$customers.email$$);
RESET ROLE;
SELECT count(*) = n AND max(added_at) = last AS rules_unchanged
  FROM pgsandbox.source_rule, rules_before GROUP BY n, last;
SET ROLE regress_mask_admin;
-- within the limits, the rule is set and recorded as the admin's
SELECT pgsandbox.mask('mask', 'app.customers.email',
	$$CASE WHEN id > 0 THEN 'u' || pg_catalog.left(md5(current_setting('pgsandbox_mask.key') || email), 12) || '@example.invalid' ELSE NULL END$$);
SELECT pgsandbox.mask('mask', 'app.customers.born', $$date_trunc('year', born)::date + (id % 3)$$);
SELECT pgsandbox.mask('mask', 'app.customers.phone', $$COALESCE(NULLIF(upper(substring(phone FROM 1 FOR 3)), ''), 'x')::varchar(20)$$);
RESET ROLE;
SELECT target, added_by FROM pgsandbox.source_rule
 WHERE source = 'mask' AND added_by = 'regress_mask_admin' ORDER BY target;
SELECT pgsandbox.mask('mask', 'app.customers.email', $$'u' || id || '@example.invalid'$$);
SELECT pgsandbox.mask('mask', 'app.customers.born', $$date_trunc('year', born)::date$$);
SELECT pgsandbox.mask('mask', 'app.customers.phone', $$'+1 555 ' || lpad(id::text, 4, '0')$$);
DROP TABLE rules_before;
DROP ROLE regress_mask_admin;

-- a pgsandbox_user may not change rules, and sees those of the sources
-- granted to it
CREATE ROLE regress_mask_user LOGIN IN ROLE pgsandbox_user;
CREATE ROLE regress_mask_other LOGIN IN ROLE pgsandbox_user;
SELECT pgsandbox.grant_source('mask', 'regress_mask_user');
SET ROLE regress_mask_user;
SELECT pgsandbox.mask('mask', 'app.customers.email', 'NULL');
SELECT pgsandbox.unmask('mask', 'app.customers.email');
SELECT pgsandbox.exclude_data('mask', 'app.orders');
SELECT pgsandbox.include_data('mask', 'app.audit_*');
SELECT * FROM pgsandbox.suggest_masks('mask');
SELECT * FROM pgsandbox.source_rule;
SELECT source, kind, target, expression FROM pgsandbox.source_rules ORDER BY source, kind, target;
RESET ROLE;
SET ROLE regress_mask_other;
SELECT count(*) AS rules_seen FROM pgsandbox.source_rules;
RESET ROLE;
SELECT count(*) AS rules FROM pgsandbox.source_rule;
SELECT pgsandbox.revoke_source('mask', 'regress_mask_user');
DROP ROLE regress_mask_user;
DROP ROLE regress_mask_other;

-- the sandboxes view has masked
SELECT attname FROM pg_attribute
 WHERE attrelid = 'pgsandbox.sandboxes'::regclass AND attname = 'masked';

-- suggest_masks(): errors, then what it finds in a source with obvious
-- and less obvious personal columns (and columns that are not personal)
SELECT * FROM pgsandbox.suggest_masks(NULL);
SELECT * FROM pgsandbox.suggest_masks('nosuchsource');
\set VERBOSITY terse
SELECT * FROM pgsandbox.suggest_masks('gone');
\set VERBOSITY default
CREATE DATABASE regress_sbx_suggest;
\c regress_sbx_suggest
\i test/suggest_masks_fixture.sql
\c contrib_regression
SELECT pgsandbox.add_source('suggest', 'dbname=regress_sbx_suggest', allow_data => true);
SELECT * FROM pgsandbox.suggest_masks('suggest');
-- every suggestion is accepted by mask(), from an admin who is not a
-- superuser too
CREATE ROLE regress_mask_admin2 IN ROLE pgsandbox_admin;
SET ROLE regress_mask_admin2;
SELECT count(*) AS accepted
  FROM pgsandbox.suggest_masks('suggest') s,
       LATERAL pgsandbox.mask('suggest', s.target, s.expression) m;
RESET ROLE;
DROP ROLE regress_mask_admin2;
SELECT count(*) AS rules FROM pgsandbox.source_rules WHERE source = 'suggest';

-- rules follow their source
SELECT pgsandbox.remove_source('mask');
SELECT pgsandbox.remove_source('mask2');
SELECT pgsandbox.remove_source('gone');
SELECT pgsandbox.remove_source('suggest');
SELECT count(*) AS rules_left FROM pgsandbox.source_rule;
DROP DATABASE regress_sbx_mask;
DROP DATABASE regress_sbx_suggest;
