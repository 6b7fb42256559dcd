/*-------------------------------------------------------------------------
 *
 * relations.c
 *	  Relationships a source's schema does not declare: the SQL functions
 *	  that declare and remove them (relate, unrelate), how their targets are
 *	  written and read back, and their check against the source, at the
 *	  call and at every reduced clone.
 *
 * Many applications keep their relationships in the application: a column
 * orders.customer_id with no foreign key, or a polymorphic pair such as
 * comments.commentable_type and comments.commentable_id.  relate() tells a
 * reduced clone to follow such a relationship as it follows a foreign key
 * (subset.c): from the referring columns of one table to columns of
 * another that are unique on the source, where an optional condition holds
 * of the referring row (commentable_type = 'Post').
 *
 * A rule's target is "schema.table(column, ...) -> schema.table(column,
 * ...)", each name quoted as SQL wants it, so that it reads back into its
 * parts.  The condition is checked as a subset condition is: one SQL
 * expression, within what an admin who is not a superuser may use, planned
 * against the referring table (only a trusted owner's) without reading a
 * row, and naming no masked column.  In the source's queries it reads the
 * referring row by the table's own name, whatever else the query joins:
 * sbx_relation_condition.
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
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_masking.h"
#include "sbx_roles.h"
#include "utils/builtins.h"
#include "utils/varlena.h"

PG_FUNCTION_INFO_V1(pgsandbox_relate);
PG_FUNCTION_INFO_V1(pgsandbox_unrelate);

/* the most columns on each side, as an index has at most */
#define SBX_RELATION_MAX_COLUMNS	32

/*
 * The length of the first "schema.table(columns)" in 'text': up to the
 * first closing parenthesis outside double quotes, or -1.  *open is the
 * offset of the opening one.
 */
static int
sbx_relation_end_length(const char *text, int *open)
{
	bool		quoted = false;

	*open = -1;
	for (int i = 0; text[i] != '\0'; i++)
	{
		if (text[i] == '"')
			quoted = !quoted;
		else if (!quoted && text[i] == '(' && *open < 0)
			*open = i;
		else if (!quoted && text[i] == ')' && *open >= 0)
			return i + 1;
	}
	return -1;
}

/*
 * One end of a relationship, "schema.table(column, ...)": its parts, and
 * the end written as a target writes it.  'what' says which end, for the
 * errors.
 */
static char *
sbx_parse_relation_end(const char *text, const char *what, char **schema, char **table,
					   List **columns)
{
	int			open;
	int			len = sbx_relation_end_length(text, &open);
	char	   *normalized;
	char	   *list;
	List	   *names;
	StringInfoData buf;
	ListCell   *lc;

	if (len < 0 || text[len + strspn(text + len, " ")] != '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid %s \"%s\"", what, text),
				 errdetail("A relationship's end is schema.table(column, ...), each name quoted as in SQL where needed.")));
	sbx_parse_table_target(pnstrdup(text, open), schema, table, &normalized);
	list = pnstrdup(text + open + 1, len - open - 2);
	if (!SplitIdentifierString(list, ',', &names) || names == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid %s \"%s\"", what, text),
				 errdetail("A relationship's end names at least one column, each quoted as in SQL where needed.")));
	if (list_length(names) > SBX_RELATION_MAX_COLUMNS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a relationship's end names at most %d columns", SBX_RELATION_MAX_COLUMNS)));
	initStringInfo(&buf);
	appendStringInfo(&buf, "%s(", normalized);
	*columns = NIL;
	foreach(lc, names)
	{
		char	   *name = pstrdup(lfirst(lc));
		ListCell   *lprev;

		foreach(lprev, *columns)
		{
			if (strcmp(lfirst(lprev), name) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_COLUMN),
						 errmsg("column \"%s\" appears twice in %s \"%s\"", name, what, text)));
		}
		*columns = lappend(*columns, name);
		appendStringInfo(&buf, "%s%s", foreach_current_index(lc) > 0 ? ", " : "",
						 quote_identifier(name));
	}
	appendStringInfoChar(&buf, ')');
	return buf.data;
}

/*
 * Parse a relate rule's target back into 'rule': the referring end, " -> ",
 * the referred end.
 */
void
sbx_parse_relation_target(const char *target, SbxSubsetRule *rule)
{
	int			open;
	int			len = sbx_relation_end_length(target, &open);

	if (len < 0 || strncmp(target + len, " -> ", 4) != 0)
		elog(ERROR, "invalid relationship \"%s\"", target);
	(void) sbx_parse_relation_end(pnstrdup(target, len), "relationship", &rule->schema,
								  &rule->table, &rule->columns);
	(void) sbx_parse_relation_end(target + len + 4, "relationship", &rule->ref_schema,
								  &rule->ref_table, &rule->ref_columns);
	rule->relation = true;
}

/*
 * The condition of a relationship as a source's query writes it, where
 * 'row' names the referring row among other tables: it reads the row by
 * the table's own name, so that its column names mean the row's columns,
 * whatever else the query joins.
 */
char *
sbx_relation_condition(const char *condition, const char *table, const char *row)
{
	return psprintf("EXISTS (SELECT FROM (SELECT %s.*) AS %s WHERE " SBX_MASK_EXPR_FORMAT ")",
					row, sbx_remote_quote_ident(table), condition);
}

/*
 * What the source says of a relationship, one row per pair of columns, in
 * the relationship's order: the referring and referred tables' OIDs, each
 * column's number, name (quoted) and type, the equality operator that
 * compares them ("OPERATOR(pg_catalog.=)", or NULL if there is none), the
 * referred column's collation where they differ ("COLLATE x "), and
 * whether a unique index covers exactly the referred columns.  Equality
 * is the server's own: an operator '=' of pg_catalog between the columns'
 * base types (varchar compares as text).
 */
static const char *const sbx_relation_sql =
"WITH f AS (SELECT c.oid FROM pg_catalog.pg_class c"
"             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
"            WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')),"
"     t AS (SELECT c.oid FROM pg_catalog.pg_class c"
"             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
"            WHERE n.nspname = $3 AND c.relname = $4 AND c.relkind IN ('r', 'p')),"
"     u AS (SELECT * FROM ROWS FROM (pg_catalog.unnest($5::pg_catalog.text[]),"
"                                    pg_catalog.unnest($6::pg_catalog.text[]))"
"                         WITH ORDINALITY u(fc, tc, i)),"
"     c AS (SELECT u.i, u.fc, u.tc, a.attnum AS fnum, b.attnum AS tnum,"
"                  a.attcollation AS fcoll, b.attcollation AS tcoll,"
"                  pg_catalog.format_type(a.atttypid, a.atttypmod) AS fname,"
"                  pg_catalog.format_type(b.atttypid, b.atttypmod) AS tname,"
"                  (SELECT CASE WHEN x.b = 'pg_catalog.varchar'::pg_catalog.regtype"
"                               THEN 'pg_catalog.text'::pg_catalog.regtype ELSE x.b END"
"                     FROM (SELECT CASE ty.typtype WHEN 'd' THEN ty.typbasetype ELSE ty.oid END"
"                             FROM pg_catalog.pg_type ty WHERE ty.oid = a.atttypid) x(b)) AS ftype,"
"                  (SELECT CASE WHEN x.b = 'pg_catalog.varchar'::pg_catalog.regtype"
"                               THEN 'pg_catalog.text'::pg_catalog.regtype ELSE x.b END"
"                     FROM (SELECT CASE ty.typtype WHEN 'd' THEN ty.typbasetype ELSE ty.oid END"
"                             FROM pg_catalog.pg_type ty WHERE ty.oid = b.atttypid) x(b)) AS ttype"
"             FROM u"
"             LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = (SELECT oid FROM f)"
"                   AND a.attname = u.fc AND a.attnum > 0 AND NOT a.attisdropped"
"             LEFT JOIN pg_catalog.pg_attribute b ON b.attrelid = (SELECT oid FROM t)"
"                   AND b.attname = u.tc AND b.attnum > 0 AND NOT b.attisdropped)"
" SELECT (SELECT oid FROM f), (SELECT oid FROM t), c.fnum, c.tnum,"
"        pg_catalog.quote_ident(c.fc), pg_catalog.quote_ident(c.tc), c.fname, c.tname,"
"        (SELECT 'OPERATOR(pg_catalog.=)' FROM pg_catalog.pg_operator o"
"          WHERE o.oprname = '=' AND o.oprnamespace = 'pg_catalog'::pg_catalog.regnamespace"
"            AND o.oprleft = c.ttype AND o.oprright = c.ftype"
"            AND o.oprresult = 'pg_catalog.bool'::pg_catalog.regtype),"
"        (SELECT pg_catalog.format('COLLATE %I.%I ', cn.nspname, co.collname)"
"           FROM pg_catalog.pg_collation co"
"           JOIN pg_catalog.pg_namespace cn ON cn.oid = co.collnamespace"
"          WHERE co.oid = c.tcoll AND c.fcoll <> c.tcoll),"
"        EXISTS (SELECT FROM pg_catalog.pg_index x"
"                 WHERE x.indrelid = (SELECT oid FROM t) AND x.indisunique AND x.indisvalid"
"                   AND x.indpred IS NULL AND x.indexprs IS NULL"
"                   AND x.indnkeyatts = (SELECT pg_catalog.count(*) FROM u)"
"                   AND (SELECT pg_catalog.count(*)"
"                          FROM pg_catalog.unnest(x.indkey::pg_catalog.int2[]) WITH ORDINALITY k(n, o)"
"                         WHERE k.o <= x.indnkeyatts AND k.n IN (SELECT tnum FROM c))"
"                       = x.indnkeyatts)"
"   FROM c ORDER BY c.i";

/* a text[] literal of quoted names */
static char *
sbx_names_array(List *names)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	foreach(lc, names)
	{
		appendStringInfoString(&buf, foreach_current_index(lc) > 0 ? ",\"" : "\"");
		for (const char *p = lfirst(lc); *p; p++)
		{
			if (*p == '"' || *p == '\\')
				appendStringInfoChar(&buf, '\\');
			appendStringInfoChar(&buf, *p);
		}
		appendStringInfoChar(&buf, '"');
	}
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

/*
 * Read relationship 'rule' on the source and check it: both tables exist,
 * every column exists, each pair compares with '=', and the referred
 * columns are unique (a primary key, or a unique index that covers exactly
 * them, with no predicate or expression).  Returns the rows of
 * sbx_relation_sql; an error otherwise, naming the relationship.
 */
static void sbx_check_relation_rows(const PGresult *res, const char *source,
									const SbxSubsetRule *rule);

PGresult *
sbx_resolve_relation(PGconn *conn, const char *source, const SbxSubsetRule *rule)
{
	const char *params[6];
	PGresult   *res;

	params[0] = rule->schema;
	params[1] = rule->table;
	params[2] = rule->ref_schema;
	params[3] = rule->ref_table;
	params[4] = sbx_names_array(rule->columns);
	params[5] = sbx_names_array(rule->ref_columns);
	res = sbx_remote_exec(conn, sbx_relation_sql, 6, params, PGRES_TUPLES_OK,
						  psprintf("could not read source \"%s\"", source));
	PG_TRY();
	{
		sbx_check_relation_rows(res, source, rule);
	}
	PG_CATCH();
	{
		PQclear(res);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return res;
}

/* The checks of sbx_resolve_relation, on the rows of sbx_relation_sql. */
static void
sbx_check_relation_rows(const PGresult *res, const char *source, const SbxSubsetRule *rule)
{
	char	   *from = quote_qualified_identifier(rule->schema, rule->table);
	char	   *to = quote_qualified_identifier(rule->ref_schema, rule->ref_table);

	for (int i = 0; i < PQntuples(res); i++)
	{
		const char *fcol = list_nth(rule->columns, i);
		const char *tcol = list_nth(rule->ref_columns, i);

		if (PQgetisnull(res, i, 0) || PQgetisnull(res, i, 1))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("table \"%s\" of relationship \"%s\" does not exist in source \"%s\"",
							PQgetisnull(res, i, 0) ? from : to, rule->target, source)));
		if (PQgetisnull(res, i, 2) || PQgetisnull(res, i, 3))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" of table \"%s\" does not exist in source \"%s\"",
							PQgetisnull(res, i, 2) ? fcol : tcol,
							PQgetisnull(res, i, 2) ? from : to, source),
					 errdetail("Relationship \"%s\" names it.", rule->target)));
		if (PQgetisnull(res, i, 8))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("column \"%s\" of table \"%s\" (%s) cannot refer to column \"%s\" of table \"%s\" (%s)",
							fcol, from, PQgetvalue(res, i, 6), tcol, to, PQgetvalue(res, i, 7)),
					 errdetail("A relationship compares its columns with an equality operator of the server's own, of the same type on each side.")));
		if (PQgetvalue(res, i, 10)[0] != 't')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_FOREIGN_KEY),
					 errmsg("the referred columns of relationship \"%s\" of source \"%s\" are not unique",
							rule->target, source),
					 errdetail("A relationship refers to columns of %s that a primary key, or a unique index with no predicate or expression, covers exactly.",
							   to),
					 errhint("A table without such a key can refer to others, but not be referred to.")));
	}
}

/*
 * In the caller's SPI connection: the names of the columns of
 * schema.table that a masking rule of the source covers, a key mask's
 * marked by a '+' ahead of its name.
 */
static List *
sbx_masked_columns(const char *source, const char *schema, const char *table)
{
	Oid			argtypes[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		values[3];
	List	   *columns = NIL;

	values[0] = CStringGetTextDatum(source);
	values[1] = CStringGetTextDatum(schema);
	values[2] = CStringGetTextDatum(table);
	if (SPI_execute_with_args(sbx_catalog_has_key_masks()
							  ? "SELECT column_name, key_mask FROM pgsandbox.source_rule"
							  " WHERE source = $1 AND kind = 'mask'"
							  "   AND schema_name = $2 AND table_name = $3"
							  : "SELECT column_name, false FROM pgsandbox.source_rule"
							  " WHERE source = $1 AND kind = 'mask'"
							  "   AND schema_name = $2 AND table_name = $3",
							  3, argtypes, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the rules of source \"%s\"", source);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		char	   *column = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		char	   *key = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);

		/* a key mask's column is marked by a '+' ahead of its name */
		columns = lappend(columns, key[0] == 't' ? psprintf("+%s", column) : column);
	}
	return columns;
}

/*
 * Whether relationship 'rule' uses column 'column' of schema.table: as a
 * column of either end, or in its condition; only in its condition if
 * condition_only (a key mask covers the column: its values stay matched).
 */
bool
sbx_relation_uses(const SbxSubsetRule *rule, const char *schema, const char *table,
				  const char *column, bool condition_only)
{
	ListCell   *lc;

	if (strcmp(rule->schema, schema) == 0 && strcmp(rule->table, table) == 0)
	{
		foreach(lc, rule->columns)
		{
			if (!condition_only && strcmp(lfirst(lc), column) == 0)
				return true;
		}
		if (rule->condition != NULL)
		{
			foreach(lc, sbx_condition_columns(rule->condition))
			{
				if (sbx_condition_name_reads(lfirst(lc), table, column))
					return true;
			}
		}
	}
	if (!condition_only &&
		strcmp(rule->ref_schema, schema) == 0 && strcmp(rule->ref_table, table) == 0)
	{
		foreach(lc, rule->ref_columns)
		{
			if (strcmp(lfirst(lc), column) == 0)
				return true;
		}
	}
	return false;
}

/*
 * In the caller's SPI connection, for mask(): refuse to mask a column that
 * a relationship uses, as a column that a foreign key uses is refused; for
 * mask_key() (key), a column its condition reads.
 */
void
sbx_check_mask_not_related(const char *source, const char *schema, const char *table,
						   const char *column, bool key)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];

	values[0] = CStringGetTextDatum(source);
	/* in the order of their names: the one an error names is always the same */
	if (SPI_execute_with_args("SELECT target, expression FROM pgsandbox.source_rule"
							  " WHERE source = $1 AND kind = 'relate' ORDER BY target",
							  1, argtypes, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the rules of source \"%s\"", source);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		SbxSubsetRule rule;

		memset(&rule, 0, sizeof(rule));
		rule.target = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		rule.condition = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);
		sbx_parse_relation_target(rule.target, &rule);
		if (sbx_relation_uses(&rule, schema, table, column, key))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot mask column \"%s\" of table \"%s\": relationship \"%s\" uses it",
							column, quote_qualified_identifier(schema, table), rule.target),
					 key ? errdetail("The rows kept would tell the values of a masked column.") :
					 errdetail("Masked values would no longer match the rows that refer to them, or that they refer to."),
					 key ? 0 : errhint("A key mask, set with mask_key(), masks every column tied to the key the same.")));
	}
}

/*
 * The relationship on the source: both tables (sbx_check_rule_table), its
 * columns, operators and key (sbx_resolve_relation), and a condition
 * planned against the referring table, reading no row.
 */
static void
sbx_check_relation_on_source(const char *source, const SbxSubsetRule *rule)
{
	PGconn	   *conn = sbx_source_connect(source);

	PG_TRY();
	{
		Oid			relid;

		sbx_begin_rule_check(conn, source);
		sbx_check_rule_ascii(conn, source, "relationship", rule->target, rule->condition);
		relid = sbx_check_rule_table(conn, source, rule->schema, rule->table);
		(void) sbx_check_rule_table(conn, source, rule->ref_schema, rule->ref_table);
		PQclear(sbx_resolve_relation(conn, source, rule));
		if (rule->condition != NULL)
		{
			sbx_check_tables_trusted(conn, source, sbx_source_trusted_owners(source),
									 list_make1_oid(relid), "to check a rule against it");
			PQclear(sbx_plan_rule(conn,
								  psprintf("SELECT FROM ONLY %s sbx_r WHERE %s LIMIT 0",
										   sbx_remote_quote_qualified(rule->schema, rule->table),
										   sbx_relation_condition(rule->condition, rule->table,
																  "sbx_r")),
								  SBX_RELATION_CONDITION, rule->target, source));
		}
	}
	PG_FINALLY();
	{
		libpqsrv_disconnect(conn);
	}
	PG_END_TRY();
}

/* relate() and unrelate(): the rule their arguments name */
static void
sbx_relation_args(FunctionCallInfo fcinfo, SbxSubsetRule *rule)
{
	char	   *from;
	char	   *to;

	sbx_require_arg(fcinfo, 0, "source name");
	sbx_require_arg(fcinfo, 1, "referring columns");
	sbx_require_arg(fcinfo, 2, "referred columns");
	sbx_check_database();
	sbx_require_admin();
	memset(rule, 0, sizeof(*rule));
	from = sbx_parse_relation_end(text_to_cstring(PG_GETARG_TEXT_PP(1)), "referring columns",
								  &rule->schema, &rule->table, &rule->columns);
	to = sbx_parse_relation_end(text_to_cstring(PG_GETARG_TEXT_PP(2)), "referred columns",
								&rule->ref_schema, &rule->ref_table, &rule->ref_columns);
	if (list_length(rule->columns) != list_length(rule->ref_columns))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_FOREIGN_KEY),
				 errmsg("a relationship refers from %d columns to %d",
						list_length(rule->columns), list_length(rule->ref_columns)),
				 errdetail("Each referring column refers to one referred column, in order.")));
	rule->target = psprintf("%s -> %s", from, to);
	rule->relation = true;
}

/*
 * relate(source text, referring text, referred text, condition text DEFAULT NULL)
 */
Datum
pgsandbox_relate(PG_FUNCTION_ARGS)
{
	SbxSubsetRule rule;
	char	   *source;

	sbx_relation_args(fcinfo, &rule);
	source = text_to_cstring(PG_GETARG_TEXT_PP(0));
	if (!PG_ARGISNULL(3))
	{
		rule.condition = text_to_cstring(PG_GETARG_TEXT_PP(3));
		if (sbx_subset_share(rule.condition, NULL) != -1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("a relationship's condition is an expression over the referring row, not a share of rows")));
		sbx_check_expression_syntax(rule.condition, SBX_RELATION_CONDITION);
		/* before the source sees it: planning may evaluate a function */
		if (!superuser_arg(sbx_caller()))
			sbx_check_rule_rights(rule.condition, SBX_RELATION_CONDITION);
	}

	SPI_connect();
	sbx_lock_source(source);
	/* a masked value would match nothing, and which rows match would tell it */
	for (int end = 0; end < 2; end++)
	{
		const char *schema = end == 0 ? rule.schema : rule.ref_schema;
		const char *table = end == 0 ? rule.table : rule.ref_table;
		ListCell   *lc;

		foreach(lc, sbx_masked_columns(source, schema, table))
		{
			char	   *column = lfirst(lc);
			bool		key = (column[0] == '+');

			if (key)
				column++;
			if (sbx_relation_uses(&rule, schema, table, column, key))
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("relationship \"%s\" uses column \"%s\" of table \"%s\", which a masking rule covers",
								rule.target, column, quote_qualified_identifier(schema, table)),
						 errdetail("Masked values would no longer match the rows that refer to them, and the rows kept would tell the values of a masked column."),
						 key ? 0 : errhint("Remove the masking rule with unmask() first, or make it a key mask with mask_key().")));
		}
	}
	sbx_check_relation_on_source(source, &rule);
	sbx_set_table_rule(source, "relate", rule.schema, rule.table, rule.target, rule.condition);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * unrelate(source text, referring text, referred text)
 */
Datum
pgsandbox_unrelate(PG_FUNCTION_ARGS)
{
	SbxSubsetRule rule;

	sbx_relation_args(fcinfo, &rule);
	sbx_remove_rule(text_to_cstring(PG_GETARG_TEXT_PP(0)), "relate", rule.target, rule.target);
	PG_RETURN_VOID();
}
