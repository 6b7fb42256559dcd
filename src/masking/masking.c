/*-------------------------------------------------------------------------
 *
 * masking.c
 *	  Applying a source's rules to a data clone, in the clone worker: the
 *	  rows of masked tables are read through the rules' expressions on the
 *	  source, so that an unmasked value never leaves it, and the tables
 *	  excluded keep their definition without rows.
 *
 * The worker opens a read-only, repeatable-read transaction on the source
 * (the reader), locks the rules' tables and exports its snapshot; every
 * pg_dump of the clone runs in that snapshot (--snapshot), and so do the
 * reads here.  In it, the rules are resolved: each mask rule's table and
 * column must exist, no foreign key may use the column and the table may
 * not be an extension's (or the clone fails, naming the rule: these may
 * have changed since the rule was set); a rule covers the table's
 * inheritance children and partitions too, as does a table pattern of
 * exclude_data.  pg_dump is told to leave out the rows of every masked or
 * excluded table (--exclude-table-data, with exact names); the restore
 * runs section by section, and between data and post-data each masked
 * table is filled by
 * COPY (SELECT <column or its expression>, ... FROM ONLY <table>) TO STDOUT
 * on the reader, streamed into COPY ... FROM STDIN over a login as the
 * sandbox's own role.  Indexes, constraints and materialized views, built
 * after, see masked values only; a masked value that breaks one fails the
 * clone.
 *
 * An error the source raises while it evaluates the expressions row by
 * row may quote a row's value, so its message is withheld: the clone fails
 * with the source's SQLSTATE and the table's rules.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/string.h"
#include "libpq-fe.h"
#include "libpq/libpq-be-fe-helpers.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_masking.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/varlena.h"

static char *sbx_table_targets(const SbxMaskedTable *table);


/*
 * The tables a pattern of exclude_data matches, with their children.  An
 * extension's tables are not matched: their rows are the extension's, and
 * copied as it keeps them.
 */
static void
sbx_resolve_exclusions(SbxMasking *m, List *patterns, List **excluded_oids)
{
	ListCell   *lc;

	foreach(lc, patterns)
	{
		const char *pattern = lfirst(lc);
		char	   *schema_re;
		char	   *table_re;
		const char *params[2];
		PGresult   *res;

		sbx_table_pattern_regex(pattern, &schema_re, &table_re);
		params[0] = schema_re;
		params[1] = table_re;
		res = sbx_reader_exec(m,
							  "WITH RECURSIVE matched(relid) AS ("
							  "  SELECT c.oid FROM pg_catalog.pg_class c"
							  "    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
							  "   WHERE c.relkind IN ('r', 'p')"
							  "     AND n.nspname !~ '^pg_' AND n.nspname <> 'information_schema'"
							  "     AND ($1::text IS NULL OR n.nspname ~ $1) AND c.relname ~ $2"
							  "     AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d"
							  "                      WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass"
							  "                        AND d.objid = c.oid AND d.deptype = 'e')"
							  "  UNION"
							  "  SELECT i.inhrelid FROM pg_catalog.pg_inherits i"
							  "    JOIN matched ON i.inhparent = matched.relid)"
							  " SELECT matched.relid, n.nspname, c.relname FROM matched"
							  "   JOIN pg_catalog.pg_class c ON c.oid = matched.relid"
							  "   JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace",
							  2, params, PGRES_TUPLES_OK);
		for (int i = 0; i < PQntuples(res); i++)
		{
			Oid			relid = atooid(PQgetvalue(res, i, 0));

			if (list_member_oid(*excluded_oids, relid))
				continue;
			*excluded_oids = lappend_oid(*excluded_oids, relid);
			sbx_leave_out(m, relid, PQgetvalue(res, i, 1), PQgetvalue(res, i, 2),
						  pattern, NULL);
			m->nexcluded++;
		}
		PQclear(res);
	}
}

/*
 * The OID (as text) of the table that mask rule 'rule' names, which must
 * still have the rule's column.
 */
static char *
sbx_mask_rule_relid(SbxMasking *m, SbxMaskRule *rule)
{
	const char *params[3] = {rule->schema, rule->table, rule->column};
	PGresult   *res;
	char	   *relid;

	res = sbx_reader_exec(m,
						  "SELECT c.oid, (SELECT a.attnum FROM pg_catalog.pg_attribute a"
						  "                WHERE a.attrelid = c.oid AND a.attname = $3"
						  "                  AND a.attnum > 0 AND NOT a.attisdropped"
						  "                  AND a.attgenerated = '')"
						  "  FROM pg_catalog.pg_class c"
						  "  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
						  " WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')",
						  3, params, PGRES_TUPLES_OK);
	if (PQntuples(res) == 0)
	{
		PQclear(res);
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("masking rule \"%s\" of source \"%s\" names a table the source no longer has",
						rule->target, m->source),
				 errhint("Remove the rule with unmask(), or set it again.")));
	}
	if (PQgetisnull(res, 0, 1))
	{
		PQclear(res);
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("masking rule \"%s\" of source \"%s\" names a column the source no longer has",
						rule->target, m->source),
				 errhint("Remove the rule with unmask(), or set it again.")));
	}
	relid = pstrdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	return relid;
}

/*
 * The tables mask rule 'rule' covers, table relid and its children (oid,
 * schema, name, kind), checked to be safe to mask now.
 */
static PGresult *
sbx_mask_rule_covered(SbxMasking *m, SbxMaskRule *rule, const char *relid)
{
	const char *params[2] = {relid, rule->column};
	PGresult   *res;

	/*
	 * The table and its children, with what would make the rule unsafe
	 * now, though it was not when set: a foreign key on the column
	 * (pg_restore would check it against rows copied unmasked, and
	 * quote them), or the table's being an extension's, whose rows
	 * are copied apart from the dump.
	 */
	res = sbx_reader_exec(m,
						  "WITH RECURSIVE covered(relid) AS ("
						  "  VALUES ($1::oid)"
						  "  UNION"
						  "  SELECT i.inhrelid FROM pg_catalog.pg_inherits i"
						  "    JOIN covered ON i.inhparent = covered.relid)"
						  " SELECT covered.relid, n.nspname, c.relname, c.relkind,"
						  "        (SELECT k.conname FROM pg_catalog.pg_constraint k"
						  "           JOIN pg_catalog.pg_attribute a ON a.attrelid = covered.relid"
						  "          WHERE a.attname = $2 AND k.contype = 'f'"
						  "            AND ((k.conrelid = covered.relid AND a.attnum = ANY (k.conkey))"
						  "              OR (k.confrelid = covered.relid AND a.attnum = ANY (k.confkey)))"
						  "          ORDER BY k.conname LIMIT 1),"
						  "        (SELECT e.extname FROM pg_catalog.pg_depend d"
						  "           JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid"
						  "          WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass"
						  "            AND d.objid = covered.relid AND d.deptype = 'e'"
						  "          LIMIT 1)"
						  "   FROM covered"
						  "   JOIN pg_catalog.pg_class c ON c.oid = covered.relid"
						  "   JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
						  "  ORDER BY covered.relid",
						  2, params, PGRES_TUPLES_OK);
	for (int i = 0; i < PQntuples(res); i++)
	{
		char	   *fkey;
		char	   *extension;

		if (PQgetisnull(res, i, 4) && PQgetisnull(res, i, 5))
			continue;
		/* a key mask covers every column the key ties (key_masks.c) */
		if (rule->key && PQgetisnull(res, i, 5))
			continue;
		fkey = PQgetisnull(res, i, 4) ? NULL : pstrdup(PQgetvalue(res, i, 4));
		extension = PQgetisnull(res, i, 5) ? NULL : pstrdup(PQgetvalue(res, i, 5));
		PQclear(res);
		if (fkey != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("masking rule \"%s\" of source \"%s\" masks a column that foreign key \"%s\" uses",
							rule->target, m->source, fkey),
					 errdetail("Masked values would no longer match the rows that refer to them, or that they refer to."),
					 errhint("Remove the rule with unmask(), or the foreign key from the source.")));
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("masking rule \"%s\" of source \"%s\" masks a table of extension \"%s\"",
						rule->target, m->source, extension),
				 errdetail("The rows of an extension's tables are copied as the extension keeps them."),
				 errhint("Remove the rule with unmask().")));
	}
	return res;
}

/* The tables of res that hold rows, masked by 'rule' unless excluded. */
static void
sbx_mask_covered_tables(SbxMasking *m, SbxMaskRule *rule, PGresult *res,
						List *excluded_oids)
{
	for (int i = 0; i < PQntuples(res); i++)
	{
		Oid			relid = atooid(PQgetvalue(res, i, 0));
		SbxMaskedTable *table;

		if (PQgetvalue(res, i, 3)[0] != 'r' || list_member_oid(excluded_oids, relid))
			continue;
		table = sbx_masked_table(m, relid, PQgetvalue(res, i, 1), PQgetvalue(res, i, 2));
		table->rules = lappend(table->rules, rule);
	}
}

/*
 * Each mask rule's table and column, which must exist, and the tables it
 * covers: the table and its children that hold rows.
 */
static void
sbx_resolve_masks(SbxMasking *m, List *masks, List *excluded_oids)
{
	ListCell   *lc;

	foreach(lc, masks)
	{
		SbxMaskRule *rule = lfirst(lc);
		PGresult   *res;

		res = sbx_mask_rule_covered(m, rule, sbx_mask_rule_relid(m, rule));
		sbx_mask_covered_tables(m, rule, res, excluded_oids);
		PQclear(res);
		m->ncolumns++;
	}
}

/*
 * Before the source sees a rule: one whose author is not a superuser may
 * use only what mask_expr.c allows, as when it was set.  This is checked
 * again at each clone, as the author may no longer be a superuser, or
 * pgsandbox.mask_functions have changed, since.
 */
static void
sbx_check_rules_rights(SbxMasking *m, List *masks)
{
	ListCell   *lc;

	foreach(lc, masks)
	{
		SbxMaskRule *rule = lfirst(lc);
		const char *refused;

		if (rule->trusted)
			continue;
		refused = sbx_mask_expression_refused(rule->expression);
		if (refused != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("masking rule \"%s\" of source \"%s\" uses %s, which only a superuser's rule may use",
							rule->target, m->source, refused),
					 errdetail("The rule's author is not a superuser, and the rule would run with the rights of the source's login."),
					 errhint("Set the rule again within those limits, or as a superuser.")));
	}
}

/*
 * A key mask, checked again as when it was set: it reads its column alone,
 * and calls no function that is not immutable (key_masks.c).
 */
static void
sbx_check_key_masks(SbxMasking *m, List *masks)
{
	ListCell   *lc;

	foreach(lc, masks)
	{
		SbxMaskRule *rule = lfirst(lc);

		if (!rule->key)
			continue;
		sbx_check_key_mask_expression(rule->expression, rule->table, rule->column);
		sbx_check_key_mask_functions(m->reader, m->source, rule->expression, rule->target);
		sbx_check_key_mask_table(m->reader, m->source, rule->schema, rule->table, rule->target);
	}
}

/*
 * A function outside pg_catalog that pgsandbox.mask_functions lets the
 * rules of admins who are not superusers call runs with the rights of the
 * source's login: in the source, every function of that name must belong
 * to a superuser, or its owner could replace it.  Checked when such a rule
 * exists, in the clone's snapshot.
 */
static void
sbx_check_listed_functions(SbxMasking *m, List *masks)
{
	bool		untrusted = false;
	List	   *listed;
	ListCell   *lc;

	foreach(lc, masks)
		untrusted |= !((SbxMaskRule *) lfirst(lc))->trusted;
	if (!untrusted || sbx_mask_functions_setting == NULL ||
		!SplitIdentifierString(pstrdup(sbx_mask_functions_setting), ',', &listed))
		return;
	foreach(lc, listed)
	{
		char	   *entry = lfirst(lc);
		char	   *dot = strchr(entry, '.');
		const char *params[2];
		PGresult   *res;

		if (dot == NULL)
			continue;			/* pg_catalog's */
		*dot = '\0';
		params[0] = entry;
		params[1] = dot + 1;
		res = sbx_reader_exec(m,
							  "SELECT p.oid::pg_catalog.regprocedure::pg_catalog.text"
							  "  FROM pg_catalog.pg_proc p"
							  "  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace"
							  " WHERE n.nspname OPERATOR(pg_catalog.=) $1 AND p.proname OPERATOR(pg_catalog.=) $2"
							  "   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r"
							  "                    WHERE r.oid OPERATOR(pg_catalog.=) p.proowner AND r.rolsuper)"
							  " ORDER BY 1 LIMIT 1",
							  2, params, PGRES_TUPLES_OK);
		if (PQntuples(res) > 0)
		{
			char	   *func = pstrdup(PQgetvalue(res, 0, 0));

			PQclear(res);
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("function %s of source \"%s\", listed in pgsandbox.mask_functions, belongs to a role that is not a superuser",
							func, m->source),
					 errdetail("Its owner could replace it, and the masking rules of administrators who are not superusers would run it with the rights of the source's login."),
					 errhint("Have a superuser own it, or take it out of pgsandbox.mask_functions.")));
		}
		PQclear(res);
	}
}

/*
 * The rules are SQL in the admin database's encoding, sent to the source as
 * they are: where the source has another, they must be ASCII, or they
 * would read otherwise there.
 */
static void
sbx_check_rules_encoding(SbxMasking *m, List *masks, List *patterns, List *subsets,
						 int rules_encoding)
{
	ListCell   *lc;

	if (pg_char_to_encoding(m->encoding) == rules_encoding)
		return;
	foreach(lc, masks)
	{
		SbxMaskRule *rule = lfirst(lc);

		if (!pg_is_ascii(rule->target) || !pg_is_ascii(rule->expression))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("masking rule \"%s\" of source \"%s\" is not ASCII, and the source's encoding is not the admin database's",
							rule->target, m->source),
					 errdetail("The source's encoding is %s, the admin database's %s.",
							   m->encoding, pg_encoding_to_char(rules_encoding))));
	}
	foreach(lc, patterns)
	{
		if (!pg_is_ascii(lfirst(lc)))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("table pattern \"%s\" of source \"%s\" is not ASCII, and the source's encoding is not the admin database's",
							(char *) lfirst(lc), m->source),
					 errdetail("The source's encoding is %s, the admin database's %s.",
							   m->encoding, pg_encoding_to_char(rules_encoding))));
	}
	foreach(lc, subsets)
	{
		SbxSubsetRule *rule = lfirst(lc);

		if (!pg_is_ascii(rule->target) || (rule->condition && !pg_is_ascii(rule->condition)))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("%s rule \"%s\" of source \"%s\" is not ASCII, and the source's encoding is not the admin database's",
							rule->relation ? "relate" : rule->follow ? "follow" : "subset",
							rule->target, m->source),
					 errdetail("The source's encoding is %s, the admin database's %s.",
							   m->encoding, pg_encoding_to_char(rules_encoding))));
	}
}

/*
 * A rule's expression over a masked table's columns may call a cast from
 * their types (md5(col) casts col to text), found in pg_cast, not by
 * name.  One whose function a role that is not a superuser owns (the owner
 * of a type in the source may create casts from it) could run that role's
 * code with the rights of the source's login: such a cast fails the clone,
 * whoever wrote the rules.  The types are the columns' (with the base
 * types of domains, element types of arrays, subtypes of ranges and
 * multiranges and attribute types of composites) and the tables' row
 * types.  The check reads the catalog in the clone's snapshot: a cast
 * created after it began is not seen (the README says what to do where a
 * source's owners are not trusted).
 */
static void
sbx_check_column_casts(SbxMasking *m)
{
	StringInfoData relids;
	const char *params[1];
	PGresult   *res;
	ListCell   *lc;

	if (m->masked == NIL)
		return;
	initStringInfo(&relids);
	appendStringInfoChar(&relids, '{');
	foreach(lc, m->masked)
		appendStringInfo(&relids, "%s%u", relids.len > 1 ? "," : "",
						 ((SbxMaskedTable *) lfirst(lc))->relid);
	appendStringInfoChar(&relids, '}');
	params[0] = relids.data;
	res = sbx_reader_exec(m, psprintf(
						  "WITH RECURSIVE types(typ) AS ("
						  "  SELECT typ FROM ("
						  "    SELECT a.atttypid FROM pg_catalog.pg_attribute a"
						  "     WHERE a.attrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])"
						  "       AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped"
						  "    UNION ALL"
						  "    SELECT c.reltype FROM pg_catalog.pg_class c"
						  "     WHERE c.oid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])) first(typ)"
						  "  UNION"
						  "  SELECT v.typ FROM types"
						  "    JOIN pg_catalog.pg_type t ON t.oid OPERATOR(pg_catalog.=) types.typ,"
						  "    LATERAL (SELECT t.typbasetype UNION ALL SELECT t.typelem"
						  "             UNION ALL SELECT r.rngsubtype FROM pg_catalog.pg_range r"
						  "              WHERE r.rngtypid OPERATOR(pg_catalog.=) t.oid%s"
						  "             UNION ALL SELECT a.atttypid FROM pg_catalog.pg_attribute a"
						  "              WHERE a.attrelid OPERATOR(pg_catalog.=) t.typrelid"
						  "                AND t.typrelid OPERATOR(pg_catalog.<>) 0"
						  "                AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped) v(typ)"
						  "   WHERE v.typ OPERATOR(pg_catalog.<>) 0)"
						  " SELECT k.castsource::pg_catalog.regtype::pg_catalog.text,"
						  "        k.casttarget::pg_catalog.regtype::pg_catalog.text,"
						  "        p.oid::pg_catalog.regprocedure::pg_catalog.text"
						  "   FROM pg_catalog.pg_cast k"
						  "   JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) k.castfunc"
						  "  WHERE k.castsource IN (SELECT typ FROM types)"
						  "    AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r"
						  "                     WHERE r.oid OPERATOR(pg_catalog.=) p.proowner AND r.rolsuper)"
						  "  ORDER BY 1, 2 LIMIT 1",
						  /* multiranges are PostgreSQL 14's */
						  PQserverVersion(m->reader) >= 140000
						  ? " OR r.rngmultitypid OPERATOR(pg_catalog.=) t.oid" : ""),
						  1, params, PGRES_TUPLES_OK);
	if (PQntuples(res) > 0)
	{
		char	   *from = pstrdup(PQgetvalue(res, 0, 0));
		char	   *to = pstrdup(PQgetvalue(res, 0, 1));
		char	   *func = pstrdup(PQgetvalue(res, 0, 2));

		PQclear(res);
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("the cast from %s to %s in source \"%s\" runs function %s, which a role that is not a superuser owns",
						from, to, m->source, func),
				 errdetail("A masked table has a column of type %s: its rules could run that role's function with the rights of the source's login.",
						   from),
				 errhint("Drop the cast from the source, or have a superuser own its function.")));
	}
	PQclear(res);
	pfree(relids.data);
}

/*
 * The statement that locks the tables of the mask rules with their
 * children, or NULL if there is none, looked up before the reader's
 * transaction begins.  A rule's table the source does not have is left to
 * sbx_resolve_masks to report, in the snapshot.
 */
static char *
sbx_rule_tables_lock(SbxMasking *m, List *masks)
{
	StringInfoData sql;
	List	   *seen = NIL;		/* tables looked up */
	int			nlocked = 0;
	ListCell   *lc;

	initStringInfo(&sql);
	appendStringInfoString(&sql, "LOCK TABLE ");
	foreach(lc, masks)
	{
		SbxMaskRule *rule = lfirst(lc);
		const char *params[2] = {rule->schema, rule->table};
		char	   *qualified = sbx_remote_quote_qualified(rule->schema, rule->table);
		PGresult   *res;
		bool		exists;
		bool		looked_up = false;
		ListCell   *ls;

		/* a table with several masked columns is looked up once */
		foreach(ls, seen)
			looked_up |= strcmp(lfirst(ls), qualified) == 0;
		if (looked_up)
			continue;
		seen = lappend(seen, qualified);
		res = sbx_reader_exec(m,
							  "SELECT 1 FROM pg_catalog.pg_class c"
							  "  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
							  " WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')",
							  2, params, PGRES_TUPLES_OK);
		exists = PQntuples(res) > 0;
		PQclear(res);
		if (exists)
			appendStringInfo(&sql, "%s%s", nlocked++ > 0 ? ", " : "", qualified);
	}
	list_free(seen);
	if (nlocked == 0)
	{
		pfree(sql.data);
		return NULL;
	}
	appendStringInfoString(&sql, " IN ACCESS SHARE MODE");
	return sql.data;
}

/*
 * Every table the reader will plan a query on, masked or reduced, with the
 * partitioned tables the closure names: its owners and their code must be
 * trusted (source_trust.c).  Checked in the clone's snapshot, before any
 * such query.
 */
static void
sbx_check_read_tables_trusted(SbxMasking *m)
{
	List	   *relids = list_copy(m->reduced_relids);
	ListCell   *lc;

	foreach(lc, m->masked)
		relids = list_append_unique_oid(relids, ((SbxMaskedTable *) lfirst(lc))->relid);
	sbx_check_tables_trusted(m->reader, m->source, m->trusted_owners, relids,
							 "to read its masked or reduced rows");
	list_free(relids);
}

/* The column lists of a masked table's COPY on both sides. */
static void
sbx_masked_columns(SbxMasking *m, SbxMaskedTable *table)
{
	char		relid[16];
	const char *params[1] = {relid};
	PGresult   *res;
	StringInfoData select_list;
	StringInfoData column_list;

	snprintf(relid, sizeof(relid), "%u", table->relid);
	res = sbx_reader_exec(m,
						  "SELECT attname FROM pg_catalog.pg_attribute"
						  " WHERE attrelid = $1::oid AND attnum > 0 AND NOT attisdropped"
						  "   AND attgenerated = '' ORDER BY attnum",
						  1, params, PGRES_TUPLES_OK);
	initStringInfo(&select_list);
	initStringInfo(&column_list);
	for (int i = 0; i < PQntuples(res); i++)
	{
		const char *column = PQgetvalue(res, i, 0);
		const char *expression = NULL;
		bool		own_rule = false;
		ListCell   *lc;

		/* a rule on the table itself comes before one on its parent */
		foreach(lc, table->rules)
		{
			SbxMaskRule *rule = lfirst(lc);
			bool		own;

			if (strcmp(rule->column, column) != 0)
				continue;
			own = strcmp(quote_qualified_identifier(rule->schema, rule->table),
						 table->qualified) == 0;
			if (expression == NULL || (own && !own_rule))
			{
				expression = rule->expression;
				own_rule = own;
			}
		}
		if (i > 0)
		{
			appendStringInfoString(&select_list, ", ");
			appendStringInfoString(&column_list, ", ");
		}
		if (expression)
			appendStringInfo(&select_list, SBX_MASK_EXPR_FORMAT, expression);
		else
			appendStringInfoString(&select_list, sbx_remote_quote_ident(column));
		appendStringInfoString(&column_list, sbx_remote_quote_ident(column));
	}
	PQclear(res);
	table->select_list = select_list.data;
	table->column_list = column_list.data;

	/* its row type, which only it has: the reads check that they read it */
	res = sbx_reader_exec(m, "SELECT reltype FROM pg_catalog.pg_class WHERE oid = $1::oid",
						  1, params, PGRES_TUPLES_OK);
	if (PQntuples(res) != 1)
		elog(ERROR, "table %s of source \"%s\" has no row type", table->qualified, m->source);
	table->reltype = atooid(PQgetvalue(res, 0, 0));
	PQclear(res);
}

/*
 * Begin masking a data clone: open the reader's transaction on connection
 * 'reader', export its snapshot and resolve the rules in it.  The rules'
 * text is in encoding rules_encoding (the admin database's; this worker
 * is connected to the sandbox's).  The reader stays open, in that
 * transaction, until the clone is filled.
 *
 * A live build (live_copy.c) passes the snapshot its slot exported: the
 * reader reads in it instead of one of its own, so that the dump holds
 * the source exactly as the subscription takes it up.  Only exclude_data
 * rules apply to a live source: no table is masked or reduced, and none
 * needs a lock before the snapshot.
 */
SbxMasking *
sbx_masking_begin(PGconn *reader, const char *source, const char *trusted_owners,
				  List *masks, List *patterns, List *subsets, int rules_encoding,
				  const char *live_snapshot)
{
	SbxMasking *m = palloc0(sizeof(SbxMasking));
	List	   *excluded_oids = NIL;
	List	   *derived;
	List	   *all_masks;
	bool		any_key = false;
	PGresult   *res;
	ListCell   *lc;
	char	   *lock;

	m->reader = reader;
	m->source = source;
	m->trusted_owners = trusted_owners;
	sbx_check_rules_rights(m, masks);

	/* the session of a reader that copies rows (sandbox_conn.c) */
	sbx_source_session_setup(reader, true,
							 psprintf("could not read source \"%s\" for masking", source));
	sbx_set_mask_key(reader, source,
					 psprintf("could not read source \"%s\" for masking", source));
	res = sbx_reader_exec(m, "SELECT pg_catalog.current_setting('server_encoding')", 0, NULL,
						  PGRES_TUPLES_OK);
	m->encoding = pstrdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	sbx_check_rules_encoding(m, masks, patterns, subsets, rules_encoding);
	sbx_check_key_masks(m, masks);

	/*
	 * The columns key masks cover, locked with the others; found again in
	 * the snapshot, where they must be the same.
	 */
	derived = sbx_expand_key_masks(m, masks, subsets);
	all_masks = list_concat(list_copy(masks), derived);
	foreach(lc, masks)
		any_key |= ((SbxMaskRule *) lfirst(lc))->key;
	sbx_check_rules_rights(m, derived);

	/*
	 * The masked tables are locked before the snapshot is taken (a LOCK
	 * takes none): no column of theirs can be renamed, dropped or swapped
	 * between what the snapshot's catalog says and what the COPY reads.
	 */
	lock = sbx_rule_tables_lock(m, all_masks);
	PQclear(sbx_reader_exec(m, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
							0, NULL, PGRES_COMMAND_OK));
	if (live_snapshot != NULL)
	{
		if (all_masks != NIL || subsets != NIL)
			elog(ERROR, "a live build of source \"%s\" has masking or subset rules", source);
		PQclear(sbx_reader_exec(m, psprintf("SET TRANSACTION SNAPSHOT %s",
											quote_literal_cstr(live_snapshot)),
								0, NULL, PGRES_COMMAND_OK));
		m->snapshot = pstrdup(live_snapshot);
	}
	else
	{
		if (lock != NULL)
			PQclear(sbx_reader_exec(m, lock, 0, NULL, PGRES_COMMAND_OK));
		res = sbx_reader_exec(m, "SELECT pg_catalog.pg_export_snapshot()", 0, NULL,
							  PGRES_TUPLES_OK);
		m->snapshot = pstrdup(PQgetvalue(res, 0, 0));
		PQclear(res);
	}

	if (any_key &&
		strcmp(sbx_key_mask_targets(derived),
			   sbx_key_mask_targets(sbx_expand_key_masks(m, masks, subsets))) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the foreign keys of source \"%s\" changed as its clone began", source),
				 errdetail("The columns a key mask covers are found as the clone begins."),
				 errhint("Clone again.")));
	sbx_resolve_exclusions(m, patterns, &excluded_oids);
	sbx_resolve_masks(m, all_masks, excluded_oids);
	/* the rows subset rules keep, and the tables they reduce (subset.c) */
	if (subsets != NIL)
		sbx_subset_resolve(m, subsets, excluded_oids);
	sbx_check_column_casts(m);
	sbx_check_listed_functions(m, masks);
	sbx_check_read_tables_trusted(m);
	foreach(lc, m->masked)
	{
		SbxMaskedTable *table = lfirst(lc);

		sbx_masked_columns(m, table);
		/* a partition attached since the lock, too */
		PQclear(sbx_reader_exec(m, psprintf("LOCK TABLE ONLY %s IN ACCESS SHARE MODE",
											table->sql_name),
								0, NULL, PGRES_COMMAND_OK));
	}
	return m;
}

/* pg_dump's options for a masked clone. */
List *
sbx_masking_dump_options(const SbxMasking *m)
{
	List	   *options = list_make1(psprintf("--snapshot=%s", m->snapshot));
	ListCell   *lc;

	/*
	 * The names below are the reader's, in the source's encoding: pg_dump
	 * matches them in that one, whatever the conninfo, or the source's
	 * database or role settings, say of client_encoding.
	 */
	options = lappend(options, psprintf("--encoding=%s", m->encoding));

	/*
	 * The reader holds its locks on the masked tables until the clone is
	 * filled.  A statement on the source that waits for one of them (an
	 * ALTER TABLE, a DROP) is queued ahead of pg_dump's own lock on that
	 * table, and pg_dump would wait for it while it waits for the reader,
	 * which waits for pg_dump: a deadlock the server cannot see.  pg_dump
	 * gives up instead, and the clone fails.
	 */
	options = lappend(options, psprintf("--lock-wait-timeout=%d", sbx_lock_timeout));
	foreach(lc, m->excluded)
		options = lappend(options, psprintf("--exclude-table-data=%s", (char *) lfirst(lc)));
	return options;
}

/*
 * If pg_dump's archive must not hold the rows of table relid in the
 * source, the rules that say so, for messages; NULL otherwise.
 */
const char *
sbx_masking_rules_of(const SbxMasking *m, Oid relid)
{
	ListCell   *lc;

	foreach(lc, m->left_out)
	{
		SbxLeftOut *entry = lfirst(lc);

		if (entry->relid != relid)
			continue;
		if (entry->masked != NULL && entry->masked->rules == NIL)
			return pstrdup("subset rules");
		if (entry->masked != NULL)
			return psprintf("masking rules %s", sbx_table_targets(entry->masked));
		return psprintf("exclude_data rule \"%s\"", entry->pattern);
	}
	return NULL;
}

/* The targets of a masked table's rules, for messages. */
static char *
sbx_table_targets(const SbxMaskedTable *table)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, table->rules)
		appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "",
						 ((SbxMaskRule *) lfirst(lc))->target);
	return buf.data;
}

/*
 * The source failed to read a masked table: before the COPY began its
 * message quotes no row and is shown; once it began, rows were read and
 * only its SQLSTATE is.
 */
pg_noreturn static void
sbx_masked_read_failed(SbxMasking *m, const SbxMaskedTable *table, PGresult *res,
					   bool rows_read)
{
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	int			code = sbx_remote_sqlstate(res);
	char	   *msg = sbx_remote_message(m->reader, res);

	state = state ? pstrdup(state) : "?";
	PQclear(res);
	if (rows_read)
		ereport(ERROR,
				(errcode(code),
				 errmsg("could not read the masked rows of table %s from source \"%s\"",
						table->qualified, m->source),
				 errdetail("The source failed with SQLSTATE %s; its message is not shown, as it may quote a row's value.",
						   state),
				 errhint("Check the masking rules %s on the source.", sbx_table_targets(table))));
	ereport(ERROR,
			(errcode(code),
			 errmsg("could not read the masked rows of table %s from source \"%s\"",
					table->qualified, m->source),
			 errdetail_internal("%s", msg),
			 errhint("Check the masking rules %s on the source.", sbx_table_targets(table))));
}

pg_noreturn static void
sbx_masked_write_failed(PGconn *sandbox, const SbxMaskedTable *table, PGresult *res)
{
	int			code = sbx_remote_sqlstate(res);
	char	   *msg = sbx_remote_message(sandbox, res);

	PQclear(res);
	ereport(ERROR,
			(errcode(code),
			 errmsg("could not write the masked rows of table %s into the sandbox",
					table->qualified),
			 errdetail_internal("%s", msg),
			 errhint("A masked value may not fit its column: check the masking rules %s.",
					 sbx_table_targets(table))));
}

/*
 * The masked table is read by name, and its rows are only ever the ones of
 * the table the rules were resolved against.  The lock taken before the
 * snapshot keeps the table from being renamed, moved or dropped, but not
 * its schema from being renamed, and another relation put in its place:
 * a view, say, with the real values under a column no rule masks.  (Only
 * a trusted role may do that: source_trust.c refuses a table in a schema
 * anyone else owns.)  So the name must still lead to the same table just
 * before the COPY and just after it; but a session's catalog caches may
 * lag behind another session's change until it next takes a new lock, so
 * that check only catches a swap early, and the statements themselves
 * decide.  The COPY of every row reads with TABLESAMPLE SYSTEM (100), which
 * reads every row and stands only on a table or a materialized view (so no
 * view), and fails on a row whose tableoid is not the table's (so no other
 * table).  A reduced table's kept rows are read by their ctids, which a
 * view may name a column after: those reads keep only rows of the table's
 * own row type, which no other relation has, and each must bring as many
 * rows as it names ctids.  Every read must bring the sandbox as many rows
 * as the source says it sent.
 */
static void
sbx_check_same_table(SbxMasking *m, const SbxMaskedTable *table)
{
	char		relid[16];
	const char *params[2] = {table->sql_name, relid};
	PGresult   *res;
	bool		same;

	snprintf(relid, sizeof(relid), "%u", table->relid);
	res = sbx_reader_exec(m, "SELECT pg_catalog.to_regclass($1) OPERATOR(pg_catalog.=) $2::pg_catalog.oid",
						  2, params, PGRES_TUPLES_OK);
	same = !PQgetisnull(res, 0, 0) && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	if (!same)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table %s of source \"%s\" was replaced during the clone",
						table->qualified, m->source),
				 errdetail("Its name now leads to another relation than the one masking rules %s were resolved against.",
						   sbx_table_targets(table)),
				 errhint("Clone again once the source's schemas stay put.")));
}

/*
 * Stream the rows of one COPY of the reader into table's COPY in the
 * sandbox; returns how many rows went in, which must be as many as the
 * source sent, and as 'expected' unless that is -1.
 */
static int64
sbx_copy_rows(SbxMasking *m, const SbxMaskedTable *table, const char *query,
			  PGconn *sandbox, int64 expected)
{
	PGresult   *res;
	bool		copying = false;
	int64		rows;
	int64		sent;

	res = libpqsrv_exec_params(m->reader, query, 0, NULL, NULL, NULL, NULL, 0,
							   PG_WAIT_EXTENSION);
	if (PQresultStatus(res) != PGRES_COPY_OUT)
		sbx_masked_read_failed(m, table, res, false);
	PQclear(res);
	/* from here on, the source evaluates the expressions over rows */
	copying = true;
	/* frozen as written: the truncation before allows it (sbx_masking_copy) */
	res = libpqsrv_exec(sandbox, psprintf("COPY %s (%s) FROM STDIN (FREEZE)", table->sql_name,
										  table->column_list),
						PG_WAIT_EXTENSION);
	if (PQresultStatus(res) != PGRES_COPY_IN)
		sbx_masked_write_failed(sandbox, table, res);
	PQclear(res);

	/* in messages of 64 kB, the receiver waited for with the latch */
	if (!sbx_copy_relay(m->reader, sandbox))
	{
		/* a failure, never a success of what went in so far */
		(void) PQputCopyEnd(sandbox, "the relay of the rows failed");
		sbx_masked_write_failed(sandbox, table,
								libpqsrv_get_result_last(sandbox, PG_WAIT_EXTENSION));
	}
	res = libpqsrv_get_result_last(m->reader, PG_WAIT_EXTENSION);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		(void) PQputCopyEnd(sandbox, "the source failed");
		sbx_masked_read_failed(m, table, res, copying);
	}
	sent = strtoi64(PQcmdTuples(res), NULL, 10);
	PQclear(res);

	if (PQputCopyEnd(sandbox, NULL) != 1)
		sbx_masked_write_failed(sandbox, table, NULL);
	res = libpqsrv_get_result_last(sandbox, PG_WAIT_EXTENSION);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		sbx_masked_write_failed(sandbox, table, res);
	rows = strtoi64(PQcmdTuples(res), NULL, 10);
	PQclear(res);

	/* what the source says it sent is what the sandbox took, and enough */
	if (rows != sent || (expected >= 0 && rows != expected))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("table %s of source \"%s\" gave " INT64_FORMAT " rows where " INT64_FORMAT " were expected",
						table->qualified, m->source, rows, expected >= 0 ? expected : sent),
				 errdetail("The source sent " INT64_FORMAT " rows and the sandbox took " INT64_FORMAT ".",
						   sent, rows),
				 errhint("The table may have been replaced during the clone: clone again.")));
	return rows;
}

/*
 * Stream one table the reader copies into the sandbox: every row, read
 * with TABLESAMPLE SYSTEM (100) (which stands only on a table or a
 * materialized view); or, for a reduced table, the rows kept, read by
 * their ctid (which only a table has) in chunks.  Both keep only rows
 * whose tableoid is the table's.
 */
static void
sbx_copy_masked_table(SbxMasking *m, SbxMaskedTable *table, PGconn *sandbox)
{
	ListCell   *lc;

	sbx_check_same_table(m, table);
	if (sbx_test_copy_pause != 0)
	{
		char		key[16];
		const char *params[1] = {key};

		/* a test renames what it likes here, between the check and the read */
		snprintf(key, sizeof(key), "%d", sbx_test_copy_pause);
		PQclear(sbx_reader_exec(m, "SELECT pg_catalog.pg_advisory_xact_lock_shared($1::pg_catalog.int8)",
								1, params, PGRES_TUPLES_OK));
	}
	if (!table->reduced)
		table->rows = sbx_copy_rows(m, table,
									psprintf("COPY (SELECT %s FROM ONLY %s TABLESAMPLE SYSTEM (100)"
											 " WHERE CASE WHEN tableoid OPERATOR(pg_catalog.=) %u::pg_catalog.oid THEN true"
											 " ELSE ('a row of relation ' OPERATOR(pg_catalog.||) tableoid::pg_catalog.text"
											 " OPERATOR(pg_catalog.||) ', not of the table read')::pg_catalog.bool END)"
											 " TO STDOUT",
											 table->select_list, table->sql_name, table->relid),
									sandbox, -1);
	foreach(lc, table->kept_chunks)
	{
		const char *chunk = lfirst(lc);
		int64		kept = 0;
		char	   *query;

		/* one "(block,offset)" per kept row */
		for (const char *p = chunk; *p; p++)
			kept += (*p == '(');
		query = psprintf("COPY (SELECT %s FROM ONLY %s"
						 " WHERE tableoid OPERATOR(pg_catalog.=) %u::pg_catalog.oid"
						 "   AND ctid OPERATOR(pg_catalog.=) ANY ('%s'::pg_catalog.tid[])"
						 "   AND pg_catalog.pg_typeof(%s.*)::pg_catalog.oid OPERATOR(pg_catalog.=) %u::pg_catalog.oid)"
						 " TO STDOUT",
						 table->select_list, table->sql_name, table->relid, chunk,
						 table->sql_refname, table->reltype);

		table->rows += sbx_copy_rows(m, table, query, sandbox, kept);
		/* a chunk is copied once: neither it nor its query is kept */
		pfree(query);
		pfree(lfirst(lc));
	}
	list_free(table->kept_chunks);
	table->kept_chunks = NIL;
	/* a swap during the COPY left its rows out: fail rather than be empty */
	sbx_check_same_table(m, table);
	elog(DEBUG1, "copied " INT64_FORMAT " rows into %s", table->rows, table->qualified);
}

/*
 * Fill every masked table of the sandbox, over 'sandbox', a login as its
 * role; the restore's data section is done and its post-data section not
 * begun.
 */
void
sbx_masking_copy(SbxMasking *m, PGconn *sandbox)
{
	ListCell   *lc;

	/* a reduced table's chunks are empty until its rows are found */
	if (m->subset_nodes != NULL)
		elog(ERROR, "the rows of the reduced tables were not computed before the copy");
	pgstat_report_activity(STATE_RUNNING, "pgsandbox: copying masked rows");
	{
		const char *params[1] = {m->encoding};

		/* the rows come in the source's encoding, converted by the sandbox */
		PQclear(sbx_remote_exec(sandbox,
								"SELECT pg_catalog.set_config('client_encoding', $1, false),"
								" pg_catalog.set_config('datestyle', 'ISO', false),"
								" pg_catalog.set_config('client_min_messages', 'error', false)",
								1, params, PGRES_TUPLES_OK,
								"could not prepare the sandbox for masked rows"));
	}
	PQclear(sbx_remote_exec(sandbox, "BEGIN", 0, NULL, PGRES_COMMAND_OK,
							"could not begin writing the masked rows into the sandbox"));

	/*
	 * Loaded in the transaction that truncates them (they are empty, and
	 * have no trigger or foreign key yet: those come with the post-data
	 * section), the rows skip the WAL under wal_level = minimal, as in one
	 * pg_restore --single-transaction; and they may be written frozen, so
	 * that the index builds that follow set no hint bit on them (with data
	 * checksums, a hint bit writes its page to the WAL).
	 */
	if (m->masked != NIL)
	{
		StringInfoData tables;

		initStringInfo(&tables);
		foreach(lc, m->masked)
			appendStringInfo(&tables, "%s%s", tables.len > 0 ? ", " : "",
							 ((SbxMaskedTable *) lfirst(lc))->sql_name);
		PQclear(sbx_remote_exec(sandbox, psprintf("TRUNCATE ONLY %s", tables.data), 0, NULL,
								PGRES_COMMAND_OK,
								"could not begin writing the masked rows into the sandbox"));
	}
	foreach(lc, m->masked)
		sbx_copy_masked_table(m, lfirst(lc), sandbox);
	PQclear(sbx_remote_exec(sandbox, "COMMIT", 0, NULL, PGRES_COMMAND_OK,
							"could not commit the masked rows into the sandbox"));
	pgstat_report_activity(STATE_IDLE, NULL);
}

/* What the rules did, for the 'ready' event's notes. */
char *
sbx_masking_summary(const SbxMasking *m)
{
	int			nmasked = 0;
	ListCell   *lc;
	char	   *summary;

	foreach(lc, m->masked)
		nmasked += ((SbxMaskedTable *) lfirst(lc))->rules != NIL;
	summary = psprintf("masked by %d rule%s in %d table%s, rows left out of %d table%s",
					   m->ncolumns, m->ncolumns == 1 ? "" : "s",
					   nmasked, nmasked == 1 ? "" : "s",
					   m->nexcluded, m->nexcluded == 1 ? "" : "s");
	if (m->nreduced > 0)
		summary = psprintf("%s; %s", summary, sbx_subset_summary(m));
	return summary;
}
