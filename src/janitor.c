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
 * of them back.  A drop asked for by a caller, or by the reaper, does not
 * wait for it: the request is set aside and served again once the janitor
 * has stopped (an expired sandbox is taken up again by the next round of
 * the reaper), and other callers are served meanwhile.  Only the worker's
 * own clean-ups wait, in a loop that keeps the wake-ups of callers.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/twophase.h"
#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "sbx_conn.h"
#include "sbx_worker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

/* the janitors the lifecycle worker has started and not yet seen stop */
typedef struct SbxJanitor
{
	Oid			dboid;
	BackgroundWorkerHandle *handle;
} SbxJanitor;

#define SBX_MAX_JANITORS	8

static SbxJanitor sbx_janitors[SBX_MAX_JANITORS];

/* Forget the janitors that have stopped; return how many still run. */
static int
sbx_janitors_check(void)
{
	int			running = 0;

	for (int i = 0; i < SBX_MAX_JANITORS; i++)
	{
		if (sbx_janitors[i].handle == NULL)
			continue;
		if (sbx_dynamic_worker_stopped(sbx_janitors[i].handle))
		{
			pfree(sbx_janitors[i].handle);
			sbx_janitors[i].handle = NULL;
			sbx_janitors[i].dboid = InvalidOid;
		}
		else
			running++;
	}
	return running;
}

static bool
sbx_janitor_running_for(Oid dboid)
{
	sbx_janitors_check();
	for (int i = 0; i < SBX_MAX_JANITORS; i++)
	{
		if (sbx_janitors[i].handle != NULL && sbx_janitors[i].dboid == dboid)
			return true;
	}
	return false;
}

/*
 * In the lifecycle worker: start a janitor that rolls back the prepared
 * transactions of database dboid, unless one already does.  Does not wait.
 */
bool
sbx_janitor_start(Oid dboid, const char *name)
{
	int			free_slot = -1;

	if (sbx_janitor_running_for(dboid))
		return true;
	for (int i = 0; i < SBX_MAX_JANITORS && free_slot < 0; i++)
	{
		if (sbx_janitors[i].handle == NULL)
			free_slot = i;
	}
	if (free_slot >= 0)
		sbx_janitors[free_slot].handle =
			sbx_start_dynamic_worker("sbx_janitor_main", "pgsandbox janitor", name,
									 ObjectIdGetDatum(dboid), NULL, 0);
	if (free_slot < 0 || sbx_janitors[free_slot].handle == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("could not start a worker to roll back the prepared transactions of sandbox \"%s\"",
						name),
				 errhint("Raise max_worker_processes.")));
	sbx_janitors[free_slot].dboid = dboid;
	return true;
}

/*
 * Wait until no janitor works on database dboid.  A wake-up of the latch
 * that comes meanwhile (a caller's request) is kept for the main loop.
 */
void
sbx_janitor_wait(Oid dboid)
{
	bool		woken = false;

	while (sbx_janitor_running_for(dboid))
	{
		int			rc = WaitLatch(MyLatch,
								   WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
								   50L, PG_WAIT_EXTENSION);

		if (rc & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			woken = true;
		}
		CHECK_FOR_INTERRUPTS();
	}
	if (woken)
		SetLatch(MyLatch);
}

/* Does any janitor still run? */
bool
sbx_janitors_running(void)
{
	return sbx_janitors_check() > 0;
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
				(errmsg("rolled back prepared transaction \"%s\" of a sandbox being dropped",
						(const char *) lfirst(lc))));
	}
	proc_exit(0);
}
