/* pgsandbox--0.10--0.11.sql: upgrade pgsandbox from 0.10 to 0.11 (alert rules' series) */

\echo Use "ALTER EXTENSION pgsandbox UPDATE TO '0.11'" to load this file. \quit

-- Two series for metrics/alerts.yml: whether the worker runs, and how long
-- each scheduled snapshot's refresh is overdue.
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
	  LEFT JOIN (SELECT s.source, s.schema_only, s.data_as_of
				   FROM pgsandbox._current_snapshots() cs
				   JOIN pgsandbox.sandbox s ON s.id OPERATOR(pg_catalog.=) cs.id) c
		ON c.source OPERATOR(pg_catalog.=) p.source AND c.schema_only OPERATOR(pg_catalog.=) p.schema_only
	 WHERE p.schedule IS NOT NULL;

-- the view computes when a scheduled snapshot is due
GRANT EXECUTE ON FUNCTION pgsandbox._next_run(text, timestamptz) TO pg_monitor;
