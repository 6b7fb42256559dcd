/* pgsandbox--0.2--0.3.sql: upgrade pgsandbox from 0.2 to 0.3 (fast clones) */

\echo Use "ALTER EXTENSION pgsandbox UPDATE TO '0.3'" to load this file. \quit

/*
 * The sandbox table also tracks snapshots and pool members: what they are
 * (kind), how a sandbox got its contents (method), when its data was read
 * from the source (data_as_of), the snapshot it was copied from, and when a
 * snapshot stopped serving new copies (retired_at).
 */
ALTER TABLE pgsandbox.sandbox
	ADD COLUMN kind text NOT NULL DEFAULT 'sandbox'
		CHECK (kind IN ('sandbox', 'snapshot', 'pool')),
	ADD COLUMN method text CHECK (method IN ('dump', 'snapshot', 'pool')),
	ADD COLUMN data_as_of timestamptz,
	ADD COLUMN snapshot_id bigint,
	ADD COLUMN retired_at timestamptz;
UPDATE pgsandbox.sandbox SET method = 'dump';
CREATE INDEX sandbox_snapshots ON pgsandbox.sandbox (source, schema_only, id)
	WHERE kind <> 'sandbox' AND status IN ('cloning', 'ready');

ALTER TABLE pgsandbox.event DROP CONSTRAINT event_action_check;
ALTER TABLE pgsandbox.event ADD CONSTRAINT event_action_check
	CHECK (action IN ('clone', 'ready', 'failed', 'drop', 'expire',
					  'cleanup', 'extend', 'snapshot', 'snapshot_failed',
					  'handout', 'pool_fill'));

-- Snapshot schedules and pools, per source and kind of snapshot.
CREATE TABLE pgsandbox.snapshot_plan (
	source		text NOT NULL REFERENCES pgsandbox.source ON DELETE CASCADE,
	schema_only	boolean NOT NULL,
	schedule	text,
	next_run_at	timestamptz,
	pool_size	integer NOT NULL DEFAULT 0 CHECK (pool_size >= 0),
	last_error	text,
	-- the source database's encoding, collation, ctype, locale provider and
	-- ICU locale, as last read, for the worker's own builds
	source_locale text[],
	PRIMARY KEY (source, schema_only)
);
REVOKE ALL ON pgsandbox.snapshot_plan FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('pgsandbox.snapshot_plan', '');

CREATE FUNCTION pgsandbox._next_run(schedule text, after timestamptz)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'pgsandbox_next_run'
LANGUAGE C STABLE STRICT;
COMMENT ON FUNCTION pgsandbox._next_run(text, timestamptz) IS
	'Internal: the first run of a snapshot schedule after a moment (UTC cron, or N seconds / N minutes)';

CREATE FUNCTION pgsandbox._progress()
RETURNS TABLE(name text, source text, kind text, phase text, done bigint,
			  total bigint, started_at timestamptz, owner_oid oid)
AS 'MODULE_PATHNAME', 'pgsandbox_progress'
LANGUAGE C STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox._progress() IS
	'Internal: the clones, snapshot builds and pool fills under way';

CREATE OR REPLACE VIEW pgsandbox.sandboxes WITH (security_barrier) AS
	SELECT s.name, s.source, s.schema_only, s.status, s.labels,
		   s.requested_by AS owner, s.created_at, s.ready_at, s.expires_at,
		   s.dropped_at, s.size_bytes, s.error, s.method, s.data_as_of
	  FROM pgsandbox.sandbox s
	 WHERE s.kind = 'sandbox'
	   AND (s.owner_oid = pgsandbox._caller() OR pgsandbox._caller_is_admin());

CREATE VIEW pgsandbox.snapshots WITH (security_barrier) AS
	SELECT p.source, p.schema_only,
		   CASE WHEN r.id IS NOT NULL THEN 'ready'
				WHEN b.building THEN 'building'
				WHEN p.last_error IS NOT NULL THEN 'failed' END AS status,
		   r.data_as_of AS taken_at, r.size_bytes, p.schedule, p.next_run_at,
		   p.last_error
	  FROM pgsandbox.snapshot_plan p
	  LEFT JOIN LATERAL (
			SELECT s.id, s.data_as_of, s.size_bytes FROM pgsandbox.sandbox s
			 WHERE s.kind = 'snapshot' AND s.status = 'ready' AND s.retired_at IS NULL
			   AND s.source = p.source AND s.schema_only = p.schema_only
			 ORDER BY s.id DESC LIMIT 1) r ON true
	  CROSS JOIN LATERAL (
			SELECT EXISTS (SELECT 1 FROM pgsandbox.sandbox s
							WHERE s.kind = 'snapshot' AND s.status = 'cloning'
							  AND s.source = p.source AND s.schema_only = p.schema_only)
			AS building) b
	 WHERE pgsandbox._caller_is_admin();
COMMENT ON VIEW pgsandbox.snapshots IS
	'Snapshots of sources that clones copy instead of dumping the source, with their schedules (for admins)';

CREATE VIEW pgsandbox.pools WITH (security_barrier) AS
	SELECT p.source, p.schema_only, p.pool_size AS size,
		   (SELECT pg_catalog.count(*) FROM pgsandbox.sandbox s
			 WHERE s.kind = 'pool' AND s.status = 'ready'
			   AND s.source = p.source AND s.schema_only = p.schema_only
			   AND s.snapshot_id = (SELECT max(c.id) FROM pgsandbox.sandbox c
									 WHERE c.kind = 'snapshot' AND c.status = 'ready'
									   AND c.retired_at IS NULL
									   AND c.source = p.source
									   AND c.schema_only = p.schema_only)) AS ready,
		   (SELECT pg_catalog.count(*) FROM pgsandbox.sandbox s
			 WHERE s.kind = 'pool' AND s.status = 'cloning'
			   AND s.source = p.source AND s.schema_only = p.schema_only) AS filling
	  FROM pgsandbox.snapshot_plan p
	 WHERE p.pool_size > 0 AND pgsandbox._caller_is_admin();
COMMENT ON VIEW pgsandbox.pools IS
	'Pools of ready sandboxes that clone() hands out at once (for admins)';

CREATE VIEW pgsandbox.progress WITH (security_barrier) AS
	SELECT p.name, p.source, p.kind, p.phase, p.done, p.total, p.started_at
	  FROM pgsandbox._progress() p
	 WHERE p.owner_oid = pgsandbox._caller() OR pgsandbox._caller_is_admin();
COMMENT ON VIEW pgsandbox.progress IS
	'Clones, snapshot builds and pool fills under way, and how far along they are (a pgsandbox_user sees its own clones)';

REVOKE ALL ON pgsandbox.snapshots, pgsandbox.pools, pgsandbox.progress FROM PUBLIC;
GRANT SELECT ON pgsandbox.snapshots, pgsandbox.pools TO pgsandbox_admin;
GRANT SELECT ON pgsandbox.progress TO pgsandbox_admin, pgsandbox_user;

-- clone() gains fresh: dump the live source even when a pool or a
-- snapshot could serve the clone
DROP FUNCTION pgsandbox.clone(text, boolean, interval, jsonb);
CREATE FUNCTION pgsandbox.clone(source text,
								schema_only boolean DEFAULT true,
								ttl interval DEFAULT NULL,
								labels jsonb DEFAULT '{}',
								fresh boolean DEFAULT false)
RETURNS TABLE(name text, conninfo text, expires_at timestamptz)
AS 'MODULE_PATHNAME', 'pgsandbox_clone'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.clone(text, boolean, interval, jsonb, boolean) IS
	'Clone an approved source into a new sandbox database and login role: from its pool, its snapshot or, with fresh or failing those, the live source; returns when it is ready';

CREATE FUNCTION pgsandbox.snapshot(source text, schema_only boolean DEFAULT false)
RETURNS TABLE(source text, schema_only boolean, taken_at timestamptz, size_bytes bigint)
AS 'MODULE_PATHNAME', 'pgsandbox_snapshot'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.snapshot(text, boolean) IS
	'Take (or retake) a snapshot of a source now; returns when it is ready';

CREATE FUNCTION pgsandbox.drop_snapshot(source text, schema_only boolean DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_drop_snapshot'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.drop_snapshot(text, boolean) IS
	'Drop a source''s snapshot of one kind, or of both kinds if schema_only is null';

CREATE FUNCTION pgsandbox.schedule_snapshot(source text, schedule text,
											schema_only boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_schedule_snapshot'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.schedule_snapshot(text, text, boolean) IS
	'Have the worker retake a source''s snapshot on a schedule (cron in UTC, or N seconds / N minutes); null unschedules';

CREATE FUNCTION pgsandbox.set_pool(source text, size integer,
								   schema_only boolean DEFAULT true)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_set_pool'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.set_pool(text, integer, boolean) IS
	'Have the worker keep size ready sandboxes of a source, made from its snapshot, for clone() to hand out; 0 removes the pool';

REVOKE ALL ON FUNCTION
	pgsandbox._next_run(text, timestamptz),
	pgsandbox._progress(),
	pgsandbox.clone(text, boolean, interval, jsonb, boolean),
	pgsandbox.snapshot(text, boolean),
	pgsandbox.drop_snapshot(text, boolean),
	pgsandbox.schedule_snapshot(text, text, boolean),
	pgsandbox.set_pool(text, integer, boolean)
FROM PUBLIC;

GRANT EXECUTE ON FUNCTION
	pgsandbox._progress(),
	pgsandbox.clone(text, boolean, interval, jsonb, boolean)
TO pgsandbox_admin, pgsandbox_user;

GRANT EXECUTE ON FUNCTION
	pgsandbox._next_run(text, timestamptz),
	pgsandbox.snapshot(text, boolean),
	pgsandbox.drop_snapshot(text, boolean),
	pgsandbox.schedule_snapshot(text, text, boolean),
	pgsandbox.set_pool(text, integer, boolean)
TO pgsandbox_admin;
