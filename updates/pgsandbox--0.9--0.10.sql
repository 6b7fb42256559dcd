/* pgsandbox--0.9--0.10.sql: upgrade pgsandbox from 0.9 to 0.10 (reduced data clones) */

\echo Use "ALTER EXTENSION pgsandbox UPDATE TO '0.10'" to load this file. \quit

-- Subset rules: a table's rows a data clone keeps (a condition, or a share
-- of its rows), and tables whose rows referring to kept rows are kept too.
ALTER TABLE pgsandbox.source_rule DROP CONSTRAINT source_rule_kind_check;
ALTER TABLE pgsandbox.source_rule ADD CONSTRAINT source_rule_kind_check
	CHECK (kind IN ('mask', 'exclude_data', 'subset', 'follow'));

-- Whether subset rules reduced a sandbox's rows.
ALTER TABLE pgsandbox.sandbox ADD COLUMN reduced boolean NOT NULL DEFAULT false;

CREATE OR REPLACE VIEW pgsandbox.sandboxes WITH (security_barrier) AS
	SELECT s.name, s.source, s.schema_only, s.status, s.labels,
		   s.requested_by AS owner, s.created_at, s.ready_at, s.expires_at,
		   s.dropped_at, s.size_bytes, s.error, s.method, s.data_as_of,
		   s.masked, s.protected_until, s.idle_timeout, s.last_used_at,
		   s.read_only_at, s.reduced
	  FROM pgsandbox.sandbox s
	 WHERE s.kind = 'sandbox'
	   AND (s.owner_oid = pgsandbox._caller() OR pgsandbox._caller_is_admin());

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

REVOKE ALL ON FUNCTION
	pgsandbox.subset(text, text, text),
	pgsandbox.unsubset(text, text),
	pgsandbox.follow(text, text, bigint),
	pgsandbox.unfollow(text, text)
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
	pgsandbox.subset(text, text, text),
	pgsandbox.unsubset(text, text),
	pgsandbox.follow(text, text, bigint),
	pgsandbox.unfollow(text, text)
TO pgsandbox_admin;
