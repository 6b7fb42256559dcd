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

CREATE OR REPLACE VIEW pgsandbox.sources WITH (security_barrier) AS
	SELECT s.name, s.allow_data, s.host, s.port, s.dbname, s."user", s.added_at,
		   s.allow_statistics, s.trusted_owners
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

-- What the servers said of a failed clone is for admins: others read the
-- step that failed, the first line.
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
		   s.read_only_at, s.reduced
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