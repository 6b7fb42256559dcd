/*-------------------------------------------------------------------------
 *
 * live_command.c
 *	  Commands on a live snapshot's subscription, run in the snapshot's
 *	  database: pausing its apply for a copy (DISABLE), resuming it
 *	  (ENABLE), and detaching it before its database is dropped (DISABLE,
 *	  no slot, DROP SUBSCRIPTION: the slot on the source is dropped apart,
 *	  live_slots.c).
 *
 * ALTER and DROP SUBSCRIPTION find a subscription in the current database
 * only, and neither the lifecycle worker nor a copy's clone worker is
 * connected there: each command is a short-lived "pgsandbox live" worker
 * connected to the snapshot's database (closed to connections or not),
 * which the caller waits for, for a bounded time.  The worker reports
 * nothing: the caller reads the outcome from pg_subscription, a shared
 * catalog, and from pg_stat_subscription, which says whether the apply
 * worker still runs.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_roles.h"
#include "sbx_spi.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

/* what a live worker is asked, in its bgw_extra */
typedef struct SbxLiveTask
{
	SbxLiveCommand command;
	char		subscription[NAMEDATALEN];
} SbxLiveTask;

/* how long a caller waits for a command, or for the apply worker to go */
#define SBX_LIVE_WAIT_MS	30000
/* how long a paused apply may finish the transaction it applies */
#define SBX_LIVE_STOP_MS	2000

/*
 * Wait, for a bounded time, until done() says so, polling every 10 ms; a
 * wake-up of the latch meanwhile is kept for the caller's own loop.
 * Returns whether done() said so in time.
 */
static bool
sbx_live_wait(bool (*done) (void *arg), void *arg, int timeout_ms)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
	bool		woken = false;
	bool		ok;

	while (!(ok = done(arg)) && GetCurrentTimestamp() < deadline)
	{
		int			rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
								   10L, PG_WAIT_EXTENSION);

		if (rc & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			woken = true;
		}
		CHECK_FOR_INTERRUPTS();
	}
	if (woken)
		SetLatch(MyLatch);
	return ok;
}

static bool
sbx_live_worker_done(void *arg)
{
	return sbx_dynamic_worker_stopped((BackgroundWorkerHandle *) arg);
}

/*
 * Outside a transaction: the number of apply workers of the subscription
 * of that name in database dboid that run now, and in *enabled whether it
 * is enabled; -1 if there is no such subscription.
 */
static int
sbx_live_state(Oid dboid, const char *subscription, bool *enabled)
{
	char		dbbuf[16];
	const char *args[2] = {dbbuf, subscription};
	int			running = -1;
	bool		isnull;

	snprintf(dbbuf, sizeof(dbbuf), "%u", dboid);
	sbx_xact_begin("pgsandbox: looking at a live snapshot's subscription");
	sbx_spi("SELECT s.subenabled,"
			"       (SELECT pg_catalog.count(*) FROM pg_catalog.pg_stat_subscription a"
			"         WHERE a.subid = s.oid AND a.pid IS NOT NULL)"
			"  FROM pg_catalog.pg_subscription s"
			" WHERE s.subdbid = $1::oid AND s.subname = $2",
			SPI_OK_SELECT, 2, args);
	if (SPI_processed == 1)
	{
		*enabled = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
											  SPI_tuptable->tupdesc, 1, &isnull));
		running = (int) DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
													SPI_tuptable->tupdesc, 2, &isnull));
	}
	sbx_xact_commit();
	return running;
}

/* Outside a transaction: end the apply workers of a disabled subscription. */
static void
sbx_live_end_apply(Oid dboid, const char *subscription)
{
	char		dbbuf[16];
	const char *args[2] = {dbbuf, subscription};

	snprintf(dbbuf, sizeof(dbbuf), "%u", dboid);
	sbx_xact_begin("pgsandbox: ending a live snapshot's apply");
	sbx_spi("SELECT pg_catalog.pg_terminate_backend(a.pid)"
			"  FROM pg_catalog.pg_stat_subscription a"
			"  JOIN pg_catalog.pg_subscription s ON s.oid = a.subid"
			" WHERE s.subdbid = $1::oid AND s.subname = $2 AND NOT s.subenabled"
			"   AND a.pid IS NOT NULL", SPI_OK_SELECT, 2, args);
	sbx_xact_commit();
}

typedef struct SbxLiveTarget
{
	Oid			dboid;
	const char *subscription;
} SbxLiveTarget;

static bool
sbx_live_apply_gone(void *arg)
{
	SbxLiveTarget *t = (SbxLiveTarget *) arg;
	bool		enabled;

	return sbx_live_state(t->dboid, t->subscription, &enabled) <= 0;
}

/*
 * Outside a transaction: run 'command' on subscription 'subscription' of
 * database dboid (named 'name', for the worker's name), and wait for it.
 * A pause returns once the apply worker has gone, so that the database may
 * be copied.  An error if the command did not take effect.
 */
void
sbx_live_command(Oid dboid, const char *name, const char *subscription,
				 SbxLiveCommand command)
{
	SbxLiveTask task;
	BackgroundWorkerHandle *handle;
	SbxLiveTarget target = {dboid, subscription};
	bool		enabled = false;
	int			running;
	const char *what = command == SBX_LIVE_PAUSE ? "pause"
		: command == SBX_LIVE_RESUME ? "resume" : "detach";

	memset(&task, 0, sizeof(task));
	task.command = command;
	strlcpy(task.subscription, subscription, sizeof(task.subscription));
	handle = sbx_start_dynamic_worker("sbx_live_worker_main", "pgsandbox live", name,
									  ObjectIdGetDatum(dboid), &task, sizeof(task));
	if (handle == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("could not start a worker to %s the live snapshot \"%s\"", what, name),
				 errhint("Raise max_worker_processes.")));
	if (!sbx_live_wait(sbx_live_worker_done, handle, SBX_LIVE_WAIT_MS))
	{
		TerminateBackgroundWorker(handle);
		pfree(handle);
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("could not %s the live snapshot \"%s\" in time", what, name)));
	}
	pfree(handle);

	running = sbx_live_state(dboid, subscription, &enabled);
	if (command == SBX_LIVE_DETACH ? running >= 0
		: running < 0 || enabled != (command == SBX_LIVE_RESUME))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("could not %s the live snapshot \"%s\"", what, name),
				 errdetail("See the server log.")));
	/*
	 * A disabled subscription's apply stops between two transactions of the
	 * source; one long transaction could keep it for as long as it takes.
	 * Past a moment, it is ended: its transaction rolls back and its origin
	 * stays where it was, so the apply starts that transaction again once
	 * resumed, and nothing is lost or applied twice.
	 */
	if (command == SBX_LIVE_PAUSE &&
		!sbx_live_wait(sbx_live_apply_gone, &target, SBX_LIVE_STOP_MS))
		sbx_live_end_apply(dboid, subscription);
	if (command == SBX_LIVE_PAUSE &&
		!sbx_live_wait(sbx_live_apply_gone, &target, SBX_LIVE_WAIT_MS))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("the apply worker of the live snapshot \"%s\" did not stop in time", name)));
}

/*
 * The live worker: connected to the snapshot's database as the bootstrap
 * superuser, it runs one command on the subscription, bounded by
 * pgsandbox.lock_timeout, and exits.  An error is logged, and the caller
 * finds the subscription as it was.
 */
void
sbx_live_worker_main(Datum main_arg)
{
	Oid			dboid = DatumGetObjectId(main_arg);
	SbxLiveTask task;
	const char *sub;

	memcpy(&task, MyBgworkerEntry->bgw_extra, sizeof(task));
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, BGWORKER_BYPASS_ALLOWCONN);
	pgstat_report_appname("pgsandbox live");
	sbx_harden_session();

	sub = quote_identifier(task.subscription);
	sbx_xact_begin("pgsandbox: a command on a live snapshot's subscription");
	switch (task.command)
	{
		case SBX_LIVE_PAUSE:
			sbx_run_utility(psprintf("ALTER SUBSCRIPTION %s DISABLE", sub), NULL);
			break;
		case SBX_LIVE_RESUME:
			sbx_run_utility(psprintf("ALTER SUBSCRIPTION %s ENABLE", sub), NULL);
			break;
		case SBX_LIVE_DETACH:
			/* the slot on the source is not this command's: see live_slots.c */
			sbx_run_utility(psprintf("ALTER SUBSCRIPTION %s DISABLE", sub), NULL);
			sbx_run_utility(psprintf("ALTER SUBSCRIPTION %s SET (slot_name = NONE)", sub), NULL);
			sbx_run_utility(psprintf("DROP SUBSCRIPTION %s", sub), NULL);
			break;
	}
	sbx_xact_commit();
	proc_exit(0);
}
