/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The lifecycle worker: serves the request queue, runs clones through
 *	  dynamic clone workers, and runs its timers (the reaper of expired
 *	  sandboxes, the retry of reconciliation, and the upkeep of snapshots and
 *	  pools).
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
 * A clone is served from the first of these that can serve it: a ready
 * member of the source's pool (handed out at once, pool.c), a copy of the
 * source's current snapshot, or a dump of the live source.  Snapshot builds
 * and pool fills are clone jobs too, started by the upkeep timer with no
 * caller waiting; they leave one job free for callers.
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
#include "pgsandbox.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "sbx_clone.h"
#include "sbx_conn.h"
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
#include "utils/timestamp.h"

/* the lifecycle worker's own view of the clone workers it started */
typedef struct SbxJobState
{
	BackgroundWorkerHandle *handle;
	bool		terminated;		/* asked to stop because the caller left */
	bool		answered;		/* finished and served before its process
								 * ended: only its slot is left to free */
	TimestampTz started;
	char		actor[NAMEDATALEN];
	bool		actor_is_admin; /* sees what the source said of a failure */
} SbxJobState;

static SbxJobState sbx_jobs[SBX_MAX_CLONE_JOBS];

/* a drop request set aside while a janitor rolls back prepared xacts */
typedef struct SbxParkedDrop
{
	int			slot;
	SbxRequest	req;
} SbxParkedDrop;

/*
 * A timer: 'step' does one bounded piece of work and says whether more is
 * waiting, in which case it runs again on the next pass, after the queue
 * has been served; otherwise it runs again 'interval_ms' later (never, if
 * that is negative).
 */
typedef struct SbxTimer
{
	long		(*interval_ms) (void);
	bool		(*step) (void);
	TimestampTz last;			/* when its last step ended */
	bool		more;			/* its last step left work waiting */
} SbxTimer;

/* State that lives as long as the worker; allocated in sbx_worker_cxt. */
static MemoryContext sbx_worker_cxt = NULL;
static List *sbx_parked = NIL;	/* of SbxParkedDrop */
static List *sbx_reap_todo = NIL;	/* names of rows the reaper drops */
static List *sbx_reconcile_ids = NIL;	/* ids (text) still to reconcile */

/* whether the catalog has snapshots and pools (it is updated to 0.3) */
static bool sbx_catalog_current = false;

/*
 * A scheduled snapshot build or a pool fill is due and every clone job is
 * taken: callers leave the next free job to it (sbx_serve_requests).
 */
static bool sbx_background_waits = false;

/*
 * Whether snapshots, plans or pools may exist, and whether a pool may be
 * set.  Only the worker makes them (serving snapshot requests), and the
 * upkeep timer clears these when it finds none; while they are false, the
 * timer sleeps and clones look for no pool or snapshot.
 */
static bool sbx_snapshots_may_exist = true;
static bool sbx_pools_may_exist = true;

/* the request being served, answered if an error escapes to the loop */
static int	sbx_serving_slot = -1;
static uint64 sbx_serving_serial = 0;

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

static void
sbx_answer_with(int slot, uint64 serial, ErrorData *edata)
{
	sbx_queue_answer_error(slot, serial, edata->sqlerrcode,
						   edata->message, edata->detail);
}

/* Reconcile this sandbox again later (its clean-up failed now). */
static void
sbx_reconcile_later(int64 sandbox_id)
{
	MemoryContext old = MemoryContextSwitchTo(sbx_worker_cxt);

	sbx_reconcile_ids = lappend(sbx_reconcile_ids,
								psprintf(INT64_FORMAT, sandbox_id));
	MemoryContextSwitchTo(old);
}

/* what undoing a job needs, for sbx_try_or_warn (spi.c) */
typedef struct SbxUndoStep
{
	int64		sandbox_id;
	const SbxCloneJob *job;
	const char *reason;
	const char *actor;
} SbxUndoStep;

static void
sbx_fail_clone_step(void *arg)
{
	const SbxUndoStep *step = arg;

	sbx_clone_fail(step->sandbox_id, step->reason, "failed", step->actor);
}

/*
 * Undo a clone, logging instead of raising if the undoing fails itself; the
 * reconciliation timer then tries again.
 */
static void
sbx_fail_clone_quietly(int64 sandbox_id, const char *reason, const char *actor)
{
	SbxUndoStep step = {.sandbox_id = sandbox_id, .reason = reason, .actor = actor};

	if (!sbx_try_or_warn(sbx_fail_clone_step, &step,
						 psprintf("could not clean up sandbox " INT64_FORMAT ", will try again later",
								  sandbox_id)))
		sbx_reconcile_later(sandbox_id);
}

static void
sbx_undo_reset_or_save_step(void *arg)
{
	const SbxUndoStep *step = arg;

	if (step->job->reset)
		sbx_reset_fail(step->job, step->reason, step->actor);
	else
		sbx_save_fail(step->job, step->reason, step->actor);
}

/*
 * Undo what clone job 'job' made, whatever it was: a clone's row fails and
 * its database and role go; a reset's new database goes and the sandbox
 * keeps its old one; a save fails and its sandbox opens again.
 */
static void
sbx_undo_job_quietly(const SbxCloneJob *job, const char *reason, const char *actor)
{
	SbxUndoStep step = {.job = job, .reason = reason, .actor = actor};

	if (!job->reset && job->kind != SBX_KIND_SAVE)
	{
		if (job->sandbox_id > 0)
			sbx_fail_clone_quietly(job->sandbox_id, reason, actor);
		return;
	}
	if (!sbx_try_or_warn(sbx_undo_reset_or_save_step, &step,
						 psprintf("could not clean up after a %s of sandbox \"%s\", will try again later",
								  job->reset ? "reset" : "save",
								  job->reset ? job->reset_of : job->snapshot_name)))
	{
		if (job->kind == SBX_KIND_SAVE && job->sandbox_id > 0)
			sbx_reconcile_later(job->sandbox_id);
		sbx_reconcile_later(job->reset ? job->sandbox_id : job->parent_id);
	}
}

/*
 * Start the clone worker for job j, which the lifecycle worker has filled
 * in shared memory.
 */
static void
sbx_start_clone_worker(int j, const char *name, int64 sandbox_id)
{
	/* the sandbox id: a worker started late must not take a reused job */
	sbx_jobs[j].handle = sbx_start_dynamic_worker("sbx_clone_worker_main",
												  "pgsandbox clone", name,
												  Int32GetDatum(j),
												  &sandbox_id, sizeof(sandbox_id));
	if (sbx_jobs[j].handle == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("could not start a clone worker"),
				 errhint("Raise max_worker_processes, or lower pgsandbox.max_concurrent_clones.")));
}

/* Start or end the progress entry of clone job j. */
static void
sbx_progress_start(int j, const SbxActor *by, const SbxCloneSpec *spec)
{
	SbxProgress *p = &sbx_shared->progress[j];

	LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
	memset(p, 0, sizeof(*p));
	p->active = true;
	p->kind = spec->kind;
	p->phase = SBX_PHASE_CREATING;
	strlcpy(p->source, spec->source, sizeof(p->source));
	p->owner = by->role;
	p->total = -1;
	p->started = GetCurrentTimestamp();
	LWLockRelease(sbx_shared->lock);
}

static void
sbx_progress_end(int j)
{
	LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
	memset(&sbx_shared->progress[j], 0, sizeof(SbxProgress));
	LWLockRelease(sbx_shared->lock);
}

/*
 * Hand clone job j, filled in *job, to a new clone worker, for request
 * (slot, serial), or none (slot -1), on behalf of 'by'.  The job's
 * secrets are wiped from *job once shared memory holds them.
 */
static void
sbx_launch_job(int j, SbxCloneJob *job, int slot, uint64 serial, const SbxActor *by)
{
	job->in_use = true;
	job->request = slot;
	job->request_serial = serial;
	if (job->steps[SBX_STEP_TAKEN] == 0)
		job->steps[SBX_STEP_TAKEN] = GetCurrentTimestamp();
	job->steps[SBX_STEP_QUEUED] = job->steps[SBX_STEP_TAKEN];
	LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
	if (slot >= 0 && sbx_shared->requests[slot].serial == serial)
	{
		sbx_shared->requests[slot].clone_job = j;
		sbx_shared->requests[slot].sandbox_id = job->sandbox_id;
		job->steps[SBX_STEP_QUEUED] = sbx_shared->requests[slot].queued_at;
	}
	memcpy(&sbx_shared->jobs[j], job, sizeof(SbxCloneJob));
	strlcpy(sbx_shared->progress[j].source, job->source,
			sizeof(sbx_shared->progress[j].source));
	LWLockRelease(sbx_shared->lock);
	explicit_bzero(job->password, sizeof(job->password));
	explicit_bzero(job->conninfo, sizeof(job->conninfo));

	sbx_jobs[j].terminated = false;
	sbx_jobs[j].started = GetCurrentTimestamp();
	strlcpy(sbx_jobs[j].actor, by->name, NAMEDATALEN);
	sbx_jobs[j].actor_is_admin = by->is_admin;
	sbx_start_clone_worker(j, job->name, job->sandbox_id);
}

/* Forget clone job j, of sandbox_id, which did not start. */
static void
sbx_forget_job(int j, int64 sandbox_id)
{
	LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
	if (sbx_shared->jobs[j].in_use && sbx_shared->jobs[j].sandbox_id == sandbox_id)
		explicit_bzero(&sbx_shared->jobs[j], sizeof(SbxCloneJob));
	LWLockRelease(sbx_shared->lock);
	sbx_jobs[j].handle = NULL;
	sbx_progress_end(j);
}

/*
 * The clone slots job j takes: its own, and those granted to it for a
 * parallel dump and restore (sbx_grant_parallel_slots) and not given back.
 */
static int
sbx_job_slots(int j)
{
	int			extra;

	LWLockAcquire(sbx_shared->lock, LW_SHARED);
	extra = sbx_shared->jobs[j].in_use ? sbx_shared->jobs[j].extra_slots : 0;
	LWLockRelease(sbx_shared->lock);
	return 1 + extra;
}

/*
 * The clone slots beyond its own that clone job j, about to start for
 * request slot (-1: no caller), may take for a parallel dump and restore:
 * a data dump of a source of pgsandbox.parallel_min_size or more, none of
 * whose tables holds half the pages (as clone() probed it: one table loads
 * on one core whatever the jobs, and a directory archive gives up the
 * stream's overlap of dump and restore), up to pgsandbox.clone_jobs jobs in
 * all, out of the slots no running job holds.  Work no caller waits for
 * leaves one slot to callers.  Only this worker grants slots, so none is
 * counted twice.
 */
#define SBX_PARALLEL_MAX_SHARE	0.5

static int
sbx_grant_parallel_slots(int j, int slot, const SbxCloneSpec *spec)
{
	int			used = 1;
	int			free_slots;

	if (spec->snapshot != NULL || spec->schema_only || sbx_clone_jobs <= 1 ||
		spec->source_bytes < (int64) sbx_parallel_min_size * 1024 * 1024 ||
		spec->source_share <= 0 || spec->source_share >= SBX_PARALLEL_MAX_SHARE)
		return 0;
	for (int k = 0; k < SBX_MAX_CLONE_JOBS; k++)
	{
		if (k != j && sbx_jobs[k].handle != NULL)
			used += sbx_job_slots(k);
	}
	/* background work leaves one to callers; callers, one that it waits for */
	free_slots = sbx_max_concurrent_clones - used -
		(slot < 0 || sbx_background_waits ? 1 : 0);
	return Max(0, Min(sbx_clone_jobs - 1, free_slots));
}

/*
 * Begin a clone using clone job j: make the catalog row, the role and the
 * database (or leave a copy of a snapshot to the clone worker), then start
 * the clone worker.  The request (slot, serial) waits for it; slot is -1 for
 * a clone that no caller waits for.  On failure the clone is undone and the
 * error goes to the request.  Returns whether the clone worker was started.
 */
static bool
sbx_clone_start(int j, int slot, uint64 serial, const SbxActor *by,
				const SbxCloneSpec *spec)
{
	MemoryContext cxt = CurrentMemoryContext;
	SbxCloneJob job;

	TimestampTz taken = GetCurrentTimestamp();

	memset(&job, 0, sizeof(job));
	sbx_progress_start(j, by, spec);
	PG_TRY();
	{
		sbx_clone_create(j, by, spec, &job);
		job.extra_slots = sbx_grant_parallel_slots(j, slot, spec);
		job.steps[SBX_STEP_TAKEN] = taken;
		job.steps[SBX_STEP_CREATED] = GetCurrentTimestamp();
		sbx_launch_job(j, &job, slot, serial, by);
	}
	PG_CATCH();
	{
		ErrorData  *edata = sbx_catch_error(cxt);

		sbx_forget_job(j, job.sandbox_id);
		explicit_bzero(job.password, sizeof(job.password));
		explicit_bzero(job.conninfo, sizeof(job.conninfo));

		if (job.sandbox_id > 0)
			sbx_fail_clone_quietly(job.sandbox_id, edata->message, by->name);
		if (spec->kind == SBX_KIND_SANDBOX)
			sbx_count_clone_failure(spec->from_save ? "save" :
									spec->snapshot ? "snapshot" : "dump",
									edata->sqlerrcode);
		if (slot < 0)
			ereport(LOG,
					(errmsg("could not start a %s of source \"%s\"",
							sbx_kind_names[spec->kind], spec->source),
					 errdetail_internal("%s", edata->message)));
		sbx_answer_with(slot, serial, edata);
	}
	PG_END_TRY();
	return sbx_jobs[j].handle != NULL;
}

/*
 * A sandbox's clone has finished: mark it ready and hand its caller the
 * credentials.  If the caller left at the last moment, no one has them, and
 * the sandbox is dropped.
 */
static void
sbx_sandbox_succeeded(int j, SbxCloneJob *job, double secs, SbxRequest *outcome)
{
	outcome->expires_at = sbx_clone_ready(job, sbx_jobs[j].actor, secs);
	strlcpy(outcome->result_name, job->name, sizeof(outcome->result_name));
	memcpy(outcome->password, job->password, sizeof(outcome->password));
	if (job->request < 0 ||
		sbx_queue_answer(job->request, job->request_serial, outcome))
		ereport(LOG,
				(errmsg("sandbox \"%s\" is ready (source \"%s\", %.1f s)",
						job->name, job->source, secs)));
	else
	{
		(void) sbx_drop(job->name, &sbx_worker_actor, false, false, "cleanup");
		ereport(LOG,
				(errmsg("dropped sandbox \"%s\", whose caller stopped waiting as it became ready",
						job->name)));
	}
}

/*
 * A reset's new database is ready: swap it in and answer the caller, then
 * drop the old one.  If the swap fails, the sandbox keeps its old data.
 */
static void
sbx_reset_cleanup_step(void *arg)
{
	sbx_reset_cleanup(*(int64 *) arg, false);
}

static void
sbx_reset_succeeded(int j, SbxCloneJob *job, double secs)
{
	MemoryContext cxt = CurrentMemoryContext;
	SbxRequest	outcome;
	volatile bool swapped = false;

	memset(&outcome, 0, sizeof(outcome));
	PG_TRY();
	{
		/* a caller who left just now gets no reset it did not wait for */
		if (sbx_queue_abandoned(job->request, job->request_serial))
			ereport(ERROR,
					(errcode(ERRCODE_QUERY_CANCELED),
					 errmsg("reset canceled: the caller stopped waiting")));
		outcome.taken_at = sbx_reset_swap(job, sbx_jobs[j].actor, secs,
										  &outcome.expires_at);
		swapped = true;
	}
	PG_CATCH();
	{
		ErrorData  *edata = sbx_catch_error(cxt);

		sbx_undo_job_quietly(job, edata->message, sbx_jobs[j].actor);
		sbx_answer_with(job->request, job->request_serial, edata);
	}
	PG_END_TRY();
	if (!swapped)
		return;
	strlcpy(outcome.detail, job->origin, sizeof(outcome.detail));
	(void) sbx_queue_answer(job->request, job->request_serial, &outcome);
	ereport(LOG,
			(errmsg("sandbox \"%s\" was reset to %s (%.1f s)", job->reset_of, job->origin, secs)));

	/* the old database goes now, or at the next reconciliation */
	if (!sbx_try_or_warn(sbx_reset_cleanup_step, &job->sandbox_id,
						 psprintf("could not drop the database sandbox \"%s\" had before its reset, will try again later",
								  job->reset_of)))
		sbx_reconcile_later(job->sandbox_id);
}

/*
 * A clone job has finished: mark what it made ready (a sandbox, a snapshot,
 * a pool member or a save) and answer its caller, if any.
 */
static void
sbx_clone_succeeded(int j, SbxCloneJob *job, double secs)
{
	MemoryContext cxt = CurrentMemoryContext;
	SbxRequest	outcome;

	/* what it holds, which its copies are checked against (verify.c) */
	(void) sbx_try_or_warn(sbx_record_clone_digest, job,
						   "could not record what a clone holds");
	if (job->reset)
	{
		sbx_reset_succeeded(j, job, secs);
		return;
	}
	memset(&outcome, 0, sizeof(outcome));
	PG_TRY();
	{
		switch (job->kind)
		{
			case SBX_KIND_SANDBOX:
				sbx_sandbox_succeeded(j, job, secs, &outcome);
				break;
			case SBX_KIND_SNAPSHOT:
				outcome.size_bytes = sbx_snapshot_done(job, secs);
				outcome.taken_at = job->data_as_of;
				(void) sbx_queue_answer(job->request, job->request_serial, &outcome);
				ereport(LOG,
						(errmsg("snapshot \"%s\" of source \"%s\" is ready (%.1f s)",
								job->name, job->source, secs)));
				break;
			case SBX_KIND_POOL:
				(void) sbx_clone_ready(job, sbx_jobs[j].actor, secs);
				break;
			case SBX_KIND_SAVE:
				/* a caller who left just now gets no save it was not told of */
				if (sbx_queue_abandoned(job->request, job->request_serial))
					ereport(ERROR,
							(errcode(ERRCODE_QUERY_CANCELED),
							 errmsg("save canceled: the caller stopped waiting")));
				sbx_save_done(job, sbx_jobs[j].actor, secs);
				strlcpy(outcome.result_name, job->name, sizeof(outcome.result_name));
				(void) sbx_queue_answer(job->request, job->request_serial, &outcome);
				ereport(LOG,
						(errmsg("sandbox \"%s\" was saved as \"%s\" (%.1f s)",
								job->snapshot_name, job->name, secs)));
				break;
		}
	}
	PG_CATCH();
	{
		ErrorData  *edata = sbx_catch_error(cxt);

		sbx_undo_job_quietly(job, edata->message, sbx_jobs[j].actor);
		if (job->kind == SBX_KIND_SANDBOX)
			sbx_count_clone_failure(sbx_clone_method(job), edata->sqlerrcode);
		sbx_answer_with(job->request, job->request_serial, edata);
	}
	PG_END_TRY();
	explicit_bzero(&outcome, sizeof(outcome));
}

/*
 * The clone worker of job j has copied a snapshot into the job's database:
 * record the database and start the clone worker that adopts it.  Returns
 * whether it started; if not, *job says why, for the failure path.
 */
static bool
sbx_copy_continue(int j, SbxCloneJob *job)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile bool started = false;

	PG_TRY();
	{
		sbx_clone_secure(j, job);
		job->finished = false;
		LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
		memcpy(&sbx_shared->jobs[j], job, sizeof(SbxCloneJob));
		LWLockRelease(sbx_shared->lock);
		pfree(sbx_jobs[j].handle);
		sbx_jobs[j].handle = NULL;
		sbx_start_clone_worker(j, job->name, job->sandbox_id);
		started = true;
	}
	PG_CATCH();
	{
		ErrorData  *edata = sbx_catch_error(cxt);

		job->finished = true;
		job->ok = false;
		job->sqlerrcode = edata->sqlerrcode;
		strlcpy(job->message, edata->message, sizeof(job->message));
		job->detail[0] = '\0';
	}
	PG_END_TRY();
	return started;
}

/*
 * Free clone job j, whose process has ended.
 */
static void
sbx_clone_free(int j)
{
	LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
	explicit_bzero(&sbx_shared->jobs[j], sizeof(SbxCloneJob));
	LWLockRelease(sbx_shared->lock);
	if (sbx_jobs[j].handle != NULL)
		pfree(sbx_jobs[j].handle);
	sbx_jobs[j].handle = NULL;
	sbx_jobs[j].answered = false;
}

/*
 * Whether clone job j's worker reported success and has nothing left to do
 * but exit: then a sandbox or pool member is served at once
 * (sbx_clone_finish), without waiting for the process to end.  A reset,
 * whose database is renamed next, a save and a snapshot wait for it.
 */
static bool
sbx_clone_done_early(int j)
{
	bool		done;

	LWLockAcquire(sbx_shared->lock, LW_SHARED);
	done = sbx_shared->jobs[j].in_use && sbx_shared->jobs[j].finished &&
		sbx_shared->jobs[j].ok && !sbx_shared->jobs[j].copy_stage &&
		!sbx_shared->jobs[j].reset &&
		(sbx_shared->jobs[j].kind == SBX_KIND_SANDBOX ||
		 sbx_shared->jobs[j].kind == SBX_KIND_POOL);
	LWLockRelease(sbx_shared->lock);
	return done;
}

/*
 * A clone worker has stopped, or (stopped false) reported success and is
 * exiting: go on with a copy of a snapshot, or mark its sandbox ready and
 * hand the caller the credentials, or undo it and report why.  A job served
 * before its process ended keeps its clone slot until it has.
 */
static void
sbx_clone_finish(int j, bool stopped)
{
	SbxCloneJob job;
	bool		abandoned;
	double		secs;
	long		s;
	int			us;

	if (sbx_jobs[j].answered)
	{
		Assert(stopped);
		sbx_clone_free(j);
		return;
	}
	LWLockAcquire(sbx_shared->lock, LW_SHARED);
	memcpy(&job, &sbx_shared->jobs[j], sizeof(job));
	LWLockRelease(sbx_shared->lock);
	job.steps[SBX_STEP_COLLECTED] = GetCurrentTimestamp();
	abandoned = sbx_queue_abandoned(job.request, job.request_serial);
	if (job.finished && job.ok && job.copy_stage && !abandoned &&
		sbx_copy_continue(j, &job))
	{
		explicit_bzero(&job, sizeof(job));
		return;
	}

	LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
	memset(&sbx_shared->progress[j], 0, sizeof(SbxProgress));
	if (job.request >= 0 && sbx_shared->requests[job.request].serial == job.request_serial)
		sbx_shared->requests[job.request].clone_job = -1;
	LWLockRelease(sbx_shared->lock);
	if (stopped)
		sbx_clone_free(j);
	else
		sbx_jobs[j].answered = true;

	TimestampDifference(sbx_jobs[j].started, GetCurrentTimestamp(), &s, &us);
	secs = s + us / 1000000.0;

	if (job.finished && job.ok && !abandoned)
		sbx_clone_succeeded(j, &job, secs);
	else
	{
		const char *message;
		const char *detail = NULL;
		int			code;
		char	   *reason;

		if (abandoned)
		{
			code = ERRCODE_QUERY_CANCELED;
			message = job.reset ? "reset canceled: the caller stopped waiting"
				: "clone canceled: the caller stopped waiting";
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
			message = "clone worker exited before finishing";
		}
		reason = detail ? psprintf("%s\n%s", message, detail) : pstrdup(message);
		sbx_undo_job_quietly(&job, reason, sbx_jobs[j].actor);
		if (job.kind == SBX_KIND_SANDBOX && !job.reset)
			sbx_count_clone_failure(sbx_clone_method(&job), code);
		/*
		 * What the source, pg_dump or pg_restore said is in the detail: a
		 * caller who is not an admin gets the step that failed and its
		 * SQLSTATE, not the text of a server that objects others own
		 * could make speak (the sandbox's row and events show the same).
		 */
		if (detail != NULL && !sbx_jobs[j].actor_is_admin)
			detail = "What the servers said is shown to administrators only, in pgsandbox.sandboxes and the server log.";
		sbx_queue_answer_error(job.request, job.request_serial, code, message, detail);
		if (job.reset)
			ereport(LOG,
					(errmsg("reset of sandbox \"%s\" failed; it keeps its data", job.reset_of),
					 errdetail_internal("%s", message)));
		else
			ereport(LOG,
					(errmsg("clone of source \"%s\" into sandbox \"%s\" failed",
							job.source, job.name),
					 errdetail_internal("%s", message)));
	}
	explicit_bzero(&job, sizeof(job));
}


/*
 * Check the clone workers: finish stopped ones, stop abandoned ones.
 * Returns the clone slots the running ones take.
 */
static int
sbx_check_jobs(void)
{
	int			running = 0;

	for (int j = 0; j < SBX_MAX_CLONE_JOBS; j++)
	{
		int			slot;
		uint64		serial;

		if (sbx_jobs[j].handle == NULL)
			continue;
		if (sbx_dynamic_worker_stopped(sbx_jobs[j].handle))
		{
			sbx_clone_finish(j, true);
			/* the second half of a copy holds the same job */
			if (sbx_jobs[j].handle != NULL)
				running++;
			continue;
		}
		if (!sbx_jobs[j].answered && sbx_clone_done_early(j))
			sbx_clone_finish(j, false);
		running += sbx_job_slots(j);
		if (sbx_jobs[j].answered)
			continue;			/* no caller to watch any more */
		LWLockAcquire(sbx_shared->lock, LW_SHARED);
		slot = sbx_shared->jobs[j].request;
		serial = sbx_shared->jobs[j].request_serial;
		LWLockRelease(sbx_shared->lock);
		if (!sbx_jobs[j].terminated && sbx_queue_abandoned(slot, serial))
		{
			TerminateBackgroundWorker(sbx_jobs[j].handle);
			sbx_jobs[j].terminated = true;
		}
	}
	return running;
}

static void
sbx_park_drop(int slot, const SbxRequest *req)
{
	MemoryContext old = MemoryContextSwitchTo(sbx_worker_cxt);
	SbxParkedDrop *parked = palloc(sizeof(SbxParkedDrop));

	parked->slot = slot;
	memcpy(&parked->req, req, sizeof(SbxRequest));
	sbx_parked = lappend(sbx_parked, parked);
	MemoryContextSwitchTo(old);
}

/*
 * Serve a drop, an extend or a protect.  A drop that must wait for a
 * janitor is set aside (unless this is already its second turn, may_defer false) and
 * served again once the janitor has stopped.
 */
static void
sbx_serve_change(int slot, const SbxRequest *req, bool may_defer)
{
	MemoryContext cxt = CurrentMemoryContext;
	SbxActor	by = {req->caller, req->caller_is_admin, req->actor};
	SbxRequest	outcome;

	memset(&outcome, 0, sizeof(outcome));
	PG_TRY();
	{
		if (req->kind == SBX_REQ_DROP)
		{
			SbxDropOutcome done = sbx_drop(req->name, &by, req->only_if_expired,
										   may_defer,
										   req->only_if_expired ? "expire" : "drop");

			if (done == SBX_DROP_DEFERRED)
				sbx_park_drop(slot, req);
			else
			{
				outcome.dropped = (done == SBX_DROP_DONE);
				/* its saves, retired, are dropped by the upkeep */
				if (outcome.dropped)
					sbx_snapshots_may_exist = true;
				(void) sbx_queue_answer(slot, req->serial, &outcome);
			}
		}
		else if (req->kind == SBX_REQ_DROP_SAVE)
		{
			sbx_drop_save(&by, req->name);
			sbx_snapshots_may_exist = true;
			(void) sbx_queue_answer(slot, req->serial, &outcome);
		}
		else if (req->kind == SBX_REQ_PROTECT)
		{
			outcome.expires_at = sbx_protect(req->name, &by, req->protect_until);
			(void) sbx_queue_answer(slot, req->serial, &outcome);
		}
		else
		{
			outcome.expires_at = sbx_extend(req->name, &by, req->ttl_secs);
			(void) sbx_queue_answer(slot, req->serial, &outcome);
		}
	}
	PG_CATCH();
	{
		sbx_answer_with(slot, req->serial, sbx_catch_error(cxt));
	}
	PG_END_TRY();
}

/* Whether a drop of sandbox 'name' is set aside, waiting for a janitor. */
static bool
sbx_drop_parked(const char *name)
{
	ListCell   *lc;

	foreach(lc, sbx_parked)
	{
		SbxParkedDrop *p = lfirst(lc);

		if (p->req.kind == SBX_REQ_DROP && strcmp(p->req.name, name) == 0)
			return true;
	}
	return false;
}

/* Serve the drops set aside once no janitor runs any more. */
static void
sbx_serve_parked(void)
{
	List	   *parked;
	ListCell   *lc;

	if (sbx_parked == NIL || sbx_janitors_running())
		return;
	parked = sbx_parked;
	sbx_parked = NIL;
	foreach(lc, parked)
	{
		SbxParkedDrop *p = lfirst(lc);

		sbx_serving_slot = p->slot;
		sbx_serving_serial = p->req.serial;
		sbx_serve_change(p->slot, &p->req, false);
		sbx_serving_slot = -1;
	}
	list_free_deep(parked);
}

/* A free clone job, or -1. */
static int
sbx_free_clone_job(void)
{
	for (int j = 0; j < SBX_MAX_CLONE_JOBS; j++)
	{
		if (sbx_jobs[j].handle == NULL && !sbx_shared->jobs[j].in_use)
			return j;
	}
	return -1;
}

/*
 * Serve a clone from the source's pool if a member is ready.  Returns
 * whether the request was answered (with a sandbox, or with an error); if
 * not, *snapshot is filled with the source's current snapshot, when it has
 * one (*have_snapshot).
 */
static bool
sbx_try_pool(int slot, const SbxRequest *req, SbxSnapshotRef *snapshot,
			 bool *have_snapshot)
{
	MemoryContext cxt = CurrentMemoryContext;
	SbxActor	by = {req->caller, req->caller_is_admin, req->actor};
	bool		answered = false;
	volatile bool handing_out = false;
	SbxRequest	outcome;

	*have_snapshot = false;
	if (req->fresh || !sbx_catalog_current || !sbx_snapshots_may_exist)
		return false;
	memset(&outcome, 0, sizeof(outcome));
	PG_TRY();
	{
		bool		handed = false;

		if (sbx_pools_may_exist)
		{
			handing_out = true;
			handed = sbx_pool_handout(&by, req, &outcome);
			handing_out = false;
		}
		if (handed)
		{
			answered = true;
			if (!sbx_queue_answer(slot, req->serial, &outcome))
			{
				/* the caller left: no one has the new password */
				(void) sbx_drop(outcome.result_name, &sbx_worker_actor, false,
								false, "cleanup");
			}
		}
		else
			*have_snapshot = sbx_current_snapshot(req->source, req->schema_only,
												  snapshot);
	}
	PG_CATCH();
	{
		ErrorData  *edata = sbx_catch_error(cxt);

		sbx_count_clone_failure(handing_out ? "pool" : "snapshot", edata->sqlerrcode);
		sbx_answer_with(slot, req->serial, edata);
		answered = true;
	}
	PG_END_TRY();
	explicit_bzero(&outcome, sizeof(outcome));
	return answered;
}

/*
 * Serve a clone: hand out a ready member of the source's pool, or start
 * clone job j, which copies the source's current snapshot or, failing that
 * or with fresh, dumps the live source.  With no clone job free (j < 0),
 * only a hand-out can serve it; otherwise it goes back to the queue.
 */
static void
sbx_serve_clone(int j, int slot, const SbxRequest *req)
{
	SbxActor	by = {req->caller, req->caller_is_admin, req->actor};
	SbxSnapshotRef snapshot;
	bool		have_snapshot;
	SbxCloneSpec spec;
	char		save_source[NAMEDATALEN];
	bool		save_schema_only = false;
	bool		from_save = (req->target[0] != '\0');

	/* a clone of a save copies that save, and nothing else */
	if (from_save)
	{
		MemoryContext cxt = CurrentMemoryContext;
		bool		failed = false;

		if (j < 0)
		{
			sbx_queue_untake(slot, req->serial);
			return;
		}
		PG_TRY();
		{
			sbx_save_to_clone(&by, req->target, &snapshot, save_source, &save_schema_only);
		}
		PG_CATCH();
		{
			ErrorData  *edata = sbx_catch_error(cxt);

			sbx_count_clone_failure("save", edata->sqlerrcode);
			sbx_answer_with(slot, req->serial, edata);
			failed = true;
		}
		PG_END_TRY();
		if (failed)
			return;
		have_snapshot = true;
	}
	else if (sbx_try_pool(slot, req, &snapshot, &have_snapshot))
		return;
	if (j < 0)
	{
		sbx_queue_untake(slot, req->serial);
		return;
	}

	memset(&spec, 0, sizeof(spec));
	spec.kind = SBX_KIND_SANDBOX;
	spec.source = from_save ? save_source : req->source;
	spec.schema_only = from_save ? save_schema_only : req->schema_only;
	spec.from_save = from_save;
	spec.ttl_secs = req->ttl_secs;
	spec.labels = req->labels;
	spec.locale = from_save ? NULL : &req->locale;
	spec.snapshot = have_snapshot ? &snapshot : NULL;
	spec.statistics = req->statistics;
	spec.idle_secs = req->idle_secs;
	spec.connection_limit = req->connection_limit;
	spec.source_bytes = req->source_bytes;
	spec.source_plain = req->source_plain;
	spec.source_share = req->source_share;
	(void) sbx_clone_start(j, slot, req->serial, &by, &spec);
}

/*
 * Serve a reset or a save with clone job j: check and mark the sandbox,
 * then start the clone worker that fills the new database.  On failure,
 * what was begun is undone and the error goes to the caller.
 */
static void
sbx_serve_reset_or_save(int j, int slot, const SbxRequest *req)
{
	MemoryContext cxt = CurrentMemoryContext;
	SbxActor	by = {req->caller, req->caller_is_admin, req->actor};
	SbxCloneJob job;
	SbxCloneSpec spec;

	memset(&job, 0, sizeof(job));
	memset(&spec, 0, sizeof(spec));
	spec.kind = req->kind == SBX_REQ_SAVE ? SBX_KIND_SAVE : SBX_KIND_SANDBOX;
	spec.source = "";
	sbx_progress_start(j, &by, &spec);
	PG_TRY();
	{
		if (req->kind == SBX_REQ_RESET)
			sbx_reset_begin(j, &by, req, &job);
		else
		{
			/* the upkeep drops saves once retired */
			sbx_snapshots_may_exist = true;
			sbx_save_begin(j, &by, req, &job);
		}
		sbx_launch_job(j, &job, slot, req->serial, &by);
	}
	PG_CATCH();
	{
		ErrorData  *edata = sbx_catch_error(cxt);

		sbx_forget_job(j, job.sandbox_id);
		if (job.reset || (job.kind == SBX_KIND_SAVE && job.parent_id > 0))
			sbx_undo_job_quietly(&job, edata->message, by.name);
		sbx_answer_with(slot, req->serial, edata);
	}
	PG_END_TRY();
	explicit_bzero(job.password, sizeof(job.password));
	explicit_bzero(job.conninfo, sizeof(job.conninfo));
}

/*
 * Start building a snapshot of (source, schema_only) with clone job j, for
 * a caller of snapshot() (slot, serial) or for the worker's upkeep (slot -1).
 * The source's encoding and locale are the caller's probe's, or else those
 * the plan recorded.
 */
static bool
sbx_start_snapshot(int j, int slot, uint64 serial, const SbxActor *by,
				   const char *source, bool schema_only, const SbxLocale *probed,
				   int64 source_bytes, double source_share)
{
	MemoryContext cxt = CurrentMemoryContext;
	SbxLocale	locale;
	SbxCloneSpec spec;
	bool		failed = false;

	if (probed != NULL && probed->encoding[0] != '\0')
		memcpy(&locale, probed, sizeof(locale));
	else
	{
		PG_TRY();
		{
			sbx_plan_locale(source, schema_only, &locale);
		}
		PG_CATCH();
		{
			sbx_answer_with(slot, serial, sbx_catch_error(cxt));
			failed = true;
		}
		PG_END_TRY();
		if (failed)
			return false;
	}
	memset(&spec, 0, sizeof(spec));
	spec.kind = SBX_KIND_SNAPSHOT;
	spec.source = source;
	spec.schema_only = schema_only;
	spec.locale = &locale;
	spec.source_bytes = source_bytes;
	spec.source_share = source_share;
	return sbx_clone_start(j, slot, serial, by, &spec);
}

/*
 * Serve a request about snapshots: snapshot() records the plan and starts a
 * build its caller waits for; the others change the plan or retire
 * snapshots and are answered at once.
 */
static void
sbx_serve_snapshot_request(int j, int slot, const SbxRequest *req)
{
	MemoryContext cxt = CurrentMemoryContext;
	SbxActor	by = {req->caller, req->caller_is_admin, req->actor};
	SbxRequest	outcome;
	bool		failed = false;

	memset(&outcome, 0, sizeof(outcome));
	if (req->kind == SBX_REQ_SNAPSHOT || req->kind == SBX_REQ_SCHEDULE)
		sbx_snapshots_may_exist = true;
	else if (req->kind == SBX_REQ_SET_POOL && req->pool_size > 0)
		sbx_snapshots_may_exist = sbx_pools_may_exist = true;
	PG_TRY();
	{
		if (req->kind == SBX_REQ_DROP_SNAPSHOT)
			sbx_retire_snapshots(&by, req->source, req->both_kinds, req->schema_only);
		else
			sbx_plan_update(&by, req);
	}
	PG_CATCH();
	{
		sbx_answer_with(slot, req->serial, sbx_catch_error(cxt));
		failed = true;
	}
	PG_END_TRY();
	if (failed)
		return;
	if (req->kind == SBX_REQ_SNAPSHOT)
		(void) sbx_start_snapshot(j, slot, req->serial, &by, req->source,
								  req->schema_only, &req->locale, req->source_bytes,
								  req->source_share);
	else
		(void) sbx_queue_answer(slot, req->serial, &outcome);
}

/*
 * Serve pending requests in the order they came: drops and extends at once,
 * clones while fewer than max_concurrent_clones run, less the one kept for
 * background work that waits for it (sbx_upkeep_step).
 */
static void
sbx_serve_requests(bool ready, int running)
{
	List	   *pending = sbx_queue_pending();
	ListCell   *lc;

	foreach(lc, pending)
	{
		int			slot = lfirst_int(lc);
		int			j = running < sbx_max_concurrent_clones - (sbx_background_waits ? 1 : 0)
			? sbx_free_clone_job() : -1;
		SbxRequest	req;

		/* with no clone job free, a clone may still be handed out */
		if (!sbx_queue_take(slot, !ready || j >= 0 ||
							(sbx_catalog_current && sbx_pools_may_exist), &req))
			continue;
		if (ready && j < 0 && (req.kind == SBX_REQ_SNAPSHOT || req.kind == SBX_REQ_RESET ||
							   req.kind == SBX_REQ_SAVE))
		{
			sbx_queue_untake(slot, req.serial);
			continue;
		}

		sbx_serving_slot = slot;
		sbx_serving_serial = req.serial;
		if (!ready)
			sbx_queue_answer_error(slot, req.serial,
								   ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
								   psprintf("extension \"pgsandbox\" is not installed in database \"%s\"",
											sbx_database),
								   NULL);
		else if (req.kind == SBX_REQ_CLONE)
			sbx_serve_clone(j, slot, &req);
		else if (req.kind == SBX_REQ_DROP || req.kind == SBX_REQ_EXTEND ||
				 req.kind == SBX_REQ_PROTECT || req.kind == SBX_REQ_DROP_SAVE)
			sbx_serve_change(slot, &req, true);
		else if (req.kind == SBX_REQ_RESET || req.kind == SBX_REQ_SAVE)
			sbx_serve_reset_or_save(j, slot, &req);
		else
			sbx_serve_snapshot_request(j, slot, &req);
		if (j >= 0 && sbx_jobs[j].handle != NULL)
			running += sbx_job_slots(j);
		sbx_serving_slot = -1;
	}
	list_free(pending);
}

/* ------------------------------------------------------------------------
 * Timers
 * ------------------------------------------------------------------------
 */

static long
sbx_reap_interval(void)
{
	return sbx_gc_interval * 1000L;
}

/*
 * The reaper: drop expired sandboxes, and finish the drops that were
 * blocked, one a step, so that callers are served in between.  A new round
 * lists those due by then; once none is, a role a drop had to leave behind
 * is dropped (drop.c).
 */
typedef struct SbxReapRound
{
	List	   *names;			/* expired, or with a drop to finish */
	bool		more;			/* a leftover role was dropped: look again */
} SbxReapRound;

static void
sbx_reap_round_step(void *arg)
{
	SbxReapRound *round = arg;

	round->names = sbx_expired_sandboxes();
	if (round->names == NIL)
		round->more = sbx_drop_one_leftover_role();
}

static bool
sbx_reap_step(void)
{
	char	   *name;

	if (sbx_reap_todo == NIL)
	{
		SbxReapRound round = {NIL, false};
		ListCell   *lc;
		MemoryContext old;

		(void) sbx_try_or_warn(sbx_reap_round_step, &round,
							   "could not look for expired sandboxes");
		/* the round outlives this pass of the loop */
		old = MemoryContextSwitchTo(sbx_worker_cxt);
		foreach(lc, round.names)
			sbx_reap_todo = lappend(sbx_reap_todo, pstrdup(lfirst(lc)));
		MemoryContextSwitchTo(old);
		if (sbx_reap_todo == NIL)
			return round.more;
	}

	name = pstrdup(linitial(sbx_reap_todo));
	pfree(linitial(sbx_reap_todo));
	sbx_reap_todo = list_delete_first(sbx_reap_todo);

	/* a caller's drop set aside for a janitor finishes it, not the reaper */
	if (!sbx_drop_parked(name) && sbx_reap_one(name))
		ereport(LOG,
				(errmsg("the reaper dropped sandbox \"%s\"", name)));
	return sbx_reap_todo != NIL;
}

static long
sbx_reconcile_interval(void)
{
	return sbx_reconcile_ids != NIL ? 10000L : -1L;
}

/*
 * Reconciliation, one sandbox a step.  One that fails is logged and goes to
 * the back of the list, to be tried again at the next interval.
 */
static void
sbx_reconcile_one_step(void *arg)
{
	sbx_reconcile_one(*(int64 *) arg);
}

static bool
sbx_reconcile_step(void)
{
	List	   *ids = sbx_reconcile_ids;
	ListCell   *lc;

	/* each id is tried once in a round; failures come back in the list */
	sbx_reconcile_ids = NIL;
	foreach(lc, ids)
	{
		int64		id = pg_strtoint64(lfirst(lc));
		char	   *what = psprintf("could not reconcile sandbox " INT64_FORMAT
									", will try again later", id);

		if (!sbx_try_or_warn(sbx_reconcile_one_step, &id, what))
			sbx_reconcile_later(id);
		pfree(what);
	}
	list_free_deep(ids);
	return false;
}

static long
sbx_upkeep_interval(void)
{
	return sbx_snapshots_may_exist ? 1000L : -1L;
}

/*
 * Clone slots taken now, and how many jobs no caller waits for.
 */
static int
sbx_running_jobs(int *background)
{
	int			running = 0;

	*background = 0;
	for (int j = 0; j < SBX_MAX_CLONE_JOBS; j++)
	{
		if (sbx_jobs[j].handle == NULL)
			continue;
		running += sbx_job_slots(j);
		if (sbx_shared->jobs[j].request < 0)
			(*background)++;
	}
	return running;
}

/*
 * Whether a pool member of 'bytes' fits in the disk budget.  One that does
 * not is held back, not failed, until space is freed; the first hold is
 * logged.
 */
static bool
sbx_pool_fill_fits(const char *source, int64 bytes)
{
	static bool held = false;
	bool		fits;

	sbx_xact_begin("pgsandbox: checking the disk budget");
	fits = sbx_budget_allows(bytes);
	sbx_xact_commit();
	if (!fits && !held)
		ereport(LOG,
				(errmsg("pool of source \"%s\" is not filled: a member would pass pgsandbox.max_total_size",
						source)));
	held = !fits;
	return fits;
}

/*
 * The upkeep of snapshots and pools, one piece a step: drop a snapshot that
 * serves no more or a stale pool member; else, if a clone job is free for
 * it, start a scheduled snapshot build or fill a pool (building its
 * snapshot first if it has none).  Builds and fills leave one clone job for
 * callers, unless only one is allowed.
 */
static bool
sbx_upkeep_step(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile bool more = false;
	bool		pools;
	int			background;
	int			running = sbx_running_jobs(&background);
	int			j;
	char		source[NAMEDATALEN];
	bool		schema_only;
	bool		need_snapshot;

	if (!sbx_catalog_current)
		return false;			/* waits for ALTER EXTENSION UPDATE */
	PG_TRY();
	{
		sbx_snapshots_may_exist = sbx_snapshots_in_use(&pools);
		sbx_pools_may_exist = pools;
		if (!sbx_snapshots_may_exist)
			sbx_background_waits = false;	/* nothing to look after: the timer sleeps */
		else if (sbx_drop_one_retired() || sbx_pool_drop_one_stale())
			more = true;
		else if (background >= Max(1, sbx_max_concurrent_clones - 1))
			sbx_background_waits = false;	/* at its share already */
		else if (running >= sbx_max_concurrent_clones ||
				 (j = sbx_free_clone_job()) < 0)
		{
			/* callers hold every job: keep the next one free for this */
			sbx_xact_begin("pgsandbox: looking for background work");
			sbx_background_waits = sbx_scheduled_build_due();
			sbx_xact_commit();
			if (!sbx_background_waits)
				sbx_background_waits = sbx_pool_next_fill(source, &schema_only,
														  &need_snapshot);
		}
		else
		{
			sbx_background_waits = false;
			/* a start that fails waits for the next interval */
			if (sbx_next_scheduled_build(source, &schema_only))
				more = sbx_start_snapshot(j, -1, 0, &sbx_worker_actor, source,
										  schema_only, NULL, -1, 0);
			else if (sbx_pool_next_fill(source, &schema_only, &need_snapshot))
			{
				SbxSnapshotRef snapshot;

				if (need_snapshot)
					more = sbx_start_snapshot(j, -1, 0, &sbx_worker_actor, source,
											  schema_only, NULL, -1, 0);
				else if (sbx_current_snapshot(source, schema_only, &snapshot) &&
						 sbx_pool_fill_fits(source, snapshot.size_bytes))
				{
					SbxCloneSpec spec;

					memset(&spec, 0, sizeof(spec));
					spec.kind = SBX_KIND_POOL;
					spec.source = source;
					spec.schema_only = schema_only;
					spec.snapshot = &snapshot;
					more = sbx_clone_start(j, -1, 0, &sbx_worker_actor, &spec);
				}
			}
		}
	}
	PG_CATCH();
	{
		ErrorData  *edata = sbx_catch_error(cxt);

		sbx_background_waits = false;
		ereport(WARNING,
				(errmsg("could not look after snapshots and pools"),
				 errdetail_internal("%s", edata->message)));
	}
	PG_END_TRY();
	return more;
}

/*
 * Logins noted in shared memory go to the catalog once a minute, or within
 * a second once the table is full (login_times.c, which wakes the worker then).
 */
static long
sbx_usage_interval(void)
{
	return sbx_usage_full() ? 1000L : 60000L;
}

static void
sbx_usage_flush_step(void *arg)
{
	sbx_usage_flush();
}

static bool
sbx_usage_step(void)
{
	if (sbx_catalog_current)
		(void) sbx_try_or_warn(sbx_usage_flush_step, NULL,
							   "could not record the use of sandboxes");
	return false;
}

static long
sbx_measure_interval(void)
{
	return sbx_size_check_interval * 1000L;
}

static void
sbx_measure_sizes_step(void *arg)
{
	sbx_measure_sizes();
}

/* Measure the sandboxes in use, for the disk budget (disk_budget.c). */
static bool
sbx_measure_step(void)
{
	if (sbx_catalog_current)
		(void) sbx_try_or_warn(sbx_measure_sizes_step, NULL, "could not measure sandboxes");
	return false;
}

/* End what holds the server's horizon back (tenants.c). */
static bool
sbx_tenants_step(void)
{
	if (sbx_catalog_current)
		sbx_tenants_check();
	return false;
}

static SbxTimer sbx_timers[] = {
	{sbx_reap_interval, sbx_reap_step, 0, false},
	{sbx_reconcile_interval, sbx_reconcile_step, 0, false},
	{sbx_upkeep_interval, sbx_upkeep_step, 0, false},
	{sbx_usage_interval, sbx_usage_step, 0, false},
	{sbx_measure_interval, sbx_measure_step, 0, false},
	{sbx_tenants_interval, sbx_tenants_step, 0, false},
};
#define SBX_TIMER_RECONCILE 1

/*
 * Run the timers that are due.  Returns the milliseconds until the next one
 * is due.
 */
static long
sbx_run_timers(void)
{
	long		wait_ms = 10000L;

	for (int i = 0; i < lengthof(sbx_timers); i++)
	{
		SbxTimer   *t = &sbx_timers[i];
		long		interval = t->interval_ms();
		TimestampTz now = GetCurrentTimestamp();
		TimestampTz next;

		if (interval < 0)
			continue;
		/* from the last step, so that a reloaded interval counts at once */
		next = t->more ? t->last : TimestampTzPlusMilliseconds(t->last, interval);
		if (now >= next)
		{
			t->more = t->step();
			t->last = now = GetCurrentTimestamp();
			interval = t->interval_ms();
			if (interval < 0)
				continue;
			next = t->more ? now : TimestampTzPlusMilliseconds(now, interval);
		}
		wait_ms = Min(wait_ms, TimestampDifferenceMilliseconds(now, next));
	}
	return wait_ms;
}

/* ------------------------------------------------------------------------
 * Start and main loop
 * ------------------------------------------------------------------------
 */

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

static void
sbx_forget_previous_run(void)
{
	char		path[MAXPGPATH];
	List	   *ids = NIL;
	ListCell   *lc;
	MemoryContext old;

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
	old = MemoryContextSwitchTo(sbx_worker_cxt);
	foreach(lc, ids)
		sbx_reconcile_ids = lappend(sbx_reconcile_ids, pstrdup(lfirst(lc)));
	MemoryContextSwitchTo(old);
	/* the first round at once, before any clone starts */
	if (sbx_reconcile_ids != NIL)
		(void) sbx_reconcile_step();
	/* then what a crash left of the databases being made (orphans.c) */
	(void) sbx_try_or_warn(sbx_remove_orphans_step, NULL,
						   "could not remove the orphaned database directories");
	sbx_timers[SBX_TIMER_RECONCILE].last = GetCurrentTimestamp();
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
	if (sbx_serving_slot >= 0)
		sbx_answer_with(sbx_serving_slot, sbx_serving_serial, edata);
	sbx_serving_slot = -1;
	FreeErrorData(edata);
	pgstat_report_activity(STATE_IDLE, "");
	RESUME_INTERRUPTS();

	/* do not spin if the error comes back at once */
	(void) WaitLatch(MyLatch, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 1000L,
					 PG_WAIT_EXTENSION);
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
		if (sbx_parked != NIL)
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
