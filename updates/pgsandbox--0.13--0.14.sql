/* pgsandbox--0.13--0.14.sql: upgrade pgsandbox from 0.13 to 0.14 */

\echo Use "ALTER EXTENSION pgsandbox UPDATE TO '0.14'" to load this file. \quit

-- What a live snapshot's apply was doing at the worker's last look, and
-- since when; an event once a live snapshot that fell behind is back.
ALTER TABLE pgsandbox.sandbox ADD COLUMN live_state text;
ALTER TABLE pgsandbox.sandbox ADD COLUMN live_state_since timestamptz;
ALTER TABLE pgsandbox.event DROP CONSTRAINT event_action_check;
ALTER TABLE pgsandbox.event ADD CONSTRAINT event_action_check
	CHECK (action IN ('clone', 'ready', 'failed', 'drop', 'expire',
					  'cleanup', 'extend', 'snapshot', 'snapshot_failed',
					  'handout', 'pool_fill', 'protect', 'unprotect',
					  'read_only', 'reset', 'reset_failed', 'save', 'blocked',
					  'refused', 'session_ended', 'prepared_rolled_back',
					  'live_rebuild', 'live_lag', 'live_caught_up'));

CREATE OR REPLACE VIEW pgsandbox.snapshots WITH (security_barrier) AS
	SELECT p.source, p.schema_only,
		   CASE WHEN r.id IS NOT NULL THEN 'ready'
				WHEN b.building THEN 'building'
				WHEN p.last_error IS NOT NULL THEN 'failed' END AS status,
		   r.data_as_of AS taken_at, r.size_bytes, p.schedule, p.next_run_at,
		   p.last_error, r.live_slot IS NOT NULL AS live, r.live_as_of,
		   r.live_lag_bytes, r.live_state, r.live_state_since
	  FROM pgsandbox.snapshot_plan p
	  LEFT JOIN LATERAL (
			SELECT s.id, s.data_as_of, s.size_bytes, s.live_slot, s.live_as_of,
				   s.live_lag_bytes, s.live_state, s.live_state_since
			  FROM pgsandbox.sandbox s
			 WHERE s.kind = 'snapshot' AND s.status = 'ready' AND s.retired_at IS NULL
			   AND s.source = p.source AND s.schema_only = p.schema_only
			 ORDER BY s.id DESC LIMIT 1) r ON true
	  CROSS JOIN LATERAL (
			SELECT EXISTS (SELECT 1 FROM pgsandbox.sandbox s
							WHERE s.kind = 'snapshot' AND s.status = 'cloning'
							  AND s.source = p.source AND s.schema_only = p.schema_only)
			AS building) b
	 WHERE pgsandbox._caller_is_admin();

-- The metrics view reads the current snapshots once, and the statistics of
-- the sandboxes' databases in one pass; its query is a function's, planned
-- once a session.
-- The series are a function's query, so that a session that reads them
-- again (an exporter keeps its connection) plans it once: planning the
-- whole query took as long as running it (0.14).
CREATE FUNCTION pgsandbox._metrics()
RETURNS TABLE(name text, labels jsonb, value double precision)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $metrics$
#variable_conflict use_column
BEGIN
	RETURN QUERY
		WITH live AS (
			SELECT s.kind, s.status, s.owner_oid, s.size_bytes, s.protected_until,
				   s.read_only_at, s.data_as_of, s.retired_at
			  FROM pgsandbox.sandbox s
			 WHERE s.status IN ('cloning', 'ready')
		), current_snapshot AS (
			-- read once: each call plans the worker's query anew (0.14)
			SELECT c.source, c.schema_only, c.id FROM pgsandbox._current_snapshots() c
		), current_data AS (
			SELECT cs.source, cs.schema_only, s.data_as_of, s.live_slot, s.live_as_of,
				   s.live_lag_bytes
			  FROM current_snapshot cs
			  JOIN pgsandbox.sandbox s ON s.id OPERATOR(pg_catalog.=) cs.id
		), sandbox_usage AS (
			-- the sandboxes' sessions and temporary bytes, in one pass, read
			-- from the statistics of each one's database by its OID (0.14: a
			-- join with pg_stat_database was planned as a scan of pg_database
			-- for each sandbox)
			SELECT COALESCE(pg_catalog.sum(pg_catalog.pg_stat_get_db_numbackends(s.db_oid)), 0) AS sessions,
				   COALESCE(pg_catalog.sum(pg_catalog.pg_stat_get_db_temp_bytes(s.db_oid)), 0) AS temp_bytes
			  FROM pgsandbox.sandbox s
			 WHERE s.kind OPERATOR(pg_catalog.=) 'sandbox' AND s.status OPERATOR(pg_catalog.=) 'ready'
			   AND s.db_oid IS NOT NULL
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
									JOIN current_snapshot c ON c.id = s.snapshot_id
								   WHERE s.kind = 'pool' AND s.status = 'ready'
									 AND s.source = p.source AND s.schema_only = p.schema_only)))
				w(state, n)
		 WHERE p.pool_size > 0
		UNION ALL
		SELECT 'pgsandbox_snapshot_oldest_age_seconds', '{}'::jsonb,
			   pg_catalog.date_part('epoch', pg_catalog.now() - pg_catalog.min(c.data_as_of))
		  FROM current_data c
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
		  FROM budget b
		UNION ALL
		-- 1 while the worker runs in this database, 0 when it is gone
		SELECT 'pgsandbox_worker_up', '{}'::jsonb,
			   (SELECT pg_catalog.count(*) FROM pg_catalog.pg_stat_activity a
				 WHERE a.backend_type OPERATOR(pg_catalog.=) 'pgsandbox worker'
				   AND a.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())::double precision
		UNION ALL
		-- how long a scheduled snapshot's refresh is overdue: the time since the
		-- run its schedule set after the current snapshot's data (after the
		-- planned run, for a plan with no snapshot yet), 0 if none is due
		SELECT 'pgsandbox_snapshot_overdue_seconds',
			   pg_catalog.jsonb_build_object('source', p.source, 'schema_only', p.schema_only::text),
			   GREATEST(0, COALESCE(pg_catalog.date_part('epoch', pg_catalog.now() OPERATOR(pg_catalog.-)
							COALESCE(pgsandbox._next_run(p.schedule, c.data_as_of), p.next_run_at)), 0))
		  FROM pgsandbox.snapshot_plan p
		  LEFT JOIN current_data c
			ON c.source OPERATOR(pg_catalog.=) p.source AND c.schema_only OPERATOR(pg_catalog.=) p.schema_only
		 WHERE p.schedule IS NOT NULL
		UNION ALL
		-- the sandboxes' share of the server (0.12): their sessions and the
		-- temporary files they wrote, the slots free and those reserved from
		-- sandbox logins; what the caps refused is a counter
		SELECT 'pgsandbox_sandbox_sessions', '{}'::jsonb, u.sessions::double precision
		  FROM sandbox_usage u
		UNION ALL
		SELECT 'pgsandbox_sandbox_temp_bytes', '{}'::jsonb, u.temp_bytes::double precision
		  FROM sandbox_usage u
		UNION ALL
		SELECT 'pgsandbox_connection_slots_free', '{}'::jsonb,
			   (pg_catalog.current_setting('max_connections')::integer OPERATOR(pg_catalog.-)
				(SELECT pg_catalog.count(*) FROM pg_catalog.pg_stat_activity a
				  WHERE a.backend_type OPERATOR(pg_catalog.=) 'client backend'))::double precision
		UNION ALL
		SELECT 'pgsandbox_connection_slots_reserved', '{}'::jsonb,
			   COALESCE(pg_catalog.current_setting('pgsandbox.reserved_connections', true),
						'0')::double precision
		UNION ALL
		-- live snapshots (0.12), as the worker last measured them: how far
		-- behind their source they are, in the source's WAL and in time (since
		-- the source's time up to which every change is applied)
		SELECT 'pgsandbox_live_lag_bytes', pg_catalog.jsonb_build_object('source', s.source),
			   s.live_lag_bytes::double precision
		  FROM current_data s
		 WHERE s.live_slot IS NOT NULL AND s.live_lag_bytes IS NOT NULL
		UNION ALL
		SELECT 'pgsandbox_live_lag_seconds', pg_catalog.jsonb_build_object('source', s.source),
			   GREATEST(0, pg_catalog.date_part('epoch', pg_catalog.now() OPERATOR(pg_catalog.-)
							COALESCE(s.live_as_of, s.data_as_of)))
		  FROM current_data s
		 WHERE s.live_slot IS NOT NULL;
END
$metrics$;
COMMENT ON FUNCTION pgsandbox._metrics() IS
	'Internal: the series of the metrics view';
REVOKE ALL ON FUNCTION pgsandbox._metrics() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgsandbox._metrics() TO pgsandbox_admin, pg_monitor;

CREATE OR REPLACE VIEW pgsandbox.metrics AS
	SELECT m.name, m.labels, m.value FROM pgsandbox._metrics() m;
