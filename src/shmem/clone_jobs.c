/*-------------------------------------------------------------------------
 *
 * clone_jobs.c
 *	  What clone jobs share beyond their own entry: the clone slots a
 *	  parallel dump and restore takes, the moments of a clone, told in its
 *	  'ready' event, and which roles are filling a database right now.
 *
 * pgsandbox.max_concurrent_clones bounds the clone slots in use.  Each job
 * takes one as the lifecycle worker starts it, and a dump worth several jobs
 * of pg_dump and pg_restore takes one more slot per job beyond the first,
 * as many as are free: the lifecycle worker, which alone starts jobs, grants
 * them as it starts the job (worker.c), so no two clones can count on the
 * same slot.  A clone worker that finds it cannot use them gives them back
 * at once; the rest go with the job.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "sbx_common.h"
#include "sbx_shmem.h"
#include "storage/lwlock.h"
#include "utils/timestamp.h"

/* what each step did, read as "<name> at <ms>" */
static const char *const sbx_step_names[SBX_STEP_COUNT] = {
	"queued",
	"taken",
	"role and database made",
	"clone worker started",
	"source read",
	"pg_dump started",
	"pg_dump done",
	"restored",
	"copied",
	"owned",
	"verified",
	"finished",
	"worker reported",
	"marked ready",
};

/*
 * Give back the clone slots clone job j, of sandbox_id, was granted beyond
 * its own, and wake the lifecycle worker, which may start another clone.
 */
void
sbx_release_clone_slots(int j, int64 sandbox_id)
{
	LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
	if (sbx_shared->jobs[j].in_use && sbx_shared->jobs[j].sandbox_id == sandbox_id)
		sbx_shared->jobs[j].extra_slots = 0;
	LWLockRelease(sbx_shared->lock);
	sbx_queue_wake_worker();
}

/*
 * Whether role 'name' fills a database for a clone job that has not
 * reported yet: its sessions are pgsandbox's own (pg_restore, the masked
 * rows' COPY), since no one else knows its password yet, and the login
 * check lets them in whatever the sandbox's caps say.
 */
bool
sbx_clone_under_way(const char *name)
{
	bool		found = false;

	if (sbx_shared == NULL)
		return false;
	LWLockAcquire(sbx_shared->lock, LW_SHARED);
	for (int j = 0; j < SBX_MAX_CLONE_JOBS && !found; j++)
		found = sbx_shared->jobs[j].in_use && !sbx_shared->jobs[j].finished &&
			strcmp(sbx_shared->jobs[j].name, name) == 0;
	LWLockRelease(sbx_shared->lock);
	return found;
}

/*
 * The moments of a clone, in milliseconds from its request and in the order
 * they came, for its 'ready' event: "steps (ms from the request): queued
 * 0.0, taken 1.2, ...".  Steps not taken are left out.
 */
char *
sbx_describe_steps(const TimestampTz *steps)
{
	StringInfoData buf;
	TimestampTz origin = steps[SBX_STEP_QUEUED];
	int			order[SBX_STEP_COUNT];
	int			n = 0;

	initStringInfo(&buf);
	if (origin == 0)
		return buf.data;
	/* by time, steps of the same moment in their own order */
	for (int i = 0; i < SBX_STEP_COUNT; i++)
	{
		int			k;

		if (steps[i] == 0)
			continue;
		k = n++;
		while (k > 0 && steps[order[k - 1]] > steps[i])
		{
			order[k] = order[k - 1];
			k--;
		}
		order[k] = i;
	}
	appendStringInfoString(&buf, "steps (ms from the request):");
	for (int k = 0; k < n; k++)
		appendStringInfo(&buf, "%s %s %.1f", k == 0 ? "" : ",", sbx_step_names[order[k]],
						 (double) (steps[order[k]] - origin) / 1000.0);
	return buf.data;
}
