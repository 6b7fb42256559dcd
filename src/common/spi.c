/*-------------------------------------------------------------------------
 *
 * spi.c
 *	  How the lifecycle worker works on the catalog: its transactions, SPI
 *	  statements with text arguments, utility statements run as top-level
 *	  commands, the event log and random names and passwords.
 *
 * lifecycle.c, snapshot.c and pool.c build on these.  Each of their
 * operations starts and commits its own transactions, so that what one step
 * made is recorded before the next begins.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"
#include "parser/parser.h"
#include "pgstat.h"
#include "sbx_common.h"
#include "sbx_spi.h"
#include "tcop/tcopprot.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

/*
 * The memory context the caller of a lifecycle function works in.  A
 * transaction switches away from it and its commit leaves us in
 * TopMemoryContext; sbx_xact_commit switches back, and sbx_keep copies
 * results out of SPI's memory into it.
 */
MemoryContext sbx_outer_cxt = NULL;

char *
sbx_keep(const char *s)
{
	return s ? MemoryContextStrdup(sbx_outer_cxt, s) : NULL;
}

/* begin and end a worker transaction with SPI and a snapshot */
void
sbx_xact_begin(const char *activity)
{
	sbx_outer_cxt = CurrentMemoryContext;
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, activity);
}

void
sbx_xact_commit(void)
{
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(sbx_outer_cxt);
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * In a PG_CATCH block: take the error, abort the transaction, and return
 * the error data in the given (long enough lived) context.
 */
ErrorData *
sbx_catch_error(MemoryContext cxt)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	FlushErrorState();
	AbortCurrentTransaction();
	MemoryContextSwitchTo(cxt);
	return edata;
}

/*
 * Run step(arg); an error it raises is logged as a warning, "what" followed
 * by its message, and the transaction it left is aborted.  Returns whether
 * the step succeeded.  For the steps of background workers that are tried
 * again later, or whose failure must not fail what called them.
 */
bool
sbx_try_or_warn(void (*step) (void *arg), void *arg, const char *what)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile bool ok = false;

	PG_TRY();
	{
		step(arg);
		ok = true;
	}
	PG_CATCH();
	{
		ErrorData  *edata = sbx_catch_error(cxt);

		ereport(WARNING,
				(errmsg("%s", what),
				 errdetail_internal("%s", edata->message)));
		FreeErrorData(edata);
	}
	PG_END_TRY();
	return ok;
}

#define SBX_SPI_MAX_ARGS 12

/* Execute one SQL statement through SPI, with text arguments. */
int
sbx_spi(const char *sql, int expect, int nargs, const char *const *args)
{
	Oid			types[SBX_SPI_MAX_ARGS] = {0};
	Datum		values[SBX_SPI_MAX_ARGS] = {0};
	char		nulls[SBX_SPI_MAX_ARGS + 1];
	int			rc;

	if (nargs > SBX_SPI_MAX_ARGS)
		elog(ERROR, "pgsandbox catalog statement has too many arguments");
	memset(nulls, ' ', SBX_SPI_MAX_ARGS);
	nulls[SBX_SPI_MAX_ARGS] = '\0';
	for (int i = 0; i < nargs; i++)
	{
		types[i] = TEXTOID;
		values[i] = args[i] ? CStringGetTextDatum(args[i]) : (Datum) 0;
		nulls[i] = args[i] ? ' ' : 'n';
	}
	rc = SPI_execute_with_args(sql, nargs, types, values, nulls, false, 0);
	if (rc != expect)
		elog(ERROR, "pgsandbox catalog statement failed: %s",
			 SPI_result_code_string(rc));
	return rc;
}

/* A column of a result row as text in SPI's memory, or NULL. */
char *
sbx_spi_text(int row, int col)
{
	return SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col);
}

/* One column of every result row, as a list of strings kept by the caller. */
List *
sbx_keep_column(int col)
{
	List	   *result = NIL;
	MemoryContext old = MemoryContextSwitchTo(sbx_outer_cxt);

	for (uint64 i = 0; i < SPI_processed; i++)
		result = lappend(result,
						 SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, col));
	MemoryContextSwitchTo(old);
	return result;
}

void
sbx_log_event(const char *sandbox, const char *action, const char *actor,
			  const char *detail)
{
	const char *args[4] = {sandbox, action, actor, detail};

	sbx_spi("INSERT INTO pgsandbox.event (sandbox, action, actor, detail) "
			"VALUES ($1, $2, $3, $4)", SPI_OK_INSERT, 4, args);
}

/*
 * Run one utility statement as a top-level command of the current
 * transaction, the way a client's simple query would, so that CREATE and
 * DROP DATABASE are allowed.  It waits at most pgsandbox.lock_timeout for a
 * lock: the roles and databases it alters can be locked by other roles
 * (lock_holders.c), and a lock timeout (55P03) gives the step up.
 *
 * A secret is put into the statement's parse tree, so that it appears in no
 * query text (and so in no log line, no error context and no WARNING's
 * context): with a CREATE ROLE or an ALTER ROLE, 'secret' is the password,
 * added to its options; with a CREATE SUBSCRIPTION, it is the connection
 * string, in place of the one the text gives (which should be '').
 */
void
sbx_run_utility(const char *sql, const char *secret)
{
	List	   *parsetree = pg_parse_query(sql);
	RawStmt    *raw;
	PlannedStmt *pstmt;
	char		timeout[16];

	if (list_length(parsetree) != 1)
		elog(ERROR, "pgsandbox expected one utility statement");
	raw = linitial_node(RawStmt, parsetree);
	if (secret && IsA(raw->stmt, CreateSubscriptionStmt))
		((CreateSubscriptionStmt *) raw->stmt)->conninfo = pstrdup(secret);
	else if (secret)
	{
		DefElem    *password = makeDefElem("password",
										   (Node *) makeString(pstrdup(secret)),
										   -1);

		if (IsA(raw->stmt, CreateRoleStmt))
			((CreateRoleStmt *) raw->stmt)->options =
				lappend(((CreateRoleStmt *) raw->stmt)->options, password);
		else
			castNode(AlterRoleStmt, raw->stmt)->options =
				lappend(castNode(AlterRoleStmt, raw->stmt)->options, password);
	}

	snprintf(timeout, sizeof(timeout), "%d", sbx_lock_timeout);
	(void) set_config_option("lock_timeout", timeout, PGC_SUSET, PGC_S_OVERRIDE,
							 GUC_ACTION_LOCAL, true, 0, false);

	pstmt = makeNode(PlannedStmt);
	pstmt->commandType = CMD_UTILITY;
	pstmt->canSetTag = true;
	pstmt->utilityStmt = raw->stmt;
	pstmt->stmt_location = raw->stmt_location;
	pstmt->stmt_len = raw->stmt_len;

	PushActiveSnapshot(GetTransactionSnapshot());
	ProcessUtility(pstmt, sql, false, PROCESS_UTILITY_TOPLEVEL, NULL, NULL,
				   None_Receiver, NULL);
	if (secret && IsA(raw->stmt, CreateSubscriptionStmt))
	{
		char	   *copy = ((CreateSubscriptionStmt *) raw->stmt)->conninfo;

		explicit_bzero(copy, strlen(copy));
	}
	PopActiveSnapshot();
	CommandCounterIncrement();
}

/* One statement alone in its own transaction (CREATE/DROP DATABASE). */
void
sbx_run_utility_xact(const char *sql, const char *activity)
{
	MemoryContext outer = CurrentMemoryContext;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	pgstat_report_activity(STATE_RUNNING, activity);
	sbx_run_utility(sql, NULL);
	CommitTransactionCommand();
	MemoryContextSwitchTo(outer);
	pgstat_report_activity(STATE_IDLE, NULL);
}

/* n random characters from alphabet, unbiased, NUL-terminated in out */
void
sbx_random_string(char *out, int n, const char *alphabet)
{
	int			alen = strlen(alphabet);
	int			limit = 256 - (256 % alen);
	int			i = 0;

	while (i < n)
	{
		uint8		buf[64];

		if (!pg_strong_random(buf, sizeof(buf)))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not generate random values")));
		for (int j = 0; j < (int) sizeof(buf) && i < n; j++)
		{
			if (buf[j] < limit)
				out[i++] = alphabet[buf[j] % alen];
		}
	}
	out[n] = '\0';
}

