/*-------------------------------------------------------------------------
 *
 * key_masks.c
 *	  Key masks: a mask on a column that keys tie to other columns (a
 *	  foreign key, or a relationship relate() declared, on either side),
 *	  applied the same to every column so tied, so that every key still
 *	  matches in the sandbox.
 *
 * Natural keys hold what masking exists for: an email that is a user's
 * key, an account number that other tables refer to.  A plain mask of such
 * a column would break every reference to it; mask_key() sets a key mask
 * instead.  At each clone the reader finds the set of columns that keys tie
 * to the masked one, transitively, and reads each of them through the same
 * expression, the column's value put in the place of the masked one's
 * (sbx_expand_key_masks, sbx_key_mask_of_column).  The closure of a
 * reduced clone still runs on the real values, on the source; only what is
 * copied is masked.
 *
 * So the expression must give the same output for the same input, and
 * read nothing of the row but the column itself: it may name no other
 * column, and call no function that is not immutable on the source but
 * current_setting() (of the masking key).  Two clones of one source then
 * mask a key the same way, and a person can match rows across sandboxes
 * without seeing a real value.
 *
 * Where an admin writes no expression, one is chosen by the column's
 * type (sbx_key_mask_default):
 *	- integers: a keyed permutation of the type's range, a Feistel network
 *	  of three rounds whose round function is the server's hash of the half
 *	  and the masking key (hashint8extended), so that distinct keys stay
 *	  distinct and unique indexes hold;
 *	- text: a keyed md5 of the value; an email (local@domain) keeps its
 *	  shape, its domain masked the same wherever it occurs;
 *	- uuid: a keyed md5 of the value, as a uuid.
 * A collision of the hashes would break a unique index: post-data then
 * fails to build it, and the clone fails closed, naming the constraint.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "libpq-fe.h"
#include "nodes/nodeFuncs.h"
#include "nodes/parsenodes.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_masking.h"
#include "utils/builtins.h"

/*
 * The masking key as the seed of the round function: 60 bits of it, in a
 * scalar subquery that reads no row, which the server computes once for a
 * query, not once a row.
 */
#define SBX_KEY_SEED \
	"(SELECT ('x' OPERATOR(pg_catalog.||) pg_catalog.left(pg_catalog.current_setting('" \
	SBX_MASK_KEY_SETTING "'), 15))::pg_catalog.bit(60)::pg_catalog.int8)"

/* the masking key, before a value md5 hashes */
#define SBX_KEY_TEXT \
	"pg_catalog.current_setting('" SBX_MASK_KEY_SETTING "')"

/* round i of the Feistel network: a half's keyed hash, cut to 'mask' */
static char *
sbx_feistel_f(const char *half, int round, const char *mask)
{
	return psprintf("(pg_catalog.hashint8extended(%s, %s OPERATOR(pg_catalog.+) %d)"
					" OPERATOR(pg_catalog.&) %s)", half, SBX_KEY_SEED, round, mask);
}

/*
 * A keyed permutation of the 'bits'-bit integers, over the int8 expression
 * v of a value among them taken as unsigned (0 .. 2^bits - 1): three rounds
 * of a Feistel network over its two halves.  The result is again such a
 * value, as int8.
 */
static char *
sbx_feistel(const char *v, int bits)
{
	int			half = bits / 2;
	char	   *mask = psprintf("%lld", (long long) ((((int64) 1) << half) - 1));
	char	   *l0 = psprintf("((%s OPERATOR(pg_catalog.>>) %d) OPERATOR(pg_catalog.&) %s)", v, half, mask);
	char	   *r0 = psprintf("(%s OPERATOR(pg_catalog.&) %s)", v, mask);
	char	   *r1 = psprintf("(%s OPERATOR(pg_catalog.#) %s)", l0, sbx_feistel_f(r0, 1, mask));
	char	   *r2 = psprintf("(%s OPERATOR(pg_catalog.#) %s)", r0, sbx_feistel_f(r1, 2, mask));
	char	   *r3 = psprintf("(%s OPERATOR(pg_catalog.#) %s)", r1, sbx_feistel_f(r2, 3, mask));

	/* (l3, r3) = (r2, r3) */
	return psprintf("((%s OPERATOR(pg_catalog.<<) %d) OPERATOR(pg_catalog.|) %s)", r2, half, r3);
}

/*
 * The expression a key mask of a column of type 'typid' (typmod 'typmod',
 * named qcol, quoted) takes when the admin gives none, or NULL if there is
 * no default for its type.
 */
char *
sbx_key_mask_default(Oid typid, int typmod, const char *qcol)
{
	switch (typid)
	{
		case INT2OID:

			/*
			 * -32768 .. 32767, shifted to 0 .. 65535 and back.  A value of a
			 * wider column tied to the key that is out of the key's range
			 * fails the cast, and the clone: it would not stay distinct.
			 */
			return psprintf("(%s OPERATOR(pg_catalog.-) 32768)::pg_catalog.int2",
							sbx_feistel(psprintf("(%s::pg_catalog.int2::pg_catalog.int8 OPERATOR(pg_catalog.+) 32768)", qcol), 16));
		case INT4OID:
			return psprintf("(%s OPERATOR(pg_catalog.-) 2147483648)::pg_catalog.int4",
							sbx_feistel(psprintf("(%s::pg_catalog.int4::pg_catalog.int8 OPERATOR(pg_catalog.+) 2147483648)", qcol), 32));
		case INT8OID:
			/* the two halves of the 64 bits, as they are */
			return sbx_feistel(qcol, 64);
		case UUIDOID:
			return psprintf("pg_catalog.md5(%s OPERATOR(pg_catalog.||) %s::pg_catalog.text)::pg_catalog.uuid",
							SBX_KEY_TEXT, qcol);
		case TEXTOID:
		case VARCHAROID:
			{
				int			room = (typid == VARCHAROID && typmod > 4) ? typmod - 4 : -1;
				char	   *hash = psprintf("pg_catalog.md5(%s OPERATOR(pg_catalog.||) %s)", SBX_KEY_TEXT, qcol);

				/* local@domain: 16 hex digits @ 8 of the domain's .invalid */
				if (room < 0 || room >= 33)
					return psprintf("CASE WHEN pg_catalog.strpos(%s, '@') > 0"
									" THEN pg_catalog.left(%s, 16) OPERATOR(pg_catalog.||) '@'"
									" OPERATOR(pg_catalog.||) pg_catalog.left(pg_catalog.md5(%s"
									" OPERATOR(pg_catalog.||) pg_catalog.split_part(%s, '@', 2)), 8)"
									" OPERATOR(pg_catalog.||) '.invalid'"
									" ELSE %s END",
									qcol, hash, SBX_KEY_TEXT, qcol,
									room < 0 || room >= 32 ? hash : psprintf("pg_catalog.left(%s, %d)", hash, room));
				return psprintf("pg_catalog.left(%s, %d)", hash, Min(room, 32));
			}
		default:
			return NULL;
	}
}

/* the names of the functions a raw expression tree calls, and clock values */
static bool
sbx_calls_walker(Node *node, List **names)
{
	if (node == NULL)
		return false;
	if (IsA(node, FuncCall))
		*names = lappend(*names, ((FuncCall *) node)->funcname);
	else if (IsA(node, SQLValueFunction))
		*names = lappend(*names, NIL);
	else if (IsA(node, SubLink) && !sbx_scalar_sublink((SubLink *) node))
		*names = lappend(*names, list_make1(makeString("(subquery)")));
	return raw_expression_tree_walker(node, sbx_calls_walker, (void *) names);
}

/* the locations of the column references of a raw expression tree */
static bool
sbx_column_locations_walker(Node *node, List **locations)
{
	if (node == NULL)
		return false;
	if (IsA(node, ColumnRef))
		*locations = lappend_int(*locations, ((ColumnRef *) node)->location);
	return raw_expression_tree_walker(node, sbx_column_locations_walker, (void *) locations);
}

/* where an expression begins in what sbx_raw_parse_expression parses */
#define SBX_EXPR_OFFSET		((int) strlen("SELECT ("))

/*
 * A key mask's expression, on its text: it reads no column but 'column'
 * (of table 'table'), each reference written as a name, quoted or not
 * (not U&"..."), no clock value and no subquery that reads a table.
 * Functions are checked on the source (sbx_check_key_mask_functions).
 */
void
sbx_check_key_mask_expression(const char *expression, const char *table, const char *column)
{
	SelectStmt *select = sbx_parse_expression(expression, "key mask");
	List	   *calls = NIL;
	List	   *locations = NIL;
	ListCell   *lc;

	(void) sbx_column_locations_walker(((ResTarget *) linitial(select->targetList))->val,
									   &locations);
	foreach(lc, locations)
	{
		int			at = lfirst_int(lc) - SBX_EXPR_OFFSET;

		if (at < 0 || at >= (int) strlen(expression) ||
			((expression[at] == 'U' || expression[at] == 'u') && expression[at + 1] == '&'))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("key mask of column \"%s\" names it otherwise than by its name", column),
					 errdetail("A key mask is applied to each column tied to the key by naming that column in its place: write the name plainly, or in double quotes.")));
	}

	foreach(lc, sbx_condition_columns(expression))
	{
		if (strcmp(lfirst(lc), column) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("key mask of column \"%s\" reads %s",
							column, strcmp(lfirst(lc), "*") == 0 || strcmp(lfirst(lc), table) == 0
							? "the whole row" : psprintf("column \"%s\"", (char *) lfirst(lc))),
					 errdetail("A key mask is applied to every column tied to the key, where only the key's value is there: it may read that value alone.")));
	}
	(void) sbx_calls_walker(((ResTarget *) linitial(select->targetList))->val, &calls);
	foreach(lc, calls)
	{
		List	   *name = lfirst(lc);

		if (name == NIL || strcmp(strVal(llast(name)), "(subquery)") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("key mask of column \"%s\" uses %s", column,
							name == NIL ? "a clock value" : "a subquery"),
					 errdetail("A key mask must give the same output for the same input, in every clone.")));
	}
}

/*
 * On the source: every function of the names the key mask's expression
 * calls is immutable, but current_setting (which reads the masking key).
 * An unqualified name is pg_catalog's, as the reader's search_path has it.
 */
void
sbx_check_key_mask_functions(PGconn *conn, const char *source, const char *expression,
							 const char *target)
{
	SelectStmt *select = sbx_parse_expression(expression, "key mask");
	List	   *calls = NIL;
	ListCell   *lc;

	(void) sbx_calls_walker(((ResTarget *) linitial(select->targetList))->val, &calls);
	foreach(lc, calls)
	{
		List	   *name = lfirst(lc);
		const char *params[2];
		PGresult   *res;

		if (name == NIL)
			continue;
		params[0] = list_length(name) > 1 ? strVal(list_nth(name, list_length(name) - 2)) : "pg_catalog";
		params[1] = strVal(llast(name));
		if (strcmp(params[0], "pg_catalog") == 0 && strcmp(params[1], "current_setting") == 0)
			continue;
		res = sbx_remote_exec(conn,
							  "SELECT p.oid::pg_catalog.regprocedure::pg_catalog.text, p.provolatile"
							  "  FROM pg_catalog.pg_proc p"
							  "  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace"
							  " WHERE n.nspname OPERATOR(pg_catalog.=) $1 AND p.proname OPERATOR(pg_catalog.=) $2"
							  "   AND p.provolatile OPERATOR(pg_catalog.<>) 'i'"
							  " ORDER BY 1 LIMIT 1",
							  2, params, PGRES_TUPLES_OK,
							  psprintf("could not read source \"%s\"", source));
		if (PQntuples(res) > 0)
		{
			char	   *func = pstrdup(PQgetvalue(res, 0, 0));
			bool		is_volatile = PQgetvalue(res, 0, 1)[0] == 'v';

			PQclear(res);
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("key mask \"%s\" calls %s function %s", target,
							is_volatile ? "volatile" : "stable", func),
					 errdetail("A key mask must give the same output for the same input, in every clone: it may call immutable functions, and current_setting() for the masking key.")));
		}
		PQclear(res);
	}
}

/* The length of the column reference at 'p': names, quoted or not, and dots. */
static int
sbx_column_ref_length(const char *p)
{
	const char *start = p;

	for (;;)
	{
		if (*p == '"')
		{
			for (p++; *p && !(p[0] == '"' && p[1] != '"'); p += (*p == '"') ? 2 : 1)
				;
			if (*p)
				p++;
		}
		else
			while (*p && (isalnum((unsigned char) *p) || *p == '_' || *p == '$' || IS_HIGHBIT_SET(*p)))
				p++;
		{
			const char *q = p;

			while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')
				q++;
			if (*q != '.')
				break;
			q++;
			while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')
				q++;
			p = q;
		}
	}
	return p - start;
}

/*
 * A key mask's expression over another column: each of its column
 * references (every one of which names the masked column, as
 * sbx_check_key_mask_expression has it) written as 'column', quoted for
 * the source.  The expression stays as the server plans it best, with no
 * subquery per row.
 */
char *
sbx_key_mask_of_column(const char *expression, const char *column)
{
	List	   *stmts = sbx_raw_parse_expression(expression);
	SelectStmt *select = (SelectStmt *) ((RawStmt *) linitial(stmts))->stmt;
	List	   *locations = NIL;
	StringInfoData buf;
	int			done = 0;
	ListCell   *lc;

	(void) sbx_column_locations_walker(((ResTarget *) linitial(select->targetList))->val,
									   &locations);
	list_sort(locations, list_int_cmp);
	initStringInfo(&buf);
	foreach(lc, locations)
	{
		int			at = lfirst_int(lc) - SBX_EXPR_OFFSET;

		if (at < done || at >= (int) strlen(expression))
			elog(ERROR, "could not read key mask \"%s\"", expression);
		appendBinaryStringInfo(&buf, expression + done, at - done);
		appendStringInfoString(&buf, sbx_remote_quote_ident(column));
		done = at + sbx_column_ref_length(expression + at);
	}
	appendStringInfoString(&buf, expression + done);

	/* every column reference of the result is the column, by its name */
	foreach(lc, sbx_condition_columns(buf.data))
	{
		if (strcmp(lfirst(lc), column) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("key mask \"%s\" cannot be applied to column \"%s\"", expression, column),
					 errdetail("Its column references do not read as names alone.")));
	}
	return buf.data;
}

/*
 * On the source: the table of key mask 'target' is at the top of its
 * inheritance tree, where its keys tie it (sbx_expand_key_masks): a key
 * mask of a partition or a child would leave its siblings' values real.
 */
void
sbx_check_key_mask_table(PGconn *conn, const char *source, const char *schema,
						 const char *table, const char *target)
{
	const char *params[2] = {schema, table};
	PGresult   *res;
	bool		child;

	res = sbx_remote_exec(conn,
						  "SELECT EXISTS (SELECT FROM pg_catalog.pg_inherits i WHERE i.inhrelid = c.oid)"
						  "  FROM pg_catalog.pg_class c"
						  "  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
						  " WHERE n.nspname = $1 AND c.relname = $2",
						  2, params, PGRES_TUPLES_OK,
						  psprintf("could not read source \"%s\"", source));
	child = PQntuples(res) == 1 && PQgetvalue(res, 0, 0)[0] == 't';
	PQclear(res);
	if (child)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("key mask \"%s\" of source \"%s\" is of a partition or an inheritance child",
						target, source),
				 errdetail("A key mask covers the column in every partition and child of its table, and every column its keys tie to it."),
				 errhint("Set it on the table at the top.")));
}

/* ------------------------------------------------------------------------
 * At each clone: the columns each key mask covers
 * ------------------------------------------------------------------------
 */

/*
 * A column of the source, as the keys tie them: of a table at the top of
 * its inheritance tree (a partition's or a child's keys tie its parent's
 * column, which a mask covers with its partitions and children).
 */
typedef struct SbxKeyColumn
{
	char	   *schema;
	char	   *table;
	char	   *column;
	List	   *tied;			/* SbxKeyTie */
	const SbxMaskRule *mask;	/* the key mask that reached it, if any */
} SbxKeyColumn;

/* a tie to another column, by a key or a relationship */
typedef struct SbxKeyTie
{
	SbxKeyColumn *to;
	const SbxSubsetRule *conditional;	/* a relationship with a condition */
} SbxKeyTie;

static SbxKeyColumn *
sbx_key_column(List **columns, const char *schema, const char *table, const char *column)
{
	SbxKeyColumn *col;
	ListCell   *lc;

	foreach(lc, *columns)
	{
		col = lfirst(lc);
		if (strcmp(col->schema, schema) == 0 && strcmp(col->table, table) == 0 &&
			strcmp(col->column, column) == 0)
			return col;
	}
	col = palloc0(sizeof(SbxKeyColumn));
	col->schema = pstrdup(schema);
	col->table = pstrdup(table);
	col->column = pstrdup(column);
	*columns = lappend(*columns, col);
	return col;
}

static void
sbx_tie(List **columns, const char *s1, const char *t1, const char *c1,
		const char *s2, const char *t2, const char *c2, const SbxSubsetRule *conditional)
{
	SbxKeyColumn *a = sbx_key_column(columns, s1, t1, c1);
	SbxKeyColumn *b = sbx_key_column(columns, s2, t2, c2);
	SbxKeyTie  *ab = palloc(sizeof(SbxKeyTie));
	SbxKeyTie  *ba = palloc(sizeof(SbxKeyTie));

	ab->to = b;
	ab->conditional = conditional;
	ba->to = a;
	ba->conditional = conditional;
	a->tied = lappend(a->tied, ab);
	b->tied = lappend(b->tied, ba);
}

/*
 * The columns the source's foreign keys and the relationships tie, each
 * with its ties (SbxKeyColumn).
 */
static List *
sbx_key_ties(SbxMasking *m, List *subsets)
{
	List	   *columns = NIL;
	PGresult   *res;
	ListCell   *lc;

	/*
	 * Every foreign key, each end named by the table at the top of its
	 * inheritance tree (a partition or a child has its parent's column
	 * names), but those of system schemas (other sessions' temporary
	 * tables): no clone copies them.
	 */
	res = sbx_reader_exec(m,
						  "WITH RECURSIVE up(relid, root) AS ("
						  "  SELECT c.oid, c.oid FROM pg_catalog.pg_class c"
						  "   WHERE c.relkind IN ('r', 'p')"
						  "     AND NOT EXISTS (SELECT FROM pg_catalog.pg_inherits i WHERE i.inhrelid = c.oid)"
						  "  UNION ALL"
						  "  SELECT i.inhrelid, up.root FROM pg_catalog.pg_inherits i"
						  "    JOIN up ON i.inhparent = up.relid)"
						  " SELECT DISTINCT fn.nspname, fc.relname, fa.attname, tn.nspname, tc.relname, ta.attname"
						  "  FROM pg_catalog.pg_constraint k,"
						  "       LATERAL ROWS FROM (pg_catalog.unnest(k.conkey), pg_catalog.unnest(k.confkey)) u(c, f)"
						  "  JOIN pg_catalog.pg_attribute fa ON fa.attnum = u.c"
						  "  JOIN pg_catalog.pg_attribute ta ON ta.attnum = u.f,"
						  "       up fu, pg_catalog.pg_class fc, pg_catalog.pg_namespace fn,"
						  "       up tu, pg_catalog.pg_class tc, pg_catalog.pg_namespace tn"
						  " WHERE k.contype = 'f' AND k.conparentid = 0"
						  "   AND fa.attrelid = k.conrelid AND ta.attrelid = k.confrelid"
						  "   AND fu.relid = k.conrelid AND fc.oid = fu.root AND fn.oid = fc.relnamespace"
						  "   AND tu.relid = k.confrelid AND tc.oid = tu.root AND tn.oid = tc.relnamespace"
						  "   AND fn.nspname !~ '^pg_' AND fn.nspname <> 'information_schema'"
						  "   AND tn.nspname !~ '^pg_' AND tn.nspname <> 'information_schema'"
						  " ORDER BY 1, 2, 3, 4, 5, 6",
						  0, NULL, PGRES_TUPLES_OK);
	for (int i = 0; i < PQntuples(res); i++)
		sbx_tie(&columns, PQgetvalue(res, i, 0), PQgetvalue(res, i, 1), PQgetvalue(res, i, 2),
				PQgetvalue(res, i, 3), PQgetvalue(res, i, 4), PQgetvalue(res, i, 5), NULL);
	PQclear(res);
	foreach(lc, subsets)
	{
		SbxSubsetRule *rule = lfirst(lc);
		ListCell   *l1,
				   *l2;

		if (!rule->relation)
			continue;
		forboth(l1, rule->columns, l2, rule->ref_columns)
			sbx_tie(&columns, rule->schema, rule->table, lfirst(l1),
					rule->ref_schema, rule->ref_table, lfirst(l2),
					rule->condition ? rule : NULL);
	}
	return columns;
}

pg_noreturn static void
sbx_key_masks_meet(SbxMasking *m, const SbxMaskRule *a, const SbxMaskRule *b)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("key masks \"%s\" and \"%s\" of source \"%s\" mask columns that keys tie together",
					a->target, b->target, m->source),
			 errdetail("One key mask covers every column tied to its own."),
			 errhint("Remove one of the two rules with unmask().")));
}

/*
 * Column 'next', reached by key mask 'rule' through 'tie': it may be
 * reached by no other key mask, masked by no other rule, and not through
 * a relationship with a condition.  Returns its mask rule.
 */
static SbxMaskRule *
sbx_key_mask_reach(SbxMasking *m, const SbxMaskRule *rule, const SbxKeyTie *tie,
				   List *masks)
{
	SbxKeyColumn *next = tie->to;
	SbxMaskRule *added;
	ListCell   *lm;

	/*
	 * A column a relationship ties only where its condition holds
	 * (commentable_id, to posts where commentable_type = 'Post') holds other
	 * tables' keys in its other rows: one mask of it would break their
	 * references.
	 */
	if (tie->conditional)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("key mask \"%s\" of source \"%s\" reaches column \"%s\" of %s through relationship \"%s\", which has a condition",
						rule->target, m->source, next->column,
						quote_qualified_identifier(next->schema, next->table),
						tie->conditional->target),
				 errdetail("The column's other rows refer to other tables, whose keys this mask does not mask."),
				 errhint("Remove the key mask, or the relationship.")));
	if (next->mask != NULL)
		sbx_key_masks_meet(m, next->mask, rule);
	foreach(lm, masks)
	{
		SbxMaskRule *other = lfirst(lm);

		if (other != rule && strcmp(other->schema, next->schema) == 0 &&
			strcmp(other->table, next->table) == 0 &&
			strcmp(other->column, next->column) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("masking rule \"%s\" of source \"%s\" masks a column that key mask \"%s\" covers",
							other->target, m->source, rule->target),
					 errdetail("A key mask covers every column tied to its own, with its own expression."),
					 errhint("Remove one of the two rules with unmask().")));
	}
	added = palloc0(sizeof(SbxMaskRule));
	added->schema = next->schema;
	added->table = next->table;
	added->column = next->column;
	added->target = psprintf("%s.%s", quote_qualified_identifier(next->schema, next->table),
							 quote_identifier(next->column));
	/* the key's expression, over this column's value */
	added->expression = sbx_key_mask_of_column(rule->expression, next->column);
	added->trusted = rule->trusted;
	added->key = true;
	added->key_of = rule->target;
	return added;
}

/*
 * The mask rules a clone's key masks add: for each key mask, one for every
 * other column that the source's foreign keys and the relationships tie
 * to its column, transitively, with the key mask's expression over that
 * column's value.  A column that two key masks reach, or that a key mask
 * reaches and another rule masks, is an error.  'masks' are the rules as
 * set.
 */
List *
sbx_expand_key_masks(SbxMasking *m, List *masks, List *subsets)
{
	List	   *columns;
	List	   *derived = NIL;
	ListCell   *lc;
	bool		any = false;

	foreach(lc, masks)
		any |= ((SbxMaskRule *) lfirst(lc))->key;
	if (!any)
		return NIL;
	columns = sbx_key_ties(m, subsets);

	/* each key mask's columns, walked from its own */
	foreach(lc, masks)
	{
		SbxMaskRule *rule = lfirst(lc);
		SbxKeyColumn *start;
		List	   *queue;

		if (!rule->key)
			continue;
		start = sbx_key_column(&columns, rule->schema, rule->table, rule->column);
		if (start->mask != NULL && start->mask != rule)
			sbx_key_masks_meet(m, start->mask, rule);
		start->mask = rule;
		queue = list_make1(start);
		while (queue != NIL)
		{
			SbxKeyColumn *col = linitial(queue);
			ListCell   *lt;

			queue = list_delete_first(queue);
			foreach(lt, col->tied)
			{
				SbxKeyTie  *tie = lfirst(lt);

				if (tie->to->mask == rule)
					continue;
				derived = lappend(derived, sbx_key_mask_reach(m, rule, tie, masks));
				tie->to->mask = rule;
				queue = lappend(queue, tie->to);
			}
		}
	}
	return derived;
}

/* The targets of derived key masks, for a comparison. */
char *
sbx_key_mask_targets(List *derived)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, derived)
	{
		SbxMaskRule *rule = lfirst(lc);

		appendStringInfo(&buf, "%s <- %s\n", rule->target, rule->key_of);
	}
	return buf.data;
}
