/* pgsandbox--0.3--0.4.sql: upgrade pgsandbox from 0.3 to 0.4 (masking) */

\echo Use "ALTER EXTENSION pgsandbox UPDATE TO '0.4'" to load this file. \quit

-- A source counts the changes of its rules; a sandbox records the count its
-- rows were read under, and whether rules masked or left out any of them.
ALTER TABLE pgsandbox.source
	ADD COLUMN rules_version integer NOT NULL DEFAULT 0;
ALTER TABLE pgsandbox.sandbox
	ADD COLUMN rules_version integer NOT NULL DEFAULT 0,
	ADD COLUMN masked boolean NOT NULL DEFAULT false;

CREATE OR REPLACE VIEW pgsandbox.sandboxes WITH (security_barrier) AS
	SELECT s.name, s.source, s.schema_only, s.status, s.labels,
		   s.requested_by AS owner, s.created_at, s.ready_at, s.expires_at,
		   s.dropped_at, s.size_bytes, s.error, s.method, s.data_as_of,
		   s.masked
	  FROM pgsandbox.sandbox s
	 WHERE s.kind = 'sandbox'
	   AND (s.owner_oid = pgsandbox._caller() OR pgsandbox._caller_is_admin());

/* masking: rules per source, applied where the source's rows are read */

-- What a data clone of a source copies otherwise than as it is: a column
-- masked by an expression, or a table whose rows are left out.  Written by
-- admins' calls of mask(), unmask(), exclude_data() and include_data().
CREATE TABLE pgsandbox.source_rule (
	source		text NOT NULL REFERENCES pgsandbox.source ON DELETE CASCADE,
	kind		text NOT NULL CHECK (kind IN ('mask', 'exclude_data')),
	-- schema.table.column, each part quoted where needed, or a table pattern
	target		text NOT NULL,
	schema_name	text,
	table_name	text,
	column_name	text,
	expression	text,
	added_at	timestamptz NOT NULL DEFAULT pg_catalog.now(),
	added_by	name NOT NULL DEFAULT session_user,
	PRIMARY KEY (source, kind, target),
	CHECK ((kind = 'mask') = (expression IS NOT NULL AND column_name IS NOT NULL))
);
REVOKE ALL ON pgsandbox.source_rule FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('pgsandbox.source_rule', '');

CREATE VIEW pgsandbox.source_rules WITH (security_barrier) AS
	SELECT r.source, r.kind, r.target, r.expression, r.added_at
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
	pgsandbox.suggest_masks(text)
FROM PUBLIC;

GRANT EXECUTE ON FUNCTION
	pgsandbox.mask(text, text, text),
	pgsandbox.unmask(text, text),
	pgsandbox.exclude_data(text, text),
	pgsandbox.include_data(text, text),
	pgsandbox.suggest_masks(text)
TO pgsandbox_admin;
