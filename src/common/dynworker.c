/*-------------------------------------------------------------------------
 *
 * dynworker.c
 *	  Starting the short-lived dynamic workers of this module (clone
 *	  workers, janitors, live snapshots' commands), and telling when they
 *	  have stopped.
 *
 * A dynamic worker here reports its start and stop to the process that
 * started it and is never restarted.  Its handle lives in
 * TopMemoryContext, since the lifecycle worker checks on it across passes
 * of its loop; whoever starts it frees the handle once it has stopped.
 * Nothing here waits: waiting with WaitForBackgroundWorkerShutdown would
 * reset the lifecycle worker's latch and swallow the wake-ups of callers.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "sbx_common.h"
#include "utils/memutils.h"

/*
 * Start a dynamic worker running 'function' of this module, named
 * "<type> <name>", with main argument 'arg' and up to BGW_EXTRALEN bytes of
 * 'extra'.  Returns its handle, or NULL if no worker slot is free.
 */
BackgroundWorkerHandle *
sbx_start_dynamic_worker(const char *function, const char *type,
						 const char *name, Datum arg,
						 const void *extra, Size extra_len)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	MemoryContext old;
	bool		started;

	Assert(extra_len <= BGW_EXTRALEN);
	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(worker.bgw_library_name, "pgsandbox", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, function, BGW_MAXLEN);
	snprintf(worker.bgw_name, BGW_MAXLEN, "%s %s", type, name);
	strlcpy(worker.bgw_type, type, BGW_MAXLEN);
	worker.bgw_main_arg = arg;
	worker.bgw_notify_pid = MyProcPid;
	if (extra_len > 0)
		memcpy(worker.bgw_extra, extra, extra_len);

	old = MemoryContextSwitchTo(TopMemoryContext);
	started = RegisterDynamicBackgroundWorker(&worker, &handle);
	MemoryContextSwitchTo(old);
	return started ? handle : NULL;
}

/* Has the worker of this handle stopped (or never started)? */
bool
sbx_dynamic_worker_stopped(BackgroundWorkerHandle *handle)
{
	pid_t		pid;

	return GetBackgroundWorkerPid(handle, &pid) == BGWH_STOPPED;
}
