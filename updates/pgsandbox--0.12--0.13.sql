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

REVOKE ALL ON FUNCTION pgsandbox.relate(text, text, text, text),
	pgsandbox.unrelate(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgsandbox.relate(text, text, text, text),
	pgsandbox.unrelate(text, text, text) TO pgsandbox_admin;
