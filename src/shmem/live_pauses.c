/*-------------------------------------------------------------------------
 *
 * live_pauses.c
 *	  Live snapshots' apply, paused while their database is copied: who
 *	  pauses it, who shares the pause, and who resumes it.
 *
 * CREATE DATABASE ... TEMPLATE needs the template to have no session, and
 * a live snapshot's apply worker has one: a copy pauses it (live_command.c)
 * for as long as the copy takes.  Copies that start meanwhile share the
 * pause, and the data_as_of it was taken at; the last to finish resumes
 * the apply.  A copy that would join a pause still being taken, or one
 * being let go, waits for it.  The lifecycle worker resumes an apply left paused by a clone worker
 * that died mid copy, taking the pause as a copy would (live.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "sbx_common.h"
#include "sbx_shmem.h"
#include "storage/lwlock.h"
#include "utils/timestamp.h"

/*
 * Join the pause of live snapshot snapshot_id's apply: SBX_PAUSE_MINE if
 * this copy is the first (it pauses, then calls sbx_live_pause_ready),
 * SBX_PAUSE_SHARED with *as_of if the apply is paused already,
 * SBX_PAUSE_WAIT if another copy is pausing it (not joined: ask again).
 */
SbxPauseTurn
sbx_live_pause_join(int64 snapshot_id, TimestampTz *as_of)
{
	SbxPauseTurn turn = SBX_PAUSE_MINE;
	int			free_slot = -1;

	LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < SBX_MAX_CLONE_JOBS; i++)
	{
		SbxLivePause *p = &sbx_shared->live_pauses[i];

		if (p->snapshot_id == snapshot_id)
		{
			if (!p->paused || p->resuming)
				turn = SBX_PAUSE_WAIT;
			else
			{
				p->copies++;
				*as_of = p->as_of;
				turn = SBX_PAUSE_SHARED;
			}
			LWLockRelease(sbx_shared->lock);
			return turn;
		}
		if (p->snapshot_id == 0 && free_slot < 0)
			free_slot = i;
	}
	/* one entry per clone job, and the lifecycle worker's: rarely none */
	if (free_slot < 0)
	{
		LWLockRelease(sbx_shared->lock);
		return SBX_PAUSE_WAIT;
	}
	sbx_shared->live_pauses[free_slot].snapshot_id = snapshot_id;
	sbx_shared->live_pauses[free_slot].copies = 1;
	sbx_shared->live_pauses[free_slot].paused = false;
	LWLockRelease(sbx_shared->lock);
	return turn;
}

/* The first copy has paused the apply: the others may copy too. */
void
sbx_live_pause_ready(int64 snapshot_id, TimestampTz as_of)
{
	LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < SBX_MAX_CLONE_JOBS; i++)
	{
		SbxLivePause *p = &sbx_shared->live_pauses[i];

		if (p->snapshot_id == snapshot_id)
		{
			p->paused = true;
			p->as_of = as_of;
			p->since = GetCurrentTimestamp();
		}
	}
	LWLockRelease(sbx_shared->lock);
}

/*
 * A copy is done with the pause (or failed taking it).  Returns true if it
 * was the last: it resumes the apply, then calls sbx_live_pause_resumed,
 * and copies that come meanwhile wait; *paused_secs then says how long the
 * apply was paused.
 */
bool
sbx_live_pause_leave(int64 snapshot_id, double *paused_secs)
{
	bool		last = false;

	*paused_secs = 0;
	LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < SBX_MAX_CLONE_JOBS; i++)
	{
		SbxLivePause *p = &sbx_shared->live_pauses[i];

		if (p->snapshot_id == snapshot_id && --p->copies <= 0)
		{
			long		secs;
			int			usecs;

			if (p->paused)
			{
				TimestampDifference(p->since, GetCurrentTimestamp(), &secs, &usecs);
				*paused_secs = secs + usecs / 1000000.0;
			}
			p->copies = 0;
			p->resuming = true;
			last = true;
		}
	}
	LWLockRelease(sbx_shared->lock);
	return last;
}

/*
 * The last copy has resumed the apply (or failed to, which the lifecycle
 * worker mends): the next copy pauses it again.
 */
void
sbx_live_pause_resumed(int64 snapshot_id)
{
	LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < SBX_MAX_CLONE_JOBS; i++)
	{
		SbxLivePause *p = &sbx_shared->live_pauses[i];

		if (p->snapshot_id == snapshot_id && p->resuming)
			memset(p, 0, sizeof(*p));
	}
	LWLockRelease(sbx_shared->lock);
}
