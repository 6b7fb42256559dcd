/* pgsandbox--0.5--0.6.sql: upgrade pgsandbox from 0.5 to 0.6 (protection) */

\echo Use "ALTER EXTENSION pgsandbox UPDATE TO '0.6'" to load this file. \quit

-- A protected sandbox outlives its expiry until protected_until: the reaper
-- and gc() leave it alone; drop() by its owner or an admin still works.
ALTER TABLE pgsandbox.sandbox ADD COLUMN protected_until timestamptz;

ALTER TABLE pgsandbox.event DROP CONSTRAINT event_action_check;
ALTER TABLE pgsandbox.event ADD CONSTRAINT event_action_check
	CHECK (action IN ('clone', 'ready', 'failed', 'drop', 'expire',
					  'cleanup', 'extend', 'snapshot', 'snapshot_failed',
					  'handout', 'pool_fill', 'protect', 'unprotect'));

CREATE OR REPLACE VIEW pgsandbox.sandboxes WITH (security_barrier) AS
	SELECT s.name, s.source, s.schema_only, s.status, s.labels,
		   s.requested_by AS owner, s.created_at, s.ready_at, s.expires_at,
		   s.dropped_at, s.size_bytes, s.error, s.method, s.data_as_of,
		   s.masked, s.protected_until
	  FROM pgsandbox.sandbox s
	 WHERE s.kind = 'sandbox'
	   AND (s.owner_oid = pgsandbox._caller() OR pgsandbox._caller_is_admin());

CREATE OR REPLACE FUNCTION pgsandbox.gc(dry_run boolean DEFAULT false)
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

REVOKE ALL ON FUNCTION pgsandbox.protect(text, timestamptz), pgsandbox.unprotect(text)
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgsandbox.protect(text, timestamptz), pgsandbox.unprotect(text)
TO pgsandbox_admin, pgsandbox_user;
