/*-------------------------------------------------------------------------
 *
 * janitor.c
 *	  Rolling back the prepared transactions of a sandbox before its
 *	  database is dropped.
 *
 * DROP DATABASE refuses a database that has prepared transactions, and
 * only a session connected to that database may finish them.  When a
 * sandbox role has left some behind (possible where max_prepared_transactions
 * is above zero), the lifecycle worker starts a short-lived "pgsandbox
 * janitor" worker connected to the sandbox database, which rolls every one
 * of them back, and waits for it before dropping the database.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/twophase.h"
#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgsandbox.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

/*
 * In the lifecycle worker: roll back the prepared transactions of database
 * dboid, through a janitor worker, and wait for it.
 */
void
sbx_rollback_prepared(Oid dboid, const char *name)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	pid_t		pid;

	sbx_dynamic_worker(&worker, "sbx_janitor_main", "pgsandbox janitor", name,
					   ObjectIdGetDatum(dboid));
	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("could not start a worker to roll back the prepared transactions of sandbox \"%s\"",
						name),
				 errhint("Raise max_worker_processes.")));
	if (WaitForBackgroundWorkerStartup(handle, &pid) == BGWH_STARTED)
		(void) WaitForBackgroundWorkerShutdown(handle);
	pfree(handle);
}

/* The janitor: connected to the sandbox database as superuser. */
void
sbx_janitor_main(Datum main_arg)
{
	Oid			dboid = DatumGetObjectId(main_arg);
	List	   *gids = NIL;
	ListCell   *lc;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	pgstat_report_appname("pgsandbox janitor");
	sbx_harden_session();

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (SPI_execute("SELECT gid FROM pg_catalog.pg_prepared_xacts"
					" WHERE database OPERATOR(pg_catalog.=) pg_catalog.current_database()",
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not list prepared transactions");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		gids = lappend(gids, SPI_getvalue(SPI_tuptable->vals[i],
										  SPI_tuptable->tupdesc, 1));
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();

	foreach(lc, gids)
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		FinishPreparedTransaction((const char *) lfirst(lc), false);
		CommitTransactionCommand();
		ereport(LOG,
				(errmsg("pgsandbox: rolled back prepared transaction \"%s\" of a sandbox being dropped",
						(const char *) lfirst(lc))));
	}
	proc_exit(0);
}
