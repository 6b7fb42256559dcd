/* pgsandbox--0.7--0.8.sql: upgrade pgsandbox from 0.7 to 0.8 (reset and save) */

\echo Use "ALTER EXTENSION pgsandbox UPDATE TO '0.8'" to load this file. \quit

-- A save keeps a sandbox's state (kind 'save', parent_id its sandbox, with
-- a label unique among that sandbox's saves); reset_started_at marks a
-- sandbox whose reset or save is under way, which drops and the reaper
-- leave alone and a restart finishes or undoes; reset_role is the role a
-- reset's dump is filled as, dropped with the reset.
ALTER TABLE pgsandbox.sandbox ADD COLUMN parent_id bigint;
ALTER TABLE pgsandbox.sandbox ADD COLUMN label text;
ALTER TABLE pgsandbox.sandbox ADD COLUMN reset_started_at timestamptz;
ALTER TABLE pgsandbox.sandbox ADD COLUMN reset_role oid;
ALTER TABLE pgsandbox.sandbox DROP CONSTRAINT sandbox_kind_check;
ALTER TABLE pgsandbox.sandbox ADD CONSTRAINT sandbox_kind_check
	CHECK (kind IN ('sandbox', 'snapshot', 'pool', 'save'));
ALTER TABLE pgsandbox.sandbox DROP CONSTRAINT sandbox_method_check;
ALTER TABLE pgsandbox.sandbox ADD CONSTRAINT sandbox_method_check
	CHECK (method IN ('dump', 'snapshot', 'pool', 'save'));
-- a label names one save of a sandbox
CREATE UNIQUE INDEX sandbox_saves ON pgsandbox.sandbox (parent_id, label)
	WHERE kind = 'save' AND status IN ('cloning', 'ready') AND retired_at IS NULL;

ALTER TABLE pgsandbox.event DROP CONSTRAINT event_action_check;
ALTER TABLE pgsandbox.event ADD CONSTRAINT event_action_check
	CHECK (action IN ('clone', 'ready', 'failed', 'drop', 'expire',
					  'cleanup', 'extend', 'snapshot', 'snapshot_failed',
					  'handout', 'pool_fill', 'protect', 'unprotect',
					  'read_only', 'reset', 'reset_failed', 'save'));

-- clone() of a save: from_save instead of a source
DROP FUNCTION pgsandbox.clone(text, boolean, interval, jsonb, boolean, boolean, interval);
CREATE FUNCTION pgsandbox.clone(source text DEFAULT NULL,
								schema_only boolean DEFAULT true,
								ttl interval DEFAULT NULL,
								labels jsonb DEFAULT '{}',
								fresh boolean DEFAULT false,
								statistics boolean DEFAULT false,
								idle_timeout interval DEFAULT NULL,
								from_save text DEFAULT NULL)
RETURNS TABLE(name text, conninfo text, expires_at timestamptz)
AS 'MODULE_PATHNAME', 'pgsandbox_clone'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.clone(text, boolean, interval, jsonb, boolean, boolean, interval, text) IS
	'Clone an approved source into a new sandbox database and login role: from its pool, its snapshot or, with fresh or failing those, the live source, with statistics its planner statistics too (PostgreSQL 18); idle_timeout (or pgsandbox.default_idle_timeout) drops it after that long without a session; from_save, instead of a source, copies one of the caller''s saves; returns when it is ready';
REVOKE ALL ON FUNCTION pgsandbox.clone(text, boolean, interval, jsonb, boolean, boolean, interval, text)
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgsandbox.clone(text, boolean, interval, jsonb, boolean, boolean, interval, text)
TO pgsandbox_admin, pgsandbox_user;

CREATE FUNCTION pgsandbox.reset(name text, target text DEFAULT 'start',
								ttl interval DEFAULT NULL)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'pgsandbox_reset'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.reset(text, text, interval) IS
	'Put a sandbox back in place, under the same name, role and password: to ''start'' (what it was made from), ''latest'' (its source now) or one of its saves; its sessions are ended; ttl extends it; returns its new data_as_of';

CREATE FUNCTION pgsandbox.save(name text, label text)
RETURNS text
AS 'MODULE_PATHNAME', 'pgsandbox_save'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.save(text, text) IS
	'Keep a sandbox''s state as a save, to reset to (by its label) or clone from (by the name returned); the sandbox''s sessions are ended for the moment the copy takes';

CREATE FUNCTION pgsandbox.drop_save(name text)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_drop_save'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.drop_save(text) IS
	'Drop a save, once no copy of it is under way';

REVOKE ALL ON FUNCTION pgsandbox.reset(text, text, interval), pgsandbox.save(text, text),
	pgsandbox.drop_save(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgsandbox.reset(text, text, interval), pgsandbox.save(text, text),
	pgsandbox.drop_save(text) TO pgsandbox_admin, pgsandbox_user;

CREATE VIEW pgsandbox.saves WITH (security_barrier) AS
	SELECT s.name, p.name AS sandbox, s.label, s.status, s.source, s.schema_only,
		   s.masked, s.data_as_of AS saved_at, s.size_bytes, s.requested_by AS saved_by
	  FROM pgsandbox.sandbox s
	  JOIN pgsandbox.sandbox p ON p.id = s.parent_id
	 WHERE s.kind = 'save' AND s.status IN ('cloning', 'ready') AND s.retired_at IS NULL
	   AND (s.owner_oid = pgsandbox._caller() OR pgsandbox._caller_is_admin());
COMMENT ON VIEW pgsandbox.saves IS
	'The saves of live sandboxes (a pgsandbox_user sees those of its own sandboxes)';
REVOKE ALL ON pgsandbox.saves FROM PUBLIC;
GRANT SELECT ON pgsandbox.saves TO pgsandbox_admin, pgsandbox_user;

-- the metrics count saves: their own kind, and in their owner's budget
CREATE OR REPLACE VIEW pgsandbox.metrics AS
	WITH live AS (
		SELECT s.kind, s.status, s.owner_oid, s.size_bytes, s.protected_until,
			   s.read_only_at, s.data_as_of, s.retired_at
		  FROM pgsandbox.sandbox s
		 WHERE s.status IN ('cloning', 'ready')
	), kinds(kind) AS (
		VALUES ('sandbox'), ('snapshot'), ('pool'), ('save')
	), budget(scope, setting, used) AS (
		VALUES ('total', 'pgsandbox.max_total_size',
				(SELECT pg_catalog.sum(l.size_bytes) FROM live l)),
			   ('per_owner', 'pgsandbox.max_size_per_owner',
				(SELECT pg_catalog.max(o.bytes)
				   FROM (SELECT pg_catalog.sum(l.size_bytes) AS bytes FROM live l
						  WHERE l.kind IN ('sandbox', 'save') GROUP BY l.owner_oid) o)),
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
