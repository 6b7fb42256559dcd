/* pgsandbox--0.6--0.7.sql: upgrade pgsandbox from 0.6 to 0.7 (idle expiry, disk budget, metrics) */

\echo Use "ALTER EXTENSION pgsandbox UPDATE TO '0.7'" to load this file. \quit

-- Idle expiry: a sandbox with no session and no login for idle_timeout is
-- reaped like an expired one.  last_used_at is its last login (or when it
-- became ready), written by the worker from what the login check saw.
ALTER TABLE pgsandbox.sandbox ADD COLUMN idle_timeout interval;
ALTER TABLE pgsandbox.sandbox ADD COLUMN last_used_at timestamptz;
-- The disk budget: when size_bytes was last measured, whether sessions were
-- open then (it may have grown since), and when the sandbox was made
-- read-only for growing past pgsandbox.max_sandbox_size.
ALTER TABLE pgsandbox.sandbox ADD COLUMN size_measured_at timestamptz;
ALTER TABLE pgsandbox.sandbox ADD COLUMN size_busy boolean NOT NULL DEFAULT false;
ALTER TABLE pgsandbox.sandbox ADD COLUMN read_only_at timestamptz;
UPDATE pgsandbox.sandbox SET last_used_at = ready_at, size_measured_at = ready_at
 WHERE status = 'ready';
CREATE INDEX sandbox_live ON pgsandbox.sandbox (kind)
	WHERE status IN ('cloning', 'ready');

ALTER TABLE pgsandbox.event DROP CONSTRAINT event_action_check;
ALTER TABLE pgsandbox.event ADD CONSTRAINT event_action_check
	CHECK (action IN ('clone', 'ready', 'failed', 'drop', 'expire',
					  'cleanup', 'extend', 'snapshot', 'snapshot_failed',
					  'handout', 'pool_fill', 'protect', 'unprotect',
					  'read_only'));

-- Counters of the metrics view, kept in the catalog so that they survive
-- a restart; written only by the lifecycle worker.
CREATE TABLE pgsandbox.counter (
	name		text NOT NULL,
	labels		jsonb NOT NULL DEFAULT '{}',
	value		double precision NOT NULL DEFAULT 0,
	PRIMARY KEY (name, labels)
);
REVOKE ALL ON pgsandbox.counter FROM PUBLIC;

CREATE OR REPLACE VIEW pgsandbox.sandboxes WITH (security_barrier) AS
	SELECT s.name, s.source, s.schema_only, s.status, s.labels,
		   s.requested_by AS owner, s.created_at, s.ready_at, s.expires_at,
		   s.dropped_at, s.size_bytes, s.error, s.method, s.data_as_of,
		   s.masked, s.protected_until, s.idle_timeout, s.last_used_at,
		   s.read_only_at
	  FROM pgsandbox.sandbox s
	 WHERE s.kind = 'sandbox'
	   AND (s.owner_oid = pgsandbox._caller() OR pgsandbox._caller_is_admin());

DROP FUNCTION pgsandbox.clone(text, boolean, interval, jsonb, boolean, boolean);
CREATE FUNCTION pgsandbox.clone(source text,
								schema_only boolean DEFAULT true,
								ttl interval DEFAULT NULL,
								labels jsonb DEFAULT '{}',
								fresh boolean DEFAULT false,
								statistics boolean DEFAULT false,
								idle_timeout interval DEFAULT NULL)
RETURNS TABLE(name text, conninfo text, expires_at timestamptz)
AS 'MODULE_PATHNAME', 'pgsandbox_clone'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.clone(text, boolean, interval, jsonb, boolean, boolean, interval) IS
	'Clone an approved source into a new sandbox database and login role: from its pool, its snapshot or, with fresh or failing those, the live source, with statistics its planner statistics too (PostgreSQL 18); idle_timeout (or pgsandbox.default_idle_timeout) drops it after that long without a session; returns when it is ready';
REVOKE ALL ON FUNCTION pgsandbox.clone(text, boolean, interval, jsonb, boolean, boolean, interval)
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgsandbox.clone(text, boolean, interval, jsonb, boolean, boolean, interval)
TO pgsandbox_admin, pgsandbox_user;

-- One definition of a source's current snapshot, the worker's, for the
-- views too: the pools view counted members of the newest snapshot even
-- when its source had been removed and added again, or its rules changed.
CREATE FUNCTION pgsandbox._current_snapshots()
RETURNS TABLE(source text, schema_only boolean, id bigint)
AS 'MODULE_PATHNAME', 'pgsandbox_current_snapshots'
LANGUAGE C STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox._current_snapshots() IS
	'Internal: the snapshot of each source and kind that clones copy now, as the worker decides it';
REVOKE ALL ON FUNCTION pgsandbox._current_snapshots() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgsandbox._current_snapshots() TO pgsandbox_admin, pg_monitor;

CREATE OR REPLACE VIEW pgsandbox.pools WITH (security_barrier) AS
	SELECT p.source, p.schema_only, p.pool_size AS size,
		   (SELECT pg_catalog.count(*) FROM pgsandbox.sandbox s
			  JOIN pgsandbox._current_snapshots() c ON c.id = s.snapshot_id
			 WHERE s.kind = 'pool' AND s.status = 'ready'
			   AND s.source = p.source AND s.schema_only = p.schema_only) AS ready,
		   (SELECT pg_catalog.count(*) FROM pgsandbox.sandbox s
			 WHERE s.kind = 'pool' AND s.status = 'cloning'
			   AND s.source = p.source AND s.schema_only = p.schema_only) AS filling
	  FROM pgsandbox.snapshot_plan p
	 WHERE p.pool_size > 0 AND pgsandbox._caller_is_admin();

CREATE FUNCTION pgsandbox._queue_depth()
RETURNS TABLE(state text, requests integer)
AS 'MODULE_PATHNAME', 'pgsandbox_queue_depth'
LANGUAGE C STABLE;
COMMENT ON FUNCTION pgsandbox._queue_depth() IS
	'Internal: requests waiting in the worker''s queue and being served';
REVOKE ALL ON FUNCTION pgsandbox._queue_depth() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgsandbox._queue_depth() TO pgsandbox_admin, pg_monitor;

-- Prometheus-style series, one row each: read from the catalog and shared
-- memory only, so that a scrape measures no database.
CREATE VIEW pgsandbox.metrics AS
	WITH live AS (
		SELECT s.kind, s.status, s.owner_oid, s.size_bytes, s.protected_until,
			   s.read_only_at, s.data_as_of, s.retired_at
		  FROM pgsandbox.sandbox s
		 WHERE s.status IN ('cloning', 'ready')
	), kinds(kind) AS (
		VALUES ('sandbox'), ('snapshot'), ('pool')
	), budget(scope, setting, used) AS (
		VALUES ('total', 'pgsandbox.max_total_size',
				(SELECT pg_catalog.sum(l.size_bytes) FROM live l)),
			   ('per_owner', 'pgsandbox.max_size_per_owner',
				(SELECT pg_catalog.max(o.bytes)
				   FROM (SELECT pg_catalog.sum(l.size_bytes) AS bytes FROM live l
						  WHERE l.kind = 'sandbox' GROUP BY l.owner_oid) o)),
			   ('sandbox', 'pgsandbox.max_sandbox_size',
				(SELECT pg_catalog.max(l.size_bytes) FROM live l WHERE l.kind = 'sandbox'))
	)
	SELECT 'pgsandbox_sandboxes_live'::text AS name,
		   pg_catalog.jsonb_build_object('kind', k.kind, 'status', st.status) AS labels,
		   (SELECT pg_catalog.count(*) FROM live l
			 WHERE l.kind = k.kind AND l.status = st.status)::double precision AS value
	  FROM kinds k CROSS JOIN (VALUES ('cloning'), ('ready')) st(status)
	UNION ALL
	SELECT 'pgsandbox_database_bytes', pg_catalog.jsonb_build_object('kind', k.kind),
		   COALESCE((SELECT pg_catalog.sum(l.size_bytes) FROM live l
					  WHERE l.kind = k.kind), 0)::double precision
	  FROM kinds k
	UNION ALL
	SELECT c.name, c.labels, c.value FROM pgsandbox.counter c
	UNION ALL
	SELECT 'pgsandbox_queue_requests', pg_catalog.jsonb_build_object('state', q.state),
		   q.requests::double precision
	  FROM pgsandbox._queue_depth() q
	UNION ALL
	SELECT 'pgsandbox_pool_members',
		   pg_catalog.jsonb_build_object('source', p.source,
										 'schema_only', p.schema_only::text,
										 'state', w.state),
		   w.n::double precision
	  FROM pgsandbox.snapshot_plan p
	  CROSS JOIN LATERAL (
			VALUES ('wanted', p.pool_size::bigint),
				   ('ready', (SELECT pg_catalog.count(*) FROM pgsandbox.sandbox s
								JOIN pgsandbox._current_snapshots() c ON c.id = s.snapshot_id
							   WHERE s.kind = 'pool' AND s.status = 'ready'
								 AND s.source = p.source AND s.schema_only = p.schema_only)))
			w(state, n)
	 WHERE p.pool_size > 0
	UNION ALL
	SELECT 'pgsandbox_snapshot_oldest_age_seconds', '{}'::jsonb,
		   pg_catalog.date_part('epoch', pg_catalog.now() - pg_catalog.min(s.data_as_of))
	  FROM pgsandbox._current_snapshots() c JOIN pgsandbox.sandbox s ON s.id = c.id
	HAVING pg_catalog.count(*) > 0
	UNION ALL
	SELECT 'pgsandbox_protected_sandboxes', '{}'::jsonb,
		   pg_catalog.count(*) FILTER (WHERE l.protected_until > pg_catalog.now())::double precision
	  FROM live l WHERE l.kind = 'sandbox'
	UNION ALL
	SELECT 'pgsandbox_read_only_sandboxes', '{}'::jsonb,
		   pg_catalog.count(*) FILTER (WHERE l.read_only_at IS NOT NULL)::double precision
	  FROM live l WHERE l.kind = 'sandbox'
	UNION ALL
	SELECT 'pgsandbox_budget_limit_bytes', pg_catalog.jsonb_build_object('scope', b.scope),
		   pg_catalog.pg_size_bytes(COALESCE(pg_catalog.current_setting(b.setting, true),
											 '0'))::double precision
	  FROM budget b
	UNION ALL
	SELECT 'pgsandbox_budget_used_bytes', pg_catalog.jsonb_build_object('scope', b.scope),
		   COALESCE(b.used, 0)::double precision
	  FROM budget b;
COMMENT ON VIEW pgsandbox.metrics IS
	'Prometheus-style series of pgsandbox''s state and counters (for admins and pg_monitor)';
REVOKE ALL ON pgsandbox.metrics FROM PUBLIC;
GRANT SELECT ON pgsandbox.metrics TO pgsandbox_admin, pg_monitor;
-- a monitoring role reaches the view through the schema
GRANT USAGE ON SCHEMA pgsandbox TO pg_monitor;
