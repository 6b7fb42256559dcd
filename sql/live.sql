--
-- live: set_live() and unset_live() refuse what cannot be followed, with a
-- clear error, and change nothing; the server of this suite runs with
-- wal_level = replica, so no source here can be live (a source with an
-- exclude_data rule gets as far as that check: 053 makes one live)
--
CREATE ROLE regress_repl LOGIN REPLICATION PASSWORD 'regress_pw';
SELECT pgsandbox.add_source('live_nodata', 'dbname=contrib_regression user=regress_repl password=regress_pw');
SELECT pgsandbox.add_source('live_nopw', 'dbname=contrib_regression', allow_data => true);
SELECT pgsandbox.add_source('live_masked', 'dbname=contrib_regression user=regress_repl password=regress_pw',
                            allow_data => true);
CREATE TABLE regress_live_t (id int PRIMARY KEY, secret text);
GRANT SELECT ON regress_live_t TO regress_repl;
SELECT pgsandbox.mask('live_masked', 'public.regress_live_t.secret', $$'x'$$);
SELECT pgsandbox.add_source('live_excl', 'dbname=contrib_regression user=regress_repl password=regress_pw',
                            allow_data => true);
SELECT pgsandbox.exclude_data('live_excl', 'public.regress_live_t');
SELECT pgsandbox.add_source('live_subset', 'dbname=contrib_regression user=regress_repl password=regress_pw',
                            allow_data => true);
SELECT pgsandbox.subset('live_subset', 'public.regress_live_t', 'id < 10');
SELECT pgsandbox.add_source('live_ok', 'dbname=contrib_regression user=regress_repl password=regress_pw',
                            allow_data => true);

CREATE TEMP TABLE before AS
SELECT (SELECT count(*) FROM pgsandbox.sandbox) AS sandboxes,
       (SELECT count(*) FROM pgsandbox.snapshot_plan) AS plans,
       (SELECT count(*) FROM pg_subscription) AS subscriptions;

-- each refusal's SQLSTATE and message
CREATE FUNCTION pg_temp.try(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE sql;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;
SELECT sql, pg_temp.try(sql) AS refused FROM (VALUES
	('SELECT pgsandbox.set_live(NULL, ''pub'')'),
	('SELECT pgsandbox.set_live(''live_ok'', NULL)'),
	('SELECT pgsandbox.set_live(''live_ok'', '''')'),
	('SELECT pgsandbox.set_live(''live_ok'', repeat(''p'', 64))'),
	('SELECT pgsandbox.set_live(''nosuchsource'', ''pub'')'),
	('SELECT pgsandbox.set_live(''live_nodata'', ''pub'')'),
	('SELECT pgsandbox.set_live(''live_nopw'', ''pub'')'),
	('SELECT pgsandbox.set_live(''live_masked'', ''pub'')'),
	('SELECT pgsandbox.set_live(''live_excl'', ''pub'')'),
	('SELECT pgsandbox.set_live(''live_subset'', ''pub'')'),
	('SELECT pgsandbox.set_live(''live_ok'', ''pub'')'),
	('SELECT pgsandbox.unset_live(''live_ok'')'),
	('SELECT pgsandbox.unset_live(''nosuchsource'')'),
	('SELECT pgsandbox.unset_live(NULL)')
) AS t(sql);

-- a publication name that is not ASCII (printed apart: its bytes depend on
-- the database's encoding)
SELECT pg_temp.try('SELECT pgsandbox.set_live(''live_ok'', '
                   || quote_literal('p' || chr(249) || 'b') || ')') AS refused;

-- nothing was made, and no source is live
SELECT (SELECT count(*) FROM pgsandbox.sandbox) = sandboxes AS same_sandboxes,
       (SELECT count(*) FROM pgsandbox.snapshot_plan) = plans AS same_plans,
       (SELECT count(*) FROM pg_subscription) = subscriptions AS same_subscriptions
  FROM before;
SELECT name, live_publication FROM pgsandbox.sources WHERE name LIKE 'live%' ORDER BY name;

-- a pgsandbox_user may not call them
CREATE ROLE regress_live_user IN ROLE pgsandbox_user;
SET ROLE regress_live_user;
SELECT pgsandbox.set_live('live_ok', 'pub');
SELECT pgsandbox.unset_live('live_ok');
RESET ROLE;

-- pgsandbox_live: no login before the first live build (which gives it one
-- for its apply; the login check refuses every client as it, see 049)
SELECT rolname, rolcanlogin, rolsuper, rolbypassrls, rolreplication
  FROM pg_roles WHERE rolname = 'pgsandbox_live';

SELECT pgsandbox.remove_source('live_nodata');
SELECT pgsandbox.remove_source('live_nopw');
SELECT pgsandbox.remove_source('live_masked');
SELECT pgsandbox.remove_source('live_excl');
SELECT pgsandbox.remove_source('live_subset');
SELECT pgsandbox.remove_source('live_ok');
DROP TABLE regress_live_t;
DROP ROLE regress_live_user;
DROP ROLE regress_repl;
