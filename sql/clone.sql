--
-- clone: a schema-only and a full clone of a database of this cluster, seen
-- from the catalog; the TAP suites check the contents in depth
--
CREATE DATABASE regress_sbx_src;
\c regress_sbx_src
CREATE TABLE item (id int PRIMARY KEY, label text NOT NULL);
INSERT INTO item SELECT g, 'item ' || g FROM generate_series(1, 50) g;
COMMENT ON TABLE item IS 'things';
\c contrib_regression

SELECT pgsandbox.add_source('src', 'dbname=regress_sbx_src', allow_data => true);

-- schema only, the default
SELECT name ~ '^sbx_[a-z0-9]{8}$' AS good_name,
       conninfo ~ ('^host=\S+ port=\d+ dbname=' || name || ' user=' || name || ' password=[A-Za-z0-9]{32}$') AS good_conninfo,
       expires_at BETWEEN now() + interval '3 hours 59 minutes' AND now() + interval '4 hours 1 minute' AS default_ttl
  FROM pgsandbox.clone('src') \gset schema_
\echo :schema_good_name :schema_good_conninfo :schema_default_ttl

-- with data, a ttl and labels
SELECT name AS data_name,
       expires_at BETWEEN now() + interval '9 minutes' AND now() + interval '11 minutes' AS short_ttl
  FROM pgsandbox.clone('src', schema_only => false, ttl => '10 minutes',
                       labels => '{"task": "regress", "n": 1}') \gset
\echo :short_ttl

SELECT source, schema_only, status, labels, ready_at IS NOT NULL AS ready,
       size_bytes > 0 AS has_size, error, dropped_at
  FROM pgsandbox.sandboxes ORDER BY created_at;

-- the role and the database
SELECT r.rolcanlogin, r.rolsuper, r.rolcreatedb, r.rolcreaterole, r.rolreplication,
       r.rolbypassrls, pg_has_role(r.oid, 'pgsandbox_sandbox', 'member') AS in_group,
       d.datdba = r.oid AS owns_database,
       has_database_privilege('public', d.datname, 'CONNECT') AS public_connect
  FROM pg_roles r JOIN pg_database d ON d.datname = r.rolname
 WHERE r.rolname = :'data_name';

-- the events of the full clone
SELECT action, actor = current_user AS by_me,
       detail ~ ('^(source "src", schema and data|cloned in [0-9.]+ s; steps \(ms from the request\): queued 0\.0, taken [0-9.]+,'
                 ' role and database made [0-9.]+, clone worker started [0-9.]+, pg_dump started [0-9.]+, source read [0-9.]+,'
                 ' restored [0-9.]+, verified [0-9.]+, finished [0-9.]+, worker reported [0-9.]+, marked ready [0-9.]+)$') AS detail_ok
  FROM pgsandbox.events WHERE sandbox = :'data_name' ORDER BY at;
-- the steps come in order
SELECT bool_and(ms >= prev) AS in_order, count(*) AS steps
  FROM (SELECT m[1]::numeric AS ms, lag(m[1]::numeric, 1, 0) OVER (ORDER BY o) AS prev
          FROM pgsandbox.events e,
               regexp_matches(e.detail, ' ([0-9.]+)(,|$)', 'g') WITH ORDINALITY AS t(m, o)
         WHERE e.sandbox = :'data_name' AND e.action = 'ready') s;

-- extend, then drop
SELECT e BETWEEN now() + interval '119 minutes' AND now() + interval '121 minutes' AS extended
  FROM pgsandbox.extend(:'data_name', '2 hours') e;
SELECT expires_at BETWEEN now() + interval '119 minutes' AND now() + interval '121 minutes' AS recorded
  FROM pgsandbox.sandboxes WHERE name = :'data_name';
SELECT pgsandbox.drop(:'data_name');
SELECT status, dropped_at IS NOT NULL AS has_dropped_at
  FROM pgsandbox.sandboxes WHERE name = :'data_name';
SELECT count(*) AS left_over FROM pg_database WHERE datname = :'data_name';
SELECT count(*) AS left_over FROM pg_roles WHERE rolname = :'data_name';
-- a dropped sandbox cannot be dropped again, nor extended
SELECT set_config('regress.sandbox', :'data_name', false) IS NOT NULL AS set;
DO $$
BEGIN
	PERFORM pgsandbox.drop(current_setting('regress.sandbox'));
EXCEPTION WHEN undefined_object THEN
	RAISE NOTICE 'drop: %', replace(SQLERRM, current_setting('regress.sandbox'), '<name>');
END
$$;
DO $$
BEGIN
	PERFORM pgsandbox.extend(current_setting('regress.sandbox'), '1 hour');
EXCEPTION WHEN undefined_object THEN
	RAISE NOTICE 'extend: %', replace(SQLERRM, current_setting('regress.sandbox'), '<name>');
END
$$;
SELECT action FROM pgsandbox.events WHERE sandbox = :'data_name' ORDER BY at;

-- clean up every sandbox left
SELECT pgsandbox.drop(name) FROM pgsandbox.sandboxes WHERE status = 'ready';
SELECT status, count(*) FROM pgsandbox.sandboxes GROUP BY 1;
DROP DATABASE regress_sbx_src;

-- pg_dump's compression is a level or a method: nothing else reaches its argv
ALTER SYSTEM SET pgsandbox.dump_compression = '0 --file=/tmp/x';
ALTER SYSTEM SET pgsandbox.dump_compression = '';
ALTER SYSTEM SET pgsandbox.dump_compression = 'ZSTD';
SHOW pgsandbox.dump_compression;
