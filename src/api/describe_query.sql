-- describe_query.sql: the catalog query of describe_schema() and
-- schema_diff(), run in the database described.  describe.c holds a copy
-- of it as a C string, made by `make src/describe_query.h`; edit this file.
--
-- One JSON object, a list per kind of object, each object with its name
-- and, where a definition makes sense, that definition as PostgreSQL
-- prints it (pg_get_viewdef, pg_get_functiondef, pg_get_triggerdef,
-- pg_get_constraintdef, pg_get_indexdef, format_type) or as read from the
-- catalogs.  System schemas and whatever belongs to an extension are left
-- out; everything is ordered by name, so that two descriptions of the same
-- schema are equal.  Owners and privileges are left out.
--
-- It reads the same on every major from 15 on.  NOT NULL constraints are
-- rows of pg_constraint (contype 'n') for domains from PostgreSQL 17 and
-- for tables from 18; they are left out of the constraint lists, since
-- the column's not_null (attnotnull) and the domain's NOT NULL (typnotnull)
-- already say it, so that a description does not depend on the version.
WITH ext AS (
	SELECT classid, objid FROM pg_catalog.pg_depend WHERE deptype = 'e'
), nsp AS (
	SELECT n.oid, n.nspname FROM pg_catalog.pg_namespace n
	 WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
	   AND n.nspname !~ '^pg_(toast_)?temp_'
	   AND NOT EXISTS (SELECT 1 FROM ext WHERE ext.classid = 'pg_catalog.pg_namespace'::pg_catalog.regclass
											AND ext.objid = n.oid)
), rel AS (
	SELECT c.oid, pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(c.relname) AS name,
		   c.relkind, c.relrowsecurity, c.relforcerowsecurity, c.relreplident, c.relispartition
	  FROM pg_catalog.pg_class c JOIN nsp n ON n.oid = c.relnamespace
	 WHERE c.relkind IN ('r', 'p', 'f', 'v', 'm', 'S')
	   AND NOT EXISTS (SELECT 1 FROM ext WHERE ext.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
											AND ext.objid = c.oid)
), col AS (
	SELECT a.attrelid, pg_catalog.jsonb_agg(pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
			'name', a.attname,
			'type', pg_catalog.format_type(a.atttypid, a.atttypmod),
			'collation', CASE WHEN a.attcollation <> t.typcollation
							  THEN (SELECT pg_catalog.quote_ident(cn.nspname) || '.' || pg_catalog.quote_ident(co.collname)
									  FROM pg_catalog.pg_collation co
									  JOIN pg_catalog.pg_namespace cn ON cn.oid = co.collnamespace
									 WHERE co.oid = a.attcollation) END,
			'not_null', CASE WHEN a.attnotnull THEN true END,
			'default', CASE WHEN a.attgenerated = '' THEN pg_catalog.pg_get_expr(ad.adbin, ad.adrelid) END,
			'generated', CASE WHEN a.attgenerated <> '' THEN pg_catalog.pg_get_expr(ad.adbin, ad.adrelid) END,
			'identity', CASE a.attidentity WHEN 'a' THEN 'always' WHEN 'd' THEN 'by default' END,
			'comment', pg_catalog.col_description(a.attrelid, a.attnum))) ORDER BY a.attnum) AS columns
	  FROM pg_catalog.pg_attribute a
	  JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
	  LEFT JOIN pg_catalog.pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
	 WHERE a.attrelid IN (SELECT oid FROM rel) AND a.attnum > 0 AND NOT a.attisdropped
	 GROUP BY a.attrelid
), idx AS (
	SELECT i.indrelid, pg_catalog.jsonb_agg(pg_catalog.pg_get_indexdef(i.indexrelid) ORDER BY ic.relname) AS indexes
	  FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
	 WHERE i.indrelid IN (SELECT oid FROM rel)
	   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint co
					    WHERE co.conindid = i.indexrelid AND co.conrelid = i.indrelid)
	 GROUP BY i.indrelid
), con AS (
	SELECT co.conrelid, pg_catalog.jsonb_agg(co.conname || ' ' || pg_catalog.pg_get_constraintdef(co.oid)
											 ORDER BY co.conname) AS constraints
	  FROM pg_catalog.pg_constraint co
	 WHERE co.conrelid IN (SELECT oid FROM rel)
	   AND co.contype <> 'n'	-- NOT NULL (a row from 18): shown as the column's not_null
	 GROUP BY co.conrelid
), trg AS (
	SELECT tg.tgrelid, pg_catalog.jsonb_agg(pg_catalog.pg_get_triggerdef(tg.oid)
			|| CASE tg.tgenabled WHEN 'D' THEN ' -- disabled' WHEN 'R' THEN ' -- enabled replica'
								 WHEN 'A' THEN ' -- enabled always' ELSE '' END
			ORDER BY tg.tgname) AS triggers
	  FROM pg_catalog.pg_trigger tg
	 WHERE tg.tgrelid IN (SELECT oid FROM rel) AND NOT tg.tgisinternal
	 GROUP BY tg.tgrelid
), pol AS (
	SELECT po.polrelid, pg_catalog.jsonb_agg(
			'POLICY ' || pg_catalog.quote_ident(po.polname)
			|| CASE WHEN po.polpermissive THEN '' ELSE ' AS RESTRICTIVE' END
			|| ' FOR ' || CASE po.polcmd WHEN 'r' THEN 'SELECT' WHEN 'a' THEN 'INSERT' WHEN 'w' THEN 'UPDATE'
										 WHEN 'd' THEN 'DELETE' ELSE 'ALL' END
			|| ' TO ' || (SELECT pg_catalog.string_agg(CASE WHEN r = 0 THEN 'PUBLIC'
															ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(r)) END,
													   ', ' ORDER BY 1)
							FROM pg_catalog.unnest(po.polroles) r)
			|| COALESCE(' USING (' || pg_catalog.pg_get_expr(po.polqual, po.polrelid) || ')', '')
			|| COALESCE(' WITH CHECK (' || pg_catalog.pg_get_expr(po.polwithcheck, po.polrelid) || ')', '')
			ORDER BY po.polname) AS policies
	  FROM pg_catalog.pg_policy po
	 WHERE po.polrelid IN (SELECT oid FROM rel)
	 GROUP BY po.polrelid
), rul AS (
	SELECT ru.ev_class, pg_catalog.jsonb_agg(pg_catalog.pg_get_ruledef(ru.oid) ORDER BY ru.rulename) AS rules
	  FROM pg_catalog.pg_rewrite ru
	 WHERE ru.ev_class IN (SELECT oid FROM rel) AND ru.rulename <> '_RETURN'
	 GROUP BY ru.ev_class
), typ AS (
	SELECT t.oid, pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(t.typname) AS name,
		   t.typtype, t.typrelid, t.typbasetype, t.typtypmod, t.typnotnull, t.typdefault, t.typcollation
	  FROM pg_catalog.pg_type t JOIN nsp n ON n.oid = t.typnamespace
	 WHERE t.typtype IN ('e', 'd', 'c', 'r')
	   AND (t.typtype <> 'c' OR (SELECT c.relkind FROM pg_catalog.pg_class c WHERE c.oid = t.typrelid) = 'c')
	   AND NOT EXISTS (SELECT 1 FROM ext WHERE ext.classid = 'pg_catalog.pg_type'::pg_catalog.regclass
											AND ext.objid = t.oid)
)
SELECT pg_catalog.jsonb_build_object(
	-- a schema is its name, or its name and comment (public's stock
	-- comment is left out)
	'schemas', (SELECT COALESCE(pg_catalog.jsonb_agg(
			CASE WHEN d.comment IS NULL THEN pg_catalog.to_jsonb(n.nspname)
				 ELSE pg_catalog.jsonb_build_object('name', n.nspname, 'comment', d.comment) END
			ORDER BY n.nspname), '[]')
		FROM nsp n
		CROSS JOIN LATERAL (SELECT NULLIF(pg_catalog.obj_description(n.oid, 'pg_namespace'),
										  CASE WHEN n.nspname = 'public' THEN 'standard public schema' END)
								   AS comment) d),
	'tables', (SELECT COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
			'name', r.name,
			'kind', CASE r.relkind WHEN 'p' THEN 'partitioned' WHEN 'f' THEN 'foreign' END,
			'columns', col.columns,
			'constraints', con.constraints,
			'indexes', idx.indexes,
			'triggers', trg.triggers,
			'policies', pol.policies,
			'rules', rul.rules,
			'row_security', CASE WHEN r.relforcerowsecurity THEN 'forced'
								 WHEN r.relrowsecurity THEN 'enabled' END,
			'replica_identity', CASE r.relreplident WHEN 'n' THEN 'nothing' WHEN 'f' THEN 'full'
								WHEN 'i' THEN (SELECT 'using index ' || pg_catalog.quote_ident(ic.relname)
												 FROM pg_catalog.pg_index i
												 JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
												WHERE i.indrelid = r.oid AND i.indisreplident) END,
			'partition_key', CASE WHEN r.relkind = 'p' THEN pg_catalog.pg_get_partkeydef(r.oid) END,
			'partition_of', CASE WHEN r.relispartition THEN
				(SELECT pr.name || ' ' || pg_catalog.pg_get_expr(c.relpartbound, c.oid)
				   FROM pg_catalog.pg_class c
				   JOIN pg_catalog.pg_inherits inh ON inh.inhrelid = c.oid
				   JOIN rel pr ON pr.oid = inh.inhparent
				  WHERE c.oid = r.oid) END,
			'comment', pg_catalog.obj_description(r.oid, 'pg_class'))) ORDER BY r.name), '[]')
		FROM rel r
		LEFT JOIN col ON col.attrelid = r.oid
		LEFT JOIN con ON con.conrelid = r.oid
		LEFT JOIN idx ON idx.indrelid = r.oid
		LEFT JOIN trg ON trg.tgrelid = r.oid
		LEFT JOIN pol ON pol.polrelid = r.oid
		LEFT JOIN rul ON rul.ev_class = r.oid
	   WHERE r.relkind IN ('r', 'p', 'f')),
	'views', (SELECT COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
			'name', r.name,
			'kind', CASE r.relkind WHEN 'm' THEN 'materialized' END,
			'columns', (SELECT pg_catalog.jsonb_agg((c->>'name') || ' ' || (c->>'type'))
						  FROM pg_catalog.jsonb_array_elements(col.columns) c),
			'definition', pg_catalog.pg_get_viewdef(r.oid),
			'indexes', idx.indexes,
			'triggers', trg.triggers,
			'rules', rul.rules,
			'comment', pg_catalog.obj_description(r.oid, 'pg_class'))) ORDER BY r.name), '[]')
		FROM rel r
		LEFT JOIN col ON col.attrelid = r.oid
		LEFT JOIN idx ON idx.indrelid = r.oid
		LEFT JOIN trg ON trg.tgrelid = r.oid
		LEFT JOIN rul ON rul.ev_class = r.oid
	   WHERE r.relkind IN ('v', 'm')),
	'sequences', (SELECT COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
			'name', r.name,
			'definition', 'AS ' || pg_catalog.format_type(s.seqtypid, NULL)
				|| ' START ' || s.seqstart || ' INCREMENT ' || s.seqincrement
				|| ' MINVALUE ' || s.seqmin || ' MAXVALUE ' || s.seqmax || ' CACHE ' || s.seqcache
				|| CASE WHEN s.seqcycle THEN ' CYCLE' ELSE ' NO CYCLE' END
				|| COALESCE(' OWNED BY ' || (SELECT pr.name || '.' || pg_catalog.quote_ident(a.attname)
											   FROM pg_catalog.pg_depend d
											   JOIN rel pr ON pr.oid = d.refobjid
											   JOIN pg_catalog.pg_attribute a
												 ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
											  WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
												AND d.objid = r.oid AND d.deptype IN ('a', 'i')
												AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass
											  LIMIT 1), ''),
			'comment', pg_catalog.obj_description(r.oid, 'pg_class'))) ORDER BY r.name), '[]')
		FROM rel r JOIN pg_catalog.pg_sequence s ON s.seqrelid = r.oid
	   WHERE r.relkind = 'S'),
	'functions', (SELECT COALESCE(pg_catalog.jsonb_agg(f.obj ORDER BY f.obj->>'name'), '[]') FROM (
		SELECT pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
			'name', pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(p.proname)
					|| '(' || pg_catalog.pg_get_function_identity_arguments(p.oid) || ')',
			'kind', CASE p.prokind WHEN 'p' THEN 'procedure' WHEN 'a' THEN 'aggregate' WHEN 'w' THEN 'window' END,
			'returns', CASE WHEN p.prokind IN ('f', 'w') THEN pg_catalog.pg_get_function_result(p.oid) END,
			'language', l.lanname,
			'definition', CASE WHEN p.prokind = 'a' THEN
				(SELECT 'SFUNC = ' || ag.aggtransfn::pg_catalog.regproc::text
						|| ', STYPE = ' || pg_catalog.format_type(ag.aggtranstype, NULL)
						|| CASE WHEN ag.aggfinalfn <> 0 THEN ', FINALFUNC = ' || ag.aggfinalfn::pg_catalog.regproc::text ELSE '' END
						|| CASE WHEN ag.aggcombinefn <> 0 THEN ', COMBINEFUNC = ' || ag.aggcombinefn::pg_catalog.regproc::text ELSE '' END
						|| COALESCE(', INITCOND = ' || pg_catalog.quote_literal(ag.agginitval), '')
						|| CASE WHEN ag.aggsortop <> 0 THEN ', SORTOP = ' || ag.aggsortop::pg_catalog.regoperator::text ELSE '' END
				   FROM pg_catalog.pg_aggregate ag WHERE ag.aggfnoid = p.oid)
				ELSE pg_catalog.pg_get_functiondef(p.oid) END,
			'comment', pg_catalog.obj_description(p.oid, 'pg_proc'))) AS obj
		  FROM pg_catalog.pg_proc p JOIN nsp n ON n.oid = p.pronamespace
		  JOIN pg_catalog.pg_language l ON l.oid = p.prolang
		 WHERE NOT EXISTS (SELECT 1 FROM ext WHERE ext.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
												AND ext.objid = p.oid)) f),
	'types', (SELECT COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
			'name', t.name,
			'kind', CASE t.typtype WHEN 'e' THEN 'enum' WHEN 'd' THEN 'domain' WHEN 'c' THEN 'composite'
								   WHEN 'r' THEN 'range' END,
			'values', CASE WHEN t.typtype = 'e' THEN
				(SELECT pg_catalog.jsonb_agg(e.enumlabel ORDER BY e.enumsortorder)
				   FROM pg_catalog.pg_enum e WHERE e.enumtypid = t.oid) END,
			'definition', CASE t.typtype
				WHEN 'e' THEN 'ENUM (' || (SELECT COALESCE(pg_catalog.string_agg(pg_catalog.quote_literal(e.enumlabel), ', '
																			   ORDER BY e.enumsortorder), '')
											 FROM pg_catalog.pg_enum e WHERE e.enumtypid = t.oid) || ')'
				WHEN 'd' THEN pg_catalog.format_type(t.typbasetype, t.typtypmod)
					|| CASE WHEN t.typcollation <> (SELECT bt.typcollation FROM pg_catalog.pg_type bt
													 WHERE bt.oid = t.typbasetype)
							THEN ' COLLATE ' || (SELECT pg_catalog.quote_ident(co.collname) FROM pg_catalog.pg_collation co
												  WHERE co.oid = t.typcollation) ELSE '' END
					|| COALESCE(' DEFAULT ' || t.typdefault, '')
					|| CASE WHEN t.typnotnull THEN ' NOT NULL' ELSE '' END
					|| COALESCE((SELECT pg_catalog.string_agg(' CONSTRAINT ' || pg_catalog.quote_ident(co.conname) || ' '
															|| pg_catalog.pg_get_constraintdef(co.oid), '' ORDER BY co.conname)
								   FROM pg_catalog.pg_constraint co
								  WHERE co.contypid = t.oid
									AND co.contype <> 'n'), '')	-- a domain's NOT NULL (a row from 17): typnotnull
				WHEN 'c' THEN '(' || (SELECT COALESCE(pg_catalog.string_agg(pg_catalog.quote_ident(a.attname) || ' '
																		   || pg_catalog.format_type(a.atttypid, a.atttypmod),
																		   ', ' ORDER BY a.attnum), '')
										FROM pg_catalog.pg_attribute a
									   WHERE a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped) || ')'
				WHEN 'r' THEN (SELECT 'RANGE (SUBTYPE = ' || pg_catalog.format_type(rg.rngsubtype, NULL)
									  || CASE WHEN rg.rngsubdiff <> 0 THEN ', SUBTYPE_DIFF = ' || rg.rngsubdiff::pg_catalog.regproc::text ELSE '' END
									  || ')'
								 FROM pg_catalog.pg_range rg WHERE rg.rngtypid = t.oid) END,
			'comment', pg_catalog.obj_description(t.oid, 'pg_type'))) ORDER BY t.name), '[]')
		FROM typ t),
	'collations', (SELECT COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
			'name', pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(co.collname),
			'definition', 'PROVIDER = ' || CASE co.collprovider WHEN 'i' THEN 'icu' WHEN 'c' THEN 'libc' ELSE 'default' END
				|| COALESCE(', LC_COLLATE = ' || pg_catalog.quote_literal(co.collcollate), '')
				|| COALESCE(', LC_CTYPE = ' || pg_catalog.quote_literal(co.collctype), '')
				|| CASE WHEN co.collisdeterministic THEN '' ELSE ', DETERMINISTIC = false' END,
			'comment', pg_catalog.obj_description(co.oid, 'pg_collation'))) ORDER BY n.nspname, co.collname), '[]')
		FROM pg_catalog.pg_collation co JOIN nsp n ON n.oid = co.collnamespace
	   WHERE NOT EXISTS (SELECT 1 FROM ext WHERE ext.classid = 'pg_catalog.pg_collation'::pg_catalog.regclass
											  AND ext.objid = co.oid)),
	'operators', (SELECT COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
			'name', o.oid::pg_catalog.regoperator::text,
			'definition', 'FUNCTION = ' || o.oprcode::pg_catalog.regproc::text
				|| CASE WHEN o.oprcom <> 0 THEN ', COMMUTATOR = ' || o.oprcom::pg_catalog.regoperator::text ELSE '' END
				|| CASE WHEN o.oprnegate <> 0 THEN ', NEGATOR = ' || o.oprnegate::pg_catalog.regoperator::text ELSE '' END
				|| CASE WHEN o.oprrest <> 0 THEN ', RESTRICT = ' || o.oprrest::pg_catalog.regproc::text ELSE '' END
				|| CASE WHEN o.oprjoin <> 0 THEN ', JOIN = ' || o.oprjoin::pg_catalog.regproc::text ELSE '' END,
			'comment', pg_catalog.obj_description(o.oid, 'pg_operator'))) ORDER BY o.oid::pg_catalog.regoperator::text), '[]')
		FROM pg_catalog.pg_operator o JOIN nsp n ON n.oid = o.oprnamespace
	   WHERE NOT EXISTS (SELECT 1 FROM ext WHERE ext.classid = 'pg_catalog.pg_operator'::pg_catalog.regclass
											  AND ext.objid = o.oid)),
	'casts', (SELECT COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
			'name', pg_catalog.format_type(ca.castsource, NULL) || ' AS ' || pg_catalog.format_type(ca.casttarget, NULL),
			'definition', CASE ca.castmethod WHEN 'f' THEN 'WITH FUNCTION ' || ca.castfunc::pg_catalog.regprocedure::text
											 WHEN 'i' THEN 'WITH INOUT' ELSE 'WITHOUT FUNCTION' END
				|| CASE ca.castcontext WHEN 'i' THEN ' AS IMPLICIT' WHEN 'a' THEN ' AS ASSIGNMENT' ELSE '' END,
			'comment', pg_catalog.obj_description(ca.oid, 'pg_cast')))
			ORDER BY pg_catalog.format_type(ca.castsource, NULL), pg_catalog.format_type(ca.casttarget, NULL)), '[]')
		FROM pg_catalog.pg_cast ca
	   WHERE ca.oid >= 16384
		 AND NOT EXISTS (SELECT 1 FROM ext WHERE ext.classid = 'pg_catalog.pg_cast'::pg_catalog.regclass
												AND ext.objid = ca.oid)),
	'text_search_configurations', (SELECT COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
			'name', pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(cfg.cfgname),
			'definition', 'PARSER = ' || (SELECT pg_catalog.quote_ident(pn.nspname) || '.' || pg_catalog.quote_ident(pr.prsname)
										 FROM pg_catalog.pg_ts_parser pr JOIN pg_catalog.pg_namespace pn ON pn.oid = pr.prsnamespace
										WHERE pr.oid = cfg.cfgparser)
				|| COALESCE((SELECT '; ' || pg_catalog.string_agg(m.maptokentype || ': ' || m.mapdict::pg_catalog.regdictionary::text,
																 ', ' ORDER BY m.maptokentype, m.mapseqno)
							   FROM pg_catalog.pg_ts_config_map m WHERE m.mapcfg = cfg.oid), ''),
			'comment', pg_catalog.obj_description(cfg.oid, 'pg_ts_config'))) ORDER BY n.nspname, cfg.cfgname), '[]')
		FROM pg_catalog.pg_ts_config cfg JOIN nsp n ON n.oid = cfg.cfgnamespace
	   WHERE NOT EXISTS (SELECT 1 FROM ext WHERE ext.classid = 'pg_catalog.pg_ts_config'::pg_catalog.regclass
											  AND ext.objid = cfg.oid)),
	'extensions', (SELECT COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
			'name', e.extname, 'version', e.extversion, 'schema', n.nspname) ORDER BY e.extname), '[]')
		FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace)
)::text
