/*-------------------------------------------------------------------------
 *
 * subset_rules.c
 *	  A source's subset rules: the SQL functions that set and remove them
 *	  (subset, unsubset, follow, unfollow), their checks against the source,
 *	  and the columns a subset condition names.
 *
 * A subset rule names a table as schema.table and gives either a condition
 * over the row's own columns (an SQL expression a WHERE clause takes) or a
 * share of its rows ('1%', '0.5%'), chosen by a hash of the primary key so
 * that two clones of the same source state keep the same rows.  A follow
 * rule names a table whose rows that refer to kept rows are kept too, at
 * most max_rows of them.  subset.c computes, at each data clone, the rows
 * these rules and the source's foreign keys keep.
 *
 * A condition is checked as a masking expression is (rules.c): one SQL
 * expression, within what an admin who is not a superuser may use, planned
 * against the table on the source without reading a row.  It may not name
 * a masked column, since the rows kept would tell its values; mask() in
 * turn refuses a column that a condition names.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "libpq-fe.h"
#include "libpq/libpq-be-fe-helpers.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "nodes/parsenodes.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_masking.h"
#include "sbx_roles.h"
#include "sbx_shmem.h"
#include "utils/builtins.h"
#include "utils/varlena.h"

PG_FUNCTION_INFO_V1(pgsandbox_subset);
PG_FUNCTION_INFO_V1(pgsandbox_unsubset);
PG_FUNCTION_INFO_V1(pgsandbox_follow);
PG_FUNCTION_INFO_V1(pgsandbox_unfollow);

#define SBX_SUBSET_CONDITION	"subset condition"

/* A subset or follow rule's target, schema.table, parsed. */
void
sbx_parse_table_target(const char *target, char **schema, char **table,
					   char **normalized)
{
	char	   *copy = pstrdup(target);
	List	   *parts;

	if (!SplitIdentifierString(copy, '.', &parts) || list_length(parts) != 2)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid table \"%s\"", target),
				 errdetail("A table is schema.table, each part quoted as in SQL where needed.")));
	*schema = pstrdup(linitial(parts));
	*table = pstrdup(lsecond(parts));
	*normalized = quote_qualified_identifier(*schema, *table);
}

/*
 * If 'condition' is a share of rows (it ends with '%': '1%', '0.25%'), that
 * share in millionths of the rows (10000 for 1%), or -2 if it is not a
 * valid one: a share is more than 0 and at most 100%, with at most four
 * decimals.  -1 for a condition.  A share "of pages" ('1% of pages')
 * samples the table's pages instead of its rows: *of_pages (if not NULL)
 * says which.
 */
int64
sbx_subset_share(const char *condition, bool *of_pages)
{
	const char *p = condition + strspn(condition, " ");
	const char *end = condition + strlen(condition);
	int64		whole = 0;
	int64		frac = 0;
	int			decimals = 0;
	bool		pages = false;

	if (of_pages)
		*of_pages = false;
	while (end > p && end[-1] == ' ')
		end--;
	/* "... of pages", in any case, the words apart */
	if (end - p > 9 && pg_strncasecmp(end - 5, "pages", 5) == 0 && end[-6] == ' ')
	{
		const char *w = end - 6;

		while (w > p && w[-1] == ' ')
			w--;
		if (w - p > 3 && pg_strncasecmp(w - 2, "of", 2) == 0 && w[-3] == ' ')
		{
			end = w - 3;
			while (end > p && end[-1] == ' ')
				end--;
			pages = true;
		}
	}
	if (end == p || end[-1] != '%')
		return -1;
	end--;
	while (end > p && end[-1] == ' ')
		end--;
	if (p == end || !isdigit((unsigned char) *p))
		return -2;
	while (p < end && isdigit((unsigned char) *p))
	{
		whole = whole * 10 + (*p++ - '0');
		if (whole > 100)
			return -2;
	}
	if (p < end && *p == '.')
	{
		p++;
		while (p < end && isdigit((unsigned char) *p))
		{
			if (++decimals > 4)
				return -2;
			frac = frac * 10 + (*p++ - '0');
		}
		if (decimals == 0)
			return -2;
	}
	if (p != end)
		return -2;
	for (; decimals < 4; decimals++)
		frac *= 10;
	if ((whole == 100 && frac > 0) || (whole == 0 && frac == 0))
		return -2;
	if (of_pages)
		*of_pages = pages;
	return whole * 10000 + frac;
}

/* the column names a raw expression tree refers to */
static bool
sbx_column_refs_walker(Node *node, List **names)
{
	if (node == NULL)
		return false;
	if (IsA(node, ColumnRef))
	{
		ColumnRef  *ref = (ColumnRef *) node;
		Node	   *last = llast(ref->fields);

		/* t.* is every column of t */
		*names = lappend(*names, IsA(last, String) ? strVal(last) : "*");
		return false;
	}
	return raw_expression_tree_walker(node, sbx_column_refs_walker, (void *) names);
}

/*
 * The names of the columns a condition refers to (unqualified); "*" for a
 * reference to every column.
 */
List *
sbx_condition_columns(const char *condition)
{
	SelectStmt *select = sbx_parse_expression(condition, SBX_SUBSET_CONDITION);
	List	   *names = NIL;

	(void) sbx_column_refs_walker(((ResTarget *) linitial(select->targetList))->val, &names);
	return names;
}

/*
 * Whether 'name', from a condition on table 'table', may read 'column': it
 * is the column, or every column ("*", or the table's own name, which a
 * condition reads as its whole row).
 */
bool
sbx_condition_name_reads(const char *name, const char *table, const char *column)
{
	return strcmp(name, column) == 0 || strcmp(name, "*") == 0 || strcmp(name, table) == 0;
}

/*
 * In the caller's SPI connection: the rules of one kind of schema.table of
 * a source, as (target, expression, column_name) in SPI_tuptable.
 */
static void
sbx_select_table_rules(const char *source, const char *kind, const char *schema,
					   const char *table)
{
	Oid			argtypes[4] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		values[4];

	values[0] = CStringGetTextDatum(source);
	values[1] = CStringGetTextDatum(kind);
	values[2] = CStringGetTextDatum(schema);
	values[3] = CStringGetTextDatum(table);
	if (SPI_execute_with_args("SELECT target, expression, column_name FROM pgsandbox.source_rule"
							  " WHERE source = $1 AND kind = $2"
							  "   AND schema_name = $3 AND table_name = $4",
							  4, argtypes, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the rules of source \"%s\"", source);
}

/*
 * In the caller's SPI connection: a masked column of schema.table that the
 * condition names, or NULL.
 */
static char *
sbx_condition_masked_column(const char *source, const char *schema, const char *table,
							const char *condition)
{
	List	   *columns = sbx_condition_columns(condition);
	ListCell   *lc;

	sbx_select_table_rules(source, "mask", schema, table);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		char	   *masked = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3);

		foreach(lc, columns)
		{
			if (sbx_condition_name_reads(lfirst(lc), table, masked))
				return masked;
		}
	}
	return NULL;
}

/*
 * In the caller's SPI connection, for mask(): refuse to mask a column that
 * a subset condition of the same table names.
 */
void
sbx_check_mask_not_in_subset(const char *source, const char *schema, const char *table,
							 const char *column)
{
	sbx_select_table_rules(source, "subset", schema, table);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		char	   *target = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		char	   *condition = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);
		ListCell   *lc;

		if (sbx_subset_share(condition, NULL) >= 0)
			continue;
		foreach(lc, sbx_condition_columns(condition))
		{
			if (sbx_condition_name_reads(lfirst(lc), table, column))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("cannot mask column \"%s\": the subset condition of table %s names it",
								column, target),
						 errdetail("The rows a condition keeps would tell the values of a masked column."),
						 errhint("Remove the subset rule with unsubset() first.")));
		}
	}
}

/*
 * In a session on the source: the table a rule names ('what', such as
 * "subset rule"), which must exist, hold rows, be no partition (a rule
 * names its partitioned table) and no extension's.  Returns its OID.
 */
Oid
sbx_check_rule_table(PGconn *conn, const char *source, const char *schema, const char *table)
{
	const char *params[2] = {schema, table};
	char	   *qualified = quote_qualified_identifier(schema, table);
	PGresult   *res;
	Oid			relid;
	bool		found;
	bool		partition;
	char	   *extension;

	res = sbx_remote_exec(conn,
						  "SELECT c.relispartition, c.oid,"
						  "       (SELECT e.extname FROM pg_catalog.pg_depend d"
						  "          JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid"
						  "         WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass"
						  "           AND d.objid = c.oid AND d.deptype = 'e' LIMIT 1)"
						  "  FROM pg_catalog.pg_class c"
						  "  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
						  " WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')"
						  "   AND n.nspname !~ '^pg_' AND n.nspname <> 'information_schema'",
						  2, params, PGRES_TUPLES_OK,
						  psprintf("could not read source \"%s\"", source));
	/* a system catalog is none of the tables a clone copies */
	found = PQntuples(res) == 1;
	partition = found && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	relid = found ? atooid(PQgetvalue(res, 0, 1)) : InvalidOid;
	extension = found && !PQgetisnull(res, 0, 2) ? pstrdup(PQgetvalue(res, 0, 2)) : NULL;
	PQclear(res);
	if (!found)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("table \"%s\" does not exist in source \"%s\"", qualified, source)));
	if (partition)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("table \"%s\" is a partition", qualified),
				 errhint("Name its partitioned table: a rule covers every partition.")));
	if (extension != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("table \"%s\" belongs to extension \"%s\"", qualified, extension),
				 errdetail("The rows of an extension's tables are copied as the extension keeps them.")));
	return relid;
}

/*
 * The table of a subset or follow rule ('kind') in the source, as
 * sbx_check_rule_table wants it.  A condition must plan against it as a
 * WHERE clause, reading no row.  A rule that is not ASCII needs the source
 * in the admin database's encoding.
 */
static void
sbx_check_subset_on_source(const char *source, const char *kind, const char *schema,
						   const char *table, const char *condition)
{
	PGconn	   *conn = sbx_source_connect(source);

	PG_TRY();
	{
		char	   *qualified = quote_qualified_identifier(schema, table);
		Oid			relid;

		sbx_begin_rule_check(conn, source);
		sbx_check_rule_ascii(conn, source, kind, qualified, condition);
		relid = sbx_check_rule_table(conn, source, schema, table);
		if (condition != NULL)
		{
			/* the condition is planned against the table */
			sbx_check_tables_trusted(conn, source, sbx_source_trusted_owners(source),
									 list_make1_oid(relid), "to check a rule against it");
			PQclear(sbx_plan_rule(conn,
								  psprintf("SELECT FROM ONLY %s WHERE " SBX_MASK_EXPR_FORMAT " LIMIT 0",
										   sbx_remote_quote_qualified(schema, table), condition),
								  SBX_SUBSET_CONDITION, qualified, source));
		}
	}
	PG_FINALLY();
	{
		libpqsrv_disconnect(conn);
	}
	PG_END_TRY();
}

/*
 * Set a rule of kind 'subset', 'follow' or 'relate' of table schema.table
 * (the referring one for 'relate'); expression may be NULL.
 */
void
sbx_set_table_rule(const char *source, const char *kind, const char *schema,
				   const char *table, const char *normalized, const char *expression)
{
	Oid			argtypes[7] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, NAMEOID};
	Datum		values[7];
	char		nulls[8] = "       ";
	NameData	author;

	sbx_refuse_rule_if_live(source, kind);
	sbx_check_rules_size(source, kind, normalized,
						 7 + 2 * strlen(normalized) + (expression ? strlen(expression) : 0));
	values[0] = CStringGetTextDatum(source);
	values[1] = CStringGetTextDatum(kind);
	values[2] = CStringGetTextDatum(normalized);
	values[3] = CStringGetTextDatum(schema);
	values[4] = CStringGetTextDatum(table);
	if (expression != NULL)
		values[5] = CStringGetTextDatum(expression);
	else
		nulls[5] = 'n';
	namestrcpy(&author, GetUserNameFromId(sbx_caller(), false));
	values[6] = NameGetDatum(&author);
	if (SPI_execute_with_args("INSERT INTO pgsandbox.source_rule AS r"
							  " (source, kind, target, schema_name, table_name, expression, added_by)"
							  " VALUES ($1, $2, $3, $4, $5, $6, $7)"
							  " ON CONFLICT (source, kind, target) DO UPDATE"
							  " SET expression = excluded.expression, added_at = pg_catalog.now(),"
							  "     added_by = excluded.added_by",
							  7, argtypes, values, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not set a %s rule of source \"%s\"", kind, source);
	sbx_rules_changed(source);
}

/*
 * subset(source text, target text, condition text)
 */
Datum
pgsandbox_subset(PG_FUNCTION_ARGS)
{
	char	   *source;
	char	   *schema;
	char	   *table;
	char	   *normalized;
	char	   *condition;
	int64		share;
	char	   *masked;

	sbx_require_arg(fcinfo, 0, "source name");
	sbx_require_arg(fcinfo, 1, "table");
	sbx_require_arg(fcinfo, 2, "condition");
	sbx_check_database();
	sbx_require_admin();
	source = text_to_cstring(PG_GETARG_TEXT_PP(0));
	sbx_parse_table_target(text_to_cstring(PG_GETARG_TEXT_PP(1)), &schema, &table, &normalized);
	condition = text_to_cstring(PG_GETARG_TEXT_PP(2));
	share = sbx_subset_share(condition, NULL);
	if (share == -2)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid share of rows \"%s\"", condition),
				 errdetail("A share is more than 0%% and at most 100%%, with at most four decimals, of the rows ('1%%') or of the pages ('1%% of pages').")));
	if (share < 0)
	{
		sbx_check_expression_syntax(condition, SBX_SUBSET_CONDITION);
		/* before the source sees it: planning may evaluate a function */
		if (!superuser_arg(sbx_caller()))
			sbx_check_rule_rights(condition, SBX_SUBSET_CONDITION);
	}

	SPI_connect();
	sbx_lock_source(source);
	if (share < 0 &&
		(masked = sbx_condition_masked_column(source, schema, table, condition)) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("subset condition for \"%s\" names masked column \"%s\"", normalized, masked),
				 errdetail("The rows a condition keeps would tell the values of a masked column.")));
	sbx_check_subset_on_source(source, "subset rule", schema, table, share < 0 ? condition : NULL);
	sbx_set_table_rule(source, "subset", schema, table, normalized, condition);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * follow(source text, target text, max_rows bigint DEFAULT NULL)
 */
Datum
pgsandbox_follow(PG_FUNCTION_ARGS)
{
	char	   *source;
	char	   *schema;
	char	   *table;
	char	   *normalized;
	char	   *max_rows = NULL;

	sbx_require_arg(fcinfo, 0, "source name");
	sbx_require_arg(fcinfo, 1, "table");
	sbx_check_database();
	sbx_require_admin();
	source = text_to_cstring(PG_GETARG_TEXT_PP(0));
	sbx_parse_table_target(text_to_cstring(PG_GETARG_TEXT_PP(1)), &schema, &table, &normalized);
	if (!PG_ARGISNULL(2))
	{
		if (PG_GETARG_INT64(2) < 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("max_rows must be at least 1")));
		max_rows = psprintf(INT64_FORMAT, PG_GETARG_INT64(2));
	}

	SPI_connect();
	sbx_lock_source(source);
	sbx_check_subset_on_source(source, "follow rule", schema, table, NULL);
	sbx_set_table_rule(source, "follow", schema, table, normalized, max_rows);
	SPI_finish();
	PG_RETURN_VOID();
}

/* unsubset() and unfollow() */
static void
sbx_remove_table_rule(FunctionCallInfo fcinfo, const char *kind)
{
	char	   *schema;
	char	   *table;
	char	   *normalized;

	sbx_require_arg(fcinfo, 0, "source name");
	sbx_require_arg(fcinfo, 1, "table");
	sbx_check_database();
	sbx_require_admin();
	sbx_parse_table_target(text_to_cstring(PG_GETARG_TEXT_PP(1)), &schema, &table, &normalized);
	sbx_remove_rule(text_to_cstring(PG_GETARG_TEXT_PP(0)), kind, normalized, normalized);
}

/*
 * unsubset(source text, target text)
 */
Datum
pgsandbox_unsubset(PG_FUNCTION_ARGS)
{
	sbx_remove_table_rule(fcinfo, "subset");
	PG_RETURN_VOID();
}

/*
 * unfollow(source text, target text)
 */
Datum
pgsandbox_unfollow(PG_FUNCTION_ARGS)
{
	sbx_remove_table_rule(fcinfo, "follow");
	PG_RETURN_VOID();
}
