/* pgsandbox--0.4--0.5.sql: upgrade pgsandbox from 0.4 to 0.5 (source generations, statistics) */

\echo Use "ALTER EXTENSION pgsandbox UPDATE TO '0.5'" to load this file. \quit

-- Each time a source is added it gets a new generation; a snapshot or pool
-- member records the generation of the source it was made of.  A source
-- removed and added again, even in one transaction while a snapshot of the
-- old one was being built, is then never served by what was made of the
-- old one.  (Before, the times the source was added and the snapshot made
-- were compared, which that transaction could defeat.)
CREATE SEQUENCE pgsandbox.source_generation;
SELECT pg_catalog.pg_extension_config_dump('pgsandbox.source_generation', '');
ALTER TABLE pgsandbox.source ADD COLUMN generation bigint;
UPDATE pgsandbox.source
   SET generation = pg_catalog.nextval('pgsandbox.source_generation');
ALTER TABLE pgsandbox.source
	ALTER COLUMN generation SET DEFAULT pg_catalog.nextval('pgsandbox.source_generation'),
	ALTER COLUMN generation SET NOT NULL;

-- what existed before keeps serving as it did: made since its source was
-- added
ALTER TABLE pgsandbox.sandbox ADD COLUMN source_generation bigint;
UPDATE pgsandbox.sandbox s
   SET source_generation = o.generation
  FROM pgsandbox.source o
 WHERE o.name = s.source AND o.added_at <= s.created_at;

-- Clones may carry the planner's statistics of a source (PostgreSQL 18),
-- where an admin allows it: statistics hold values of its columns.
ALTER TABLE pgsandbox.source ADD COLUMN allow_statistics boolean NOT NULL DEFAULT false;

CREATE OR REPLACE VIEW pgsandbox.sources WITH (security_barrier) AS
	SELECT s.name, s.allow_data, s.host, s.port, s.dbname, s."user", s.added_at,
		   s.allow_statistics
	  FROM pgsandbox.source s
	 WHERE pgsandbox._caller_is_admin()
		OR EXISTS (SELECT 1 FROM pgsandbox.source_grant g
					WHERE g.source = s.name
					  AND pg_catalog.pg_has_role(pgsandbox._caller(), g.grantee, 'MEMBER'));

DROP FUNCTION pgsandbox.add_source(text, text, boolean);
CREATE FUNCTION pgsandbox.add_source(name text, conninfo text,
									 allow_data boolean DEFAULT false,
									 allow_statistics boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_add_source'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.add_source(text, text, boolean, boolean) IS
	'Approve a database as a clone source; allow_data permits copying its rows, allow_statistics its planner statistics (PostgreSQL 18)';
REVOKE ALL ON FUNCTION pgsandbox.add_source(text, text, boolean, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgsandbox.add_source(text, text, boolean, boolean) TO pgsandbox_admin;

DROP FUNCTION pgsandbox.clone(text, boolean, interval, jsonb, boolean);
CREATE FUNCTION pgsandbox.clone(source text,
								schema_only boolean DEFAULT true,
								ttl interval DEFAULT NULL,
								labels jsonb DEFAULT '{}',
								fresh boolean DEFAULT false,
								statistics boolean DEFAULT false)
RETURNS TABLE(name text, conninfo text, expires_at timestamptz)
AS 'MODULE_PATHNAME', 'pgsandbox_clone'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.clone(text, boolean, interval, jsonb, boolean, boolean) IS
	'Clone an approved source into a new sandbox database and login role: from its pool, its snapshot or, with fresh or failing those, the live source, with statistics its planner statistics too (PostgreSQL 18); returns when it is ready';
REVOKE ALL ON FUNCTION pgsandbox.clone(text, boolean, interval, jsonb, boolean, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgsandbox.clone(text, boolean, interval, jsonb, boolean, boolean)
	TO pgsandbox_admin, pgsandbox_user;
