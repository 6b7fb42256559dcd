/* pgsandbox--0.4--0.5.sql: upgrade pgsandbox from 0.4 to 0.5 (source generations) */

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
