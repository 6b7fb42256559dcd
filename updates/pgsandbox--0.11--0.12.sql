/* pgsandbox--0.11--0.12.sql: upgrade pgsandbox from 0.11 to 0.12 */

\echo Use "ALTER EXTENSION pgsandbox UPDATE TO '0.12'" to load this file. \quit

/*
 * pgsandbox_reader, the login of a source of this cluster whose connection
 * string names no user (source_reader.c): it reads every table and runs no
 * row-level security policy, and may do nothing else.  The worker gives it
 * LOGIN and a password that only it knows; the login check keeps it out of
 * this database.  A role of that name that pgsandbox did not make is
 * refused, rather than handed those rights.
 */
DO $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'pgsandbox_reader') THEN
		CREATE ROLE pgsandbox_reader NOLOGIN BYPASSRLS IN ROLE pg_read_all_data;
	ELSIF NOT pg_catalog.pg_has_role('pgsandbox_reader', 'pg_read_all_data', 'MEMBER') THEN
		RAISE EXCEPTION 'role "pgsandbox_reader" exists, and pgsandbox did not make it'
			USING ERRCODE = 'duplicate_object',
				  HINT = 'Drop or rename the role, then create or update the extension.';
	END IF;
END
$$;

-- The roles whose code pgsandbox may run when it plans a query on a
-- source's tables (source_trust.c), and the function that names them.
ALTER TABLE pgsandbox.source ADD COLUMN trusted_owners text[] NOT NULL DEFAULT '{}';
-- Live sources: a publication to follow.
ALTER TABLE pgsandbox.source ADD COLUMN live_publication text;

CREATE OR REPLACE VIEW pgsandbox.sources WITH (security_barrier) AS
	SELECT s.name, s.allow_data, s.host, s.port, s.dbname, s."user", s.added_at,
		   s.allow_statistics, s.trusted_owners, s.live_publication
	  FROM pgsandbox.source s
	 WHERE pgsandbox._caller_is_admin()
		OR EXISTS (SELECT 1 FROM pgsandbox.source_grant g
					WHERE g.source = s.name
					  AND pg_catalog.pg_has_role(pgsandbox._caller(), g.grantee, 'MEMBER'));

CREATE FUNCTION pgsandbox.trust_owners(source text, owners text[])
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_trust_owners'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.trust_owners(text, text[]) IS
	'Name the roles of a source whose tables and functions pgsandbox may plan queries on, besides superusers and the source''s login (an empty array trusts none)';

REVOKE ALL ON FUNCTION pgsandbox.trust_owners(text, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgsandbox.trust_owners(text, text[]) TO pgsandbox_admin;

-- A sandbox's share of the server (tenants.c, tenant_limits.c): the cap of
-- sessions a clone asks for, and the events of what its caps refused and
-- of what the worker ended.
ALTER TABLE pgsandbox.sandbox ADD COLUMN connection_limit integer;
-- What a database held when it was made, which its copies are checked
-- against (verify.c).
ALTER TABLE pgsandbox.sandbox ADD COLUMN objects_digest text;
-- The OID a database is made with, recorded before it is made (orphans.c).
ALTER TABLE pgsandbox.sandbox ADD COLUMN planned_db_oid oid;
-- A live snapshot's slot, how far it has applied and how far behind it is.
ALTER TABLE pgsandbox.sandbox ADD COLUMN live_slot text;
ALTER TABLE pgsandbox.sandbox ADD COLUMN live_tables text;
ALTER TABLE pgsandbox.sandbox ADD COLUMN live_as_of timestamptz;
ALTER TABLE pgsandbox.sandbox ADD COLUMN live_lag_bytes bigint;
ALTER TABLE pgsandbox.sandbox ADD COLUMN live_errors bigint NOT NULL DEFAULT 0;
ALTER TABLE pgsandbox.event DROP CONSTRAINT event_action_check;
ALTER TABLE pgsandbox.event ADD CONSTRAINT event_action_check
	CHECK (action IN ('clone', 'ready', 'failed', 'drop', 'expire',
					  'cleanup', 'extend', 'snapshot', 'snapshot_failed',
					  'handout', 'pool_fill', 'protect', 'unprotect',
					  'read_only', 'reset', 'reset_failed', 'save', 'blocked',
					  'refused', 'session_ended', 'prepared_rolled_back',
					  'live_rebuild', 'live_lag'));

-- What the servers said of a failed clone is for admins: others read the
-- step that failed, the first line.  A sandbox's cap, sessions and
-- temporary files.
CREATE OR REPLACE VIEW pgsandbox.sandboxes WITH (security_barrier) AS
	SELECT s.name, s.source, s.schema_only, s.status, s.labels,
		   s.requested_by AS owner, s.created_at, s.ready_at, s.expires_at,
		   s.dropped_at, s.size_bytes,
		   -- what the servers said of a failure is for admins: others
		   -- read the step that failed
		   CASE WHEN pgsandbox._caller_is_admin() THEN s.error
				ELSE pg_catalog.split_part(s.error, E'\n', 1) END AS error,
		   s.method, s.data_as_of,
		   s.masked, s.protected_until, s.idle_timeout, s.last_used_at,
		   s.read_only_at, s.reduced,
		   -- its share of the server: the sessions it may have and has,
		   -- and the temporary files it wrote since the statistics began
		   LEAST(s.connection_limit,
							NULLIF(COALESCE(pg_catalog.current_setting('pgsandbox.max_connections_per_sandbox', true),
											'-1')::integer, -1)) AS connection_limit,
		   (SELECT d.numbackends FROM pg_catalog.pg_stat_database d
			 WHERE d.datid = s.db_oid AND s.status = 'ready') AS sessions,
		   (SELECT d.temp_bytes FROM pg_catalog.pg_stat_database d
			 WHERE d.datid = s.db_oid AND s.status = 'ready') AS temp_bytes
	  FROM pgsandbox.sandbox s
	 WHERE s.kind = 'sandbox'
	   AND (s.owner_oid = pgsandbox._caller() OR pgsandbox._caller_is_admin());
CREATE OR REPLACE VIEW pgsandbox.events WITH (security_barrier) AS
	SELECT e.at, e.sandbox, e.action, e.actor,
		   CASE WHEN pgsandbox._caller_is_admin() THEN e.detail
				ELSE pg_catalog.split_part(e.detail, E'\n', 1) END AS detail
	  FROM pgsandbox.event e
	 WHERE pgsandbox._caller_is_admin()
		OR EXISTS (SELECT 1 FROM pgsandbox.sandbox s
					WHERE s.name = e.sandbox AND s.owner_oid = pgsandbox._caller());
-- clone()'s argument for a sandbox's cap of sessions.

DROP FUNCTION pgsandbox.clone(text, boolean, interval, jsonb, boolean, boolean, interval, text);
CREATE FUNCTION pgsandbox.clone(source text DEFAULT NULL,
								schema_only boolean DEFAULT true,
								ttl interval DEFAULT NULL,
								labels jsonb DEFAULT '{}',
								fresh boolean DEFAULT false,
								statistics boolean DEFAULT false,
								idle_timeout interval DEFAULT NULL,
								from_save text DEFAULT NULL,
								connection_limit integer DEFAULT NULL)
RETURNS TABLE(name text, conninfo text, expires_at timestamptz)
AS 'MODULE_PATHNAME', 'pgsandbox_clone'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.clone(text, boolean, interval, jsonb, boolean, boolean, interval, text, integer) IS
	'Clone an approved source into a new sandbox database and login role: from its pool, its snapshot or, with fresh or failing those, the live source, with statistics its planner statistics too (PostgreSQL 18); idle_timeout (or pgsandbox.default_idle_timeout) drops it after that long without a session; from_save, instead of a source, copies one of the caller''s saves; connection_limit caps its sessions below pgsandbox.max_connections_per_sandbox; returns when it is ready';

REVOKE ALL ON FUNCTION pgsandbox.clone(text, boolean, interval, jsonb, boolean, boolean, interval, text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgsandbox.clone(text, boolean, interval, jsonb, boolean, boolean, interval, text, integer)
	TO pgsandbox_admin, pgsandbox_user;

-- The sandboxes' sessions and temporary files, the free and reserved slots.
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
	 WHERE p.schedule IS NOT NULL
	UNION ALL
	-- the sandboxes' share of the server (0.12): their sessions and the
	-- temporary files they wrote, the slots free and those reserved from
	-- sandbox logins; what the caps refused is a counter
	SELECT 'pgsandbox_sandbox_sessions', '{}'::jsonb,
		   COALESCE(pg_catalog.sum(d.numbackends), 0)::double precision
	  FROM pgsandbox.sandbox s
	  JOIN pg_catalog.pg_stat_database d ON d.datid OPERATOR(pg_catalog.=) s.db_oid
	 WHERE s.kind OPERATOR(pg_catalog.=) 'sandbox' AND s.status OPERATOR(pg_catalog.=) 'ready'
	UNION ALL
	SELECT 'pgsandbox_sandbox_temp_bytes', '{}'::jsonb,
		   COALESCE(pg_catalog.sum(d.temp_bytes), 0)::double precision
	  FROM pgsandbox.sandbox s
	  JOIN pg_catalog.pg_stat_database d ON d.datid OPERATOR(pg_catalog.=) s.db_oid
	 WHERE s.kind OPERATOR(pg_catalog.=) 'sandbox' AND s.status OPERATOR(pg_catalog.=) 'ready'
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
	  FROM pgsandbox._current_snapshots() cs
	  JOIN pgsandbox.sandbox s ON s.id OPERATOR(pg_catalog.=) cs.id
	 WHERE s.live_slot IS NOT NULL AND s.live_lag_bytes IS NOT NULL
	UNION ALL
	SELECT 'pgsandbox_live_lag_seconds', pg_catalog.jsonb_build_object('source', s.source),
		   GREATEST(0, pg_catalog.date_part('epoch', pg_catalog.now() OPERATOR(pg_catalog.-)
						COALESCE(s.live_as_of, s.data_as_of)))
	  FROM pgsandbox._current_snapshots() cs
	  JOIN pgsandbox.sandbox s ON s.id OPERATOR(pg_catalog.=) cs.id
	 WHERE s.live_slot IS NOT NULL;

/*
 * pgsandbox_live, the owner of live snapshots' subscriptions (live.c): their
 * apply runs as it, a member of each live snapshot's role, with no login
 * but that of the apply (the login check refuses every client), no
 * password, and no privilege outside those snapshots.  A role of that name
 * that pgsandbox did not make, or that any role is a member of, is refused.
 */
DO $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'pgsandbox_live') THEN
		CREATE ROLE pgsandbox_live NOLOGIN BYPASSRLS;
		COMMENT ON ROLE pgsandbox_live IS 'pgsandbox: owns the subscriptions of live snapshots';
	ELSIF pg_catalog.shobj_description('pgsandbox_live'::pg_catalog.regrole, 'pg_authid')
		  IS DISTINCT FROM 'pgsandbox: owns the subscriptions of live snapshots'
		  OR EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members
					  WHERE roleid = 'pgsandbox_live'::pg_catalog.regrole) THEN
		RAISE EXCEPTION 'role "pgsandbox_live" exists, and pgsandbox did not make it'
			USING ERRCODE = 'duplicate_object',
				  HINT = 'Drop or rename the role, then create or update the extension.';
	END IF;
END
$$;

-- Live sources (set_live, unset_live) and live snapshots in the snapshots
-- view.
CREATE FUNCTION pgsandbox.set_live(source text, publication text)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_set_live'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.set_live(text, text) IS
	'Make a source live: its data snapshot follows it by logical replication from the publication, through a slot pgsandbox makes on the source';
CREATE FUNCTION pgsandbox.unset_live(source text)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_unset_live'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.unset_live(text) IS
	'Stop following a live source: its subscription and the slot pgsandbox made go with its live snapshot';
REVOKE ALL ON FUNCTION pgsandbox.set_live(text, text), pgsandbox.unset_live(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgsandbox.set_live(text, text), pgsandbox.unset_live(text)
	TO pgsandbox_admin;

CREATE OR REPLACE VIEW pgsandbox.snapshots WITH (security_barrier) AS
	SELECT p.source, p.schema_only,
		   CASE WHEN r.id IS NOT NULL THEN 'ready'
				WHEN b.building THEN 'building'
				WHEN p.last_error IS NOT NULL THEN 'failed' END AS status,
		   r.data_as_of AS taken_at, r.size_bytes, p.schedule, p.next_run_at,
		   p.last_error, r.live_slot IS NOT NULL AS live, r.live_as_of,
		   r.live_lag_bytes
	  FROM pgsandbox.snapshot_plan p
	  LEFT JOIN LATERAL (
			SELECT s.id, s.data_as_of, s.size_bytes, s.live_slot, s.live_as_of,
				   s.live_lag_bytes
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
