--
-- agent: run_sql, describe_schema and schema_diff on a sandbox, as an
-- agent would call them
--
CREATE DATABASE regress_sbx_shop;
\c regress_sbx_shop
CREATE TABLE customer (id int PRIMARY KEY, email text NOT NULL UNIQUE);
CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL REFERENCES customer,
                     amount numeric(10,2) NOT NULL DEFAULT 0, note text);
CREATE INDEX orders_customer ON orders (customer_id);
CREATE VIEW big_orders AS SELECT * FROM orders WHERE amount > 100;
CREATE FUNCTION order_total(c int) RETURNS numeric LANGUAGE sql
    AS 'SELECT sum(amount) FROM orders WHERE customer_id = c';
COMMENT ON TABLE orders IS 'one row per order';
INSERT INTO customer VALUES (1, 'a@example.com'), (2, 'b@example.com');
INSERT INTO orders SELECT g, 1 + g % 2, g * 10.5, NULL FROM generate_series(1, 20) g;
\c contrib_regression

SELECT pgsandbox.add_source('shop', 'dbname=regress_sbx_shop', allow_data => true);
CREATE ROLE regress_agent LOGIN IN ROLE pgsandbox_user;
CREATE ROLE regress_other LOGIN IN ROLE pgsandbox_user;
SELECT pgsandbox.grant_source('shop', 'regress_agent');

SET ROLE regress_agent;
SELECT name AS sbx FROM pgsandbox.clone('shop', schema_only => false) \gset

-- the shape of the sandbox
SELECT jsonb_pretty(pgsandbox.describe_schema(:'sbx'));

-- statements run as the sandbox role, with typed values, row limits and
-- the error of the statement that failed
SELECT jsonb_pretty(pgsandbox.run_sql(:'sbx',
    'SELECT current_user = current_database() AS as_sandbox_role, 1::int AS i, 2.5::numeric AS n,
            true AS b, NULL::text AS nothing, ''{"k": 1}''::jsonb AS j, ''NaN''::float8 AS nan;
     SELECT id FROM orders ORDER BY id;
     UPDATE orders SET note = ''seen'' WHERE id <= 3;
     SELECT * FROM no_such_table;
     SELECT 1', row_limit => 2));

-- one call is one transaction: the failed statement undid the UPDATE
SELECT pgsandbox.run_sql(:'sbx', 'SELECT count(note) FROM orders') -> 'results' -> 0 -> 'rows' AS noted;

-- row_limit 0 counts without returning rows; read_only rolls back
SELECT pgsandbox.run_sql(:'sbx', 'SELECT * FROM orders', row_limit => 0);
SELECT pgsandbox.run_sql(:'sbx', 'DELETE FROM orders', read_only => true);
SELECT pgsandbox.run_sql(:'sbx', 'CREATE TEMP TABLE t (i int); SELECT 1', read_only => true) -> 'error' ->> 'sqlstate' AS sqlstate;
SELECT pgsandbox.run_sql(:'sbx', 'SELECT count(*) AS orders, count(note) AS noted FROM orders') -> 'results' -> 0 -> 'rows';

-- a statement past its timeout is cancelled
SELECT pgsandbox.run_sql(:'sbx', 'SELECT pg_sleep(5)', timeout => '100ms') -> 'error';
-- even when the SQL turns statement_timeout off
SELECT clock_timestamp() AS before \gset
SELECT pgsandbox.run_sql(:'sbx', 'SET statement_timeout = 0; SELECT pg_sleep(30)', timeout => '100ms') -> 'error' ->> 'sqlstate' AS sqlstate;
SELECT clock_timestamp() - :'before'::timestamptz < interval '10 seconds' AS cancelled_in_time;

-- the sandbox role cannot hand itself to other roles
SELECT pgsandbox.run_sql(:'sbx', 'GRANT ' || quote_ident(:'sbx') || ' TO pgsandbox_user') -> 'error' ->> 'message' AS message;

-- the sandbox role cannot see pgsandbox's catalog
SELECT pgsandbox.run_sql(:'sbx', 'SELECT * FROM pgsandbox.source') -> 'error' ->> 'message' AS message;

-- a migration, and what it changed
SELECT pgsandbox.run_sql(:'sbx', $$
    ALTER TABLE orders ADD COLUMN status text NOT NULL DEFAULT 'new';
    UPDATE orders SET note = '' WHERE note IS NULL;
    ALTER TABLE orders ALTER COLUMN note SET NOT NULL;
    CREATE INDEX orders_status ON orders (status);
    DROP VIEW big_orders;
    CREATE TABLE audit (at timestamptz DEFAULT now(), what text);
    COMMENT ON TABLE orders IS 'orders, with a status';
$$) -> 'error' AS migration_error;
SELECT jsonb_pretty(pgsandbox.schema_diff(:'sbx'));

-- bad input
SELECT pgsandbox.run_sql(NULL, 'SELECT 1');
SELECT pgsandbox.run_sql(:'sbx', NULL);
SELECT pgsandbox.run_sql(:'sbx', 'SELECT 1', row_limit => 1001);
SELECT pgsandbox.run_sql(:'sbx', 'SELECT 1', row_limit => -1);
SELECT pgsandbox.run_sql(:'sbx', 'SELECT 1', timeout => '0');
SELECT pgsandbox.run_sql(:'sbx', 'SELECT 1', read_only => NULL);
SELECT pgsandbox.run_sql('sbx_nosuch00', 'SELECT 1');
SELECT pgsandbox.describe_schema('postgres');
SELECT pgsandbox.schema_diff(NULL);
RESET ROLE;

-- another user's sandbox does not exist for it
SELECT set_config('regress.sandbox', :'sbx', false) IS NOT NULL AS set;
SET ROLE regress_other;
DO $$
BEGIN
	PERFORM pgsandbox.run_sql(current_setting('regress.sandbox'), 'SELECT 1');
EXCEPTION WHEN undefined_object THEN
	RAISE NOTICE 'run_sql: %', replace(SQLERRM, current_setting('regress.sandbox'), '<name>');
END
$$;
DO $$
BEGIN
	PERFORM pgsandbox.describe_schema(current_setting('regress.sandbox'));
EXCEPTION WHEN undefined_object THEN
	RAISE NOTICE 'describe_schema: %', replace(SQLERRM, current_setting('regress.sandbox'), '<name>');
END
$$;
RESET ROLE;

-- a dropped sandbox cannot be used, and its secret is gone
SELECT pgsandbox.drop(:'sbx');
DO $$
BEGIN
	PERFORM pgsandbox.run_sql(current_setting('regress.sandbox'), 'SELECT 1');
EXCEPTION WHEN undefined_object THEN
	RAISE NOTICE 'run_sql: %', replace(SQLERRM, current_setting('regress.sandbox'), '<name>');
END
$$;
SELECT count(*) AS secrets_left FROM pgsandbox.sandbox_secret;

SELECT pgsandbox.remove_source('shop');
DROP ROLE regress_agent, regress_other;
DROP DATABASE regress_sbx_shop;
