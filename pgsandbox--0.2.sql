/* pgsandbox--0.2.sql: catalog, views and functions of pgsandbox */

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

GRANT USAGE ON SCHEMA pgsandbox TO pgsandbox_admin, pgsandbox_user;

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
	added_by	name NOT NULL DEFAULT session_user
);

-- Every sandbox ever made, written only by the lifecycle worker.
CREATE TABLE pgsandbox.sandbox (
	id			bigserial PRIMARY KEY,
	name		text NOT NULL UNIQUE,
	source		text NOT NULL,
	schema_only	boolean NOT NULL,
	status		text NOT NULL
				CHECK (status IN ('cloning', 'ready', 'failed', 'dropped')),
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
	error		text
);
CREATE INDEX sandbox_live_expiry ON pgsandbox.sandbox (expires_at)
	WHERE status = 'ready';

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
								  'cleanup', 'extend')),
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

REVOKE ALL ON pgsandbox.source, pgsandbox.sandbox, pgsandbox.event,
	pgsandbox.source_grant, pgsandbox.sandbox_secret FROM PUBLIC;
REVOKE ALL ON SEQUENCE pgsandbox.sandbox_id_seq, pgsandbox.event_id_seq FROM PUBLIC;

-- a dump of the admin database keeps the sources and who may clone them
SELECT pg_catalog.pg_extension_config_dump('pgsandbox.source', '');
SELECT pg_catalog.pg_extension_config_dump('pgsandbox.source_grant', '');

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
	SELECT s.name, s.allow_data, s.host, s.port, s.dbname, s."user", s.added_at
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
		   s.dropped_at, s.size_bytes, s.error
	  FROM pgsandbox.sandbox s
	 WHERE s.owner_oid = pgsandbox._caller() OR pgsandbox._caller_is_admin();
COMMENT ON VIEW pgsandbox.sandboxes IS
	'Every sandbox pgsandbox made, live or not (a pgsandbox_user sees its own)';

CREATE VIEW pgsandbox.events WITH (security_barrier) AS
	SELECT e.at, e.sandbox, e.action, e.actor, e.detail
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
									 allow_data boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_add_source'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.add_source(text, text, boolean) IS
	'Approve a database as a clone source; allow_data permits copying its rows';

CREATE FUNCTION pgsandbox.remove_source(name text)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_remove_source'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.remove_source(text) IS
	'Withdraw the approval of a clone source; existing sandboxes stay';

CREATE FUNCTION pgsandbox.clone(source text,
								schema_only boolean DEFAULT true,
								ttl interval DEFAULT NULL,
								labels jsonb DEFAULT '{}')
RETURNS TABLE(name text, conninfo text, expires_at timestamptz)
AS 'MODULE_PATHNAME', 'pgsandbox_clone'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.clone(text, boolean, interval, jsonb) IS
	'Clone an approved source into a new sandbox database and login role; returns when it is ready';

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
	pgsandbox.add_source(text, text, boolean),
	pgsandbox.remove_source(text),
	pgsandbox.grant_source(text, regrole),
	pgsandbox.revoke_source(text, regrole),
	pgsandbox.doctor(),
	pgsandbox.clone(text, boolean, interval, jsonb),
	pgsandbox.drop(text),
	pgsandbox.extend(text, interval),
	pgsandbox._drop_expired(text),
	pgsandbox.gc(boolean)
FROM PUBLIC;

GRANT EXECUTE ON FUNCTION
	pgsandbox._caller(),
	pgsandbox._caller_is_admin(),
	pgsandbox.run_sql(text, text, integer, boolean, interval),
	pgsandbox.describe_schema(text),
	pgsandbox.schema_diff(text),
	pgsandbox.clone(text, boolean, interval, jsonb),
	pgsandbox.drop(text),
	pgsandbox.extend(text, interval),
	pgsandbox._drop_expired(text),
	pgsandbox.gc(boolean)
TO pgsandbox_admin, pgsandbox_user;

GRANT EXECUTE ON FUNCTION
	pgsandbox.add_source(text, text, boolean),
	pgsandbox.remove_source(text),
	pgsandbox.grant_source(text, regrole),
	pgsandbox.revoke_source(text, regrole),
	pgsandbox.doctor()
TO pgsandbox_admin;
