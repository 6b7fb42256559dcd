/* pgsandbox--0.14.sql: catalog, views and functions of pgsandbox */

\echo Use "CREATE EXTENSION pgsandbox" to load this file. \quit

/*
 * pgsandbox lives in one database per cluster: the one its worker connects
 * to.  Installed anywhere else it could do nothing, so it is refused.
 */
DO $$
DECLARE
	home text := COALESCE(pg_catalog.current_setting('pgsandbox.database', true),
						  'postgres');
BEGIN
	IF pg_catalog.current_database() OPERATOR(pg_catalog.<>) home THEN
		RAISE EXCEPTION 'can only create extension "pgsandbox" in database "%"', home
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = 'The pgsandbox worker works in the database that pgsandbox.database names.',
				  HINT = pg_catalog.format('Create the extension in database "%s", or set pgsandbox.database = ''%s'' and restart the server.',
										   home, pg_catalog.current_database());
	END IF;
END
$$;

/*
 * Three group roles, made if missing (roles belong to the cluster, not to
 * the extension, so they outlive it):
 *	pgsandbox_admin		manages sources, sees, extends and drops every sandbox
 *	pgsandbox_user		clones granted sources, sees, extends and drops its own
 *	pgsandbox_sandbox	every sandbox role; no privileges, and the login check
 *						lets its members into their own database only
 */
DO $$
DECLARE
	r text;
BEGIN
	FOREACH r IN ARRAY ARRAY['pgsandbox_admin', 'pgsandbox_user', 'pgsandbox_sandbox'] LOOP
		IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = r) THEN
			EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', r);
		END IF;
	END LOOP;
END
$$;

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

GRANT USAGE ON SCHEMA pgsandbox TO pgsandbox_admin, pgsandbox_user;

CREATE SEQUENCE pgsandbox.source_generation;

-- Approved sources.  conninfo may hold a password: no one but the owner
-- of the extension reads this table; the sources view shows the rest.
CREATE TABLE pgsandbox.source (
	name		text PRIMARY KEY,
	conninfo	text NOT NULL,
	allow_data	boolean NOT NULL DEFAULT false,
	host		text,
	port		text,
	dbname		text,
	"user"		text,
	-- added by a non-superuser: its connection must authenticate by password
	require_password boolean NOT NULL DEFAULT true,
	added_at	timestamptz NOT NULL DEFAULT pg_catalog.now(),
	added_by	name NOT NULL DEFAULT session_user,
	-- counts the changes of its rules: a snapshot taken under other rules
	-- is stale
	rules_version integer NOT NULL DEFAULT 0,
	-- new each time the source is added: a snapshot or pool member of an
	-- earlier source of the same name never serves this one
	generation	bigint NOT NULL DEFAULT pg_catalog.nextval('pgsandbox.source_generation'),
	-- clones may carry the planner's statistics, which hold column values
	allow_statistics boolean NOT NULL DEFAULT false,
	-- roles whose code pgsandbox may run when it plans a query on the
	-- source's tables, besides superusers and the source's login
	trusted_owners text[] NOT NULL DEFAULT '{}',
	-- a live source: its data snapshot follows it by logical replication
	-- from this publication
	live_publication text
);

-- Every sandbox ever made, written only by the lifecycle worker.
CREATE TABLE pgsandbox.sandbox (
	id			bigserial PRIMARY KEY,
	name		text NOT NULL UNIQUE,
	source		text NOT NULL,
	schema_only	boolean NOT NULL,
	status		text NOT NULL
				CHECK (status IN ('cloning', 'ready', 'failed', 'dropped', 'dropping')),
	labels		jsonb NOT NULL DEFAULT '{}',
	requested_by name NOT NULL,
	owner_oid	oid NOT NULL,	-- the role that asked for it
	ttl			interval NOT NULL,
	role_oid	oid,		-- the role pgsandbox created, once it exists
	db_oid		oid,		-- the database pgsandbox created, once it exists
	created_at	timestamptz NOT NULL DEFAULT pg_catalog.now(),
	ready_at	timestamptz,
	expires_at	timestamptz,
	dropped_at	timestamptz,
	size_bytes	bigint,
	error		text,
	-- a sandbox, a snapshot of a source, or a pool member not yet handed out
	kind		text NOT NULL DEFAULT 'sandbox'
				CHECK (kind IN ('sandbox', 'snapshot', 'pool', 'save')),
	-- how its contents came: a dump of the source, a copy of a snapshot, a pool
	method		text CHECK (method IN ('dump', 'snapshot', 'pool', 'save')),
	data_as_of	timestamptz,	-- when its data was read from the source
	snapshot_id	bigint,		-- the snapshot it was copied from
	retired_at	timestamptz,	-- a snapshot no longer copied, to be dropped
	-- its source's rules_version when its rows were read, and whether rules
	-- masked or left out any of them
	rules_version integer NOT NULL DEFAULT 0,
	masked		boolean NOT NULL DEFAULT false,
	-- the generation of its source it was made of
	source_generation bigint,
	-- the reaper and gc() leave it alone until then (protect())
	protected_until timestamptz,
	-- idle expiry: dropped after idle_timeout with no session and no login
	-- since last_used_at (its last login, or when it became ready)
	idle_timeout interval,
	last_used_at timestamptz,
	-- the disk budget: when size_bytes was last measured, whether sessions
	-- were open then, and when it was made read-only for growing past
	-- pgsandbox.max_sandbox_size
	size_measured_at timestamptz,
	size_busy	boolean NOT NULL DEFAULT false,
	read_only_at timestamptz,
	-- a save keeps a sandbox's state (kind 'save', parent_id its sandbox,
	-- with a label unique among that sandbox's saves); reset_started_at
	-- marks a sandbox whose reset or save is under way, which drops and the
	-- reaper leave alone and a restart finishes or undoes; reset_role is the
	-- role a reset's dump is filled as, dropped with the reset
	parent_id	bigint,
	label		text,
	reset_started_at timestamptz,
	reset_role	oid,
	-- when a drop began: a row 'dropping' is no longer live, and the
	-- worker finishes its drop whatever blocked or interrupted it
	drop_started_at timestamptz,
	-- whether subset rules reduced its rows
	reduced		boolean NOT NULL DEFAULT false,
	-- the cap of sessions its clone asked for, below
	-- pgsandbox.max_connections_per_sandbox; NULL for the setting's
	connection_limit integer,
	-- what its database held when it was made, "<objects>:<md5 of their
	-- names>": a copy of it must hold the same
	objects_digest text,
	-- the OID its database is made with, recorded before it is made: what a
	-- crash leaves of it is known to be pgsandbox's, and removed
	planned_db_oid oid,
	-- a live snapshot: it follows its source through a subscription in its
	-- database and a slot of this name on the source; the worker records
	-- how far it has applied (the source's time up to which every change
	-- is in) and how far behind the source it is, and the apply errors it
	-- has seen; live_tables: the tables its publication published, counted
	-- and hashed by name
	live_slot	text,
	live_tables	text,
	live_as_of	timestamptz,
	live_lag_bytes bigint,
	live_errors	bigint NOT NULL DEFAULT 0,
	-- what its apply was doing at the worker's last look ('applying',
	-- 'paused' for a copy, 'starting', 'source unreachable'), and since when
	live_state	text,
	live_state_since timestamptz
);
CREATE INDEX sandbox_live_expiry ON pgsandbox.sandbox (expires_at)
	WHERE status = 'ready';
CREATE INDEX sandbox_live ON pgsandbox.sandbox (kind)
	WHERE status IN ('cloning', 'ready');
-- a label names one save of a sandbox
CREATE UNIQUE INDEX sandbox_saves ON pgsandbox.sandbox (parent_id, label)
	WHERE kind = 'save' AND status IN ('cloning', 'ready') AND retired_at IS NULL;
CREATE INDEX sandbox_snapshots ON pgsandbox.sandbox (source, schema_only, id)
	WHERE kind <> 'sandbox' AND status IN ('cloning', 'ready');

-- What run_sql and describe_schema need to log in as a sandbox's role,
-- readable by no one but the owner of the extension; removed with the
-- sandbox.
CREATE TABLE pgsandbox.sandbox_secret (
	sandbox_id	bigint PRIMARY KEY REFERENCES pgsandbox.sandbox ON DELETE CASCADE,
	password	text NOT NULL
);

-- Audit log, written only by the lifecycle worker.
CREATE TABLE pgsandbox.event (
	id			bigserial PRIMARY KEY,
	at			timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
	sandbox		text NOT NULL,
	action		text NOT NULL
				CHECK (action IN ('clone', 'ready', 'failed', 'drop', 'expire',
								  'cleanup', 'extend', 'snapshot', 'snapshot_failed',
								  'handout', 'pool_fill', 'protect', 'unprotect',
								  'read_only', 'reset', 'reset_failed', 'save', 'blocked',
								  'refused', 'session_ended', 'prepared_rolled_back',
								  'live_rebuild', 'live_lag', 'live_caught_up')),
	actor		text NOT NULL,
	detail		text
);
CREATE INDEX event_sandbox ON pgsandbox.event (sandbox);

-- Which roles may clone which source (members of the grantee may too).
CREATE TABLE pgsandbox.source_grant (
	source		text NOT NULL REFERENCES pgsandbox.source ON DELETE CASCADE,
	grantee		oid NOT NULL,
	granted_at	timestamptz NOT NULL DEFAULT pg_catalog.now(),
	PRIMARY KEY (source, grantee)
);

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
REVOKE ALL ON pgsandbox.source, pgsandbox.sandbox, pgsandbox.event,
	pgsandbox.source_grant, pgsandbox.sandbox_secret, pgsandbox.snapshot_plan
	FROM PUBLIC;
REVOKE ALL ON SEQUENCE pgsandbox.sandbox_id_seq, pgsandbox.event_id_seq FROM PUBLIC;

-- Counters of the metrics view, kept in the catalog so that they survive
-- a restart; written only by the lifecycle worker.
CREATE TABLE pgsandbox.counter (
	name		text NOT NULL,
	labels		jsonb NOT NULL DEFAULT '{}',
	value		double precision NOT NULL DEFAULT 0,
	PRIMARY KEY (name, labels)
);
REVOKE ALL ON pgsandbox.counter FROM PUBLIC;

-- a dump of the admin database keeps the sources and who may clone them
SELECT pg_catalog.pg_extension_config_dump('pgsandbox.source', '');
SELECT pg_catalog.pg_extension_config_dump('pgsandbox.source_generation', '');
SELECT pg_catalog.pg_extension_config_dump('pgsandbox.source_grant', '');
SELECT pg_catalog.pg_extension_config_dump('pgsandbox.snapshot_plan', '');

/*
 * Who is asking: the current role of the session, as SET ROLE left it,
 * whatever SECURITY DEFINER function it is called from.
 */
CREATE FUNCTION pgsandbox._caller()
RETURNS oid
AS 'MODULE_PATHNAME', 'pgsandbox_caller'
LANGUAGE C STABLE STRICT;
COMMENT ON FUNCTION pgsandbox._caller() IS
	'Internal: the role on whose behalf pgsandbox acts';

CREATE FUNCTION pgsandbox._caller_is_admin()
RETURNS boolean
AS 'MODULE_PATHNAME', 'pgsandbox_caller_is_admin'
LANGUAGE C STABLE STRICT;
COMMENT ON FUNCTION pgsandbox._caller_is_admin() IS
	'Internal: whether the caller is a superuser or has the privileges of pgsandbox_admin';

-- The views show a pgsandbox_user only its own rows; security_barrier
-- keeps a caller's own functions from seeing the others first.
CREATE VIEW pgsandbox.sources WITH (security_barrier) AS
	SELECT s.name, s.allow_data, s.host, s.port, s.dbname, s."user", s.added_at,
		   s.allow_statistics, s.trusted_owners, s.live_publication
	  FROM pgsandbox.source s
	 WHERE pgsandbox._caller_is_admin()
		OR EXISTS (SELECT 1 FROM pgsandbox.source_grant g
					WHERE g.source = s.name
					  AND pg_catalog.pg_has_role(pgsandbox._caller(), g.grantee, 'MEMBER'));
COMMENT ON VIEW pgsandbox.sources IS
	'Approved sources the caller may clone (all of them for an admin), without their connection strings';

CREATE VIEW pgsandbox.source_grants WITH (security_barrier) AS
	SELECT g.source, g.grantee::regrole AS grantee, g.granted_at
	  FROM pgsandbox.source_grant g
	 WHERE pgsandbox._caller_is_admin();
COMMENT ON VIEW pgsandbox.source_grants IS
	'Which roles may clone which source (for admins)';

CREATE VIEW pgsandbox.sandboxes WITH (security_barrier) AS
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
COMMENT ON VIEW pgsandbox.sandboxes IS
	'Every sandbox pgsandbox made, live or not (a pgsandbox_user sees its own)';

CREATE VIEW pgsandbox.events WITH (security_barrier) AS
	SELECT e.at, e.sandbox, e.action, e.actor,
		   CASE WHEN pgsandbox._caller_is_admin() THEN e.detail
				ELSE pg_catalog.split_part(e.detail, E'\n', 1) END AS detail
	  FROM pgsandbox.event e
	 WHERE pgsandbox._caller_is_admin()
		OR EXISTS (SELECT 1 FROM pgsandbox.sandbox s
					WHERE s.name = e.sandbox AND s.owner_oid = pgsandbox._caller());
COMMENT ON VIEW pgsandbox.events IS
	'What happened to each sandbox, and who asked for it (a pgsandbox_user sees its own)';

REVOKE ALL ON pgsandbox.sources, pgsandbox.source_grants, pgsandbox.sandboxes,
	pgsandbox.events FROM PUBLIC;
GRANT SELECT ON pgsandbox.sources, pgsandbox.sandboxes, pgsandbox.events
	TO pgsandbox_admin, pgsandbox_user;
GRANT SELECT ON pgsandbox.source_grants TO pgsandbox_admin;

CREATE FUNCTION pgsandbox.add_source(name text, conninfo text,
									 allow_data boolean DEFAULT false,
									 allow_statistics boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_add_source'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.add_source(text, text, boolean, boolean) IS
	'Approve a database as a clone source; allow_data permits copying its rows, allow_statistics its planner statistics (PostgreSQL 18)';

CREATE FUNCTION pgsandbox.remove_source(name text)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_remove_source'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.remove_source(text) IS
	'Withdraw the approval of a clone source; existing sandboxes stay';

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

CREATE FUNCTION pgsandbox.drop(name text)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_drop'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.drop(text) IS
	'Drop a live sandbox''s database and role, ending its sessions first';

CREATE FUNCTION pgsandbox.extend(name text, ttl interval)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'pgsandbox_extend'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.extend(text, interval) IS
	'Set a live sandbox''s expiry to now() + ttl, within pgsandbox.max_ttl';

CREATE FUNCTION pgsandbox.protect(name text, until timestamptz)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'pgsandbox_protect'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.protect(text, timestamptz) IS
	'Keep a live sandbox from the reaper and gc() until a moment, within pgsandbox.max_protect';

CREATE FUNCTION pgsandbox.unprotect(name text)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_unprotect'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.unprotect(text) IS
	'End a sandbox''s protection: it expires as its expiry says';

CREATE FUNCTION pgsandbox._drop_expired(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pgsandbox_drop_expired'
LANGUAGE C STRICT SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox._drop_expired(text) IS
	'Internal: have the worker drop a sandbox if it is still expired';

CREATE FUNCTION pgsandbox.gc(dry_run boolean DEFAULT false)
RETURNS TABLE(name text, expires_at timestamptz, dropped boolean)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	r record;
BEGIN
	IF dry_run IS NULL THEN
		RAISE EXCEPTION 'dry_run must not be null'
			USING ERRCODE = 'null_value_not_allowed';
	END IF;
	FOR r IN
		SELECT s.name, s.expires_at
		  FROM pgsandbox.sandbox s
		 WHERE s.status = 'ready' AND s.expires_at <= pg_catalog.now()
		   AND (s.protected_until IS NULL OR s.protected_until <= pg_catalog.now())
		   AND (s.owner_oid = pgsandbox._caller() OR pgsandbox._caller_is_admin())
		 ORDER BY s.expires_at, s.name
	LOOP
		name := r.name;
		expires_at := r.expires_at;
		dropped := CASE WHEN dry_run THEN false
						ELSE pgsandbox._drop_expired(r.name) END;
		RETURN NEXT;
	END LOOP;
END
$$;
COMMENT ON FUNCTION pgsandbox.gc(boolean) IS
	'Drop every expired sandbox now (a pgsandbox_user: its own); with dry_run, only list them';

CREATE FUNCTION pgsandbox.trust_owners(source text, owners text[])
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_trust_owners'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.trust_owners(text, text[]) IS
	'Name the roles of a source whose tables and functions pgsandbox may plan queries on, besides superusers and the source''s login (an empty array trusts none)';

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

CREATE FUNCTION pgsandbox.grant_source(source text, grantee regrole)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_grant_source'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.grant_source(text, regrole) IS
	'Let a role (and its members) clone a source';

CREATE FUNCTION pgsandbox.revoke_source(source text, grantee regrole)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_revoke_source'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.revoke_source(text, regrole) IS
	'Take back a role''s right to clone a source';

CREATE FUNCTION pgsandbox.doctor()
RETURNS TABLE("check" text, ok boolean, detail text)
AS 'MODULE_PATHNAME', 'pgsandbox_doctor'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.doctor() IS
	'What an administrator should fix for pgsandbox to work safely';

CREATE FUNCTION pgsandbox.run_sql(name text, sql text,
								  row_limit integer DEFAULT 100,
								  read_only boolean DEFAULT false,
								  timeout interval DEFAULT '30s')
RETURNS jsonb
AS 'MODULE_PATHNAME', 'pgsandbox_run_sql'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.run_sql(text, text, integer, boolean, interval) IS
	'Run SQL in a sandbox, logged in as its role; returns each statement''s outcome as JSON';

CREATE FUNCTION pgsandbox.describe_schema(name text)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'pgsandbox_describe_schema'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.describe_schema(text) IS
	'Schemas, tables, columns, constraints, indexes, views, functions and extensions of a sandbox, as JSON';

/*
 * The difference between two descriptions made by describe_schema: objects
 * only in the sandbox (added), only in the source (dropped), and in both
 * but different (changed; for tables, column by column).
 */
CREATE FUNCTION pgsandbox._added(before jsonb, after jsonb)
RETURNS jsonb
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT jsonb_agg(x ORDER BY x) FROM (
		SELECT jsonb_array_elements_text(COALESCE($2, '[]')) EXCEPT
		SELECT jsonb_array_elements_text(COALESCE($1, '[]'))) AS t(x)
$$;
COMMENT ON FUNCTION pgsandbox._added(jsonb, jsonb) IS
	'Internal: the strings of one JSON array that the other lacks';

CREATE FUNCTION pgsandbox._schema_diff(source jsonb, sandbox jsonb)
RETURNS jsonb
LANGUAGE sql IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
WITH kinds(list, kind) AS (
	VALUES ('schemas', 'schema'), ('tables', 'table'), ('views', 'view'),
		   ('sequences', 'sequence'), ('functions', 'function'),
		   ('types', 'type'), ('collations', 'collation'), ('operators', 'operator'),
		   ('casts', 'cast'), ('text_search_configurations', 'text search configuration'),
		   ('extensions', 'extension')
), objects AS (
	SELECT k.kind, s.side,
		   CASE jsonb_typeof(o) WHEN 'object' THEN o->>'name' ELSE o #>> '{}' END AS name,
		   o
	  FROM kinds k
	 CROSS JOIN (VALUES ('source', $1), ('sandbox', $2)) AS s(side, doc)
	 CROSS JOIN LATERAL jsonb_array_elements(COALESCE(s.doc->k.list, '[]')) o
), pairs AS (
	SELECT COALESCE(a.kind, b.kind) AS kind, COALESCE(a.name, b.name) AS name,
		   a.o AS before, b.o AS after
	  FROM (SELECT * FROM objects WHERE side = 'source') a
	  FULL JOIN (SELECT * FROM objects WHERE side = 'sandbox') b
		ON a.kind = b.kind AND a.name = b.name
), table_changes AS (
	SELECT p.kind, p.name, jsonb_strip_nulls(jsonb_build_object(
		'kind', p.kind, 'name', p.name,
		'columns_added', (SELECT jsonb_agg(c ORDER BY c->>'name')
							FROM jsonb_array_elements(COALESCE(p.after->'columns', '[]')) c
						   WHERE NOT EXISTS (SELECT 1 FROM jsonb_array_elements(COALESCE(p.before->'columns', '[]')) d
											  WHERE d->>'name' = c->>'name')),
		'columns_dropped', (SELECT jsonb_agg(c ORDER BY c->>'name')
							  FROM jsonb_array_elements(COALESCE(p.before->'columns', '[]')) c
							 WHERE NOT EXISTS (SELECT 1 FROM jsonb_array_elements(COALESCE(p.after->'columns', '[]')) d
												WHERE d->>'name' = c->>'name')),
		'columns_changed', (SELECT jsonb_agg(jsonb_build_object('name', c->>'name', 'before', c, 'after', d)
											 ORDER BY c->>'name')
							  FROM jsonb_array_elements(COALESCE(p.before->'columns', '[]')) c
							  JOIN jsonb_array_elements(COALESCE(p.after->'columns', '[]')) d
								ON d->>'name' = c->>'name'
							 WHERE c <> d),
		'constraints_added', pgsandbox._added(p.before->'constraints', p.after->'constraints'),
		'constraints_dropped', pgsandbox._added(p.after->'constraints', p.before->'constraints'),
		'indexes_added', pgsandbox._added(p.before->'indexes', p.after->'indexes'),
		'indexes_dropped', pgsandbox._added(p.after->'indexes', p.before->'indexes'),
		'triggers_added', pgsandbox._added(p.before->'triggers', p.after->'triggers'),
		'triggers_dropped', pgsandbox._added(p.after->'triggers', p.before->'triggers'),
		'policies_added', pgsandbox._added(p.before->'policies', p.after->'policies'),
		'policies_dropped', pgsandbox._added(p.after->'policies', p.before->'policies'),
		'rules_added', pgsandbox._added(p.before->'rules', p.after->'rules'),
		'rules_dropped', pgsandbox._added(p.after->'rules', p.before->'rules')))
		-- properties of the table itself: <property>_before and _after
		|| COALESCE((SELECT jsonb_object_agg(x.key, x.value) FROM (
				SELECT f || side.suffix AS key,
					   CASE WHEN f = 'kind' THEN COALESCE(side.doc->f, '"table"') ELSE side.doc->f END AS value
				  FROM unnest(ARRAY['kind', 'comment', 'row_security', 'replica_identity',
									'partition_key', 'partition_of']) f
				 CROSS JOIN (VALUES ('_before', p.before), ('_after', p.after)) AS side(suffix, doc)
				 WHERE p.before->f IS DISTINCT FROM p.after->f) x
			 WHERE x.value IS NOT NULL), '{}') AS change
	  FROM pairs p
	 WHERE p.kind = 'table' AND p.before IS NOT NULL AND p.after IS NOT NULL
	   AND p.before <> p.after
)
SELECT jsonb_build_object(
	'added', COALESCE((SELECT jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
										'kind', kind, 'name', name,
										'definition', CASE jsonb_typeof(after) WHEN 'object' THEN after->'definition' END))
										ORDER BY kind, name)
						 FROM pairs WHERE before IS NULL), '[]'),
	'dropped', COALESCE((SELECT jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
										  'kind', kind, 'name', name,
										  'definition', CASE jsonb_typeof(before) WHEN 'object' THEN before->'definition' END))
										  ORDER BY kind, name)
						   FROM pairs WHERE after IS NULL), '[]'),
	'changed', COALESCE((SELECT jsonb_agg(c.change ORDER BY c.kind, c.name) FROM (
			SELECT kind, name, change FROM table_changes
			UNION ALL
			SELECT kind, name, jsonb_build_object('kind', kind, 'name', name,
												  'before', before, 'after', after)
			  FROM pairs
			 WHERE kind <> 'table' AND before IS NOT NULL AND after IS NOT NULL
			   AND before <> after) c), '[]'))
$$;
COMMENT ON FUNCTION pgsandbox._schema_diff(jsonb, jsonb) IS
	'Internal: compare two schema descriptions';

CREATE FUNCTION pgsandbox.schema_diff(name text)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'pgsandbox_schema_diff'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.schema_diff(text) IS
	'What differs between a sandbox''s schema and its source''s: objects added, dropped and changed';

REVOKE ALL ON FUNCTION
	pgsandbox._added(jsonb, jsonb),
	pgsandbox._schema_diff(jsonb, jsonb),
	pgsandbox.run_sql(text, text, integer, boolean, interval),
	pgsandbox.describe_schema(text),
	pgsandbox.schema_diff(text),
	pgsandbox._caller(),
	pgsandbox._caller_is_admin(),
	pgsandbox.add_source(text, text, boolean, boolean),
	pgsandbox.remove_source(text),
	pgsandbox.trust_owners(text, text[]),
	pgsandbox.set_live(text, text),
	pgsandbox.unset_live(text),
	pgsandbox.grant_source(text, regrole),
	pgsandbox.revoke_source(text, regrole),
	pgsandbox.doctor(),
	pgsandbox.clone(text, boolean, interval, jsonb, boolean, boolean, interval, text, integer),
	pgsandbox.drop(text),
	pgsandbox.extend(text, interval),
	pgsandbox.protect(text, timestamptz),
	pgsandbox.unprotect(text),
	pgsandbox._drop_expired(text),
	pgsandbox.gc(boolean)
FROM PUBLIC;

GRANT EXECUTE ON FUNCTION
	pgsandbox._caller(),
	pgsandbox._caller_is_admin(),
	pgsandbox.run_sql(text, text, integer, boolean, interval),
	pgsandbox.describe_schema(text),
	pgsandbox.schema_diff(text),
	pgsandbox.clone(text, boolean, interval, jsonb, boolean, boolean, interval, text, integer),
	pgsandbox.drop(text),
	pgsandbox.extend(text, interval),
	pgsandbox.protect(text, timestamptz),
	pgsandbox.unprotect(text),
	pgsandbox._drop_expired(text),
	pgsandbox.gc(boolean)
TO pgsandbox_admin, pgsandbox_user;

GRANT EXECUTE ON FUNCTION
	pgsandbox.add_source(text, text, boolean, boolean),
	pgsandbox.remove_source(text),
	pgsandbox.trust_owners(text, text[]),
	pgsandbox.set_live(text, text),
	pgsandbox.unset_live(text),
	pgsandbox.grant_source(text, regrole),
	pgsandbox.revoke_source(text, regrole),
	pgsandbox.doctor()
TO pgsandbox_admin;

/* fast clones: snapshots, pools, schedules and progress */

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

CREATE FUNCTION pgsandbox._current_snapshots()
RETURNS TABLE(source text, schema_only boolean, id bigint)
AS 'MODULE_PATHNAME', 'pgsandbox_current_snapshots'
LANGUAGE C STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox._current_snapshots() IS
	'Internal: the snapshot of each source and kind that clones copy now, as the worker decides it';
REVOKE ALL ON FUNCTION pgsandbox._current_snapshots() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgsandbox._current_snapshots() TO pgsandbox_admin, pg_monitor;

CREATE VIEW pgsandbox.snapshots WITH (security_barrier) AS
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
COMMENT ON VIEW pgsandbox.snapshots IS
	'Snapshots of sources that clones copy instead of dumping the source, with their schedules (for admins)';

CREATE VIEW pgsandbox.pools WITH (security_barrier) AS
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

CREATE VIEW pgsandbox.metrics AS
	SELECT m.name, m.labels, m.value FROM pgsandbox._metrics() m;
COMMENT ON VIEW pgsandbox.metrics IS
	'Prometheus-style series of pgsandbox''s state and counters (for admins and pg_monitor)';
REVOKE ALL ON pgsandbox.metrics FROM PUBLIC;
GRANT SELECT ON pgsandbox.metrics TO pgsandbox_admin, pg_monitor;
-- a monitoring role reaches the view through the schema
GRANT USAGE ON SCHEMA pgsandbox TO pg_monitor;

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
	pgsandbox.snapshot(text, boolean),
	pgsandbox.drop_snapshot(text, boolean),
	pgsandbox.schedule_snapshot(text, text, boolean),
	pgsandbox.set_pool(text, integer, boolean)
FROM PUBLIC;

GRANT EXECUTE ON FUNCTION pgsandbox._progress() TO pgsandbox_admin, pgsandbox_user;

GRANT EXECUTE ON FUNCTION
	pgsandbox._next_run(text, timestamptz),
	pgsandbox.snapshot(text, boolean),
	pgsandbox.drop_snapshot(text, boolean),
	pgsandbox.schedule_snapshot(text, text, boolean),
	pgsandbox.set_pool(text, integer, boolean)
TO pgsandbox_admin;
-- the metrics view computes when a scheduled snapshot is due (0.11)
GRANT EXECUTE ON FUNCTION pgsandbox._next_run(text, timestamptz) TO pg_monitor;

/* masking: rules per source, applied where the source's rows are read */

-- What a data clone of a source copies otherwise than as it is: a column
-- masked by an expression, a table whose rows are left out, a table whose
-- rows are reduced to those a condition keeps (subset: the condition, or a
-- share such as '1%', in expression), or a table whose rows referring to
-- kept rows are kept (follow: the most rows, if any, in expression), or a
-- relationship the source does not declare (relate: its target is
-- "schema.table(columns) -> schema.table(columns)", schema_name and
-- table_name the referring table's, its condition, if any, in expression).
-- Written by admins' calls of mask(), unmask(), exclude_data(),
-- include_data(), subset(), unsubset(), follow(), unfollow(), relate() and
-- unrelate().
CREATE TABLE pgsandbox.source_rule (
	source		text NOT NULL REFERENCES pgsandbox.source ON DELETE CASCADE,
	kind		text NOT NULL CHECK (kind IN ('mask', 'exclude_data', 'subset', 'follow', 'relate')),
	-- schema.table.column, each part quoted where needed, or a table pattern
	target		text NOT NULL,
	schema_name	text,
	table_name	text,
	column_name	text,
	expression	text,
	added_at	timestamptz NOT NULL DEFAULT pg_catalog.now(),
	added_by	name NOT NULL DEFAULT session_user,
	-- mask: a key mask, applied the same to every column keys tie to it
	key_mask	boolean NOT NULL DEFAULT false,
	PRIMARY KEY (source, kind, target),
	CHECK ((kind = 'mask') = (expression IS NOT NULL AND column_name IS NOT NULL)),
	CHECK (kind = 'mask' OR NOT key_mask)
);
REVOKE ALL ON pgsandbox.source_rule FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('pgsandbox.source_rule', '');

CREATE VIEW pgsandbox.source_rules WITH (security_barrier) AS
	SELECT r.source, r.kind, r.target, r.expression, r.added_at, r.key_mask
	  FROM pgsandbox.source_rule r
	 WHERE pgsandbox._caller_is_admin()
		OR EXISTS (SELECT 1 FROM pgsandbox.source_grant g
					WHERE g.source = r.source
					  AND pg_catalog.pg_has_role(pgsandbox._caller(), g.grantee, 'MEMBER'));
COMMENT ON VIEW pgsandbox.source_rules IS
	'How data clones of each source are masked and reduced (a pgsandbox_user sees the rules of the sources it may clone)';
REVOKE ALL ON pgsandbox.source_rules FROM PUBLIC;
GRANT SELECT ON pgsandbox.source_rules TO pgsandbox_admin, pgsandbox_user;

CREATE FUNCTION pgsandbox.mask(source text, target text, expression text)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_mask'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.mask(text, text, text) IS
	'Have data clones of a source read a column (schema.table.column) through an expression over its row, evaluated on the source';

CREATE FUNCTION pgsandbox.mask_key(source text, target text, expression text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_mask_key'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.mask_key(text, text, text) IS
	'Have data clones of a source read a key column (schema.table.column), and every column keys tie to it, through one deterministic expression of its value; by default a keyed permutation of integers, a keyed hash of text that keeps an email''s shape, or of a uuid';

CREATE FUNCTION pgsandbox.unmask(source text, target text)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_unmask'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.unmask(text, text) IS
	'Remove a masking rule of a source';

CREATE FUNCTION pgsandbox.exclude_data(source text, table_pattern text)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_exclude_data'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.exclude_data(text, text) IS
	'Have data clones of a source copy the tables matching a pattern (as pg_dump reads one) without their rows';

CREATE FUNCTION pgsandbox.include_data(source text, table_pattern text)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_include_data'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.include_data(text, text) IS
	'Remove a pattern that exclude_data() set';

CREATE FUNCTION pgsandbox.subset(source text, target text, condition text)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_subset'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.subset(text, text, text) IS
	'Have data clones of a source keep only the rows of a table (schema.table) that a condition over its row holds for, or a share of them (''1%''), with every row they need';

CREATE FUNCTION pgsandbox.unsubset(source text, target text)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_unsubset'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.unsubset(text, text) IS
	'Remove a subset rule of a source';

CREATE FUNCTION pgsandbox.follow(source text, target text, max_rows bigint DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_follow'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.follow(text, text, bigint) IS
	'Have reduced data clones of a source keep the rows of a table (schema.table) that refer to kept rows, at most max_rows of them';

CREATE FUNCTION pgsandbox.unfollow(source text, target text)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_unfollow'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.unfollow(text, text) IS
	'Remove a follow rule of a source';

CREATE FUNCTION pgsandbox.relate(source text, referring text, referred text,
								 condition text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_relate'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.relate(text, text, text, text) IS
	'Have reduced data clones of a source follow a relationship its schema does not declare, from schema.table(columns) to unique schema.table(columns), where a condition over the referring row holds';

CREATE FUNCTION pgsandbox.unrelate(source text, referring text, referred text)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_unrelate'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.unrelate(text, text, text) IS
	'Remove a relationship relate() declared';

REVOKE ALL ON FUNCTION pgsandbox.relate(text, text, text, text),
	pgsandbox.unrelate(text, text, text), pgsandbox.mask_key(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgsandbox.relate(text, text, text, text),
	pgsandbox.unrelate(text, text, text), pgsandbox.mask_key(text, text, text) TO pgsandbox_admin;

CREATE FUNCTION pgsandbox.suggest_masks(source text)
RETURNS TABLE(target text, reason text, expression text)
AS 'MODULE_PATHNAME', 'pgsandbox_suggest_masks'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.suggest_masks(text) IS
	'Columns of a source that look personal, by name and by sampled values, each with an expression for mask(); reads the source only';

REVOKE ALL ON FUNCTION
	pgsandbox.mask(text, text, text),
	pgsandbox.unmask(text, text),
	pgsandbox.exclude_data(text, text),
	pgsandbox.include_data(text, text),
	pgsandbox.subset(text, text, text),
	pgsandbox.unsubset(text, text),
	pgsandbox.follow(text, text, bigint),
	pgsandbox.unfollow(text, text),
	pgsandbox.suggest_masks(text)
FROM PUBLIC;

GRANT EXECUTE ON FUNCTION
	pgsandbox.mask(text, text, text),
	pgsandbox.unmask(text, text),
	pgsandbox.exclude_data(text, text),
	pgsandbox.include_data(text, text),
	pgsandbox.subset(text, text, text),
	pgsandbox.unsubset(text, text),
	pgsandbox.follow(text, text, bigint),
	pgsandbox.unfollow(text, text),
	pgsandbox.suggest_masks(text)
TO pgsandbox_admin;

/* resets and saves */

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
