/*-------------------------------------------------------------------------
 *
 * requests.c
 *	  Serving the request queue: each request callers of clone(), drop(),
 *	  extend(), protect(), reset(), save(), snapshot() and the like put in
 *	  shared memory is taken, in order, and served inside its own error
 *	  handler, so that one failing request answers its caller with the
 *	  error and the others are served as before.
 *
 * A clone is served from the first of these that can serve it: a ready
 * member of the source's pool (handed out at once, pool.c), a copy of the
 * source's current snapshot, or a dump of the live source.  A drop whose
 * sandbox has prepared transactions waits, parked, while a janitor rolls
 * them back (janitor.c).
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

/* a drop request set aside while a janitor rolls back prepared xacts */
typedef struct SbxParkedDrop
{
	int			slot;
	SbxRequest	req;
} SbxParkedDrop;

static List *sbx_parked = NIL;	/* of SbxParkedDrop, in sbx_worker_cxt */

/* the request being served, answered if an error escapes to the loop */
static int	sbx_serving_slot = -1;
static uint64 sbx_serving_serial = 0;

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
bool
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
void
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
void
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
								   NULL, NULL);
		else if (req.kind == SBX_REQ_CLONE)
			sbx_serve_clone(j, slot, &req);
		else if (req.kind == SBX_REQ_DROP || req.kind == SBX_REQ_EXTEND ||
				 req.kind == SBX_REQ_PROTECT || req.kind == SBX_REQ_DROP_SAVE)
			sbx_serve_change(slot, &req, true);
		else if (req.kind == SBX_REQ_RESET || req.kind == SBX_REQ_SAVE)
			sbx_serve_reset_or_save(j, slot, &req);
		else
			sbx_serve_snapshot_request(j, slot, &req);
		if (j >= 0 && sbx_job_running(j))
			running += sbx_job_slots(j);
		sbx_serving_slot = -1;
	}
	list_free(pending);
}

/* Whether a drop waits for a janitor: the worker then looks often. */
bool
sbx_drops_parked(void)
{
	return sbx_parked != NIL;
}

/*
 * After an error that escaped every handler: answer the request that was
 * being served with it, if any.
 */
void
sbx_answer_serving(ErrorData *edata)
{
	if (sbx_serving_slot >= 0)
		sbx_answer_with(sbx_serving_slot, sbx_serving_serial, edata);
	sbx_serving_slot = -1;
}
