/* pgsandbox--0.1--0.2.sql: upgrade pgsandbox from 0.1 to 0.2 */

\echo Use "ALTER EXTENSION pgsandbox UPDATE TO '0.2'" to load this file. \quit

-- a dump of the admin database keeps who may clone which source
SELECT pg_catalog.pg_extension_config_dump('pgsandbox.source_grant', '');

-- schema_diff() sees every kind of object a migration changes, with the
-- definitions on both sides
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
REVOKE ALL ON FUNCTION pgsandbox._added(jsonb, jsonb) FROM PUBLIC;

CREATE OR REPLACE FUNCTION pgsandbox._schema_diff(source jsonb, sandbox jsonb)
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
