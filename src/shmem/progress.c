/*-------------------------------------------------------------------------
 *
 * progress.c
 *	  _progress(): the clones, snapshot builds and pool fills under way, for
 *	  the progress view.
 *
 * Requests still waiting in the queue are 'queued'.  A pgsandbox_user sees
 * its own clones only (the function is SECURITY DEFINER, so it filters
 * itself, whatever view or query calls it).  A running clone job's
 * phase is what the lifecycle worker and the clone worker last recorded in
 * shared memory.  done is what the new database has grown by since it was
 * created empty, total what it is expected to grow by (to the size of the
 * source's database, or of the snapshot copied), both in bytes; a dump and
 * restore builds indexes last, so done moves in steps.  A copy of a live
 * snapshot that waits for its apply to reach the source's present is
 * 'catching up': total is then the source's WAL the apply had left to
 * apply when the copy looked, and done is not known.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "sbx_common.h"
#include "sbx_roles.h"
#include "sbx_shmem.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(pgsandbox_progress);

#define SBX_PROGRESS_COLS 8

/* what the view shows of a request waiting in the queue */
typedef struct SbxQueued
{
	SbxRequestKind kind;
	Oid			caller;
	char		source[NAMEDATALEN];
} SbxQueued;

/* The size of a database in bytes, or -1 if it is gone. */
static int64
sbx_database_size(Oid dboid)
{
	LOCAL_FCINFO(size_fcinfo, 1);
	Datum		size;

	if (!SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(dboid)))
		return -1;
	InitFunctionCallInfoData(*size_fcinfo, NULL, 1, InvalidOid, NULL, NULL);
	size_fcinfo->args[0].value = ObjectIdGetDatum(dboid);
	size_fcinfo->args[0].isnull = false;
	size = pg_database_size_oid(size_fcinfo);
	return size_fcinfo->isnull ? -1 : DatumGetInt64(size);
}

/*
 * _progress() RETURNS TABLE(name text, source text, kind text, phase text,
 *	 done bigint, total bigint, started_at timestamptz, owner_oid oid)
 */
Datum
pgsandbox_progress(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			caller = sbx_caller();
	bool		admin = sbx_is_admin(caller);
	SbxProgress *jobs;
	SbxQueued  *queued;
	int			nqueued = 0;

	InitMaterializedSRF(fcinfo, 0);
	(void) sbx_queue_attach();

	/* copy what is needed under the lock, then build rows without it */
	jobs = palloc(sizeof(SbxProgress) * SBX_MAX_CLONE_JOBS);
	queued = palloc(sizeof(SbxQueued) * sbx_shared->nrequests);
	LWLockAcquire(sbx_shared->lock, LW_SHARED);
	memcpy(jobs, sbx_shared->progress, sizeof(SbxProgress) * SBX_MAX_CLONE_JOBS);
	for (int i = 0; i < sbx_shared->nrequests; i++)
	{
		SbxRequest *req = &sbx_shared->requests[i];

		/* a pgsandbox_user sees its own, an admin everyone's */
		if (req->state == SBX_SLOT_PENDING && !req->abandoned &&
			SBX_REQ_NEEDS_JOB(req->kind) && (admin || req->caller == caller))
		{
			SbxQueued  *q = &queued[nqueued++];

			q->kind = req->kind;
			q->caller = req->caller;
			strlcpy(q->source, req->source, sizeof(q->source));
		}
	}
	LWLockRelease(sbx_shared->lock);

	for (int j = 0; j < SBX_MAX_CLONE_JOBS; j++)
	{
		SbxProgress *p = &jobs[j];
		Datum		values[SBX_PROGRESS_COLS];
		bool		nulls[SBX_PROGRESS_COLS] = {0};

		if (!p->active || !(admin || p->owner == caller))
			continue;
		values[0] = CStringGetTextDatum(p->name);
		nulls[0] = (p->name[0] == '\0');
		values[1] = CStringGetTextDatum(p->source);
		values[2] = CStringGetTextDatum(sbx_kind_names[p->kind]);
		values[3] = CStringGetTextDatum(sbx_phase_names[p->phase]);
		/* the database may be gone by now: its size is then unknown */
		nulls[4] = true;
		if (OidIsValid(p->dboid) && p->phase != SBX_PHASE_COPYING &&
			p->phase != SBX_PHASE_CATCHING_UP)
		{
			int64		size = sbx_database_size(p->dboid);

			values[4] = Int64GetDatum(Max(size - p->base, 0));
			nulls[4] = (size < 0);
		}
		values[5] = Int64GetDatum(p->phase == SBX_PHASE_CATCHING_UP ? p->total
								  : Max(p->total - p->base, 0));
		nulls[5] = (p->total < 0);
		values[6] = TimestampTzGetDatum(p->started);
		values[7] = ObjectIdGetDatum(p->owner);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	for (int i = 0; i < nqueued; i++)
	{
		Datum		values[SBX_PROGRESS_COLS];
		bool		nulls[SBX_PROGRESS_COLS] = {true, false, false, false, true, true, true, false};

		values[1] = CStringGetTextDatum(queued[i].source);
		values[2] = CStringGetTextDatum(queued[i].kind == SBX_REQ_SNAPSHOT ? "snapshot" : "sandbox");
		values[3] = CStringGetTextDatum(sbx_phase_names[SBX_PHASE_QUEUED]);
		values[7] = ObjectIdGetDatum(queued[i].caller);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * Record how far clone job j has come.  name is kept when NULL, total when
 * negative.
 */
void
sbx_progress_set(int j, SbxPhase phase, const char *name, int64 total)
{
	SbxProgress *p = &sbx_shared->progress[j];

	LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
	p->phase = phase;
	if (name)
		strlcpy(p->name, name, sizeof(p->name));
	if (total >= 0)
		p->total = total;
	LWLockRelease(sbx_shared->lock);
}

/* The total clone job j last recorded, -1 for none. */
int64
sbx_progress_total(int j)
{
	SbxProgress *p = &sbx_shared->progress[j];
	int64		total;

	LWLockAcquire(sbx_shared->lock, LW_SHARED);
	total = p->total;
	LWLockRelease(sbx_shared->lock);
	return total;
}

/*
 * Record the database clone job j fills, and its size when created, which
 * the progress view counts from.
 */
void
sbx_progress_database(int j, Oid dboid, int64 base)
{
	SbxProgress *p = &sbx_shared->progress[j];

	LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
	p->dboid = dboid;
	p->base = base;
	LWLockRelease(sbx_shared->lock);
}
