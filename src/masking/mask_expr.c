/*-------------------------------------------------------------------------
 *
 * mask_expr.c
 *	  What the masking expression of a rule whose author is not a superuser
 *	  may contain.
 *
 * A rule's expression is evaluated row by row on the source, over the
 * clone's reader connection, which logs in as whatever role the source's
 * conninfo names: often a superuser, since a superuser may add a source
 * as 'dbname=app'.  An administrator who is not a superuser must not
 * borrow those rights through a rule: reading pg_authid or server files,
 * calling a function with side effects, or learning who the reader is.
 *
 * So such a rule is checked here, on its raw parse tree, before it is sent
 * anywhere: when mask() sets it, and again in the clone worker before each
 * data clone reads a row (the settings below, or its author's being a
 * superuser, may have changed since).  It may hold only
 *
 *	- references to the row's columns, by their bare names, and constants;
 *	- operators not qualified by a schema other than pg_catalog, AND, OR,
 *	  NOT, IS [NOT] NULL, IS [NOT] TRUE and the like, [NOT] IN, LIKE,
 *	  BETWEEN, CASE, COALESCE, NULLIF, GREATEST, LEAST, ROW(), ARRAY[],
 *	  array subscripts, COLLATE, CURRENT_DATE and the other clock values;
 *	- casts to types named without a schema, or in pg_catalog;
 *	- calls of the functions of sbx_mask_functions below (functions of
 *	  pg_catalog that compute a value from their arguments and nothing
 *	  else), of those a superuser lists in pgsandbox.mask_functions, and
 *	  current_setting('pgsandbox_mask.key'), the masking key.
 *
 *	- a scalar subquery that reads no table, "(SELECT expression)", whose
 *	  expression is checked as the rule's is.
 * Everything else is refused: other subqueries, aggregates and window calls,
 * current_user and the other session values, any other function.  So are
 * two forms the parser turns into function calls without a FuncCall node:
 * a field selection, (x).f, which calls f(x) when x has no field f, and a
 * qualified column reference, t.f, which calls f(t) when t has no column
 * f; a column is named by its bare name only.
 *
 * A rule's text is checked alone, but sent beside the table's other rules
 * in one statement: each is parsed, and embedded, followed by a newline,
 * so that a line comment it ends with cannot reach into the next one
 * (SBX_MASK_EXPR_FORMAT).  The
 * reader's search_path is pg_catalog alone, so a name without a schema is
 * pg_catalog's; the functions and operators of pg_catalog belong to the
 * bootstrap superuser, and only a superuser can change them.
 *
 * A superuser's rules are not checked: they run with the reader's rights,
 * as the superuser who wrote them chose.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "nodes/nodeFuncs.h"
#include "nodes/parsenodes.h"
#include "parser/parser.h"
#include "sbx_masking.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/varlena.h"

/* pgsandbox.mask_functions: more functions a rule of any admin may call */
int			sbx_test_copy_pause = 0;
char	   *sbx_mask_functions_setting = NULL;

/*
 * Functions of pg_catalog that compute their result from their arguments
 * alone (the clock and random ones aside), by the names a rule calls them
 * or the parser calls them for SQL syntax (SUBSTRING, TRIM, EXTRACT, AT
 * TIME ZONE, OVERLAY, POSITION, SIMILAR TO).  Sorted.
 */
static const char *const sbx_mask_functions[] = {
	"abs", "age", "array_fill", "array_length", "array_position", "array_remove",
	"array_replace", "array_to_string", "ascii", "bit_length", "btrim",
	"cardinality", "ceil", "ceiling", "char_length", "character_length", "chr",
	"concat", "concat_ws", "date_bin", "date_part", "date_trunc", "decode", "div",
	"encode", "extract", "floor", "format", "gcd", "gen_random_uuid",
	"hashint8extended", "host",
	"initcap", "is_normalized", "isfinite", "json_build_array",
	"json_build_object", "json_strip_nulls", "json_typeof", "jsonb_build_array",
	"jsonb_build_object", "jsonb_insert", "jsonb_pretty", "jsonb_set",
	"jsonb_set_lax", "jsonb_strip_nulls", "jsonb_typeof", "justify_days",
	"justify_hours", "justify_interval", "lcm", "left", "length", "lower", "lpad",
	"ltrim", "make_date", "make_interval", "make_time", "make_timestamp",
	"make_timestamptz", "masklen", "md5", "mod", "netmask", "network", "normalize",
	"num_nonnulls", "num_nulls", "octet_length", "overlay", "position", "power",
	"quote_literal", "quote_nullable", "random", "regexp_count", "regexp_instr",
	"regexp_like", "regexp_match", "regexp_replace", "regexp_substr", "repeat",
	"replace", "reverse", "right", "round", "rpad", "rtrim", "set_masklen",
	"sha224", "sha256", "sha384", "sha512", "sign", "similar_to_escape",
	"split_part", "sqrt", "starts_with", "string_to_array", "strpos", "substr",
	"substring", "timezone", "to_char", "to_date", "to_hex", "to_json", "to_jsonb",
	"to_number", "to_timestamp", "translate", "trunc", "upper", "width_bucket"
};

typedef struct SbxExprCheck
{
	List	   *extra;			/* pgsandbox.mask_functions, split */
	char	   *refused;		/* what is refused, for the message */
} SbxExprCheck;

static int
sbx_name_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *) a, *(const char *const *) b);
}

/* A dotted name (of a function, operator or type) for messages. */
static char *
sbx_dotted_name(List *names)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, names)
	{
		Node	   *part = lfirst(lc);

		if (buf.len > 0)
			appendStringInfoChar(&buf, '.');
		appendStringInfoString(&buf, IsA(part, String) ? strVal(part) : "*");
	}
	return buf.data;
}

/* Is a name unqualified, or qualified by pg_catalog? */
static bool
sbx_name_in_catalog(List *names)
{
	if (list_length(names) == 1)
		return true;
	return list_length(names) == 2 && IsA(linitial(names), String) &&
		strcmp(strVal(linitial(names)), "pg_catalog") == 0;
}

/* Is it CURRENT_DATE or another clock value (not CURRENT_USER and the like)? */
static bool
sbx_clock_value(SQLValueFunction *svf)
{
	switch (svf->op)
	{
		case SVFOP_CURRENT_DATE:
		case SVFOP_CURRENT_TIME:
		case SVFOP_CURRENT_TIME_N:
		case SVFOP_CURRENT_TIMESTAMP:
		case SVFOP_CURRENT_TIMESTAMP_N:
		case SVFOP_LOCALTIME:
		case SVFOP_LOCALTIME_N:
		case SVFOP_LOCALTIMESTAMP:
		case SVFOP_LOCALTIMESTAMP_N:
			return true;
		default:
			return false;
	}
}

/* May a rule call this function? */
static bool
sbx_function_allowed(FuncCall *call, SbxExprCheck *check)
{
	char	   *name = strVal(llast(call->funcname));
	char	   *dotted = sbx_dotted_name(call->funcname);
	ListCell   *lc;

	if (call->agg_order != NIL || call->agg_filter != NULL || call->over != NULL ||
		call->agg_star || call->agg_distinct || call->agg_within_group)
		return false;

	/* the masking key, and no other setting */
	if (sbx_name_in_catalog(call->funcname) && strcmp(name, "current_setting") == 0)
	{
		Node	   *arg = list_length(call->args) == 1 ? linitial(call->args) : NULL;

		A_Const    *value;

		if (arg == NULL || !IsA(arg, A_Const))
			return false;
		value = (A_Const *) arg;
		return !value->isnull && nodeTag(&value->val) == T_String &&
			strcmp(value->val.sval.sval, SBX_MASK_KEY_SETTING) == 0;
	}
	if (sbx_name_in_catalog(call->funcname) &&
		bsearch(&name, sbx_mask_functions, lengthof(sbx_mask_functions),
				sizeof(char *), sbx_name_cmp) != NULL)
		return true;

	/* a bare name listed is pg_catalog's; a qualified one is taken as it is */
	foreach(lc, check->extra)
	{
		const char *listed = lfirst(lc);

		if (strchr(listed, '.') == NULL ?
			(sbx_name_in_catalog(call->funcname) && strcmp(listed, name) == 0) :
			strcmp(listed, dotted) == 0)
			return true;
	}
	return false;
}

static bool
sbx_check_expr_walker(Node *node, SbxExprCheck *check)
{
	if (node == NULL)
		return false;
	switch (nodeTag(node))
	{
		case T_List:
		case T_A_Const:
		case T_A_ArrayExpr:
		case T_A_Indices:
		case T_BoolExpr:
		case T_BooleanTest:
		case T_CaseExpr:
		case T_CaseWhen:
		case T_CoalesceExpr:
		case T_CollateClause:
		case T_MinMaxExpr:
		case T_NamedArgExpr:
		case T_NullTest:
		case T_RowExpr:
			break;

		case T_ColumnRef:
			{
				List	   *fields = ((ColumnRef *) node)->fields;

				/* t.f may be f(t): a column by its bare name only */
				if (list_length(fields) != 1 || !IsA(linitial(fields), String))
				{
					check->refused = "a qualified column reference";
					return true;
				}
			}
			break;

		case T_A_Indirection:
			{
				ListCell   *lc;

				/* (x).f may be f(x): subscripts only */
				foreach(lc, ((A_Indirection *) node)->indirection)
				{
					if (!IsA(lfirst(lc), A_Indices))
					{
						check->refused = "a field selection";
						return true;
					}
				}
			}
			break;

		case T_A_Expr:
			{
				A_Expr	   *expr = (A_Expr *) node;

				if (!sbx_name_in_catalog(expr->name))
				{
					check->refused = psprintf("operator %s", sbx_dotted_name(expr->name));
					return true;
				}
			}
			break;

		case T_TypeCast:
			{
				TypeName   *type = ((TypeCast *) node)->typeName;

				if (type->pct_type || type->setof || !sbx_name_in_catalog(type->names))
				{
					check->refused = psprintf("type %s", sbx_dotted_name(type->names));
					return true;
				}
			}
			break;

		case T_TypeName:
			break;				/* checked with its cast */

		case T_SQLValueFunction:
			if (!sbx_clock_value((SQLValueFunction *) node))
			{
				check->refused = "the session's identity or database";
				return true;
			}
			break;

		case T_FuncCall:
			if (!sbx_function_allowed((FuncCall *) node, check))
			{
				check->refused = psprintf("function %s",
										  sbx_dotted_name(((FuncCall *) node)->funcname));
				return true;
			}
			break;

		case T_SubLink:
			/* a value computed once, or per row, from no table */
			if (!sbx_scalar_sublink((SubLink *) node))
			{
				check->refused = "a subquery";
				return true;
			}
			return sbx_check_expr_walker(((ResTarget *) linitial(((SelectStmt *) ((SubLink *) node)->subselect)->targetList))->val,
										 check);

		case T_ParamRef:
			check->refused = "a parameter";
			return true;

		default:
			check->refused = "this kind of expression";
			return true;
	}
	return raw_expression_tree_walker(node, sbx_check_expr_walker, check);
}

/*
 * Whether a raw sublink is a scalar subquery that reads no table:
 * "(SELECT expression)", with no FROM, WHERE or any other clause.  Its
 * value is the expression's; the server computes it once for a query if
 * it reads nothing of the row (the masking key, for example).
 */
bool
sbx_scalar_sublink(SubLink *sublink)
{
	SelectStmt *select = (SelectStmt *) sublink->subselect;

	return sublink->subLinkType == EXPR_SUBLINK && sublink->testexpr == NULL &&
		IsA(select, SelectStmt) &&
		list_length(select->targetList) == 1 && select->fromClause == NIL &&
		select->whereClause == NULL && select->groupClause == NIL &&
		select->havingClause == NULL && select->windowClause == NIL &&
		select->sortClause == NIL && select->limitCount == NULL &&
		select->limitOffset == NULL && select->lockingClause == NIL &&
		select->withClause == NULL && select->op == SETOP_NONE &&
		select->distinctClause == NIL && select->intoClause == NULL &&
		select->valuesLists == NIL &&
		((ResTarget *) linitial(select->targetList))->name == NULL;
}

/*
 * The raw parse of "SELECT (expression)", with string literals read as
 * the standard says, as the source reads them (its sessions set
 * standard_conforming_strings): a caller who turned the setting off in its
 * session must not have a literal checked here that reads as code there.
 */
List *
sbx_raw_parse_expression(const char *expression)
{
	bool		saved = standard_conforming_strings;
	List	   *volatile stmts = NIL;

	standard_conforming_strings = true;
	PG_TRY();
	{
		stmts = raw_parser(psprintf("SELECT " SBX_MASK_EXPR_FORMAT, expression), RAW_PARSE_DEFAULT);
	}
	PG_FINALLY();
	{
		standard_conforming_strings = saved;
	}
	PG_END_TRY();
	return stmts;
}

/*
 * What in a rule's expression only a superuser's rule may use, or NULL if
 * nothing: as "function x", "a subquery" and the like.  An expression that
 * does not parse as one is reported so too (mask() refuses it before).
 */
const char *
sbx_mask_expression_refused(const char *expression)
{
	SbxExprCheck check;
	List	   *stmts;
	SelectStmt *select;
	char	   *setting;

	memset(&check, 0, sizeof(check));
	setting = pstrdup(sbx_mask_functions_setting ? sbx_mask_functions_setting : "");
	if (!SplitIdentifierString(setting, ',', &check.extra))
		check.extra = NIL;		/* the setting's check hook refuses it */

	stmts = sbx_raw_parse_expression(expression);
	if (list_length(stmts) != 1 ||
		!IsA(((RawStmt *) linitial(stmts))->stmt, SelectStmt))
		return "more than one expression";
	select = (SelectStmt *) ((RawStmt *) linitial(stmts))->stmt;
	if (list_length(select->targetList) != 1 || select->fromClause != NIL ||
		select->whereClause != NULL || select->groupClause != NIL ||
		select->havingClause != NULL || select->windowClause != NIL ||
		select->sortClause != NIL || select->limitCount != NULL ||
		select->limitOffset != NULL || select->lockingClause != NIL ||
		select->withClause != NULL || select->op != SETOP_NONE ||
		select->distinctClause != NIL || select->intoClause != NULL ||
		select->valuesLists != NIL)
		return "more than one expression";
	if (sbx_check_expr_walker(((ResTarget *) linitial(select->targetList))->val, &check))
		return check.refused;
	return NULL;
}

/* Check hook of pgsandbox.mask_functions: a list of (qualified) names. */
bool
sbx_check_mask_functions(char **newval, void **extra, GucSource source)
{
	char	   *copy = pstrdup(*newval);
	List	   *names;

	if (!SplitIdentifierString(copy, ',', &names))
	{
		GUC_check_errdetail("List syntax is invalid.");
		return false;
	}
	return true;
}

/* the masking rules' own setting, defined by _PG_init */
void
sbx_define_mask_settings(void)
{
	DefineCustomStringVariable("pgsandbox.mask_functions",
							   "Functions that the masking rules of administrators who are not superusers may call, besides pgsandbox's own list.",
							   "A comma-separated list: a bare name is a function of pg_catalog, schema.name any other. Such a rule runs with the rights of the source's login.",
							   &sbx_mask_functions_setting,
							   "",
							   PGC_SIGHUP,
							   GUC_LIST_INPUT,
							   sbx_check_mask_functions, NULL, NULL);
	DefineCustomIntVariable("pgsandbox.test_copy_pause",
							"For tests: the advisory lock a clone's reader waits for before it reads each table it copies.",
							"0, the default, waits for nothing.",
							&sbx_test_copy_pause,
							0, 0, INT_MAX,
							PGC_SUSET,
							GUC_NOT_IN_SAMPLE | GUC_NO_SHOW_ALL,
							NULL, NULL, NULL);
}
