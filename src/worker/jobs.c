/*-------------------------------------------------------------------------
 *
 * jobs.c
 *	  The clone jobs of the lifecycle worker: starting a clone worker for a
 *	  clone, a snapshot build, a pool fill, a reset or a save, granting it
 *	  clone slots, and finishing what it reports: marking the sandbox
 *	  ready, continuing a copy with its second half, or undoing a failure.
 *
 * Only the lifecycle worker runs this code; it keeps its own view of the
 * clone workers it started (sbx_jobs), beside the jobs in shared memory
 * that the clone workers and callers read (shmem/clone_jobs.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "sbx_clone.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_shmem.h"
#include "sbx_spi.h"
#include "sbx_worker.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
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

void
sbx_answer_with(int slot, uint64 serial, ErrorData *edata)
{
	sbx_queue_answer_error(slot, serial, edata->sqlerrcode,
						   edata->message, edata->detail, edata->hint);
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
void
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
void
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
void
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
void
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
int
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
bool
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
		sbx_copy_bounded(job->message, sizeof(job->message), edata->message);
		job->detail[0] = '\0';
		sbx_copy_bounded(job->hint, sizeof(job->hint), edata->hint);
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
		const char *hint = NULL;
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
			hint = job.hint[0] ? job.hint : NULL;
		}
		else
		{
			code = ERRCODE_INTERNAL_ERROR;
			message = "clone worker exited before finishing";
		}
		/* the sandbox's error and its event: the message, detail and hint */
		reason = detail ? psprintf("%s\n%s", message, detail) : pstrdup(message);
		if (hint)
			reason = psprintf("%s\nHint: %s", reason, hint);
		sbx_undo_job_quietly(&job, reason, sbx_jobs[j].actor);
		if (job.live_slot_dropped)
			sbx_live_forget_slot(job.sandbox_id);
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
		sbx_queue_answer_error(job.request, job.request_serial, code, message, detail, hint);
		if (job.reset)
			ereport(LOG,
					(errmsg("reset of sandbox \"%s\" failed; it keeps its data", job.reset_of),
					 errdetail_internal("%s", message),
					 hint ? errhint("%s", hint) : 0));
		else
			ereport(LOG,
					(errmsg("clone of source \"%s\" into sandbox \"%s\" failed",
							job.source, job.name),
					 errdetail_internal("%s", message),
					 hint ? errhint("%s", hint) : 0));
	}
	explicit_bzero(&job, sizeof(job));
}


/*
 * Check the clone workers: finish stopped ones, stop abandoned ones.
 * Returns the clone slots the running ones take.
 */
int
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

/* A free clone job, or -1. */
int
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
 * Start building a snapshot of (source, schema_only) with clone job j, for
 * a caller of snapshot() (slot, serial) or for the worker's upkeep (slot -1).
 * The source's encoding and locale are the caller's probe's, or else those
 * the plan recorded.
 */
bool
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
 * Clone slots taken now, and how many jobs no caller waits for.
 */
int
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

/* Whether clone job j has a clone worker this worker started. */
bool
sbx_job_running(int j)
{
	return sbx_jobs[j].handle != NULL;
}
