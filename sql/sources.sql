--
-- sources: approving and withdrawing clone sources, and what is shown of them
--
SELECT pgsandbox.add_source('app', 'dbname=app');
SELECT pgsandbox.add_source('remote', 'host=db.example.com port=6543 dbname=shop user=reader password=Sup3rSecret sslmode=require', allow_data => true);
SELECT pgsandbox.add_source('uri', 'postgresql://reader:UriSecret@db.example.com:5433/shop');
SELECT name, allow_data, host, port, dbname, "user", added_at <= now() AS added
  FROM pgsandbox.sources ORDER BY name;

-- no column of the view shows a password
SELECT count(*) AS leaks FROM pgsandbox.sources s
 WHERE s::text LIKE '%Secret%';

-- bad input: each a clear error, nothing added
SELECT pgsandbox.add_source('app', 'dbname=other');
SELECT pgsandbox.add_source('bad', 'dbname=app nosuchoption=1');
SELECT pgsandbox.add_source('bad', 'dbname=app password');
SELECT pgsandbox.add_source('bad', 'postgresql://[bad');
SELECT pgsandbox.add_source('bad', 'dbname=app replication=database');
SELECT pgsandbox.add_source('bad', 'dbname=app keepalives=1');
SELECT pgsandbox.add_source('bad', repeat('x', 3000));
SELECT pgsandbox.add_source(NULL, 'dbname=app');
SELECT pgsandbox.add_source('bad', NULL);
SELECT pgsandbox.add_source('bad', 'dbname=app', NULL);
SELECT pgsandbox.add_source('', 'dbname=app');
SELECT pgsandbox.add_source('bad name', 'dbname=app');
SELECT pgsandbox.add_source('x''; DROP TABLE pgsandbox.source; --', 'dbname=app');
SELECT pgsandbox.add_source(repeat('a', 64), 'dbname=app');
SELECT name FROM pgsandbox.sources ORDER BY name;

-- the stored connection string is readable by no one but the owner
CREATE ROLE regress_sbx_nobody LOGIN;
GRANT USAGE ON SCHEMA pgsandbox TO regress_sbx_nobody;
SET ROLE regress_sbx_nobody;
SELECT conninfo FROM pgsandbox.source;
SELECT * FROM pgsandbox.sources;
SELECT pgsandbox.add_source('sneaky', 'dbname=app');
RESET ROLE;
REVOKE USAGE ON SCHEMA pgsandbox FROM regress_sbx_nobody;
DROP ROLE regress_sbx_nobody;

-- withdrawing
SELECT pgsandbox.remove_source('uri');
SELECT pgsandbox.remove_source('uri');
SELECT pgsandbox.remove_source(NULL);
SELECT name FROM pgsandbox.sources ORDER BY name;
SELECT pgsandbox.remove_source('remote');
SELECT pgsandbox.remove_source('app');
