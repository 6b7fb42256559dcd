/*-------------------------------------------------------------------------
 *
 * suggest_masks.c
 *	  pgsandbox.suggest_masks(): the columns of a source that look like they
 *	  hold personal data, each with an SQL expression that could replace its
 *	  values in a sandbox.
 *
 * Over one connection to the source, in a read-only repeatable-read
 * transaction, one catalog query lists the columns of the ordinary and
 * partitioned tables the source's role may read, leaving out the system
 * schemas, whatever belongs to an extension, partitions (their partitioned
 * table stands for them), and the columns mask() refuses: generated ones
 * and those a foreign key uses.  What each column's name, type and values
 * say it holds is read by pii_detect.c, and its suggested mask made by
 * pii_masks.c.
 *
 * The sampled values are only looked at here, never shown: a message says
 * how many looked like what, not what they were.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "libpq-fe.h"
#include "libpq/libpq-be-fe-helpers.h"
#include "miscadmin.h"
#include "pii.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_roles.h"
#include "sbx_shmem.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"
#include "utils/wait_event.h"

PG_FUNCTION_INFO_V1(pgsandbox_suggest_masks);

#define SBX_MASK_COLS		3

/* how much of a column is sampled */
#define SBX_SAMPLE_ROWS		200
#define SBX_SAMPLE_CHARS	256 /* of a text value: longer ones match no shape */
#define SBX_SAMPLE_DOC_CHARS 4096	/* of a json document */

/*
 * The columns of the source's tables, as the catalog query reads them:
 * name parts, the relation and column as the source quotes them (for the
 * sampling query), the column's type as format_type prints it there, and
 * the name, category and type modifier of its base type (the type itself,
 * or what a domain is over).
 */
static const char sbx_columns_query[] =
"SELECT n.nspname, c.relname, a.attname, c.relkind,"
"       pg_catalog.format('%I.%I', n.nspname, c.relname),"
"       pg_catalog.quote_ident(a.attname),"
"       pg_catalog.format_type(a.atttypid, a.atttypmod),"
"       b.typname, t.typcategory,"
"       CASE WHEN t.typtype OPERATOR(pg_catalog.=) 'd' THEN t.typtypmod ELSE a.atttypmod END,"
"       a.attnotnull,"
"       EXISTS (SELECT FROM pg_catalog.pg_index i"
"                WHERE i.indrelid OPERATOR(pg_catalog.=) c.oid AND i.indisunique"
"                  AND a.attnum OPERATOR(pg_catalog.=) ANY (i.indkey)),"
"       c.oid"
"  FROM pg_catalog.pg_class c"
"  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
"  JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) c.oid"
"  JOIN pg_catalog.pg_type t ON t.oid OPERATOR(pg_catalog.=) a.atttypid"
"  JOIN pg_catalog.pg_type b ON b.oid OPERATOR(pg_catalog.=)"
"       CASE WHEN t.typtype OPERATOR(pg_catalog.=) 'd' THEN t.typbasetype ELSE t.oid END"
" WHERE c.relkind OPERATOR(pg_catalog.=) ANY ('{r,p}')"
"   AND NOT c.relispartition"
"   AND NOT pg_catalog.starts_with(n.nspname::pg_catalog.text, 'pg_')"
"   AND n.nspname OPERATOR(pg_catalog.<>) 'information_schema'"
"   AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped"
"   AND a.attgenerated OPERATOR(pg_catalog.=) ''"
"   AND NOT EXISTS (SELECT FROM pg_catalog.pg_constraint k"
"                    WHERE k.contype OPERATOR(pg_catalog.=) 'f'"
"                      AND ((k.conrelid OPERATOR(pg_catalog.=) c.oid"
"                            AND a.attnum OPERATOR(pg_catalog.=) ANY (k.conkey))"
"                        OR (k.confrelid OPERATOR(pg_catalog.=) c.oid"
"                            AND a.attnum OPERATOR(pg_catalog.=) ANY (k.confkey))))"
"   AND pg_catalog.has_table_privilege(c.oid, 'SELECT')"
"   AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend d"
"                    WHERE d.deptype OPERATOR(pg_catalog.=) 'e'"
"                      AND ((d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"
"                            AND d.objid OPERATOR(pg_catalog.=) c.oid)"
"                        OR (d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass"
"                            AND d.objid OPERATOR(pg_catalog.=) n.oid)))"
" ORDER BY n.nspname, c.relname, a.attnum";

#define SBX_COLUMNS_QUERY_COLS 13

/* what a reason says of each SbxShape, and the kind of column it makes */
static const struct
{
	const char *one;			/* "the one sampled value looks like ..." */
	const char *many;			/* "n of m sampled values look like ..." */
	SbxPii		kind;
}			sbx_shapes[SBX_NUM_SHAPES] = {
	[SBX_SHAPE_EMAIL] = {"an email address", "email addresses", SBX_PII_EMAIL},
	[SBX_SHAPE_IPV4] = {"an IPv4 address", "IPv4 addresses", SBX_PII_IP},
	[SBX_SHAPE_IBAN] = {"an IBAN", "IBANs", SBX_PII_BANK},
	[SBX_SHAPE_CARD] = {"a card number", "card numbers", SBX_PII_CARD},
	[SBX_SHAPE_PHONE] = {"a phone number", "phone numbers", SBX_PII_PHONE},
};

/* a row of the result */
typedef struct SbxFinding
{
	char	   *target;
	char	   *reason;
	char	   *expression;
} SbxFinding;

/*
 * A finding for a column holding kind, allocated in result_cxt, or NULL if
 * there is no mask for it.  reason says why the column is reported.
 */
static SbxFinding *
sbx_make_finding(const SbxColumn *col, SbxPii kind, const char *reason,
				 MemoryContext result_cxt)
{
	SbxFinding *finding;
	StringInfoData expr;
	const char *natural;
	char	   *target;
	char	   *expression;

	initStringInfo(&expr);
	if (!sbx_build_mask(&expr, col, kind, &natural))
		return NULL;

	target = psprintf("%s.%s.%s", quote_identifier(col->nspname),
					  quote_identifier(col->relname),
					  quote_identifier(col->attname));
	if (natural != NULL && strcmp(natural, col->type) == 0)
		expression = expr.data;
	else if (strcmp(expr.data, "NULL") == 0 || strcmp(expr.data, "'{}'") == 0)
		expression = psprintf("%s::%s", expr.data, col->type);
	else
		expression = psprintf("(%s)::%s", expr.data, col->type);

	finding = MemoryContextAlloc(result_cxt, sizeof(SbxFinding));
	finding->target = MemoryContextStrdup(result_cxt, target);
	finding->reason = MemoryContextStrdup(result_cxt, reason);
	finding->expression = MemoryContextStrdup(result_cxt, expression);
	return finding;
}

/* The columns of the source's tables, from sbx_columns_query. */
static SbxColumn *
sbx_read_columns(PGconn *conn, const char *source, int *ncolumns)
{
	PGresult   *res = sbx_remote_exec(conn, sbx_columns_query, 0, NULL, PGRES_TUPLES_OK,
										  psprintf("could not read the columns of source \"%s\"",
												   source));
	SbxColumn  *columns;
	int			n;

	if (PQnfields(res) != SBX_COLUMNS_QUERY_COLS)
	{
		PQclear(res);
		elog(ERROR, "unexpected result of the column query on source \"%s\"", source);
	}
	n = PQntuples(res);
	columns = palloc0(sizeof(SbxColumn) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		SbxColumn  *col = &columns[i];

		col->nspname = pstrdup(PQgetvalue(res, i, 0));
		col->relname = pstrdup(PQgetvalue(res, i, 1));
		col->attname = pstrdup(PQgetvalue(res, i, 2));
		col->relkind = PQgetvalue(res, i, 3)[0];
		col->remote_rel = pstrdup(PQgetvalue(res, i, 4));
		col->remote_att = pstrdup(PQgetvalue(res, i, 5));
		col->type = pstrdup(PQgetvalue(res, i, 6));
		col->basetype = pstrdup(PQgetvalue(res, i, 7));
		col->category = PQgetvalue(res, i, 8)[0];
		col->typmod = atoi(PQgetvalue(res, i, 9));
		col->notnull = PQgetvalue(res, i, 10)[0] == 't';
		col->unique = PQgetvalue(res, i, 11)[0] == 't';
		col->relid = atooid(PQgetvalue(res, i, 12));
		col->sampled = true;
	}
	PQclear(res);
	*ncolumns = n;
	return columns;
}

/*
 * Sample a column's values: the shape most of them have, if at least half
 * of them have it, or -1.  For a document (json), whether at least half of
 * them hold an email address.  *nsampled and *nshaped say how many values
 * were read and how many had the shape.
 */
static int
sbx_sample_column(PGconn *conn, const char *source, const SbxColumn *col,
				  bool document, int *nsampled, int *nshaped)
{
	char	   *sql;
	PGresult   *res;
	int			counts[SBX_NUM_SHAPES] = {0};
	int			n;
	int			best = -1;

	/* a partitioned table's own rows are its partitions' */
	sql = psprintf("SELECT pg_catalog.left(%s::pg_catalog.text, %d) FROM %s%s"
				   " WHERE %s IS NOT NULL LIMIT %d",
				   col->remote_att,
				   document ? SBX_SAMPLE_DOC_CHARS : SBX_SAMPLE_CHARS + 1,
				   col->relkind == 'p' ? "" : "ONLY ", col->remote_rel,
				   col->remote_att, SBX_SAMPLE_ROWS);
	res = sbx_remote_exec(conn, sql, 0, NULL, PGRES_TUPLES_OK,
						  psprintf("could not sample column %s.%s of source \"%s\"",
								   col->remote_rel, col->remote_att, source));

	/* the values stay in the result, and go with it */
	n = PQntuples(res);
	for (int i = 0; i < n; i++)
	{
		const char *value = PQgetvalue(res, i, 0);

		if (document)
		{
			if (sbx_holds_email(value))
				counts[SBX_SHAPE_EMAIL]++;
		}
		else if (PQgetlength(res, i, 0) <= SBX_SAMPLE_CHARS)
		{
			int			shape = sbx_value_shape(value);

			if (shape >= 0)
				counts[shape]++;
		}
	}
	PQclear(res);

	for (int s = 0; s < SBX_NUM_SHAPES; s++)
	{
		if (counts[s] > 0 && counts[s] * 2 >= n && (best < 0 || counts[s] > counts[best]))
			best = s;
	}
	*nsampled = n;
	*nshaped = best >= 0 ? counts[best] : 0;
	return best;
}

/*
 * Look at one column; append what is found to *findings, in result_cxt.
 */
static void
sbx_check_column(PGconn *conn, const char *source, const SbxColumn *col,
				 bool people_table, MemoryContext result_cxt, List **findings)
{
	SbxTypeClass class = sbx_type_class(col);
	int			kind = sbx_match_name(col->attname, people_table);
	const char *reason = NULL;
	SbxFinding *finding;
	MemoryContext old;

	if (class == SBX_TYPE_NEVER)
		return;

	if (strcmp(col->basetype, "inet") == 0 && kind != SBX_PII_IP)
	{
		kind = SBX_PII_IP;
		reason = "type inet holds IP addresses";
	}
	else if (kind >= 0)
		reason = psprintf("name looks like %s", sbx_pii_info[kind].noun);
	else if ((class == SBX_TYPE_TEXT || class == SBX_TYPE_JSON) && col->sampled)
	{
		bool		document = (class == SBX_TYPE_JSON);
		int			nsampled;
		int			nshaped;
		int			shape = sbx_sample_column(conn, source, col, document,
											  &nsampled, &nshaped);

		if (shape < 0)
			return;
		kind = document ? SBX_PII_DOCUMENT : sbx_shapes[shape].kind;
		if (document && nsampled == 1)
			reason = "the one sampled document holds an email address";
		else if (document)
			reason = psprintf("%d of %d sampled documents hold email addresses",
							  nshaped, nsampled);
		else if (nsampled == 1)
			reason = psprintf("the one sampled value looks like %s",
							  sbx_shapes[shape].one);
		else
			reason = psprintf("%d of %d sampled values look like %s",
							  nshaped, nsampled, sbx_shapes[shape].many);
	}
	else
		return;

	finding = sbx_make_finding(col, (SbxPii) kind, reason, result_cxt);
	if (finding != NULL)
	{
		old = MemoryContextSwitchTo(result_cxt);
		*findings = lappend(*findings, finding);
		MemoryContextSwitchTo(old);
	}
}

/*
 * Sampling a table plans a query on it: the tables that pgsandbox may not
 * plan on (source_trust.c) are not sampled, their columns judged by name
 * and type alone, and a warning names them.
 */
static void
sbx_leave_untrusted_unsampled(PGconn *conn, const char *source, SbxColumn *columns,
							  int ncolumns)
{
	List	   *tables = NIL;
	List	   *untrusted;
	StringInfoData names;

	for (int i = 0; i < ncolumns; i++)
		tables = list_append_unique_oid(tables, columns[i].relid);
	untrusted = sbx_untrusted_tables(conn, source, sbx_source_trusted_owners(source), tables);
	if (untrusted == NIL)
		return;
	initStringInfo(&names);
	for (int i = 0; i < ncolumns; i++)
	{
		if (!list_member_oid(untrusted, columns[i].relid))
			continue;
		/* the columns of a table come together */
		if (i == 0 || columns[i - 1].relid != columns[i].relid)
			appendStringInfo(&names, "%s%s", names.len > 0 ? ", " : "", columns[i].remote_rel);
		columns[i].sampled = false;
	}
	ereport(WARNING,
			(errmsg("suggest_masks() did not sample %d table%s of source \"%s\": %s",
					list_length(untrusted), list_length(untrusted) == 1 ? "" : "s",
					source, names.data),
			 errdetail("Their owners, or code their indexes, statistics, constraints or column types run, are not trusted; their columns were judged by name and type alone."),
			 errhint("Trust their owners with pgsandbox.trust_owners() to have them sampled.")));
}

/*
 * The findings of a source, over its connection.
 */
static List *
sbx_find_personal_columns(PGconn *conn, const char *source)
{
	MemoryContext result_cxt = CurrentMemoryContext;
	MemoryContext column_cxt;
	SbxColumn  *columns;
	int			ncolumns;
	List	   *findings = NIL;
	bool		people_table = false;

	/* the system's operators and functions only, whatever the source says */
	sbx_source_read_begin(conn, psprintf("could not prepare the session on source \"%s\"",
										 source));

	columns = sbx_read_columns(conn, source, &ncolumns);
	sbx_leave_untrusted_unsampled(conn, source, columns, ncolumns);

	column_cxt = AllocSetContextCreate(CurrentMemoryContext,
									   "pgsandbox suggest_masks column",
									   ALLOCSET_SMALL_SIZES);
	for (int i = 0; i < ncolumns; i++)
	{
		const SbxColumn *col = &columns[i];
		MemoryContext old;

		CHECK_FOR_INTERRUPTS();
		MemoryContextReset(column_cxt);
		old = MemoryContextSwitchTo(column_cxt);

		/* the columns of a table come together */
		if (i == 0 || strcmp(columns[i - 1].remote_rel, col->remote_rel) != 0)
			people_table = sbx_is_people_table(col->relname);
		sbx_check_column(conn, source, col, people_table, result_cxt, &findings);
		MemoryContextSwitchTo(old);
	}
	MemoryContextDelete(column_cxt);

	/* the transaction only read; closing the connection ends it */
	return findings;
}

static int
sbx_finding_cmp(const ListCell *a, const ListCell *b)
{
	const SbxFinding *fa = lfirst(a);
	const SbxFinding *fb = lfirst(b);

	return strcmp(fa->target, fb->target);
}

/*
 * suggest_masks(source text)
 *	 RETURNS TABLE(target text, reason text, expression text)
 */
Datum
pgsandbox_suggest_masks(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *source;
	PGconn	   *conn;
	List	   *findings = NIL;
	ListCell   *lc;

	sbx_require_arg(fcinfo, 0, "source name");
	sbx_check_database();
	sbx_require_admin();
	source = text_to_cstring(PG_GETARG_TEXT_PP(0));

	InitMaterializedSRF(fcinfo, 0);

	conn = sbx_source_connect(source);
	PG_TRY();
	{
		findings = sbx_find_personal_columns(conn, source);
	}
	PG_FINALLY();
	{
		libpqsrv_disconnect(conn);
	}
	PG_END_TRY();

	list_sort(findings, sbx_finding_cmp);
	foreach(lc, findings)
	{
		SbxFinding *finding = lfirst(lc);
		Datum		values[SBX_MASK_COLS];
		bool		nulls[SBX_MASK_COLS] = {false, false, false};

		values[0] = CStringGetTextDatum(finding->target);
		values[1] = CStringGetTextDatum(finding->reason);
		values[2] = CStringGetTextDatum(finding->expression);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
