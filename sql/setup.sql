--
-- setup: the extension installs its catalog, views and functions
--

-- only in the database its worker works in (pgsandbox.database), and
-- nothing is left behind elsewhere
\c postgres
-- (no CONTEXT: from 18 it also quotes the statement of the install script)
\set SHOW_CONTEXT never
CREATE EXTENSION pgsandbox;
\set SHOW_CONTEXT errors
SELECT count(*) AS pgsandbox_schemas FROM pg_namespace WHERE nspname = 'pgsandbox';
\c contrib_regression

CREATE EXTENSION pgsandbox;
SELECT extversion FROM pg_extension WHERE extname = 'pgsandbox';

-- a dump of this database keeps the sources and who may clone them
SELECT unnest(extconfig)::regclass AS dumped_table
  FROM pg_extension WHERE extname = 'pgsandbox' ORDER BY 1;

SELECT c.relname, c.relkind
  FROM pg_class c
 WHERE c.relnamespace = 'pgsandbox'::regnamespace AND c.relkind IN ('r', 'v')
 ORDER BY 1;

SELECT p.proname, pg_get_function_identity_arguments(p.oid) AS args,
       pg_get_function_result(p.oid) AS result
  FROM pg_proc p
 WHERE p.pronamespace = 'pgsandbox'::regnamespace
 ORDER BY 1;

-- every function a user calls has a comment
SELECT p.proname
  FROM pg_proc p
 WHERE p.pronamespace = 'pgsandbox'::regnamespace
   AND obj_description(p.oid, 'pg_proc') IS NULL;

-- the group every sandbox role joins: no login, no privileges
SELECT rolname, rolcanlogin, rolsuper, rolcreatedb, rolcreaterole
  FROM pg_roles WHERE rolname = 'pgsandbox_sandbox';

-- nothing of the schema is open to PUBLIC
SELECT c.relname
  FROM pg_class c, aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) a
 WHERE c.relnamespace = 'pgsandbox'::regnamespace AND a.grantee = 0;
SELECT p.proname
  FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
 WHERE p.pronamespace = 'pgsandbox'::regnamespace AND a.grantee = 0;

-- the settings, with their defaults
SELECT name, setting, unit, context
  FROM pg_settings WHERE name LIKE 'pgsandbox.%' AND name NOT IN ('pgsandbox.database')
 ORDER BY name;

-- the worker is running for this database (it retries every few seconds
-- until the database exists)
DO $$
BEGIN
	FOR i IN 1..300 LOOP
		PERFORM pg_stat_clear_snapshot();
		PERFORM 1 FROM pg_stat_activity
		 WHERE backend_type = 'pgsandbox worker' AND datname = current_database();
		EXIT WHEN FOUND;
		PERFORM pg_sleep(0.1);
	END LOOP;
END
$$;
SELECT backend_type, datname FROM pg_stat_activity
 WHERE backend_type = 'pgsandbox worker';
