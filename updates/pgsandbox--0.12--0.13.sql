/* pgsandbox--0.12--0.13.sql: upgrade pgsandbox from 0.12 to 0.13 */

\echo Use "ALTER EXTENSION pgsandbox UPDATE TO '0.13'" to load this file. \quit

-- Relationships a source's schema does not declare, which reduced clones
-- follow as they follow foreign keys (relate(), unrelate()).
ALTER TABLE pgsandbox.source_rule DROP CONSTRAINT source_rule_kind_check;
ALTER TABLE pgsandbox.source_rule ADD CONSTRAINT source_rule_kind_check
	CHECK (kind IN ('mask', 'exclude_data', 'subset', 'follow', 'relate'));

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

-- Key masks: a mask on a key column, applied the same to every column
-- keys tie to it (mask_key()).
ALTER TABLE pgsandbox.source_rule ADD COLUMN key_mask boolean NOT NULL DEFAULT false;
ALTER TABLE pgsandbox.source_rule ADD CONSTRAINT source_rule_check1
	CHECK (kind = 'mask' OR NOT key_mask);

CREATE OR REPLACE VIEW pgsandbox.source_rules WITH (security_barrier) AS
	SELECT r.source, r.kind, r.target, r.expression, r.added_at, r.key_mask
	  FROM pgsandbox.source_rule r
	 WHERE pgsandbox._caller_is_admin()
		OR EXISTS (SELECT 1 FROM pgsandbox.source_grant g
					WHERE g.source = r.source
					  AND pg_catalog.pg_has_role(pgsandbox._caller(), g.grantee, 'MEMBER'));

CREATE FUNCTION pgsandbox.mask_key(source text, target text, expression text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pgsandbox_mask_key'
LANGUAGE C SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION pgsandbox.mask_key(text, text, text) IS
	'Have data clones of a source read a key column (schema.table.column), and every column keys tie to it, through one deterministic expression of its value; by default a keyed permutation of integers, a keyed hash of text that keeps an email''s shape, or of a uuid';

REVOKE ALL ON FUNCTION pgsandbox.relate(text, text, text, text),
	pgsandbox.unrelate(text, text, text), pgsandbox.mask_key(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgsandbox.relate(text, text, text, text),
	pgsandbox.unrelate(text, text, text), pgsandbox.mask_key(text, text, text) TO pgsandbox_admin;
