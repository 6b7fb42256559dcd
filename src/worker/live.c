/*-------------------------------------------------------------------------
 *
 * live.c
 *	  Live snapshots, as the lifecycle worker keeps them: building one for
 *	  each live source, locking it so that only its apply enters it,
 *	  watching how far behind its source it is and whether its apply still
 *	  works, rebuilding it when it does not, and detaching its subscription
 *	  (and the slot pgsandbox made on the source) before its database is
 *	  dropped.
 *
 * A live snapshot is a data snapshot whose database holds a subscription
 * to the source's publication, owned by the snapshot's own role, so that
 * the apply runs as that role, which owns nothing outside the snapshot (the
 * clone worker makes it, clone_worker.c).  Its copies pause the apply for
 * as long as CREATE DATABASE ... TEMPLATE takes (live_pauses.c).
 *
 * The source's DDL is not replicated.  A change the apply cannot take (a
 * new column, a dropped table) makes it fail over and over, which
 * pg_stat_subscription_stats counts; a table added to the publication is
 * not in the subscription.  Either way the worker records a live_rebuild
 * event and builds a new live snapshot beside the old one, which keeps
 * serving copies, as a stale snapshot does, until the new one is ready.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_shmem.h"
#include "sbx_spi.h"
#include "sbx_worker.h"
#include "storage/ipc.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/timestamp.h"

/* looks at a source the worker remembers, for live_as_of */
#define SBX_LIVE_LOOKS	16

/* the source's WAL position at a look, and its time then */
typedef struct SbxLiveLook
{
	XLogRecPtr	lsn;
	TimestampTz at;
} SbxLiveLook;

/* what the worker remembers of a live snapshot between two looks */
typedef struct SbxLiveWatch
{
	int64		id;
	SbxLiveLook looks[SBX_LIVE_LOOKS];	/* the last looks that reached the
										 * source, oldest first */
	int			nlooks;
	TimestampTz lag_event;		/* when the last live_lag event was written */
	bool		behind;			/* a live_lag event was written, and no
								 * live_caught_up since */
	bool		looked;			/* errors and applied are set */
	int64		errors;			/* the apply's errors at the last look */
	char		applied[32];	/* the last transaction it had committed then */
	int			stuck;			/* looks that found new errors with the source
								 * answering, since the apply last committed */
	TimestampTz error_at;		/* when the last of those looks was */
} SbxLiveWatch;

static List *sbx_live_watches = NIL;	/* of SbxLiveWatch, in sbx_worker_cxt */

typedef struct SbxLiveRow SbxLiveRow;
static void sbx_live_resume_unheld(const SbxLiveRow *r);

/* how long a failed live build waits before the next one */
#define SBX_LIVE_RETRY_SECS		60
/* how long the worker waits for a source to answer its look */
#define SBX_LIVE_PROBE_TIMEOUT	2
/* how often a lag past the setting is an event */
#define SBX_LIVE_LAG_EVENT_MS	600000
/* looks that find the apply failing before a rebuild, and how long they count */
#define SBX_LIVE_STUCK_LOOKS	3
#define SBX_LIVE_STUCK_FORGET_MS	60000

/*
 * In a worker transaction: lock live snapshot 'name' (row id) as a snapshot
 * is kept, but for its apply: its role cannot log in and its database
 * belongs to the bootstrap superuser, but the database takes connections
 * of pgsandbox_live alone, the role its apply runs as; and record what its
 * subscription follows.
 */
void
sbx_lock_live_snapshot(const char *name, int64 id, const char *tables)
{
	const char *q = quote_identifier(name);
	char	   *superuser = GetUserNameFromId(BOOTSTRAP_SUPERUSERID, false);
	char		idbuf[32];
	const char *args[2] = {idbuf, tables};

	sbx_run_utility(psprintf("ALTER ROLE %s NOLOGIN", q), NULL);
	sbx_run_utility(psprintf("ALTER DATABASE %s OWNER TO %s", q, quote_identifier(superuser)),
					NULL);
	sbx_run_utility(psprintf("REVOKE ALL ON DATABASE %s FROM PUBLIC", q), NULL);
	sbx_run_utility(psprintf("GRANT CONNECT ON DATABASE %s TO " SBX_LIVE_ROLE, q), NULL);
	snprintf(idbuf, sizeof(idbuf), INT64_FORMAT, id);
	sbx_spi("UPDATE pgsandbox.sandbox SET live_tables = $2 WHERE id = $1::bigint",
			SPI_OK_UPDATE, 2, args);
}

/*
 * In a worker transaction: a live source whose live snapshot is to be
 * built now, copied into source (NAMEDATALEN bytes): one with no live
 * snapshot that serves, or whose live snapshot's apply has failed, and no
 * live build under way or failed in the last minute.
 */
bool
sbx_live_next_build(char *source)
{
	bool		found;

	if (!sbx_catalog_has_live())
		return false;
	sbx_spi(psprintf("SELECT o.name FROM pgsandbox.source o"
					 " WHERE o.live_publication IS NOT NULL AND o.allow_data"
					 "   AND NOT EXISTS (SELECT 1 FROM pgsandbox.sandbox s"
					 "                    WHERE s.kind = 'snapshot' AND s.source = o.name"
					 "                      AND s.retired_at IS NULL AND %s"
					 "                      AND ((s.live_slot IS NOT NULL"
					 "                            AND (s.status = 'cloning'"
					 "                                 OR (s.status = 'ready' AND s.live_errors = 0)))"
					 /* a failed build has forgotten its slot (sbx_live_forget_slot) */
					 "                           OR (s.status = 'failed' AND NOT s.schema_only"
					 "                               AND s.created_at > pg_catalog.now() - interval '%d seconds')))"
					 " ORDER BY o.name LIMIT 1",
					 sbx_same_source_sql(), SBX_LIVE_RETRY_SECS),
			SPI_OK_SELECT, 0, NULL);
	found = SPI_processed == 1;
	if (found)
		strlcpy(source, sbx_spi_text(0, 1), NAMEDATALEN);
	return found;
}

/*
 * In a worker transaction: retire the live snapshots of sources that are
 * no longer live (unset_live(), or removed, or added again), ready or being
 * built; they are dropped once no copy of them is under way, their
 * subscription and slot with them (sbx_live_detach_database).
 */
static void
sbx_retire_unfollowed(void)
{
	sbx_spi(psprintf("UPDATE pgsandbox.sandbox s SET retired_at = pg_catalog.now()"
					 " WHERE s.kind = 'snapshot' AND s.live_slot IS NOT NULL"
					 "   AND s.retired_at IS NULL AND s.status IN ('cloning', 'ready')"
					 "   AND NOT EXISTS (SELECT 1 FROM pgsandbox.source o"
					 "                    WHERE o.name = s.source AND %s"
					 "                      AND o.live_publication IS NOT NULL)",
					 sbx_same_source_sql()),
			SPI_OK_UPDATE, 0, NULL);
}

static SbxLiveWatch *
sbx_live_watch(int64 id)
{
	ListCell   *lc;
	SbxLiveWatch *w;
	MemoryContext old;

	foreach(lc, sbx_live_watches)
	{
		w = lfirst(lc);
		if (w->id == id)
			return w;
	}
	old = MemoryContextSwitchTo(sbx_worker_cxt);
	w = palloc0(sizeof(SbxLiveWatch));
	w->id = id;
	sbx_live_watches = lappend(sbx_live_watches, w);
	MemoryContextSwitchTo(old);
	return w;
}

/* what the worker reads of a ready live snapshot and its subscription */
struct SbxLiveRow
{
	int64		id;
	char	   *name;
	Oid			dboid;
	char	   *slot;
	int64		errors_seen;
	char	   *source;
	char	   *conninfo;
	bool		require_password;
	char	   *publication;
	bool		subscribed;		/* its subscription exists */
	bool		enabled;
	bool		intact;			/* owned by its role, on its slot and publication */
	int64		apply_errors;
	bool		running;		/* its apply worker runs */
	char	   *reported_lsn;	/* the last keepalive a running apply took
								 * (latest_end_lsn): every message before it
								 * is applied; NULL if not known */
	char	   *tables;			/* what it subscribed to, counted and hashed */
	char	   *origin_lsn;		/* the last transaction it committed, at the
								 * source's WAL position, NULL if none yet */
};

/* In a worker transaction: the ready live snapshots that serve now. */
static List *
sbx_live_rows(void)
{
	List	   *rows = NIL;
	MemoryContext old;

	sbx_spi(psprintf("WITH %s"
					 " SELECT s.id, s.name, s.db_oid, s.live_slot, s.live_errors,"
					 "        o.name, o.conninfo, o.require_password, o.live_publication,"
					 "        sub.oid IS NOT NULL, COALESCE(sub.subenabled, false),"
					 "        COALESCE(sub.subowner = '" SBX_LIVE_ROLE "'::pg_catalog.regrole AND sub.subslotname = s.live_slot"
					 "                 AND sub.subpublications = ARRAY[o.live_publication]::text[], false),"
					 "        COALESCE((SELECT st.apply_error_count FROM pg_catalog.pg_stat_subscription_stats st"
					 "                   WHERE st.subid = sub.oid), 0),"
					 "        (SELECT a.latest_end_lsn::text"
					 "           FROM pg_catalog.pg_stat_subscription a"
					 "          WHERE a.subid = sub.oid AND a.relid IS NULL AND a.pid IS NOT NULL"
					 "          ORDER BY a.latest_end_lsn DESC NULLS LAST LIMIT 1),"
					 "        s.live_tables,"
					 "        (SELECT r.remote_lsn::text FROM pg_catalog.pg_replication_origin_status r"
					 "          WHERE r.external_id = 'pg_' || sub.oid),"
					 "        EXISTS (SELECT 1 FROM pg_catalog.pg_stat_subscription a"
					 "                 WHERE a.subid = sub.oid AND a.relid IS NULL AND a.pid IS NOT NULL)"
					 "   FROM current_snapshot c"
					 "   JOIN pgsandbox.sandbox s ON s.id = c.id"
					 "   JOIN pgsandbox.source o ON o.name = s.source"
					 "   LEFT JOIN pg_catalog.pg_subscription sub"
					 "     ON sub.subdbid = s.db_oid AND sub.subname = s.name"
					 "  WHERE s.live_slot IS NOT NULL AND s.status = 'ready'"
					 "    AND o.live_publication IS NOT NULL",
					 sbx_current_snapshots_cte()),
			SPI_OK_SELECT, 0, NULL);
	/* the rows outlive the transaction */
	old = MemoryContextSwitchTo(sbx_outer_cxt);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		SbxLiveRow *r = palloc0(sizeof(SbxLiveRow));
		bool		isnull;

		r->id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		r->name = SPI_getvalue(tup, desc, 2);
		r->dboid = DatumGetObjectId(SPI_getbinval(tup, desc, 3, &isnull));
		r->slot = SPI_getvalue(tup, desc, 4);
		r->errors_seen = DatumGetInt64(SPI_getbinval(tup, desc, 5, &isnull));
		r->source = SPI_getvalue(tup, desc, 6);
		r->conninfo = SPI_getvalue(tup, desc, 7);
		r->require_password = DatumGetBool(SPI_getbinval(tup, desc, 8, &isnull));
		r->publication = SPI_getvalue(tup, desc, 9);
		r->subscribed = DatumGetBool(SPI_getbinval(tup, desc, 10, &isnull));
		r->enabled = DatumGetBool(SPI_getbinval(tup, desc, 11, &isnull));
		r->intact = DatumGetBool(SPI_getbinval(tup, desc, 12, &isnull));
		r->apply_errors = DatumGetInt64(SPI_getbinval(tup, desc, 13, &isnull));
		r->reported_lsn = SPI_getvalue(tup, desc, 14);
		r->tables = SPI_getvalue(tup, desc, 15);
		r->origin_lsn = SPI_getvalue(tup, desc, 16);
		r->running = DatumGetBool(SPI_getbinval(tup, desc, 17, &isnull));
		rows = lappend(rows, r);
	}
	MemoryContextSwitchTo(old);
	return rows;
}

/*
 * In a worker transaction: live snapshot r cannot follow its source any
 * more; record why, once, and let the upkeep build a new one beside it.
 */
static void
sbx_live_broken(const SbxLiveRow *r, const char *why)
{
	char		id[32];
	char		errors[32];
	const char *args[2] = {id, errors};

	snprintf(id, sizeof(id), INT64_FORMAT, r->id);
	snprintf(errors, sizeof(errors), INT64_FORMAT, Max(r->apply_errors, r->errors_seen + 1));
	sbx_spi("UPDATE pgsandbox.sandbox SET live_errors = $2::bigint WHERE id = $1::bigint",
			SPI_OK_UPDATE, 2, args);
	if (r->errors_seen == 0)
		sbx_log_event(r->name, "live_rebuild", SBX_WORKER_ACTOR,
					  psprintf("%s; a new live snapshot of source \"%s\" is built, and this one serves copies until it is ready",
							   why, r->source));
}

/* a pg_lsn as text, or InvalidXLogRecPtr for NULL */
static XLogRecPtr
sbx_lsn_of(const char *text)
{
	if (text == NULL)
		return InvalidXLogRecPtr;
	return DatumGetLSN(DirectFunctionCall1(pg_lsn_in, CStringGetDatum(text)));
}

/*
 * How far the apply of live snapshot r has certainly gone, in its source's
 * WAL: every transaction the source committed before this position is in
 * the snapshot.  The most any of these tells: the position the subscriber
 * confirmed to the source's slot (read at the look, if it reached the
 * source), the end of the last source transaction the apply committed
 * (its replication origin, kept while the apply is away), and the last
 * keepalive a running apply took, which comes after every message it has
 * applied (not received_lsn: that is set before the message it names is
 * applied, and a commit may still fail).  InvalidXLogRecPtr if none is
 * known.  A missing figure is never read as 0/0: that made the lag the
 * source's whole WAL whenever the apply was paused or restarting.
 */
static XLogRecPtr
sbx_live_applied(const SbxLiveRow *r, const SbxLiveProbe *probe, bool reached)
{
	XLogRecPtr	applied = sbx_lsn_of(r->origin_lsn);

	if (reached)
		applied = Max(applied, sbx_lsn_of(probe->confirmed));
	if (r->running)
		applied = Max(applied, sbx_lsn_of(r->reported_lsn));
	return applied;
}

/* what the apply of live snapshot r is doing, as the snapshots view says */
static const char *
sbx_live_state(const SbxLiveRow *r, bool reached)
{
	if (!reached)
		return "source unreachable";
	if (!r->enabled)
		return "paused";
	if (!r->running)
		return "starting";
	return "applying";
}

/*
 * Keep watch w's looks: those older than the newest one the apply has
 * passed (up to 'applied', if known) tell nothing more and go; a look that
 * reached the source ('probe', NULL if none did) is added.  Full of looks
 * the apply has not passed (it is SBX_LIVE_LOOKS looks behind), every
 * other one goes first, the oldest kept, so that the looks span the whole
 * lag, more thinly, and the apply passes one again.
 */
static void
sbx_live_keep_looks(SbxLiveWatch *w, XLogRecPtr applied, const SbxLiveProbe *probe)
{
	if (!XLogRecPtrIsInvalid(applied))
	{
		int			newest_passed = -1;

		for (int i = 0; i < w->nlooks; i++)
			if (w->looks[i].lsn <= applied)
				newest_passed = i;
		if (newest_passed > 0)
		{
			memmove(&w->looks[0], &w->looks[newest_passed],
					sizeof(SbxLiveLook) * (w->nlooks - newest_passed));
			w->nlooks -= newest_passed;
		}
	}
	if (probe == NULL)
		return;
	if (w->nlooks == SBX_LIVE_LOOKS)
	{
		int			kept = 1;

		for (int i = 2; i < w->nlooks; i += 2)
			w->looks[kept++] = w->looks[i];
		w->nlooks = kept;
	}
	w->looks[w->nlooks].lsn = sbx_lsn_of(probe->lsn);
	w->looks[w->nlooks].at = DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in,
																	 CStringGetDatum(probe->now),
																	 ObjectIdGetDatum(InvalidOid),
																	 Int32GetDatum(-1)));
	w->nlooks++;
}

/*
 * In a worker transaction: record how far live snapshot r is behind its
 * source, from what is known.  A look that reached the source adds its WAL
 * position and time to the watch's looks.  Every change the source made
 * before a look is in once the apply has passed that look's position:
 * live_as_of is the time of the newest look passed (the look now, on a
 * quiet source).  live_lag_bytes is the source's WAL after the applied
 * position, at this look or, when the source cannot be reached, at the
 * last look that reached it; it is held when nothing tells the applied
 * position.  A live_lag event is written when live_as_of falls behind
 * pgsandbox.live_max_lag by this server's clock, whether or not the source
 * answers (at most every 10 minutes), and a live_caught_up event once it
 * is back within it.
 */
static void
sbx_live_measure(const SbxLiveRow *r, const SbxLiveProbe *probe, bool reached)
{
	SbxLiveWatch *w = sbx_live_watch(r->id);
	XLogRecPtr	applied = sbx_live_applied(r, probe, reached);
	const char *state = sbx_live_state(r, reached);
	TimestampTz passed = 0;
	bool		has_state = sbx_catalog_has_live_state();
	char		id[32];
	char		lagbuf[32];
	char		asofbuf[MAXDATELEN + 1];
	const char *args[4] = {id, NULL, NULL, state};
	bool		isnull;
	TimestampTz as_of;
	Datum		lag;
	TimestampTz now = GetCurrentTimestamp();
	bool		behind;

	sbx_live_keep_looks(w, applied, reached ? probe : NULL);
	if (!XLogRecPtrIsInvalid(applied))
	{
		for (int i = w->nlooks - 1; i >= 0; i--)
		{
			if (w->looks[i].lsn <= applied)
			{
				passed = w->looks[i].at;
				break;
			}
		}
		if (w->nlooks > 0)
		{
			XLogRecPtr	source_lsn = w->looks[w->nlooks - 1].lsn;

			snprintf(lagbuf, sizeof(lagbuf), UINT64_FORMAT,
					 (uint64) (source_lsn > applied ? source_lsn - applied : 0));
			args[2] = lagbuf;
		}
	}
	if (passed != 0)
	{
		strlcpy(asofbuf, timestamptz_to_str(passed), sizeof(asofbuf));
		args[1] = asofbuf;
	}

	snprintf(id, sizeof(id), INT64_FORMAT, r->id);
	sbx_spi(psprintf("UPDATE pgsandbox.sandbox SET"
					 " live_lag_bytes = COALESCE($3::bigint, live_lag_bytes),"
					 " live_as_of = GREATEST(live_as_of, $2::timestamptz)%s"
					 " WHERE id = $1::bigint"
					 " RETURNING COALESCE(GREATEST(live_as_of, data_as_of), data_as_of), live_lag_bytes",
					 has_state
					 ? ", live_state_since = CASE WHEN live_state IS DISTINCT FROM $4"
					 "                       THEN pg_catalog.now() ELSE live_state_since END,"
					 " live_state = $4"
					 : ""),
			SPI_OK_UPDATE_RETURNING, has_state ? 4 : 3, args);
	if (SPI_processed != 1)
		return;
	as_of = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	if (isnull)
		return;
	lag = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
	behind = sbx_live_max_lag > 0 &&
		TimestampDifferenceExceeds(as_of, now, sbx_live_max_lag * 1000);
	if (behind &&
		(w->lag_event == 0 || TimestampDifferenceExceeds(w->lag_event, now, SBX_LIVE_LAG_EVENT_MS)))
	{
		w->lag_event = now;
		w->behind = true;
		sbx_log_event(r->name, "live_lag", SBX_WORKER_ACTOR,
					  psprintf("the live snapshot of source \"%s\" holds its changes up to %s only, more than pgsandbox.live_max_lag behind; %s",
							   r->source, timestamptz_to_str(as_of),
							   !reached
							   ? psprintf("the source cannot be reached (%s)", probe->why ? probe->why : "no answer")
							   : isnull
							   ? pstrdup("how much of the source's WAL is not applied is not known yet")
							   : psprintf(INT64_FORMAT " bytes of the source's WAL are not applied yet; its apply is %s",
										  DatumGetInt64(lag), state)));
	}
	else if (!behind && w->behind)
	{
		/*
		 * The 10 minutes between two live_lag events hold across a catch-up,
		 * so that a lag near the bound writes no pair at every look
		 */
		w->behind = false;
		if (has_state && sbx_live_max_lag > 0)
			sbx_log_event(r->name, "live_caught_up", SBX_WORKER_ACTOR,
						  psprintf("the live snapshot of source \"%s\" is back within pgsandbox.live_max_lag: it holds every change up to %s",
								   r->source, timestamptz_to_str(as_of)));
	}
}

/*
 * Count the looks that found live snapshot r's apply failing for good: new
 * errors since the last look, with the source answering, and no source
 * transaction committed by the apply since the count began (its
 * replication origin has not moved).  An apply that fails while its source
 * is away (a restart, the network) is not broken: it starts again once the
 * source is back, and commits.  The count is forgotten once the apply
 * commits, or after a minute with no new error.
 */
static void
sbx_live_count_stuck(const SbxLiveRow *r, bool reached)
{
	SbxLiveWatch *w = sbx_live_watch(r->id);
	const char *applied = r->origin_lsn ? r->origin_lsn : "";
	bool		committed = w->looked && strcmp(applied, w->applied) != 0;

	if (!w->looked || committed)
		w->stuck = 0;
	else if (r->apply_errors > w->errors && reached)
	{
		w->stuck++;
		w->error_at = GetCurrentTimestamp();
	}
	else if (w->stuck > 0 &&
			 TimestampDifferenceExceeds(w->error_at, GetCurrentTimestamp(), SBX_LIVE_STUCK_FORGET_MS))
		w->stuck = 0;
	w->looked = true;
	w->errors = r->apply_errors;
	strlcpy(w->applied, applied, sizeof(w->applied));
}

/*
 * Look after one ready live snapshot: its subscription intact and its apply
 * working, the publication's tables all subscribed, an apply left paused
 * resumed, and how far behind it is.
 */
static void
sbx_live_look(SbxLiveRow *r)
{
	SbxLiveProbe probe;
	bool		reached;

	reached = sbx_live_probe(r->source, r->conninfo, r->require_password, r->slot,
							 r->publication, SBX_LIVE_PROBE_TIMEOUT, &probe);
	explicit_bzero(r->conninfo, strlen(r->conninfo));

	sbx_live_count_stuck(r, reached);
	sbx_xact_begin("pgsandbox: looking after a live snapshot");
	if (!r->subscribed || !r->intact)
		sbx_live_broken(r, "its subscription is gone or was changed");
	else if (r->errors_seen > 0 || sbx_live_watch(r->id)->stuck >= SBX_LIVE_STUCK_LOOKS)
		sbx_live_broken(r, psprintf("its apply failed " INT64_FORMAT " times, and committed nothing over %d looks that found new errors with the source answering (the server log says why: most often a change of the source's schema, which is not replicated)",
									r->apply_errors, SBX_LIVE_STUCK_LOOKS));
	else if (reached && probe.tables == NULL)
		sbx_live_broken(r, psprintf("publication \"%s\" is gone from the source", r->publication));
	else if (reached && r->tables != NULL && strcmp(probe.tables, r->tables) != 0)
		sbx_live_broken(r, psprintf("publication \"%s\" publishes other tables than the subscription follows (%s, against %s: counted and hashed by name)",
									r->publication, probe.tables, r->tables));
	sbx_live_measure(r, &probe, reached);
	sbx_xact_commit();

	/* a copy's clone worker died with the apply paused */
	if (r->subscribed && !r->enabled)
		sbx_live_resume_unheld(r);
}

/*
 * The pause the lifecycle worker holds while it resumes an apply, 0 for
 * none, and whether it has left it already; let go of at exit, so that a
 * worker ended mid resume leaves no copy waiting.
 */
static int64 sbx_worker_pause = 0;
static bool sbx_worker_pause_left = false;

static void
sbx_live_release_at_exit(int code, Datum arg)
{
	double		secs;

	if (sbx_worker_pause == 0)
		return;
	if (!sbx_worker_pause_left)
		(void) sbx_live_pause_leave(sbx_worker_pause, &secs);
	sbx_live_pause_resumed(sbx_worker_pause);
	sbx_worker_pause = 0;
}

/*
 * Resume the apply of live snapshot r, left paused by a copy that died,
 * unless a copy holds the pause now.  The worker takes the pause as a copy
 * would, so that no copy pauses the apply while it resumes it.
 */
static void
sbx_live_resume_unheld(const SbxLiveRow *r)
{
	static bool exit_callback = false;
	TimestampTz as_of;
	double		secs;
	SbxPauseTurn turn = sbx_live_pause_join(r->id, &as_of);

	if (turn == SBX_PAUSE_WAIT)
		return;					/* a copy is pausing it */
	/* shared: a copy holds it, and resumes it unless it left meanwhile */
	if (turn == SBX_PAUSE_SHARED && !sbx_live_pause_leave(r->id, &secs))
		return;
	if (!exit_callback)
	{
		before_shmem_exit(sbx_live_release_at_exit, (Datum) 0);
		exit_callback = true;
	}
	sbx_worker_pause = r->id;
	sbx_worker_pause_left = turn == SBX_PAUSE_SHARED;
	PG_TRY();
	{
		sbx_live_command(r->dboid, r->name, r->name, SBX_LIVE_RESUME);
	}
	PG_FINALLY();
	{
		if (turn == SBX_PAUSE_MINE)
			(void) sbx_live_pause_leave(r->id, &secs);
		sbx_live_pause_resumed(r->id);
		sbx_worker_pause = 0;
	}
	PG_END_TRY();
}

static void
sbx_live_look_step(void *arg)
{
	sbx_live_look((SbxLiveRow *) arg);
}

/*
 * A slot left on a source: that of a live build that failed, which its
 * clone worker drops unless it died first (a crash, a restart), or that of
 * a live snapshot dropped while its source could not be reached.  One a
 * step, in turn, so that a source that stays away delays no other: dropped
 * on its source now, or forgotten with a warning if the source was removed
 * since.
 */
static void
sbx_live_drop_left_slot(void *arg)
{
	static int64 last_id = 0;
	char		lastbuf[24];
	char	   *id = NULL;
	char	   *slot = NULL;
	char	   *source = NULL;
	char	   *conninfo = NULL;
	bool		require_password = true;
	char	   *why = NULL;
	bool		gone;

	snprintf(lastbuf, sizeof(lastbuf), INT64_FORMAT, last_id);
	sbx_xact_begin("pgsandbox: looking for slots left on sources");
	sbx_spi(psprintf("SELECT s.id::text, s.live_slot, s.source, o.conninfo, o.require_password"
					 "  FROM pgsandbox.sandbox s"
					 "  LEFT JOIN pgsandbox.source o ON o.name = s.source AND %s"
					 " WHERE s.kind = 'snapshot' AND s.status IN ('failed', 'dropped')"
					 "   AND s.live_slot IS NOT NULL"
					 " ORDER BY s.id > $1::bigint DESC, s.id LIMIT 1", sbx_same_source_sql()),
			SPI_OK_SELECT, 1, (const char *[]) {lastbuf});
	if (SPI_processed == 1)
	{
		id = sbx_keep(sbx_spi_text(0, 1));
		slot = sbx_keep(sbx_spi_text(0, 2));
		source = sbx_keep(sbx_spi_text(0, 3));
		conninfo = sbx_keep(sbx_spi_text(0, 4));
		require_password = strcmp(sbx_spi_text(0, 5) ? sbx_spi_text(0, 5) : "t", "t") == 0;
	}
	sbx_xact_commit();
	if (id == NULL)
		return;
	last_id = strtoi64(id, NULL, 10);

	gone = conninfo == NULL ||
		sbx_live_slot_drop(source, conninfo, require_password, slot, SBX_LIVE_PROBE_TIMEOUT, &why);
	if (conninfo != NULL)
		explicit_bzero(conninfo, strlen(conninfo));
	if (!gone)
		return;					/* the source is away: its turn comes again */
	if (conninfo == NULL)
		ereport(WARNING,
				(errmsg("the replication slot \"%s\" of a live snapshot may be left on removed source \"%s\"",
						slot, source),
				 errhint("Drop it there with pg_drop_replication_slot() if it is.")));
	sbx_xact_begin("pgsandbox: forgetting a slot left on a source");
	sbx_spi("UPDATE pgsandbox.sandbox SET live_slot = NULL WHERE id = $1::bigint",
			SPI_OK_UPDATE, 1, (const char *[]) {id});
	sbx_xact_commit();
}

/*
 * The live timer: retire what no longer follows a live source, then look
 * after each live snapshot that serves, each in its own error handler, and
 * drop a slot left on a source.
 */
bool
sbx_live_step(void)
{
	List	   *rows;
	ListCell   *lc;

	sbx_xact_begin("pgsandbox: looking for live snapshots");
	if (!sbx_catalog_has_live())
	{
		sbx_xact_commit();
		return false;
	}
	sbx_retire_unfollowed();
	rows = sbx_live_rows();
	/* set_live() does not pass the queue: wake the upkeep for its build */
	sbx_spi("SELECT 1 FROM pgsandbox.source WHERE live_publication IS NOT NULL LIMIT 1",
			SPI_OK_SELECT, 0, NULL);
	if (SPI_processed > 0)
		sbx_snapshots_may_exist = true;
	sbx_xact_commit();
	foreach(lc, rows)
	{
		SbxLiveRow *r = lfirst(lc);

		(void) sbx_try_or_warn(sbx_live_look_step, r,
							   psprintf("could not look after the live snapshot \"%s\"", r->name));
	}
	/* forget what was watched of live snapshots that no longer serve */
	foreach(lc, sbx_live_watches)
	{
		SbxLiveWatch *w = lfirst(lc);
		bool		serves = false;
		ListCell   *rc;

		foreach(rc, rows)
			serves |= ((SbxLiveRow *) lfirst(rc))->id == w->id;
		if (!serves)
		{
			sbx_live_watches = foreach_delete_current(sbx_live_watches, lc);
			pfree(w);
		}
	}
	list_free_deep(rows);
	(void) sbx_try_or_warn(sbx_live_drop_left_slot, NULL,
						   "could not drop a slot left on a source");
	return false;
}

static void
sbx_live_forget_slot_step(void *arg)
{
	char		idbuf[24];

	snprintf(idbuf, sizeof(idbuf), INT64_FORMAT, *(int64 *) arg);
	sbx_xact_begin("pgsandbox: forgetting the slot of a failed live build");
	sbx_spi("UPDATE pgsandbox.sandbox SET live_slot = NULL WHERE id = $1::bigint",
			SPI_OK_UPDATE, 1, (const char *[]) {idbuf});
	sbx_xact_commit();
}

/*
 * Outside a transaction: the build of sandbox_id failed and its clone
 * worker dropped its slot, so the row no longer names one to drop.
 */
void
sbx_live_forget_slot(int64 sandbox_id)
{
	(void) sbx_try_or_warn(sbx_live_forget_slot_step, &sandbox_id,
						   "could not forget the slot of a failed live build");
}

/*
 * Outside a transaction, before database dboid ('name') is dropped: if it
 * holds a subscription (a live snapshot), stop its apply, drop the slot it
 * reads on the source, then the subscription.  The slot is dropped with
 * the connection string the subscription holds, so that this works after
 * the source was removed too.  A source that cannot be reached does not
 * hold the drop up while it is still a source: the subscription is
 * detached from its slot, and the catalog row keeps the slot's name for
 * the timer to drop it later with the source's connection string
 * (sbx_live_drop_left_slot).  A removed source has no connection string
 * but the subscription's: then the drop is an error, tried again later.
 * Meanwhile the slot keeps the source's WAL, which doctor() shows.
 */
void
sbx_live_detach_database(Oid dboid, const char *name)
{
	char		dbbuf[16];
	char	   *subname = NULL;
	char	   *slot = NULL;
	char	   *conninfo = NULL;
	char	   *source = NULL;
	char	   *why = NULL;

	snprintf(dbbuf, sizeof(dbbuf), "%u", dboid);
	sbx_xact_begin("pgsandbox: looking for a live snapshot's subscription");
	sbx_spi("SELECT b.subname, b.subslotname, b.subconninfo,"
			"       COALESCE((SELECT s.source FROM pgsandbox.sandbox s"
			"                  WHERE s.live_slot = b.subslotname LIMIT 1), $2)"
			"  FROM pg_catalog.pg_subscription b"
			" WHERE b.subdbid = $1::oid ORDER BY b.oid LIMIT 1", SPI_OK_SELECT, 2,
			(const char *[]) {dbbuf, name});
	if (SPI_processed == 1)
	{
		subname = sbx_keep(sbx_spi_text(0, 1));
		slot = sbx_keep(sbx_spi_text(0, 2));
		conninfo = sbx_keep(sbx_spi_text(0, 3));
		source = sbx_keep(sbx_spi_text(0, 4));
	}
	sbx_xact_commit();
	if (subname == NULL)
		return;

	sbx_live_command(dboid, name, subname, SBX_LIVE_PAUSE);
	if (slot != NULL)
	{
		bool		dropped = sbx_live_slot_drop(source, conninfo, true, slot,
												 SBX_LIVE_PROBE_TIMEOUT, &why);

		bool		source_kept = false;

		if (!dropped)
		{
			/* the slot can be dropped later only with the source's row */
			sbx_xact_begin("pgsandbox: looking for a live snapshot's source");
			sbx_spi(psprintf("SELECT 1 FROM pgsandbox.sandbox s"
							 "  JOIN pgsandbox.source o ON o.name = s.source AND %s"
							 " WHERE s.live_slot = $1", sbx_same_source_sql()),
					SPI_OK_SELECT, 1, (const char *[]) {slot});
			source_kept = SPI_processed > 0;
			sbx_xact_commit();
		}
		if (dropped)
		{
			sbx_xact_begin("pgsandbox: forgetting a live snapshot's slot");
			sbx_spi("UPDATE pgsandbox.sandbox SET live_slot = NULL WHERE live_slot = $1",
					SPI_OK_UPDATE, 1, (const char *[]) {slot});
			sbx_xact_commit();
		}
		else if (!source_kept)
		{
			/* removed: only the subscription still knows how to reach it */
			explicit_bzero(conninfo, strlen(conninfo));
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("could not drop the replication slot \"%s\" of live snapshot \"%s\" on removed source \"%s\"",
							slot, name, source),
					 errdetail_internal("%s", why),
					 errhint("The drop is tried again later, with the connection string its subscription holds; meanwhile the slot keeps the source's WAL.")));
		}
		else
			ereport(WARNING,
					(errmsg("could not drop the replication slot \"%s\" of live snapshot \"%s\" on its source",
							slot, name),
					 errdetail_internal("%s", why),
					 errhint("The worker drops it once the source can be reached; meanwhile the slot keeps the source's WAL.")));
	}
	explicit_bzero(conninfo, strlen(conninfo));
	sbx_live_command(dboid, name, subname, SBX_LIVE_DETACH);
}
