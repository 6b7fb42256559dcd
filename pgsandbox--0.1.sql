/* pgsandbox--0.1.sql: catalog, views and functions of pgsandbox */

\echo Use "CREATE EXTENSION pgsandbox" to load this file. \quit

/*
 * Sandbox roles are members of this group: it carries no privileges and
 * gives pg_hba.conf one name to match every sandbox role with.
 */
DO $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'pgsandbox_sandbox') THEN
		CREATE ROLE pgsandbox_sandbox NOLOGIN;
	END IF;
END
$$;

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

REVOKE ALL ON pgsandbox.source, pgsandbox.sandbox, pgsandbox.event FROM PUBLIC;
REVOKE ALL ON SEQUENCE pgsandbox.sandbox_id_seq, pgsandbox.event_id_seq FROM PUBLIC;

SELECT pg_catalog.pg_extension_config_dump('pgsandbox.source', '');

CREATE VIEW pgsandbox.sources AS
	SELECT name, allow_data, host, port, dbname, "user", added_at
	  FROM pgsandbox.source;
COMMENT ON VIEW pgsandbox.sources IS
	'Approved sources, without their connection strings';

CREATE VIEW pgsandbox.sandboxes AS
	SELECT name, source, schema_only, status, labels, created_at, ready_at,
		   expires_at, dropped_at, size_bytes, error
	  FROM pgsandbox.sandbox;
COMMENT ON VIEW pgsandbox.sandboxes IS
	'Every sandbox pgsandbox made, live or not';

CREATE VIEW pgsandbox.events AS
	SELECT at, sandbox, action, actor, detail
	  FROM pgsandbox.event;
COMMENT ON VIEW pgsandbox.events IS
	'What happened to each sandbox, and who asked for it';

REVOKE ALL ON pgsandbox.sources, pgsandbox.sandboxes, pgsandbox.events FROM PUBLIC;

CREATE FUNCTION pgsandbox.add_source(name text, conninfo text,
									 allow_data boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_add_source'
LANGUAGE C;
COMMENT ON FUNCTION pgsandbox.add_source(text, text, boolean) IS
	'Approve a database as a clone source; allow_data permits copying its rows';

CREATE FUNCTION pgsandbox.remove_source(name text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF name IS NULL THEN
		RAISE EXCEPTION 'source name must not be null'
			USING ERRCODE = 'null_value_not_allowed';
	END IF;
	DELETE FROM pgsandbox.source s WHERE s.name = remove_source.name;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'source "%" does not exist', name
			USING ERRCODE = 'undefined_object';
	END IF;
END
$$;
COMMENT ON FUNCTION pgsandbox.remove_source(text) IS
	'Withdraw the approval of a clone source; existing sandboxes stay';

CREATE FUNCTION pgsandbox.clone(source text,
								schema_only boolean DEFAULT true,
								ttl interval DEFAULT NULL,
								labels jsonb DEFAULT '{}')
RETURNS TABLE(name text, conninfo text, expires_at timestamptz)
AS 'MODULE_PATHNAME', 'pgsandbox_clone'
LANGUAGE C;
COMMENT ON FUNCTION pgsandbox.clone(text, boolean, interval, jsonb) IS
	'Clone an approved source into a new sandbox database and login role; returns when it is ready';

CREATE FUNCTION pgsandbox.drop(name text)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_drop'
LANGUAGE C;
COMMENT ON FUNCTION pgsandbox.drop(text) IS
	'Drop a live sandbox''s database and role, ending its sessions first';

CREATE FUNCTION pgsandbox.extend(name text, ttl interval)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'pgsandbox_extend'
LANGUAGE C;
COMMENT ON FUNCTION pgsandbox.extend(text, interval) IS
	'Set a live sandbox''s expiry to now() + ttl, within pgsandbox.max_ttl';

CREATE FUNCTION pgsandbox._drop_expired(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pgsandbox_drop_expired'
LANGUAGE C STRICT;
COMMENT ON FUNCTION pgsandbox._drop_expired(text) IS
	'Internal: have the worker drop a sandbox if it is still expired';

CREATE FUNCTION pgsandbox.gc(dry_run boolean DEFAULT false)
RETURNS TABLE(name text, expires_at timestamptz, dropped boolean)
LANGUAGE plpgsql
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
	'Drop every expired sandbox now; with dry_run, only list them';

REVOKE ALL ON FUNCTION
	pgsandbox.add_source(text, text, boolean),
	pgsandbox.remove_source(text),
	pgsandbox.clone(text, boolean, interval, jsonb),
	pgsandbox.drop(text),
	pgsandbox.extend(text, interval),
	pgsandbox._drop_expired(text),
	pgsandbox.gc(boolean)
FROM PUBLIC;
