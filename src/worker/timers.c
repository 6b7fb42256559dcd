/*-------------------------------------------------------------------------
 *
 * timers.c
 *	  The lifecycle worker's timers: the reaper of expired sandboxes, the
 *	  retry of reconciliation, the upkeep of snapshots and pools, the flush
 *	  of the noted logins, the measure of sandboxes' sizes, and the limits
 *	  of each sandbox's share of the server.
 *
 * Each timer does one bounded piece of work a step, between two passes
 * over the request queue, so that no timer keeps callers waiting.
 * Snapshot builds and pool fills are clone jobs too, started by the upkeep
 * timer with no caller waiting; they leave one job free for callers.
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

static List *sbx_reap_todo = NIL;	/* names of rows the reaper drops */

/*
 * A scheduled snapshot build or a pool fill is due and every clone job is
 * taken: callers leave the next free job to it (sbx_serve_requests).
 */
bool		sbx_background_waits = false;

/*
 * Whether snapshots, plans or pools may exist, and whether a pool may be
 * set.  Only the worker makes them (serving snapshot requests), and the
 * upkeep timer clears these when it finds none; while they are false, the
 * timer sleeps and clones look for no pool or snapshot.
 */
bool		sbx_snapshots_may_exist = true;
bool		sbx_pools_may_exist = true;

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
	return sbx_reconcile_pending() ? 10000L : -1L;
}

/* Reconciliation: a round over the sandboxes whose clean-up failed (reconcile.c). */
static bool
sbx_reconcile_step(void)
{
	sbx_reconcile_round();
	return false;
}

static long
sbx_upkeep_interval(void)
{
	return sbx_snapshots_may_exist ? 1000L : -1L;
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
			sbx_background_waits = sbx_live_next_build(source) || sbx_scheduled_build_due();
			sbx_xact_commit();
			if (!sbx_background_waits)
				sbx_background_waits = sbx_pool_next_fill(source, &schema_only,
														  &need_snapshot);
		}
		else
		{
			bool		live;

			sbx_background_waits = false;
			/* a live source without a live snapshot that works first */
			sbx_xact_begin("pgsandbox: looking for live sources to follow");
			live = sbx_live_next_build(source);
			sbx_xact_commit();
			/* a start that fails waits for the next interval */
			if (live)
				more = sbx_start_snapshot(j, -1, 0, &sbx_worker_actor, source,
										  false, NULL, -1, 0);
			else if (sbx_next_scheduled_build(source, &schema_only))
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

/* Live snapshots are looked after every pgsandbox.live_look_interval (live.c). */
static long
sbx_live_interval(void)
{
	return sbx_catalog_current ? (long) sbx_live_look_interval : -1L;
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
	{sbx_live_interval, sbx_live_step, 0, false},
	{sbx_usage_interval, sbx_usage_step, 0, false},
	{sbx_measure_interval, sbx_measure_step, 0, false},
	{sbx_tenants_interval, sbx_tenants_step, 0, false},
};
#define SBX_TIMER_RECONCILE 1

/*
 * Run the timers that are due.  Returns the milliseconds until the next one
 * is due.
 */
long
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

/* The reconciliation round just ran: the next is due an interval from now. */
void
sbx_timers_reconciled_now(void)
{
	sbx_timers[SBX_TIMER_RECONCILE].last = GetCurrentTimestamp();
}
