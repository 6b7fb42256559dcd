--
-- subset: the SQL surface of subset and follow rules, every error of bad
-- input (which changes nothing), and who may set them
--
CREATE DATABASE regress_sbx_subset;
\c regress_sbx_subset
CREATE TABLE customers (id int PRIMARY KEY, email text NOT NULL, region text);
CREATE TABLE orders (id int PRIMARY KEY, customer_id int REFERENCES customers, placed date);
CREATE TABLE events (id bigint PRIMARY KEY, body text);
CREATE TABLE log (line text);
CREATE TABLE invoices (id int, amount numeric) PARTITION BY RANGE (id);
CREATE TABLE invoices_low PARTITION OF invoices FOR VALUES FROM (0) TO (100);
CREATE TABLE ext_settings (id int, secret text);
-- a table an extension owns, as PostGIS owns spatial_ref_sys
ALTER EXTENSION plpgsql ADD TABLE ext_settings;
\c contrib_regression

SELECT pgsandbox.add_source('sub', 'dbname=regress_sbx_subset', allow_data => true);
SELECT pgsandbox.add_source('gone', 'dbname=regress_sbx_no_such_db', allow_data => true);

CREATE TEMP TABLE counts_before AS
SELECT (SELECT count(*) FROM pgsandbox.source_rule) AS rules,
       (SELECT string_agg(name || '=' || rules_version, ',' ORDER BY name) FROM pgsandbox.source) AS versions;

-- subset(): bad input, each refused
\set VERBOSITY default
SELECT pgsandbox.subset(NULL, 'public.orders', 'true');
SELECT pgsandbox.subset('sub', NULL, 'true');
SELECT pgsandbox.subset('sub', 'public.orders', NULL);
SELECT pgsandbox.subset('nosuchsource', 'public.orders', 'true');
SELECT pgsandbox.subset('sub', 'orders', 'true');
SELECT pgsandbox.subset('sub', 'a.b.c', 'true');
SELECT pgsandbox.subset('sub', 'public.nosuchtable', 'true');
SELECT pgsandbox.subset('sub', 'public.invoices_low', 'true');
SELECT pgsandbox.subset('sub', 'public.ext_settings', 'true');
SELECT pgsandbox.subset('sub', 'public.orders', '0%');
SELECT pgsandbox.subset('sub', 'public.orders', '100.01%');
SELECT pgsandbox.subset('sub', 'public.orders', '1.00001%');
SELECT pgsandbox.subset('sub', 'public.orders', '.5%');
SELECT pgsandbox.subset('sub', 'public.orders', '0% of pages');
SELECT pgsandbox.subset('sub', 'public.orders', '');
SELECT pgsandbox.subset('sub', 'public.orders', 'true) FROM orders; SELECT (1');
SELECT pgsandbox.subset('sub', 'public.orders', 'nosuchcolumn > 0');
SELECT pgsandbox.subset('sub', 'public.orders', 'id + 1');
\set VERBOSITY terse
SELECT pgsandbox.subset('gone', 'public.orders', 'true');
\set VERBOSITY default
SELECT pgsandbox.unsubset('sub', 'public.orders');
SELECT pgsandbox.follow('sub', 'public.orders', 0);
SELECT pgsandbox.follow('sub', 'public.nosuchtable');
SELECT pgsandbox.unfollow('sub', 'public.orders');

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
  FROM (VALUES ($$pgsandbox.subset(NULL, 'public.orders', 'true')$$),
               ($$pgsandbox.subset('nosuchsource', 'public.orders', 'true')$$),
               ($$pgsandbox.subset('sub', 'orders', 'true')$$),
               ($$pgsandbox.subset('sub', 'public.nosuchtable', 'true')$$),
               ($$pgsandbox.subset('sub', 'public.invoices_low', 'true')$$),
               ($$pgsandbox.subset('sub', 'public.orders', '0%')$$),
               ($$pgsandbox.subset('sub', 'public.orders', 'true) FROM orders; SELECT (1')$$),
               ($$pgsandbox.subset('sub', 'public.orders', 'nosuchcolumn > 0')$$),
               ($$pgsandbox.subset('sub', 'public.orders', 'id + 1')$$),
               ($$pgsandbox.subset('gone', 'public.orders', 'true')$$),
               ($$pgsandbox.unsubset('sub', 'public.orders')$$),
               ($$pgsandbox.follow('sub', 'public.orders', 0)$$)) v(c);

SELECT (SELECT count(*) FROM pgsandbox.source_rule) = rules AS no_rule_added,
       (SELECT string_agg(name || '=' || rules_version, ',' ORDER BY name) FROM pgsandbox.source) = versions
         AS no_version_changed
  FROM counts_before;

-- good rules: set, replaced, listed, removed; each change counts up
-- rules_version
SELECT rules_version AS v0 FROM pgsandbox.source WHERE name = 'sub' \gset
SELECT pgsandbox.subset('sub', 'public.orders', $$placed > date '2026-01-01'$$);
SELECT pgsandbox.subset('sub', 'public.orders', 'id % 10 = 0');
SELECT pgsandbox.subset('sub', 'public.events', '1% of pages');
SELECT pgsandbox.subset('sub', '"public"."customers"', ' 2.5 % ');
SELECT pgsandbox.subset('sub', 'public.log', '10%');
SELECT pgsandbox.subset('sub', 'public.invoices', '50% OF PAGES');
SELECT pgsandbox.follow('sub', 'public.orders', 1000);
SELECT kind, target, expression FROM pgsandbox.source_rules WHERE source = 'sub' ORDER BY kind, target;
SELECT rules_version - :v0 AS changes FROM pgsandbox.source WHERE name = 'sub';
SELECT pgsandbox.unsubset('sub', 'public.log');
SELECT pgsandbox.unfollow('sub', 'public.orders');
SELECT kind, target FROM pgsandbox.source_rules WHERE source = 'sub' ORDER BY kind, target;

-- a subset condition may not name a masked column, nor mask() a column a
-- condition names
SELECT pgsandbox.mask('sub', 'public.customers.email', $$'c' || id || '@example.invalid'$$);
SELECT pgsandbox.subset('sub', 'public.customers', $$email LIKE '%@example.com'$$);
SELECT pgsandbox.subset('sub', 'public.customers', $$customers::text LIKE '%x%'$$);
SELECT pgsandbox.unmask('sub', 'public.customers.email');
SELECT pgsandbox.subset('sub', 'public.customers', $$region = 'north'$$);
SELECT pgsandbox.mask('sub', 'public.customers.region', 'NULL');

-- who may set them: a pgsandbox_user may not; an admin who is not a
-- superuser may, within the limits of a masking expression
CREATE ROLE regress_subset_user IN ROLE pgsandbox_user;
CREATE ROLE regress_subset_admin IN ROLE pgsandbox_admin;
SET ROLE regress_subset_user;
SELECT pgsandbox.subset('sub', 'public.orders', 'true');
SELECT pgsandbox.follow('sub', 'public.orders');
SET ROLE regress_subset_admin;
SELECT pgsandbox.subset('sub', 'public.orders', $$id IN (SELECT 1 FROM pg_catalog.pg_authid)$$);
SELECT pgsandbox.subset('sub', 'public.orders', $$pg_catalog.pg_read_file('x') IS NOT NULL$$);
-- string literals are read as the source reads them, whatever the
-- caller's session says
SET standard_conforming_strings = off;
SELECT pgsandbox.subset('sub', 'public.orders', $$'\' || pg_catalog.pg_read_file('x') || '\' = ''$$);
RESET standard_conforming_strings;
SELECT pgsandbox.subset('sub', 'public.orders', 'id > 5');
RESET ROLE;
DROP ROLE regress_subset_user;
DROP ROLE regress_subset_admin;

-- rules follow their source
SELECT pgsandbox.remove_source('sub');
SELECT pgsandbox.remove_source('gone');
SELECT count(*) AS rules_left FROM pgsandbox.source_rule;
DROP DATABASE regress_sbx_subset;
