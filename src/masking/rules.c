/*-------------------------------------------------------------------------
 *
 * rules.c
 *	  A source's masking rules: the SQL functions that set and remove them
 *	  (mask, unmask, exclude_data, include_data), their checks against the
 *	  source, and the packed form in which the lifecycle worker hands them
 *	  to a clone worker.
 *
 * A mask rule names a column as schema.table.column and gives an SQL
 * expression over the row's own columns; a data clone reads the column
 * through it, on the source (masking.c).  When the rule is set, the column
 * is looked up in the source and the expression is planned against the
 * table, in a read-only transaction, without reading a row: a missing
 * column, an expression that does not parse, has the wrong type or does
 * not compute one value per row (an aggregate, a window or set-returning
 * function), a column a foreign key uses (whose masked values would no
 * longer match) and a column of an extension's table are refused.  An
 * exclude_data rule is a table pattern, read as pg_dump reads one: the
 * tables it matches are copied without their rows.
 *
 * Every change counts up the source's rules_version.  A snapshot records
 * the version its rows were read under, and one taken under other rules is
 * stale: it serves no copy, is dropped, and is retaken at once if it
 * existed (snapshot.c, pool.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "common/string.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "libpq-fe.h"
#include "libpq/libpq-be-fe-helpers.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "parser/parser.h"
#include "regex/regex.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_masking.h"
#include "sbx_roles.h"
#include "sbx_shmem.h"
#include "sbx_spi.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/varlena.h"

PG_FUNCTION_INFO_V1(pgsandbox_mask);
PG_FUNCTION_INFO_V1(pgsandbox_mask_key);
PG_FUNCTION_INFO_V1(pgsandbox_unmask);
PG_FUNCTION_INFO_V1(pgsandbox_exclude_data);
PG_FUNCTION_INFO_V1(pgsandbox_include_data);

/* a mask rule's target, parsed */
typedef struct SbxTarget
{
	char	   *schema;
	char	   *table;
	char	   *column;
	char	   *normalized;		/* each part quoted where needed */
} SbxTarget;

static void
sbx_parse_target(const char *target, SbxTarget *t)
{
	char	   *copy = pstrdup(target);
	List	   *parts;

	if (!SplitIdentifierString(copy, '.', &parts) || list_length(parts) != 3)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid masking target \"%s\"", target),
				 errdetail("A target is schema.table.column, each part quoted as in SQL where needed.")));
	t->schema = pstrdup(linitial(parts));
	t->table = pstrdup(lsecond(parts));
	t->column = pstrdup(lthird(parts));
	t->normalized = psprintf("%s.%s.%s", quote_identifier(t->schema),
							 quote_identifier(t->table), quote_identifier(t->column));
}

/* whether an expression is the NULL constant alone */
static bool
sbx_expression_is_null(const char *expression)
{
	SelectStmt *select = sbx_parse_expression(expression, "masking expression");
	ResTarget  *rt = linitial(select->targetList);

	return IsA(rt->val, A_Const) && ((A_Const *) rt->val)->isnull;
}

/* The column a mask rule names, as the source has it. */
typedef struct SbxMaskedColumn
{
	Oid			relid;			/* its table, in the source */
	Oid			typoid;
	int			typmod;
	char	   *coltype;		/* its type, as format_type() writes it */
	char	   *category;		/* its type's category */
	bool		notnull;
} SbxMaskedColumn;

/*
 * The column of rule target t in the source, into *col: it must exist, in
 * a table that is no extension's, not be generated, and no foreign key may
 * use it unless the rule is a key mask.
 */
static void
sbx_read_masked_column(PGconn *conn, const char *source, const SbxTarget *t,
					   SbxMaskedColumn *col, bool key)
{
	const char *params[3] = {t->schema, t->table, t->column};
	char	   *qualified = quote_qualified_identifier(t->schema, t->table);
	PGresult   *res;
	char	   *fkey;
	char	   *extension;
	bool		generated;
	bool		found;

	res = sbx_remote_exec(conn,
						  "SELECT c.oid FROM pg_catalog.pg_class c"
						  "  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
						  " WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')",
						  2, params, PGRES_TUPLES_OK,
						  psprintf("could not read source \"%s\"", source));
	found = (PQntuples(res) > 0);
	col->relid = found ? atooid(PQgetvalue(res, 0, 0)) : InvalidOid;
	PQclear(res);
	if (!found)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("table \"%s\" does not exist in source \"%s\"", qualified, source)));
	res = sbx_remote_exec(conn,
						  "SELECT a.atttypid, pg_catalog.format_type(a.atttypid, a.atttypmod),"
						  "       t.typcategory, a.attnotnull, a.attgenerated <> '', a.atttypmod,"
						  "       (SELECT k.conname FROM pg_catalog.pg_constraint k"
						  "         WHERE k.contype = 'f'"
						  "           AND ((k.conrelid = c.oid AND a.attnum = ANY (k.conkey))"
						  "             OR (k.confrelid = c.oid AND a.attnum = ANY (k.confkey)))"
						  "         ORDER BY k.conname LIMIT 1),"
						  "       (SELECT e.extname FROM pg_catalog.pg_depend d"
						  "          JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid"
						  "         WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass"
						  "           AND d.objid = c.oid AND d.deptype = 'e' LIMIT 1)"
						  "  FROM pg_catalog.pg_class c"
						  "  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
						  "  JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid"
						  "  JOIN pg_catalog.pg_type t ON t.oid = a.atttypid"
						  " WHERE n.nspname = $1 AND c.relname = $2 AND a.attname = $3"
						  "   AND a.attnum > 0 AND NOT a.attisdropped",
						  3, params, PGRES_TUPLES_OK,
						  psprintf("could not read source \"%s\"", source));
	if (PQntuples(res) == 0)
	{
		PQclear(res);
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of table \"%s\" does not exist in source \"%s\"",
						t->column, qualified, source)));
	}
	col->typoid = atooid(PQgetvalue(res, 0, 0));
	col->coltype = pstrdup(PQgetvalue(res, 0, 1));
	col->category = pstrdup(PQgetvalue(res, 0, 2));
	col->notnull = (strcmp(PQgetvalue(res, 0, 3), "t") == 0);
	generated = (strcmp(PQgetvalue(res, 0, 4), "t") == 0);
	col->typmod = atoi(PQgetvalue(res, 0, 5));
	fkey = PQgetisnull(res, 0, 6) ? NULL : pstrdup(PQgetvalue(res, 0, 6));
	extension = PQgetisnull(res, 0, 7) ? NULL : pstrdup(PQgetvalue(res, 0, 7));
	PQclear(res);
	if (extension != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot mask column \"%s\" of table \"%s\": the table belongs to extension \"%s\"",
						t->column, qualified, extension),
				 errdetail("The rows of an extension's tables are copied as the extension keeps them.")));
	if (generated)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot mask generated column \"%s\" of table \"%s\"",
						t->column, qualified),
				 errhint("Mask the columns it is computed from.")));
	if (fkey != NULL && !key)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot mask column \"%s\" of table \"%s\": foreign key \"%s\" uses it",
						t->column, qualified, fkey),
				 errdetail("Masked values would no longer match the rows that refer to them, or that they refer to."),
				 errhint("A key mask, set with mask_key(), masks every column tied to the key the same.")));
}

/*
 * The expression of a rule for t: it plans against the table, reading no
 * row, computes one value from each row, and is of the column's type, or
 * of its type category where COPY converts between them.
 */
static void
sbx_check_mask_expression(PGconn *conn, const char *source, const SbxTarget *t,
						  const char *expression, const SbxMaskedColumn *col)
{
	char	   *sql_name = sbx_remote_quote_qualified(t->schema, t->table);
	PGresult   *res;
	Oid			exprtype;
	char	   *exprcategory;
	const char *typeparam[1];
	char		typebuf[16];

	/* plan it against the table, reading no row */
	res = sbx_plan_rule(conn, psprintf("SELECT " SBX_MASK_EXPR_FORMAT " FROM ONLY %s LIMIT 0",
									   expression, sql_name),
						"masking expression", t->normalized, source);
	exprtype = PQftype(res, 0);
	PQclear(res);

	/*
	 * One value from each row: where the clone reads the rows, an
	 * aggregate would fold them and a set-returning function add
	 * some.  A WHERE clause allows neither, nor window functions.
	 */
	res = libpqsrv_exec_params(conn,
							   psprintf("SELECT FROM ONLY %s WHERE " SBX_MASK_EXPR_FORMAT " IS NULL LIMIT 0",
										sql_name, expression),
							   0, NULL, NULL, NULL, NULL, 0, PG_WAIT_EXTENSION);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		int			code = sbx_remote_sqlstate(res);

		PQclear(res);
		ereport(ERROR,
				(errcode(code),
				 errmsg("masking expression for \"%s\" must compute one value from each row",
						t->normalized),
				 errdetail("Aggregate, window and set-returning functions are not allowed in a masking expression.")));
	}
	PQclear(res);
	snprintf(typebuf, sizeof(typebuf), "%u", exprtype);
	typeparam[0] = typebuf;
	res = sbx_remote_exec(conn,
						  "SELECT typcategory, pg_catalog.format_type(oid, NULL)"
						  "  FROM pg_catalog.pg_type WHERE oid = $1::oid",
						  1, typeparam, PGRES_TUPLES_OK,
						  psprintf("could not read source \"%s\"", source));
	exprcategory = PQntuples(res) == 1 ? pstrdup(PQgetvalue(res, 0, 0)) : "";
	/*
	 * Of the column's type category, the value is converted as COPY
	 * reads it into the column; arrays, composites and other types
	 * have no such conversion and must be of the column's type.
	 */
	if (exprtype != col->typoid &&
		(strcmp(exprcategory, col->category) != 0 ||
		 strchr("BDNSTV", col->category[0]) == NULL))
	{
		char	   *exprtypename = PQntuples(res) == 1 ? pstrdup(PQgetvalue(res, 0, 1)) : "?";

		PQclear(res);
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("masking expression for \"%s\" is of type %s, but the column is of type %s",
						t->normalized, exprtypename, col->coltype),
				 errhint("Cast the expression to %s.", col->coltype)));
	}
	PQclear(res);
}

/*
 * Check a mask rule against the source: the column exists in a table that
 * is no extension's, is not generated and no foreign key uses it, and the
 * expression plans against the table, one value per row, with the
 * column's type, or one of its type category for strings, numbers, dates,
 * times, bit strings and booleans (text for a varchar column), or is NULL
 * on a nullable column.  Reads no row.
 */
static void
sbx_check_mask_on_source(const char *source, const SbxTarget *t, char **expression_p,
						 bool key)
{
	PGconn	   *conn = sbx_source_connect(source);

	PG_TRY();
	{
		SbxMaskedColumn col;
		char	   *expression = *expression_p;

		sbx_begin_rule_check(conn, source);
		sbx_read_masked_column(conn, source, t, &col, key);
		if (key && expression == NULL)
		{
			/* the default of the column's type, written by pgsandbox */
			expression = sbx_key_mask_default(col.typoid, col.typmod,
											  sbx_remote_quote_ident(t->column));
			if (expression == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("no default key mask for column \"%s\" of type %s",
								t->column, col.coltype),
						 errhint("Give the expression: one that keeps distinct values distinct, and reads the column alone.")));
			*expression_p = expression;
		}
		sbx_check_rule_ascii(conn, source, "masking rule", t->normalized, expression);
		if (key)
		{
			if (sbx_expression_is_null(expression))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("a key mask cannot be NULL"),
						 errdetail("A key mask keeps distinct keys distinct.")));
			sbx_check_key_mask_expression(expression, t->table, t->column);
			sbx_check_key_mask_functions(conn, source, expression, t->normalized);
			sbx_check_key_mask_table(conn, source, t->schema, t->table, t->normalized);
		}
		if (!sbx_expression_is_null(expression))
		{
			/* the expression is planned against the table */
			sbx_check_tables_trusted(conn, source, sbx_source_trusted_owners(source),
									 list_make1_oid(col.relid), "to check a rule against it");
			sbx_check_mask_expression(conn, source, t, expression, &col);
		}
		else if (col.notnull)
			ereport(ERROR,
					(errcode(ERRCODE_NOT_NULL_VIOLATION),
					 errmsg("cannot mask column \"%s\" of table \"%s\" with NULL: it is NOT NULL",
							t->column, quote_qualified_identifier(t->schema, t->table))));
	}
	PG_FINALLY();
	{
		libpqsrv_disconnect(conn);
	}
	PG_END_TRY();
}

/*
 * Translate a table pattern, as pg_dump and psql read one, into two regular
 * expressions over the schema name (NULL for any schema) and the table
 * name: outside double quotes letters are folded to lower case, * matches
 * any text, ? any character, a dot separates the schema from the table,
 * $ is itself, and other characters keep their meaning in a regular
 * expression; inside double quotes every character is itself.  Raises an
 * error for a pattern that is not one.
 */
void
sbx_table_pattern_regex(const char *pattern, char **schema_re, char **table_re)
{
	StringInfoData parts[2];
	int			part = 0;
	bool		quoted = false;
	const char *p = pattern;

	initStringInfo(&parts[0]);
	initStringInfo(&parts[1]);
	while (*p)
	{
		int			len = pg_mblen(p);
		StringInfo	buf = &parts[part];

		if (*p == '"')
		{
			if (quoted && p[1] == '"')
			{
				appendStringInfoChar(buf, '"');
				p += 2;
				continue;
			}
			quoted = !quoted;
		}
		else if (len > 1)
			appendBinaryStringInfo(buf, p, len);
		else if (quoted)
		{
			if (strchr("|*+?()[]{}.^$\\", *p))
				appendStringInfoChar(buf, '\\');
			appendStringInfoChar(buf, *p);
		}
		else if (*p == '.')
		{
			if (part == 1)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid table pattern \"%s\"", pattern),
						 errdetail("A table pattern is a table name or schema.table, with * and ? as wildcards.")));
			part = 1;
		}
		else if (*p == '*')
			appendStringInfoString(buf, ".*");
		else if (*p == '?')
			appendStringInfoChar(buf, '.');
		else if (*p == '$')
			appendStringInfoString(buf, "\\$");
		else
			appendStringInfoChar(buf, pg_ascii_tolower((unsigned char) *p));
		p += len;
	}
	if (quoted || parts[0].len == 0 || (part == 1 && parts[1].len == 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid table pattern \"%s\"", pattern),
				 errdetail("A table pattern is a table name or schema.table, with * and ? as wildcards.")));
	if (part == 1)
	{
		*schema_re = psprintf("^(%s)$", parts[0].data);
		*table_re = psprintf("^(%s)$", parts[1].data);
	}
	else
	{
		*schema_re = NULL;
		*table_re = psprintf("^(%s)$", parts[0].data);
	}
}

/* The room a mask rule takes among the source's rules (rule_catalog.c). */
static void
sbx_check_mask_size(const char *source, const SbxTarget *t, const char *expression)
{
	sbx_check_rules_size(source, "mask", t->normalized,
						 7 + strlen(t->normalized) + strlen(t->schema) + strlen(t->table) +
						 strlen(t->column) + strlen(expression));
}

/*
 * mask() and mask_key(): set a masking rule, a key mask if key.  A key
 * mask's expression may be NULL: the default of the column's type.
 */
static void
sbx_set_mask(FunctionCallInfo fcinfo, bool key)
{
	char	   *source;
	char	   *expression = NULL;
	SbxTarget	t;
	Oid			argtypes[8] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, NAMEOID, BOOLOID};
	Datum		values[8];
	NameData	author;
	bool		defaulted;

	sbx_require_arg(fcinfo, 0, "source name");
	sbx_require_arg(fcinfo, 1, "target");
	if (!key)
		sbx_require_arg(fcinfo, 2, "expression");
	sbx_check_database();
	sbx_require_admin();
	source = text_to_cstring(PG_GETARG_TEXT_PP(0));
	sbx_parse_target(text_to_cstring(PG_GETARG_TEXT_PP(1)), &t);
	if (!PG_ARGISNULL(2))
	{
		expression = text_to_cstring(PG_GETARG_TEXT_PP(2));
		sbx_check_expression_syntax(expression, "masking expression");
		/* before the source sees it: planning may evaluate a function */
		if (!superuser_arg(sbx_caller()))
			sbx_check_rule_rights(expression, "masking expression");
		if (key)
			sbx_check_key_mask_expression(expression, t.table, t.column);
	}

	SPI_connect();
	sbx_lock_source(source);
	sbx_refuse_rule_if_live(source, "mask");
	sbx_check_mask_not_in_subset(source, t.schema, t.table, t.column);
	sbx_check_mask_not_related(source, t.schema, t.table, t.column, key);
	/* before the source sees the rule; a default one once it is chosen */
	defaulted = (expression == NULL);
	if (!defaulted)
	{
		sbx_check_mask_size(source, &t, expression);
		sbx_check_mask_on_source(source, &t, &expression, key);
	}
	else
	{
		sbx_check_mask_on_source(source, &t, &expression, key);
		if (!superuser_arg(sbx_caller()))
			sbx_check_rule_rights(expression, "masking expression");
		sbx_check_mask_size(source, &t, expression);
	}

	values[0] = CStringGetTextDatum(source);
	values[1] = CStringGetTextDatum(t.normalized);
	values[2] = CStringGetTextDatum(t.schema);
	values[3] = CStringGetTextDatum(t.table);
	values[4] = CStringGetTextDatum(t.column);
	values[5] = CStringGetTextDatum(expression);
	/* the author, whose being a superuser lets the rule go unchecked */
	namestrcpy(&author, GetUserNameFromId(sbx_caller(), false));
	values[6] = NameGetDatum(&author);
	values[7] = BoolGetDatum(key);
	if (SPI_execute_with_args(sbx_catalog_has_key_masks()
							  ? "INSERT INTO pgsandbox.source_rule AS r"
							  " (source, kind, target, schema_name, table_name, column_name, expression,"
							  "  added_by, key_mask)"
							  " VALUES ($1, 'mask', $2, $3, $4, $5, $6, $7, $8)"
							  " ON CONFLICT (source, kind, target) DO UPDATE"
							  " SET expression = excluded.expression, added_at = pg_catalog.now(),"
							  "     added_by = excluded.added_by, key_mask = excluded.key_mask"
							  : "INSERT INTO pgsandbox.source_rule AS r"
							  " (source, kind, target, schema_name, table_name, column_name, expression,"
							  "  added_by)"
							  " VALUES ($1, 'mask', $2, $3, $4, $5, $6, $7)"
							  " ON CONFLICT (source, kind, target) DO UPDATE"
							  " SET expression = excluded.expression, added_at = pg_catalog.now(),"
							  "     added_by = excluded.added_by",
							  sbx_catalog_has_key_masks() ? 8 : 7,
							  argtypes, values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not set a masking rule of source \"%s\"", source);
	sbx_rules_changed(source);
	SPI_finish();
}

/*
 * mask(source text, target text, expression text)
 */
Datum
pgsandbox_mask(PG_FUNCTION_ARGS)
{
	sbx_set_mask(fcinfo, false);
	PG_RETURN_VOID();
}

/*
 * mask_key(source text, target text, expression text DEFAULT NULL)
 */
Datum
pgsandbox_mask_key(PG_FUNCTION_ARGS)
{
	sbx_set_mask(fcinfo, true);
	PG_RETURN_VOID();
}

/*
 * unmask(source text, target text)
 */
Datum
pgsandbox_unmask(PG_FUNCTION_ARGS)
{
	SbxTarget	t;

	sbx_require_arg(fcinfo, 0, "source name");
	sbx_require_arg(fcinfo, 1, "target");
	sbx_check_database();
	sbx_require_admin();
	sbx_parse_target(text_to_cstring(PG_GETARG_TEXT_PP(1)), &t);
	sbx_remove_rule(text_to_cstring(PG_GETARG_TEXT_PP(0)), "mask", t.normalized,
					t.normalized);
	PG_RETURN_VOID();
}

/* Check that one regular expression of a table pattern compiles. */
static void
sbx_check_pattern_regex(const char *pattern, const char *re)
{
	int			len = strlen(re);
	pg_wchar   *wide = palloc((len + 1) * sizeof(pg_wchar));
	int			wlen = pg_mb2wchar_with_len(re, wide, len);
	regex_t		compiled;
	int			rc;

	rc = pg_regcomp(&compiled, wide, wlen, REG_ADVANCED, C_COLLATION_OID);
	if (rc != REG_OKAY)
	{
		char		msg[100];

		pg_regerror(rc, &compiled, msg, sizeof(msg));
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid table pattern \"%s\"", pattern),
				 errdetail("As a regular expression: %s.", msg)));
	}
	pg_regfree(&compiled);
	pfree(wide);
}

/* A table pattern, checked; its regular expressions must compile. */
static char *
sbx_checked_pattern(text *arg)
{
	char	   *pattern = text_to_cstring(arg);
	char	   *trimmed;
	char	   *schema_re;
	char	   *table_re;
	size_t		len;

	/* spaces around a pattern are not part of it */
	trimmed = pattern;
	while (*trimmed == ' ' || *trimmed == '\t' || *trimmed == '\n')
		trimmed++;
	len = strlen(trimmed);
	while (len > 0 && strchr(" \t\n", trimmed[len - 1]))
		trimmed[--len] = '\0';
	sbx_table_pattern_regex(trimmed, &schema_re, &table_re);
	if (schema_re)
		sbx_check_pattern_regex(trimmed, schema_re);
	sbx_check_pattern_regex(trimmed, table_re);
	return trimmed;
}

/*
 * exclude_data(source text, table_pattern text)
 */
Datum
pgsandbox_exclude_data(PG_FUNCTION_ARGS)
{
	char	   *source;
	char	   *pattern;
	Oid			argtypes[2] = {TEXTOID, TEXTOID};
	Datum		values[2];

	sbx_require_arg(fcinfo, 0, "source name");
	sbx_require_arg(fcinfo, 1, "table pattern");
	sbx_check_database();
	sbx_require_admin();
	source = text_to_cstring(PG_GETARG_TEXT_PP(0));
	pattern = sbx_checked_pattern(PG_GETARG_TEXT_PP(1));

	SPI_connect();
	sbx_lock_source(source);
	sbx_refuse_rule_if_live(source, "exclude_data");
	sbx_check_rules_size(source, "exclude_data", pattern, 7 + strlen(pattern));
	values[0] = CStringGetTextDatum(source);
	values[1] = CStringGetTextDatum(pattern);
	if (SPI_execute_with_args("INSERT INTO pgsandbox.source_rule (source, kind, target)"
							  " VALUES ($1, 'exclude_data', $2)"
							  " ON CONFLICT (source, kind, target) DO NOTHING",
							  2, argtypes, values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not set an exclude_data rule of source \"%s\"", source);
	if (SPI_processed > 0)
		sbx_rules_changed(source);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * include_data(source text, table_pattern text)
 */
Datum
pgsandbox_include_data(PG_FUNCTION_ARGS)
{
	char	   *pattern;

	sbx_require_arg(fcinfo, 0, "source name");
	sbx_require_arg(fcinfo, 1, "table pattern");
	sbx_check_database();
	sbx_require_admin();
	pattern = sbx_checked_pattern(PG_GETARG_TEXT_PP(1));
	sbx_remove_rule(text_to_cstring(PG_GETARG_TEXT_PP(0)), "exclude_data", pattern, pattern);
	PG_RETURN_VOID();
}

/*
 * In a worker transaction: pack the rules of a source for a data clone's
 * job, and its rules_version.  Each rule is its kind ('m', 'M' for a mask
 * whose author is a superuser, 'x' for exclude_data, 's', 'S' for a subset
 * rule likewise, 'k', 'K' for a key mask, 'f' for follow, 'r', 'R' for
 * relate), target,
 * schema, table, column and expression, each ended by a NUL, the empty
 * ones too; an empty kind ends the list.  Returns whether there is a rule.
 */
bool
sbx_read_rules(const char *source, SbxCloneJob *job)
{
	const char *args[1] = {source};
	int			len = 0;
	bool		isnull;

	job->rules[0] = '\0';
	job->rules_version = 0;
	job->rules_encoding = GetDatabaseEncoding();
	if (!sbx_catalog_has_rules())
		return false;
	sbx_spi("SELECT rules_version FROM pgsandbox.source WHERE name = $1",
			SPI_OK_SELECT, 1, args);
	if (SPI_processed == 1)
		job->rules_version = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0],
														 SPI_tuptable->tupdesc, 1, &isnull));
	/* a rule of an author who is a superuser now goes unchecked ('M') */
	sbx_spi(psprintf("SELECT CASE kind WHEN 'exclude_data' THEN 'x' WHEN 'follow' THEN 'f'"
					 "        ELSE CASE WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_roles a"
					 "                                WHERE a.rolname = added_by AND a.rolsuper)"
					 "                  THEN pg_catalog.upper(%s)"
					 "                  ELSE %s END END, target,"
					 " COALESCE(schema_name, ''), COALESCE(table_name, ''),"
					 " COALESCE(column_name, ''), COALESCE(expression, '')"
					 "  FROM pgsandbox.source_rule WHERE source = $1"
					 " ORDER BY kind, target",
					 sbx_catalog_has_key_masks() ?
					 "CASE WHEN key_mask THEN 'k' ELSE pg_catalog.left(kind, 1) END" :
					 "pg_catalog.left(kind, 1)",
					 sbx_catalog_has_key_masks() ?
					 "CASE WHEN key_mask THEN 'k' ELSE pg_catalog.left(kind, 1) END" :
					 "pg_catalog.left(kind, 1)"),
			SPI_OK_SELECT, 1, args);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		for (int col = 1; col <= 6; col++)
		{
			char	   *value = sbx_spi_text(i, col);
			int			n = strlen(value) + 1;

			if (len + n + 1 > SBX_RULES_MAX)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("the rules of source \"%s\" take more than %d bytes",
								source, SBX_RULES_MAX)));
			memcpy(job->rules + len, value, n);
			len += n;
		}
	}
	job->rules[len] = '\0';
	return SPI_processed > 0;
}

/* Whether a clone job's rules reduce its rows: it has a subset rule. */
bool
sbx_rules_reduce(const SbxCloneJob *job)
{
	const char *p = job->rules;

	while (*p != '\0')
	{
		if (*p == 's' || *p == 'S')
			return true;
		for (int i = 0; i < 6; i++)
			p += strlen(p) + 1;
	}
	return false;
}

/*
 * Unpack a clone job's rules: masks as SbxMaskRule, table patterns as
 * strings, subset, follow and relate rules as SbxSubsetRule.
 */
void
sbx_unpack_rules(const SbxCloneJob *job, List **masks, List **patterns, List **subsets)
{
	const char *p = job->rules;

	*masks = NIL;
	*patterns = NIL;
	*subsets = NIL;
	while (*p != '\0')
	{
		const char *field[6];

		for (int i = 0; i < 6; i++)
		{
			field[i] = p;
			p += strlen(p) + 1;
		}
		if (strchr("mMkK", field[0][0]) != NULL)
		{
			SbxMaskRule *rule = palloc0(sizeof(SbxMaskRule));

			rule->trusted = (field[0][0] == 'M' || field[0][0] == 'K');
			rule->key = (field[0][0] == 'k' || field[0][0] == 'K');

			rule->target = pstrdup(field[1]);
			rule->schema = pstrdup(field[2]);
			rule->table = pstrdup(field[3]);
			rule->column = pstrdup(field[4]);
			rule->expression = pstrdup(field[5]);
			*masks = lappend(*masks, rule);
		}
		else if (field[0][0] == 'r' || field[0][0] == 'R')
		{
			SbxSubsetRule *rule = palloc0(sizeof(SbxSubsetRule));

			rule->trusted = (field[0][0] == 'R');
			rule->target = pstrdup(field[1]);
			sbx_parse_relation_target(rule->target, rule);
			rule->condition = field[5][0] ? pstrdup(field[5]) : NULL;
			*subsets = lappend(*subsets, rule);
		}
		else if (field[0][0] == 's' || field[0][0] == 'S' || field[0][0] == 'f')
		{
			SbxSubsetRule *rule = palloc0(sizeof(SbxSubsetRule));

			rule->follow = (field[0][0] == 'f');
			rule->trusted = (field[0][0] == 'S');
			rule->target = pstrdup(field[1]);
			rule->schema = pstrdup(field[2]);
			rule->table = pstrdup(field[3]);
			if (rule->follow)
				rule->max_rows = field[5][0] ? strtoi64(field[5], NULL, 10) : 0;
			else
				rule->condition = pstrdup(field[5]);
			*subsets = lappend(*subsets, rule);
		}
		else
			*patterns = lappend(*patterns, pstrdup(field[1]));
	}
}
