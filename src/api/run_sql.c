/*-------------------------------------------------------------------------
 *
 * run_sql.c
 *	  pgsandbox.run_sql(): run SQL in a sandbox as its role and return what
 *	  each statement did, as JSON an agent can read.
 *
 * The SQL goes over a fresh libpq login as the sandbox role
 * (sandbox_conn.c), in one simple-protocol query, so it may hold several
 * statements.  Rows are read one at a time (single-row mode): at most
 * row_limit of each statement's rows are kept, the rest are counted and
 * dropped.  statement_timeout bounds every statement; a cancel of the
 * caller cancels the sandbox's query too.  With read_only, the SQL runs in
 * a read-only transaction that is rolled back (and the session defaults to
 * read-only transactions, should the SQL end that one).
 *
 * The result:
 *	{"results": [{"command": "INSERT 0 1", "row_count": 1,
 *				  "columns": [{"name": "id", "type": "integer"}, ...],
 *				  "rows": [[1, "a"], ...], "truncated": false}, ...],
 *	 "error": null | {"sqlstate": "42P01", "message": ..., "detail": ...,
 *					  "hint": ..., "position": 15, "statement": 2}}
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "libpq-fe.h"
#include "libpq/libpq-be-fe-helpers.h"
#include "miscadmin.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(pgsandbox_run_sql);

#define SBX_ROW_LIMIT_MAX 1000

/* one statement's outcome */
typedef struct SbxStatement
{
	char	   *command;
	int64		row_count;
	int			ncolumns;
	char	  **colnames;
	Oid		   *coltypes;
	List	   *rows;			/* of char **, NULL for SQL NULL */
	bool		truncated;
} SbxStatement;

typedef struct SbxRunResult
{
	List	   *statements;
	PGresult   *error;			/* the failing result, or NULL */
	int			error_statement;	/* 1-based */
} SbxRunResult;

/* Run a command that must succeed (SET, BEGIN, ROLLBACK). */
static void
sbx_remote_command(PGconn *conn, const char *sql)
{
	PGresult   *res = libpqsrv_exec(conn, sql, PG_WAIT_EXTENSION);

	if (PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		char	   *msg = sbx_remote_error(conn, res);

		PQclear(res);
		ereport(ERROR,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
				 errmsg("could not prepare the sandbox session"),
				 errdetail_internal("%s", msg)));
	}
	PQclear(res);
}

static void
sbx_take_columns(SbxStatement *st, const PGresult *res)
{
	st->ncolumns = PQnfields(res);
	st->colnames = palloc0(sizeof(char *) * Max(st->ncolumns, 1));
	st->coltypes = palloc0(sizeof(Oid) * Max(st->ncolumns, 1));
	for (int i = 0; i < st->ncolumns; i++)
	{
		st->colnames[i] = pstrdup(PQfname(res, i));
		st->coltypes[i] = PQftype(res, i);
	}
}

/*
 * The next result, waiting with the caller's interrupts served.  A
 * statement still running a second past its timeout is cancelled from here:
 * the SQL may have turned statement_timeout off.
 */
/*
 * Wait until the connection has input, serving interrupts; once the
 * statement's deadline has passed, cancel it (once).  Returns false if the
 * connection broke.
 */
static bool
sbx_wait_input(PGconn *conn, TimestampTz *deadline, bool *cancelled)
{
	long		ms = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), *deadline);
	int			rc;

	if (ms <= 0)
	{
		if (!*cancelled)
		{
			PGcancel   *cancel = PQgetCancel(conn);
			char		errbuf[256];

			if (cancel)
			{
				(void) PQcancel(cancel, errbuf, sizeof(errbuf));
				PQfreeCancel(cancel);
			}
			*cancelled = true;
		}
		ms = 1000;
	}
	rc = WaitLatchOrSocket(MyLatch,
						   WL_EXIT_ON_PM_DEATH | WL_LATCH_SET |
						   WL_SOCKET_READABLE | WL_TIMEOUT,
						   PQsocket(conn), ms, PG_WAIT_EXTENSION);
	if (rc & WL_LATCH_SET)
		ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	if ((rc & WL_SOCKET_READABLE) && PQconsumeInput(conn) == 0)
		return false;
	return true;
}

/* The next result of the query, waiting as sbx_wait_input does. */
static PGresult *
sbx_next_result(PGconn *conn, TimestampTz *deadline, bool *cancelled)
{
	while (PQisBusy(conn))
	{
		if (!sbx_wait_input(conn, deadline, cancelled))
			break;				/* PQgetResult reports the broken connection */
	}
	return PQgetResult(conn);
}

/*
 * Read and throw away the rows of a COPY TO STDOUT, serving interrupts and
 * the statement's deadline while they come.
 */
static void
sbx_discard_copy(PGconn *conn, TimestampTz *deadline, bool *cancelled)
{
	for (;;)
	{
		char	   *buf;
		int			n = PQgetCopyData(conn, &buf, 1);

		if (n > 0)
		{
			PQfreemem(buf);
			continue;
		}
		if (n < 0)
			return;				/* done, or failed: the next result says */
		if (!sbx_wait_input(conn, deadline, cancelled))
			return;
	}
}

/*
 * Read every result of the query sent, keeping at most row_limit rows of
 * each statement.
 */
static void
sbx_collect(PGconn *conn, int row_limit, int timeout_ms, SbxRunResult *out)
{
	SbxStatement *st = NULL;
	PGresult   *res;
	int			nstatement = 0;
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   timeout_ms + 1000);
	bool		cancelled = false;

	while ((res = sbx_next_result(conn, &deadline, &cancelled)) != NULL)
	{
		ExecStatusType status = PQresultStatus(res);

		/* each statement has its own time */
		if (status != PGRES_SINGLE_TUPLE)
			deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												   timeout_ms + 1000);

		if (st == NULL && status != PGRES_EMPTY_QUERY)
		{
			st = palloc0(sizeof(SbxStatement));
			nstatement++;
		}
		switch (status)
		{
			case PGRES_SINGLE_TUPLE:
				if (st->colnames == NULL)
					sbx_take_columns(st, res);
				if (st->row_count < row_limit)
				{
					char	  **row = palloc0(sizeof(char *) * Max(st->ncolumns, 1));

					for (int i = 0; i < st->ncolumns; i++)
						row[i] = PQgetisnull(res, 0, i) ? NULL : pstrdup(PQgetvalue(res, 0, i));
					st->rows = lappend(st->rows, row);
				}
				else
					st->truncated = true;
				st->row_count++;
				break;
			case PGRES_TUPLES_OK:
				if (st->colnames == NULL)
					sbx_take_columns(st, res);
				st->command = pstrdup(PQcmdStatus(res));
				out->statements = lappend(out->statements, st);
				st = NULL;
				break;
			case PGRES_COMMAND_OK:
				st->command = pstrdup(PQcmdStatus(res));
				st->row_count = PQcmdTuples(res)[0] ? strtoi64(PQcmdTuples(res), NULL, 10) : 0;
				out->statements = lappend(out->statements, st);
				st = NULL;
				break;
			case PGRES_EMPTY_QUERY:
				break;
			case PGRES_COPY_IN:
				/* no data to give it: end the copy with an error */
				(void) PQputCopyEnd(conn, "run_sql does not support COPY FROM STDIN");
				break;
			case PGRES_COPY_OUT:
				{
					sbx_discard_copy(conn, &deadline, &cancelled);
					st->command = pstrdup(PQcmdStatus(res));
					out->statements = lappend(out->statements, st);
					st = NULL;
				}
				break;
			default:
				/* an error: later statements do not run */
				if (out->error == NULL)
				{
					out->error = res;
					out->error_statement = nstatement;
					res = NULL;
				}
				st = NULL;
				break;
		}
		PQclear(res);
		CHECK_FOR_INTERRUPTS();
	}
}

/* Names of the column types, looked up in the sandbox. */
static List *
sbx_type_names(PGconn *conn, SbxRunResult *out, Oid **oids_out)
{
	StringInfoData q;
	ListCell   *lc;
	int			n = 0;
	PGresult   *res;
	List	   *names = NIL;
	Oid		   *oids;
	int			max = 0;

	foreach(lc, out->statements)
		max += ((SbxStatement *) lfirst(lc))->ncolumns;
	oids = palloc0(sizeof(Oid) * Max(max, 1));
	initStringInfo(&q);
	appendStringInfoString(&q, "SELECT t.oid, pg_catalog.format_type(t.oid, NULL)"
						   " FROM pg_catalog.pg_type t WHERE t.oid IN (0");
	foreach(lc, out->statements)
	{
		SbxStatement *st = lfirst(lc);

		for (int i = 0; i < st->ncolumns; i++)
			appendStringInfo(&q, ",%u", st->coltypes[i]);
	}
	appendStringInfoChar(&q, ')');

	if (PQtransactionStatus(conn) != PQTRANS_IDLE)
		sbx_remote_command(conn, "ROLLBACK");
	res = libpqsrv_exec(conn, q.data, PG_WAIT_EXTENSION);
	if (PQresultStatus(res) == PGRES_TUPLES_OK)
	{
		for (int i = 0; i < PQntuples(res) && n < max; i++)
		{
			oids[n++] = (Oid) strtoul(PQgetvalue(res, i, 0), NULL, 10);
			names = lappend(names, pstrdup(PQgetvalue(res, i, 1)));
		}
	}
	PQclear(res);
	*oids_out = oids;
	return names;
}

static const char *
sbx_type_name(Oid type, List *names, const Oid *oids)
{
	for (int i = 0; i < list_length(names); i++)
	{
		if (oids[i] == type)
			return list_nth(names, i);
	}
	return psprintf("%u", type);
}

/* A value as JSON: numbers, booleans and JSON stay themselves. */
static void
sbx_json_value(StringInfo buf, const char *value, Oid type)
{
	if (value == NULL)
	{
		appendStringInfoString(buf, "null");
		return;
	}
	switch (type)
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case OIDOID:
			appendStringInfoString(buf, value);
			return;
		case FLOAT4OID:
		case FLOAT8OID:
		case NUMERICOID:
			/* NaN and the infinities are no JSON numbers */
			if (strspn(value, "0123456789.-+eE") == strlen(value))
			{
				appendStringInfoString(buf, value);
				return;
			}
			break;
		case BOOLOID:
			appendStringInfoString(buf, value[0] == 't' ? "true" : "false");
			return;
		case JSONOID:
		case JSONBOID:
			appendStringInfoString(buf, value);
			return;
		default:
			break;
	}
	escape_json(buf, value);
}

static void
sbx_json_field(StringInfo buf, const char *name, const char *value)
{
	escape_json(buf, name);
	appendStringInfoChar(buf, ':');
	if (value)
		escape_json(buf, value);
	else
		appendStringInfoString(buf, "null");
}

static char *
sbx_result_json(PGconn *conn, SbxRunResult *out)
{
	StringInfoData buf;
	ListCell   *lc;
	List	   *names;
	Oid		   *oids;
	bool		first = true;

	names = sbx_type_names(conn, out, &oids);
	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"results\":[");
	foreach(lc, out->statements)
	{
		SbxStatement *st = lfirst(lc);
		ListCell   *lr;

		if (!first)
			appendStringInfoChar(&buf, ',');
		first = false;
		appendStringInfoChar(&buf, '{');
		sbx_json_field(&buf, "command", st->command);
		appendStringInfo(&buf, ",\"row_count\":" INT64_FORMAT ",\"columns\":[", st->row_count);
		for (int i = 0; i < st->ncolumns; i++)
		{
			appendStringInfoString(&buf, i ? ",{" : "{");
			sbx_json_field(&buf, "name", st->colnames[i]);
			appendStringInfoChar(&buf, ',');
			sbx_json_field(&buf, "type", sbx_type_name(st->coltypes[i], names, oids));
			appendStringInfoChar(&buf, '}');
		}
		appendStringInfoString(&buf, "],\"rows\":[");
		foreach(lr, st->rows)
		{
			char	  **row = lfirst(lr);

			if (lr != list_head(st->rows))
				appendStringInfoChar(&buf, ',');
			appendStringInfoChar(&buf, '[');
			for (int i = 0; i < st->ncolumns; i++)
			{
				if (i)
					appendStringInfoChar(&buf, ',');
				sbx_json_value(&buf, row[i], st->coltypes[i]);
			}
			appendStringInfoChar(&buf, ']');
		}
		appendStringInfo(&buf, "],\"truncated\":%s}", st->truncated ? "true" : "false");
	}
	appendStringInfoString(&buf, "],\"error\":");
	if (out->error == NULL)
		appendStringInfoString(&buf, "null");
	else
	{
		const PGresult *e = out->error;
		const char *pos = PQresultErrorField(e, PG_DIAG_STATEMENT_POSITION);
		const char *msg = PQresultErrorField(e, PG_DIAG_MESSAGE_PRIMARY);

		appendStringInfoChar(&buf, '{');
		sbx_json_field(&buf, "sqlstate", PQresultErrorField(e, PG_DIAG_SQLSTATE));
		appendStringInfoChar(&buf, ',');
		sbx_json_field(&buf, "message", msg ? msg : PQresultErrorMessage(e));
		appendStringInfoChar(&buf, ',');
		sbx_json_field(&buf, "detail", PQresultErrorField(e, PG_DIAG_MESSAGE_DETAIL));
		appendStringInfoChar(&buf, ',');
		sbx_json_field(&buf, "hint", PQresultErrorField(e, PG_DIAG_MESSAGE_HINT));
		appendStringInfo(&buf, ",\"position\":%s,\"statement\":%d}",
						 pos ? pos : "null", out->error_statement);
	}
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

/* The timeout in whole milliseconds, checked. */
static int
sbx_timeout_ms(Interval *timeout)
{
	int64		usecs = timeout->time +
		((int64) timeout->day + (int64) timeout->month * DAYS_PER_MONTH) * USECS_PER_DAY;

	if (usecs < 1000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("timeout must be at least 1 millisecond")));
	if (usecs / 1000 > INT_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("timeout must be less than %d milliseconds", INT_MAX)));
	return (int) (usecs / 1000);
}

/*
 * run_sql(name text, sql text, row_limit integer, read_only boolean,
 *		   timeout interval) RETURNS jsonb
 */
Datum
pgsandbox_run_sql(PG_FUNCTION_ARGS)
{
	const char *const argnames[] = {"sandbox name", "sql", "row_limit", "read_only", "timeout"};
	char	   *name;
	char	   *sql;
	int			row_limit;
	bool		read_only;
	int			timeout_ms;
	char	   *source;
	PGconn	   *conn;
	SbxRunResult out;
	char	   *volatile json = NULL;

	for (int i = 0; i < lengthof(argnames); i++)
	{
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s must not be null", argnames[i])));
	}
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	sql = text_to_cstring(PG_GETARG_TEXT_PP(1));
	row_limit = PG_GETARG_INT32(2);
	read_only = PG_GETARG_BOOL(3);
	timeout_ms = sbx_timeout_ms(PG_GETARG_INTERVAL_P(4));
	if (row_limit < 0 || row_limit > SBX_ROW_LIMIT_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("row_limit must be between 0 and %d", SBX_ROW_LIMIT_MAX)));

	conn = sbx_sandbox_connect(name, &source);
	memset(&out, 0, sizeof(out));
	PG_TRY();
	{
		sbx_remote_command(conn, psprintf("SET statement_timeout = %d", timeout_ms));
		if (read_only)
		{
			/* the session default too, should the SQL end the transaction */
			sbx_remote_command(conn, "SET default_transaction_read_only = on");
			sbx_remote_command(conn, "BEGIN TRANSACTION READ ONLY");
		}
		if (!PQsendQuery(conn, sql))
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("could not send the SQL to sandbox \"%s\"", name),
					 errdetail_internal("%s", PQerrorMessage(conn))));
		(void) PQsetSingleRowMode(conn);
		sbx_collect(conn, row_limit, timeout_ms, &out);
		if (read_only && PQtransactionStatus(conn) != PQTRANS_IDLE)
			sbx_remote_command(conn, "ROLLBACK");
		json = sbx_result_json(conn, &out);
	}
	PG_CATCH();
	{
		/* the caller was cancelled, or the session broke: stop the query */
		PGcancel   *cancel = PQgetCancel(conn);
		char		errbuf[256];

		if (cancel)
		{
			(void) PQcancel(cancel, errbuf, sizeof(errbuf));
			PQfreeCancel(cancel);
		}
		if (out.error)
			PQclear(out.error);
		libpqsrv_disconnect(conn);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (out.error)
		PQclear(out.error);
	libpqsrv_disconnect(conn);

	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(json)));
}
