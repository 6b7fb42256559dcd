/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The lifecycle worker: its start and its main loop, which serves the
 *	  request queue (requests.c), follows the clone workers it started
 *	  (jobs.c), and runs its timers (timers.c).
 *
 * One lifecycle worker runs per cluster, connected as the bootstrap
 * superuser to the database named by pgsandbox.database.  It does every
 * change to the catalog and every CREATE/DROP of a sandbox's role and
 * database itself, one at a time, so those never race with each other.
 * The long part of a clone, the dump and the restore, runs in a clone
 * worker (clone_worker.c); up to pgsandbox.max_concurrent_clones of them run
 * at once, and the lifecycle worker keeps serving drops and its timers
 * meanwhile.
 *
 * Nothing one request or one sandbox does may stop the others: each is
 * served inside its own error handler, which records the error on the
 * request or in the log, and an error that escapes even that is caught at
 * the top of the loop.  The worker ignores query cancel (SIGINT): a
 * cancel meant for a stuck-looking backend must not end every clone.  It
 * does heed its own lock timeout (pgsandbox.lock_timeout), which
 * PostgreSQL delivers as SIGINT.  It leaves only on SIGTERM or when the
 * postmaster dies.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "access/xact.h"
#include "commands/extension.h"
#include "common/file_utils.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "sbx_clone.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_roles.h"
#include "sbx_shmem.h"
#include "sbx_spi.h"
#include "sbx_worker.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timeout.h"

/* State that lives as long as the worker. */
MemoryContext sbx_worker_cxt = NULL;

/* whether the catalog has snapshots and pools (it is updated to 0.3) */
bool		sbx_catalog_current = false;

static void
sbx_worker_detach(int code, Datum arg)
{
	LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
	if (sbx_shared->worker_pid == MyProcPid)
	{
		sbx_shared->worker_pid = 0;
		sbx_shared->worker_latch = NULL;
	}
	LWLockRelease(sbx_shared->lock);
	sbx_reader_attach_worker(NULL);
}

void
sbx_register_lifecycle_worker(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 5;
	strlcpy(worker.bgw_library_name, "pgsandbox", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "sbx_lifecycle_worker_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "pgsandbox worker", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "pgsandbox worker", BGW_MAXLEN);
	RegisterBackgroundWorker(&worker);
}


/*
 * Whether the extension is installed, and (in *current) whether its catalog
 * is at least this library's, with snapshots and pools.
 */
static bool
sbx_extension_installed(bool *current)
{
	bool		installed;

	StartTransactionCommand();
	installed = OidIsValid(get_extension_oid("pgsandbox", true));
	*current = installed && sbx_catalog_has_kinds();
	CommitTransactionCommand();
	return installed;
}

static void
sbx_remove_orphans_step(void *arg)
{
	sbx_remove_orphan_directories();
}

/*
 * What a previous run left: requests it had taken are answered with an
 * error, clone workers still running are ended and their jobs forgotten,
 * archives on disk are removed, and the sandboxes to reconcile are handed
 * to the reconciliation timer.
 */
static void
sbx_reconcile_todo_step(void *arg)
{
	sbx_end_orphan_clone_workers();
	*(List **) arg = sbx_reconcile_todo();
}

/* sandbox roles made before SET FALSE lose SET ROLE to their group */
static void
sbx_group_set_option_step(void *arg)
{
	int			changed = sbx_withdraw_group_set_option();

	if (changed > 0)
		ereport(LOG,
				(errmsg("pgsandbox: %d sandbox role%s may no longer SET ROLE " SBX_SANDBOX_GROUP,
						changed, changed == 1 ? "" : "s")));
}

static void
sbx_forget_previous_run(void)
{
	char		path[MAXPGPATH];
	List	   *ids = NIL;
	ListCell   *lc;

	sbx_queue_fail_running("the pgsandbox worker restarted while serving this request");
	LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
	for (int j = 0; j < SBX_MAX_CLONE_JOBS; j++)
	{
		explicit_bzero(&sbx_shared->jobs[j], sizeof(SbxCloneJob));
		memset(&sbx_shared->progress[j], 0, sizeof(SbxProgress));
	}
	LWLockRelease(sbx_shared->lock);

	snprintf(path, sizeof(path), "%s/%s", DataDir, SBX_TMP_DIR);
	if (access(path, F_OK) == 0)
		(void) rmtree(path, true);

	(void) sbx_try_or_warn(sbx_reconcile_todo_step, &ids,
						   "could not list the sandboxes to reconcile");
	foreach(lc, ids)
		sbx_reconcile_later(pg_strtoint64(lfirst(lc)));
	/* the first round at once, before any clone starts */
	sbx_reconcile_round();
	/* then what a crash left of the databases being made (orphans.c) */
	(void) sbx_try_or_warn(sbx_remove_orphans_step, NULL,
						   "could not remove the orphaned database directories");
	(void) sbx_try_or_warn(sbx_group_set_option_step, NULL,
						   "could not withdraw SET from the sandbox roles' membership");
	sbx_timers_reconciled_now();
}

/*
 * After an error that escaped every handler: log it, abort the transaction,
 * answer the request being served and carry on, as PostgreSQL's own
 * long-lived processes do.
 */
static void
sbx_recover_from_error(void)
{
	ErrorData  *edata;

	HOLD_INTERRUPTS();
	QueryCancelPending = false;
	error_context_stack = NULL;
	MemoryContextSwitchTo(TopMemoryContext);
	edata = CopyErrorData();
	EmitErrorReport();
	AbortCurrentTransaction();
	LWLockReleaseAll();
	ConditionVariableCancelSleep();
	pgstat_report_wait_end();
	FlushErrorState();
	MemoryContextSwitchTo(TopMemoryContext);
	sbx_answer_serving(edata);
	FreeErrorData(edata);
	pgstat_report_activity(STATE_IDLE, "");
	RESUME_INTERRUPTS();

	/*
	 * Do not spin if the error comes back at once, but leave at once on a
	 * shutdown: the loop's first step may be what fails each time.
	 */
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 1000L, PG_WAIT_EXTENSION);
	CHECK_FOR_INTERRUPTS();
	SetLatch(MyLatch);			/* wake-ups may have come meanwhile */
}

/*
 * SIGINT: a query cancel is ignored, but a lock timeout of the worker's
 * own, which PostgreSQL raises by SIGINT, cancels the statement waiting.
 */
static void
sbx_worker_sigint(SIGNAL_ARGS)
{
	if (get_timeout_indicator(LOCK_TIMEOUT, false))
		StatementCancelHandler(postgres_signal_arg);
}

void
sbx_lifecycle_worker_main(Datum main_arg)
{
	sigjmp_buf	local_sigjmp_buf;
	static MemoryContext loop_cxt;
	static bool reconciled = false;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	pqsignal(SIGINT, sbx_worker_sigint);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(sbx_database, NULL, 0);
	pgstat_report_appname("pgsandbox worker");

	LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
	sbx_shared->worker_pid = MyProcPid;
	sbx_shared->worker_latch = MyLatch;
	LWLockRelease(sbx_shared->lock);
	sbx_reader_attach_worker(MyLatch);
	before_shmem_exit(sbx_worker_detach, (Datum) 0);

	sbx_worker_cxt = AllocSetContextCreate(TopMemoryContext, "pgsandbox worker",
										   ALLOCSET_DEFAULT_SIZES);
	loop_cxt = AllocSetContextCreate(TopMemoryContext, "pgsandbox worker loop",
									 ALLOCSET_DEFAULT_SIZES);
	ereport(LOG,
			(errmsg("pgsandbox worker started for database \"%s\"", sbx_database)));

	if (sigsetjmp(local_sigjmp_buf, 1) != 0)
		sbx_recover_from_error();
	PG_exception_stack = &local_sigjmp_buf;

	for (;;)
	{
		bool		ready;
		int			running;
		long		timeout = 10000L;
		long		stats_ms;

		MemoryContextSwitchTo(loop_cxt);
		MemoryContextReset(loop_cxt);
		CHECK_FOR_INTERRUPTS();

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		ready = sbx_extension_installed(&sbx_catalog_current);
		MemoryContextSwitchTo(loop_cxt);
		if (ready && !reconciled)
		{
			reconciled = true;
			sbx_forget_previous_run();
		}
		/* the login of local sources (source_reader.c), once per start */
		if (ready)
			sbx_reader_prepare();

		running = sbx_check_jobs();
		sbx_serve_parked();
		sbx_serve_requests(ready, running);
		if (ready)
			timeout = sbx_run_timers();
		if (sbx_drops_parked())
			timeout = Min(timeout, 50L);	/* watch the janitors */

		/* the catalog tables' statistics, for autovacuum */
		stats_ms = pgstat_report_stat(false);
		if (stats_ms > 0)
			timeout = Min(timeout, stats_ms);
		pgstat_report_activity(STATE_IDLE, "");

		timeout = Max(timeout, 10L);
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 timeout, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}