/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The lifecycle worker: serves the request queue, runs clones through
 *	  dynamic clone workers, reaps expired sandboxes on a timer and
 *	  reconciles the catalog when it starts.
 *
 * One lifecycle worker runs per cluster, connected as the bootstrap
 * superuser to the database named by pgsandbox.database.  It does every
 * change to the catalog and every CREATE/DROP of a sandbox's role and
 * database itself, one at a time, so those never race with each other.
 * The long part of a clone, the dump and the restore, runs in a clone
 * worker (clone_worker.c); up to pgsandbox.max_concurrent_clones of them run
 * at once, and the lifecycle worker keeps serving drops and the reaper
 * meanwhile.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "access/xact.h"
#include "commands/extension.h"
#include "common/file_utils.h"
#include "miscadmin.h"
#include "pgsandbox.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

/* the lifecycle worker's own view of the clone workers it started */
typedef struct SbxJobState
{
	BackgroundWorkerHandle *handle;
	bool		terminated;		/* asked to stop because the caller left */
	TimestampTz started;
	char		actor[NAMEDATALEN];
} SbxJobState;

static SbxJobState sbx_jobs[SBX_MAX_CLONE_JOBS];

/* Directory for clone archives that need to be on disk. */
#define SBX_TMP_DIR "pgsandbox_tmp"

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
}

/*
 * Write the outcome of a request and wake its caller; a slot whose caller
 * left is freed instead.  'outcome' carries the result fields.  Returns
 * whether the caller gets the outcome.
 */
static bool
sbx_request_finish(int slot, const SbxRequest *outcome)
{
	SbxRequest *req = &sbx_shared->requests[slot];
	Latch	   *latch = NULL;
	bool		delivered;

	LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
	if (req->abandoned)
	{
		explicit_bzero(req->password, sizeof(req->password));
		req->state = SBX_SLOT_FREE;
	}
	else
	{
		req->sqlerrcode = outcome->sqlerrcode;
		strlcpy(req->message, outcome->message, sizeof(req->message));
		strlcpy(req->detail, outcome->detail, sizeof(req->detail));
		req->dropped = outcome->dropped;
		strlcpy(req->result_name, outcome->result_name, sizeof(req->result_name));
		memcpy(req->password, outcome->password, sizeof(req->password));
		req->expires_at = outcome->expires_at;
		req->state = SBX_SLOT_DONE;
		latch = req->caller_latch;
	}
	delivered = (latch != NULL);
	LWLockRelease(sbx_shared->lock);
	if (latch)
		SetLatch(latch);
	return delivered;
}

static void
sbx_request_fail(int slot, int sqlerrcode, const char *message, const char *detail)
{
	SbxRequest	outcome;

	memset(&outcome, 0, sizeof(outcome));
	outcome.sqlerrcode = sqlerrcode;
	strlcpy(outcome.message, message, sizeof(outcome.message));
	if (detail)
		strlcpy(outcome.detail, detail, sizeof(outcome.detail));
	(void) sbx_request_finish(slot, &outcome);
}

/*
 * In a PG_CATCH block: take the error, abort the transaction, and return
 * the error data in the given (long enough lived) context.
 */
static ErrorData *
sbx_catch_error(MemoryContext cxt)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	FlushErrorState();
	AbortCurrentTransaction();
	MemoryContextSwitchTo(cxt);
	pgstat_report_activity(STATE_IDLE, NULL);
	return edata;
}

static void
sbx_request_fail_with(int slot, ErrorData *edata)
{
	sbx_request_fail(slot, edata->sqlerrcode ? edata->sqlerrcode : ERRCODE_INTERNAL_ERROR,
					 edata->message, edata->detail);
}

/*
 * Undo a clone, logging instead of raising if the undoing fails itself.
 */
static void
sbx_fail_clone_quietly(int64 sandbox_id, const char *reason, const char *actor)
{
	MemoryContext cxt = CurrentMemoryContext;

	PG_TRY();
	{
		sbx_clone_fail(sandbox_id, reason, "failed", actor);
	}
	PG_CATCH();
	{
		ErrorData  *edata = sbx_catch_error(cxt);

		ereport(WARNING,
				(errmsg("pgsandbox: could not clean up sandbox " INT64_FORMAT ": %s",
						sandbox_id, edata->message)));
	}
	PG_END_TRY();
}

/*
 * Fill in a dynamic worker of this module that reports its start and stop
 * to the calling process and is never restarted.
 */
void
sbx_dynamic_worker(BackgroundWorker *worker, const char *function,
				   const char *type, const char *name, Datum arg)
{
	memset(worker, 0, sizeof(*worker));
	worker->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker->bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker->bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(worker->bgw_library_name, "pgsandbox", BGW_MAXLEN);
	strlcpy(worker->bgw_function_name, function, BGW_MAXLEN);
	snprintf(worker->bgw_name, BGW_MAXLEN, "%s %s", type, name);
	strlcpy(worker->bgw_type, type, BGW_MAXLEN);
	worker->bgw_main_arg = arg;
	worker->bgw_notify_pid = MyProcPid;
}

static void
sbx_start_clone_worker(int j, const char *name, int64 sandbox_id)
{
	BackgroundWorker worker;
	MemoryContext old;
	bool		started;

	sbx_dynamic_worker(&worker, "sbx_clone_worker_main", "pgsandbox clone", name,
					   Int32GetDatum(j));
	/* which sandbox: a worker started late must not take a reused job */
	memcpy(worker.bgw_extra, &sandbox_id, sizeof(sandbox_id));

	/* the handle outlives the loop's memory */
	old = MemoryContextSwitchTo(TopMemoryContext);
	started = RegisterDynamicBackgroundWorker(&worker, &sbx_jobs[j].handle);
	MemoryContextSwitchTo(old);
	if (!started)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("could not start a pgsandbox clone worker"),
				 errhint("Raise max_worker_processes, or lower pgsandbox.max_concurrent_clones.")));
}

/*
 * Begin a clone for the request in 'slot', using clone job j: make the
 * catalog row, the role and the database, then start the clone worker.
 */
static void
sbx_clone_start(int slot, int j, const SbxRequest *req)
{
	MemoryContext cxt = CurrentMemoryContext;
	SbxCloneJob job;
	int64		sandbox_id = 0;

	PG_TRY();
	{
		sbx_clone_begin(req, &job, &sandbox_id);

		job.in_use = true;
		job.request = slot;
		LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
		memcpy(&sbx_shared->jobs[j], &job, sizeof(job));
		sbx_shared->requests[slot].clone_job = j;
		sbx_shared->requests[slot].sandbox_id = sandbox_id;
		LWLockRelease(sbx_shared->lock);
		explicit_bzero(job.password, sizeof(job.password));
		explicit_bzero(job.conninfo, sizeof(job.conninfo));

		sbx_jobs[j].terminated = false;
		sbx_jobs[j].started = GetCurrentTimestamp();
		strlcpy(sbx_jobs[j].actor, req->actor, NAMEDATALEN);
		sbx_start_clone_worker(j, job.name, sandbox_id);
	}
	PG_CATCH();
	{
		ErrorData  *edata = sbx_catch_error(cxt);

		LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
		if (sbx_shared->jobs[j].in_use && sbx_shared->jobs[j].request == slot)
		{
			explicit_bzero(&sbx_shared->jobs[j], sizeof(SbxCloneJob));
			sbx_shared->requests[slot].clone_job = -1;
		}
		LWLockRelease(sbx_shared->lock);
		sbx_jobs[j].handle = NULL;
		explicit_bzero(job.password, sizeof(job.password));
		explicit_bzero(job.conninfo, sizeof(job.conninfo));

		if (sandbox_id > 0)
			sbx_fail_clone_quietly(sandbox_id, edata->message, req->actor);
		sbx_request_fail_with(slot, edata);
	}
	PG_END_TRY();
}

/*
 * A clone worker has stopped: mark its sandbox ready and hand the caller
 * the credentials, or undo it and report why.
 */
static void
sbx_clone_finish(int j)
{
	MemoryContext cxt = CurrentMemoryContext;
	SbxCloneJob job;
	bool		abandoned;
	SbxRequest	outcome;
	double		secs;
	long		s;
	int			us;

	LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
	memcpy(&job, &sbx_shared->jobs[j], sizeof(job));
	explicit_bzero(&sbx_shared->jobs[j], sizeof(SbxCloneJob));
	abandoned = sbx_shared->requests[job.request].abandoned;
	sbx_shared->requests[job.request].clone_job = -1;
	LWLockRelease(sbx_shared->lock);
	pfree(sbx_jobs[j].handle);
	sbx_jobs[j].handle = NULL;

	TimestampDifference(sbx_jobs[j].started, GetCurrentTimestamp(), &s, &us);
	secs = s + us / 1000000.0;

	memset(&outcome, 0, sizeof(outcome));
	if (job.finished && job.ok && !abandoned)
	{
		PG_TRY();
		{
			outcome.expires_at = sbx_clone_ready(job.sandbox_id, job.password,
												 sbx_jobs[j].actor, secs);
			strlcpy(outcome.result_name, job.name, sizeof(outcome.result_name));
			memcpy(outcome.password, job.password, sizeof(outcome.password));
			if (sbx_request_finish(job.request, &outcome))
				ereport(LOG,
						(errmsg("pgsandbox: sandbox \"%s\" is ready (source \"%s\", %.1f s)",
								job.name, job.source, secs)));
			else
			{
				/* the caller left at the last moment: no one has the credentials */
				(void) sbx_drop(job.name, &sbx_worker_request, "cleanup", SBX_WORKER_ACTOR);
				ereport(LOG,
						(errmsg("pgsandbox: dropped sandbox \"%s\", whose caller stopped waiting as it became ready",
								job.name)));
			}
		}
		PG_CATCH();
		{
			ErrorData  *edata = sbx_catch_error(cxt);

			sbx_fail_clone_quietly(job.sandbox_id, edata->message, sbx_jobs[j].actor);
			sbx_request_fail_with(job.request, edata);
		}
		PG_END_TRY();
	}
	else
	{
		const char *message;
		const char *detail = NULL;
		int			code;
		char	   *reason;

		if (abandoned)
		{
			code = ERRCODE_QUERY_CANCELED;
			message = "clone canceled: the caller stopped waiting";
		}
		else if (job.finished)
		{
			code = job.sqlerrcode;
			message = job.message;
			detail = job.detail[0] ? job.detail : NULL;
		}
		else
		{
			code = ERRCODE_INTERNAL_ERROR;
			message = "pgsandbox clone worker exited before finishing";
		}
		reason = detail ? psprintf("%s\n%s", message, detail) : pstrdup(message);
		sbx_fail_clone_quietly(job.sandbox_id, reason, sbx_jobs[j].actor);
		sbx_request_fail(job.request, code, message, detail);
		ereport(LOG,
				(errmsg("pgsandbox: clone of source \"%s\" into \"%s\" failed: %s",
						job.source, job.name, message)));
	}
	explicit_bzero(&job, sizeof(job));
	explicit_bzero(&outcome, sizeof(outcome));
}

/* Check the clone workers: finish stopped ones, stop abandoned ones. */
static int
sbx_check_jobs(void)
{
	int			running = 0;

	for (int j = 0; j < SBX_MAX_CLONE_JOBS; j++)
	{
		pid_t		pid;
		bool		abandoned;

		if (sbx_jobs[j].handle == NULL)
			continue;
		if (GetBackgroundWorkerPid(sbx_jobs[j].handle, &pid) == BGWH_STOPPED)
		{
			sbx_clone_finish(j);
			continue;
		}
		running++;
		LWLockAcquire(sbx_shared->lock, LW_SHARED);
		abandoned = sbx_shared->requests[sbx_shared->jobs[j].request].abandoned;
		LWLockRelease(sbx_shared->lock);
		if (abandoned && !sbx_jobs[j].terminated)
		{
			TerminateBackgroundWorker(sbx_jobs[j].handle);
			sbx_jobs[j].terminated = true;
		}
	}
	return running;
}

static void
sbx_serve_drop(int slot, const SbxRequest *req)
{
	MemoryContext cxt = CurrentMemoryContext;
	SbxRequest	outcome;

	memset(&outcome, 0, sizeof(outcome));
	PG_TRY();
	{
		if (req->kind == SBX_REQ_DROP)
			outcome.dropped = sbx_drop(req->name, req,
									   req->only_if_expired ? "expire" : "drop",
									   req->actor);
		else
			outcome.expires_at = sbx_extend(req->name, req);
		(void) sbx_request_finish(slot, &outcome);
	}
	PG_CATCH();
	{
		sbx_request_fail_with(slot, sbx_catch_error(cxt));
	}
	PG_END_TRY();
}

static int
sbx_serial_cmp(const void *a, const void *b)
{
	uint64		sa = ((const uint64 *) a)[0];
	uint64		sb = ((const uint64 *) b)[0];

	return sa < sb ? -1 : (sa > sb ? 1 : 0);
}

/*
 * Serve pending requests in the order they came: drops and extends at once,
 * clones while fewer than max_concurrent_clones run.
 */
static void
sbx_serve_requests(bool ready, int running)
{
	int			n = sbx_shared->nrequests;
	uint64	   *pending = palloc(sizeof(uint64) * 2 * n);
	int			npending = 0;

	LWLockAcquire(sbx_shared->lock, LW_SHARED);
	for (int i = 0; i < n; i++)
	{
		if (sbx_shared->requests[i].state == SBX_SLOT_PENDING)
		{
			pending[2 * npending] = sbx_shared->requests[i].serial;
			pending[2 * npending + 1] = i;
			npending++;
		}
	}
	LWLockRelease(sbx_shared->lock);
	qsort(pending, npending, sizeof(uint64) * 2, sbx_serial_cmp);

	for (int k = 0; k < npending; k++)
	{
		int			slot = (int) pending[2 * k + 1];
		SbxRequest *shared_req = &sbx_shared->requests[slot];
		SbxRequest	req;
		int			j = -1;

		LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
		if (shared_req->state != SBX_SLOT_PENDING)
		{
			LWLockRelease(sbx_shared->lock);
			continue;
		}
		if (shared_req->abandoned)
		{
			shared_req->state = SBX_SLOT_FREE;
			LWLockRelease(sbx_shared->lock);
			continue;
		}
		if (ready && shared_req->kind == SBX_REQ_CLONE)
		{
			if (running >= sbx_max_concurrent_clones)
			{
				LWLockRelease(sbx_shared->lock);
				continue;
			}
			for (int i = 0; i < SBX_MAX_CLONE_JOBS && j < 0; i++)
			{
				if (!sbx_shared->jobs[i].in_use && sbx_jobs[i].handle == NULL)
					j = i;
			}
			if (j < 0)
			{
				LWLockRelease(sbx_shared->lock);
				continue;
			}
		}
		shared_req->state = SBX_SLOT_RUNNING;
		memcpy(&req, shared_req, sizeof(req));
		LWLockRelease(sbx_shared->lock);

		if (!ready)
			sbx_request_fail(slot, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
							 psprintf("extension \"pgsandbox\" is not installed in database \"%s\"",
									  sbx_database),
							 NULL);
		else if (req.kind == SBX_REQ_CLONE)
		{
			sbx_clone_start(slot, j, &req);
			if (sbx_jobs[j].handle != NULL)
				running++;
		}
		else
			sbx_serve_drop(slot, &req);
	}
	pfree(pending);
}

/* Drop every expired sandbox. */
static void
sbx_reap(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	List	   *names = NIL;
	ListCell   *lc;

	PG_TRY();
	{
		names = sbx_expired_sandboxes();
	}
	PG_CATCH();
	{
		ErrorData  *edata = sbx_catch_error(cxt);

		ereport(WARNING,
				(errmsg("pgsandbox: could not look for expired sandboxes: %s",
						edata->message)));
	}
	PG_END_TRY();

	foreach(lc, names)
	{
		char	   *name = lfirst(lc);

		PG_TRY();
		{
			SbxRequest	reaper = sbx_worker_request;

			reaper.only_if_expired = true;
			if (sbx_drop(name, &reaper, "expire", SBX_WORKER_ACTOR))
				ereport(LOG,
						(errmsg("pgsandbox: dropped expired sandbox \"%s\"", name)));
		}
		PG_CATCH();
		{
			ErrorData  *edata = sbx_catch_error(cxt);

			ereport(WARNING,
					(errmsg("pgsandbox: could not drop expired sandbox \"%s\": %s",
							name, edata->message)));
		}
		PG_END_TRY();
	}
}

static bool
sbx_extension_installed(void)
{
	bool		installed;

	StartTransactionCommand();
	installed = OidIsValid(get_extension_oid("pgsandbox", true));
	CommitTransactionCommand();
	return installed;
}

/*
 * What a previous run left: requests it had taken are answered with an
 * error, clone jobs are forgotten (their workers are ended when their
 * databases are dropped by sbx_reconcile), archives on disk are removed,
 * and the catalog is reconciled with the cluster.
 */
static void
sbx_forget_previous_run(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	char		path[MAXPGPATH];

	for (int i = 0; i < sbx_shared->nrequests; i++)
	{
		if (sbx_shared->requests[i].state == SBX_SLOT_RUNNING)
			sbx_request_fail(i, ERRCODE_OPERATOR_INTERVENTION,
							 "the pgsandbox worker restarted while serving this request",
							 NULL);
	}
	LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
	for (int j = 0; j < SBX_MAX_CLONE_JOBS; j++)
		explicit_bzero(&sbx_shared->jobs[j], sizeof(SbxCloneJob));
	LWLockRelease(sbx_shared->lock);

	snprintf(path, sizeof(path), "%s/%s", DataDir, SBX_TMP_DIR);
	if (access(path, F_OK) == 0)
		(void) rmtree(path, true);

	PG_TRY();
	{
		sbx_reconcile();
	}
	PG_CATCH();
	{
		ErrorData  *edata = sbx_catch_error(cxt);

		ereport(WARNING,
				(errmsg("pgsandbox: could not reconcile the catalog: %s",
						edata->message)));
	}
	PG_END_TRY();
}

void
sbx_lifecycle_worker_main(Datum main_arg)
{
	MemoryContext loop_cxt;
	bool		reconciled = false;
	TimestampTz last_reap = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(sbx_database, NULL, 0);
	pgstat_report_appname("pgsandbox worker");

	LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
	sbx_shared->worker_pid = MyProcPid;
	sbx_shared->worker_latch = MyLatch;
	LWLockRelease(sbx_shared->lock);
	before_shmem_exit(sbx_worker_detach, (Datum) 0);

	loop_cxt = AllocSetContextCreate(TopMemoryContext, "pgsandbox worker loop",
									 ALLOCSET_DEFAULT_SIZES);
	ereport(LOG,
			(errmsg("pgsandbox worker started for database \"%s\"", sbx_database)));

	for (;;)
	{
		bool		ready;
		int			running;
		long		timeout;
		TimestampTz now;
		TimestampTz next_reap;

		MemoryContextSwitchTo(loop_cxt);
		MemoryContextReset(loop_cxt);

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		ready = sbx_extension_installed();
		MemoryContextSwitchTo(loop_cxt);
		if (ready && !reconciled)
		{
			sbx_forget_previous_run();
			reconciled = true;
		}

		running = sbx_check_jobs();
		sbx_serve_requests(ready, running);

		/* from the last pass, so that a reloaded interval counts at once */
		next_reap = TimestampTzPlusMilliseconds(last_reap, sbx_gc_interval * 1000L);
		now = GetCurrentTimestamp();
		if (ready && now >= next_reap)
		{
			sbx_reap();
			last_reap = GetCurrentTimestamp();
			next_reap = TimestampTzPlusMilliseconds(last_reap, sbx_gc_interval * 1000L);
		}
		timeout = ready ? TimestampDifferenceMilliseconds(GetCurrentTimestamp(), next_reap)
			: 10000L;
		timeout = Max(Min(timeout, 10000L), 10L);

		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 timeout, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}
