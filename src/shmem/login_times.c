/*-------------------------------------------------------------------------
 *
 * login_times.c
 *	  When each sandbox was last logged into, for idle expiry, and what each
 *	  was refused by its caps, for its events.
 *
 * The login check (login_check.c) sees every login of a sandbox role.  It
 * notes the moment in a small table in shared memory, which costs a short
 * lock and no catalog access: the check runs before the connection has a
 * database to read.  The lifecycle worker moves the table into the
 * catalog's last_used_at at most once a minute (sbx_usage_flush); until
 * then, sbx_pending_login tells the reaper of a login the catalog does not
 * show yet, so that a sandbox logged into just before its idle timeout
 * lives on.  Sessions still open are counted from the backends instead.
 *
 * The table holds the logins of one flush interval.  Should more distinct
 * sandbox roles than it holds log in within one, the latest logins are not
 * noted; the worker is woken, and flushes within a second.  A server restart loses what
 * was not yet flushed.
 *
 * The logins and PREPARE TRANSACTIONs a sandbox's caps refused are counted
 * the same way, by role and by cap, and written at most once a minute: one
 * 'refused' event per sandbox, whatever a client retrying in a loop does,
 * and the metrics' counters.  Refusals of roles past the table's size are
 * counted in the metrics only.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "sbx_common.h"
#include "sbx_shmem.h"
#include "sbx_spi.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#define SBX_MAX_NOTED_LOGINS	1024

typedef struct SbxLogin
{
	Oid			role;			/* InvalidOid: a free entry */
	TimestampTz at;
} SbxLogin;

#define SBX_MAX_NOTED_REFUSALS	256

typedef struct SbxRefused
{
	Oid			role;
	int64		count[SBX_NUM_REFUSALS];
} SbxRefused;

typedef struct SbxUsage
{
	LWLock	   *lock;
	int			nused;			/* entries in use, from the start */
	bool		overflow;		/* a login found the table full */
	SbxLogin	logins[SBX_MAX_NOTED_LOGINS];
	int			nrefused;
	SbxRefused	refused[SBX_MAX_NOTED_REFUSALS];
	int64		unnamed[SBX_NUM_REFUSALS];	/* refusals past the table */
	TimestampTz refusals_flushed;	/* when they were last written */
} SbxUsage;

/* each cap as the metrics label it, and the setting behind it */
static const char *const sbx_refusal_labels[SBX_NUM_REFUSALS] = {
	"sandbox_sessions", "reserved_slots", "prepared_transactions"
};

static SbxUsage *sbx_usage = NULL;

void
sbx_usage_request_shmem(void)
{
	RequestAddinShmemSpace(MAXALIGN(sizeof(SbxUsage)));
	RequestNamedLWLockTranche("pgsandbox_usage", 1);
}

void
sbx_usage_startup_shmem(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	sbx_usage = ShmemInitStruct("pgsandbox_usage", sizeof(SbxUsage), &found);
	if (!found)
	{
		memset(sbx_usage, 0, sizeof(SbxUsage));
		sbx_usage->lock = &(GetNamedLWLockTranche("pgsandbox_usage"))->lock;
	}
	LWLockRelease(AddinShmemInitLock);
}

/* A sandbox role has logged in (called by the login check). */
void
sbx_note_login(Oid role)
{
	TimestampTz now = GetCurrentTimestamp();
	bool		full = false;
	int			i;

	if (sbx_usage == NULL)
		return;
	LWLockAcquire(sbx_usage->lock, LW_EXCLUSIVE);
	for (i = 0; i < sbx_usage->nused; i++)
	{
		if (sbx_usage->logins[i].role == role)
			break;
	}
	if (i < sbx_usage->nused)
		sbx_usage->logins[i].at = now;
	else if (i < SBX_MAX_NOTED_LOGINS)
	{
		sbx_usage->logins[i].role = role;
		sbx_usage->logins[i].at = now;
		sbx_usage->nused++;
	}
	else
		full = sbx_usage->overflow = true;
	LWLockRelease(sbx_usage->lock);
	if (full)
		sbx_queue_wake_worker();
}

/* A sandbox role was refused by one of its caps (tenant_limits.c). */
void
sbx_note_refusal(Oid role, SbxRefusal why)
{
	int			i;

	if (sbx_usage == NULL)
		return;
	LWLockAcquire(sbx_usage->lock, LW_EXCLUSIVE);
	for (i = 0; i < sbx_usage->nrefused; i++)
	{
		if (sbx_usage->refused[i].role == role)
			break;
	}
	if (i == sbx_usage->nrefused && i < SBX_MAX_NOTED_REFUSALS)
	{
		memset(&sbx_usage->refused[i], 0, sizeof(SbxRefused));
		sbx_usage->refused[i].role = role;
		sbx_usage->nrefused++;
	}
	if (i < sbx_usage->nrefused)
		sbx_usage->refused[i].count[why]++;
	else
		sbx_usage->unnamed[why]++;
	LWLockRelease(sbx_usage->lock);
}

/* The last login of a role not yet flushed to the catalog, or 0. */
TimestampTz
sbx_pending_login(Oid role)
{
	TimestampTz at = 0;

	if (sbx_usage == NULL)
		return 0;
	LWLockAcquire(sbx_usage->lock, LW_SHARED);
	for (int i = 0; i < sbx_usage->nused; i++)
	{
		if (sbx_usage->logins[i].role == role)
		{
			at = sbx_usage->logins[i].at;
			break;
		}
	}
	LWLockRelease(sbx_usage->lock);
	return at;
}

/* Whether a login found the table full since the last flush. */
bool
sbx_usage_full(void)
{
	bool		overflow;

	if (sbx_usage == NULL)
		return false;
	LWLockAcquire(sbx_usage->lock, LW_SHARED);
	overflow = sbx_usage->overflow;
	LWLockRelease(sbx_usage->lock);
	return overflow;
}

/* What one sandbox was refused in the last minute, for its event. */
static char *
sbx_describe_refusals(const SbxRefused *r)
{
	StringInfoData buf;
	int64		logins = r->count[SBX_REFUSED_SANDBOX_SESSIONS] +
		r->count[SBX_REFUSED_RESERVED_SLOTS];

	initStringInfo(&buf);
	if (logins > 0)
		appendStringInfo(&buf, INT64_FORMAT " login%s refused", logins, logins == 1 ? "" : "s");
	if (r->count[SBX_REFUSED_SANDBOX_SESSIONS] > 0)
		appendStringInfo(&buf, ", " INT64_FORMAT " past its cap of sessions (pgsandbox.max_connections_per_sandbox = %d, or its clone's connection_limit)",
						 r->count[SBX_REFUSED_SANDBOX_SESSIONS], sbx_max_connections_per_sandbox);
	if (r->count[SBX_REFUSED_RESERVED_SLOTS] > 0)
		appendStringInfo(&buf, ", " INT64_FORMAT " in the slots reserved for the others (pgsandbox.reserved_connections = %d)",
						 r->count[SBX_REFUSED_RESERVED_SLOTS], sbx_reserved_connections);
	if (r->count[SBX_REFUSED_PREPARED] > 0)
		appendStringInfo(&buf, "%s" INT64_FORMAT " PREPARE TRANSACTION refused past its share (pgsandbox.max_prepared_per_sandbox: %d)",
						 logins > 0 ? "; " : "", r->count[SBX_REFUSED_PREPARED], sbx_prepared_cap());
	appendStringInfoString(&buf, ", in the last minute");
	return buf.data;
}

/*
 * Write what the caps refused since the last time, at most once a minute:
 * a 'refused' event per live sandbox, and the metrics' counters.
 */
static void
sbx_refusals_flush(void)
{
	TimestampTz now = GetCurrentTimestamp();
	SbxRefused *copy;
	int64		totals[SBX_NUM_REFUSALS];
	int			n;
	bool		events;

	LWLockAcquire(sbx_usage->lock, LW_EXCLUSIVE);
	if (!TimestampDifferenceExceeds(sbx_usage->refusals_flushed, now, 60000))
	{
		LWLockRelease(sbx_usage->lock);
		return;
	}
	n = sbx_usage->nrefused;
	copy = palloc(sizeof(SbxRefused) * Max(n, 1));
	memcpy(copy, sbx_usage->refused, sizeof(SbxRefused) * n);
	memcpy(totals, sbx_usage->unnamed, sizeof(totals));
	sbx_usage->nrefused = 0;
	memset(sbx_usage->unnamed, 0, sizeof(sbx_usage->unnamed));
	sbx_usage->refusals_flushed = now;
	LWLockRelease(sbx_usage->lock);

	if (n == 0 && totals[0] + totals[1] + totals[2] == 0)
	{
		pfree(copy);
		return;
	}
	sbx_xact_begin("pgsandbox: recording what sandboxes were refused");
	events = sbx_catalog_has_tenants();
	for (int i = 0; i < n; i++)
	{
		char		role[16];
		const char *args[2] = {role, sbx_describe_refusals(&copy[i])};

		for (int k = 0; k < SBX_NUM_REFUSALS; k++)
			totals[k] += copy[i].count[k];
		/* before the catalog knows the event, the counters only */
		if (!events)
			continue;
		snprintf(role, sizeof(role), "%u", copy[i].role);
		sbx_spi("INSERT INTO pgsandbox.event (sandbox, action, actor, detail)"
				" SELECT s.name, 'refused', '" SBX_WORKER_ACTOR "', $2 FROM pgsandbox.sandbox s"
				"  WHERE s.role_oid = $1::oid AND s.status = 'ready'",
				SPI_OK_INSERT, 2, args);
	}
	if (sbx_catalog_has_usage())
	{
		for (int k = 0; k < SBX_NUM_REFUSALS; k++)
		{
			char		count[32];
			const char *args[2] = {sbx_refusal_labels[k], count};

			if (totals[k] == 0)
				continue;
			snprintf(count, sizeof(count), INT64_FORMAT, totals[k]);
			sbx_spi("INSERT INTO pgsandbox.counter AS c (name, labels, value)"
					" VALUES ('pgsandbox_refusals_total',"
					"         pg_catalog.jsonb_build_object('limit', $1), $2::float8)"
					" ON CONFLICT (name, labels) DO UPDATE SET value = c.value + excluded.value",
					SPI_OK_INSERT, 2, args);
		}
	}
	sbx_xact_commit();
	pfree(copy);
}

/*
 * In the lifecycle worker: write the noted logins into the catalog's
 * last_used_at, in a transaction of its own, and forget those written.  A
 * login noted again meanwhile stays for the next flush.
 */
void
sbx_usage_flush(void)
{
	int			n;
	SbxLogin   *copy;
	StringInfoData roles;
	StringInfoData times;
	const char *args[2];

	if (sbx_usage == NULL)
		return;
	copy = palloc(sizeof(SbxLogin) * SBX_MAX_NOTED_LOGINS);
	LWLockAcquire(sbx_usage->lock, LW_SHARED);
	n = sbx_usage->nused;
	memcpy(copy, sbx_usage->logins, sizeof(SbxLogin) * n);
	LWLockRelease(sbx_usage->lock);

	if (n > 0)
	{
		initStringInfo(&roles);
		initStringInfo(&times);
		appendStringInfoChar(&roles, '{');
		appendStringInfoChar(&times, '{');
		for (int i = 0; i < n; i++)
		{
			appendStringInfo(&roles, "%s%u", i ? "," : "", copy[i].role);
			appendStringInfo(&times, "%s\"%s\"", i ? "," : "",
							 timestamptz_to_str(copy[i].at));
		}
		appendStringInfoChar(&roles, '}');
		appendStringInfoChar(&times, '}');
		args[0] = roles.data;
		args[1] = times.data;
		sbx_xact_begin("pgsandbox: recording the use of sandboxes");
		if (sbx_catalog_has_usage())
			sbx_spi("UPDATE pgsandbox.sandbox s"
					"   SET last_used_at = GREATEST(s.last_used_at, v.at)"
					"  FROM ROWS FROM (pg_catalog.unnest($1::oid[]),"
					"                  pg_catalog.unnest($2::timestamptz[])) AS v(role, at)"
					" WHERE s.role_oid = v.role AND s.status = 'ready'",
					SPI_OK_UPDATE, 2, args);
		sbx_xact_commit();
	}

	/* forget what was written, unless it changed meanwhile */
	LWLockAcquire(sbx_usage->lock, LW_EXCLUSIVE);
	for (int i = 0; i < n; i++)
	{
		for (int k = 0; k < sbx_usage->nused; k++)
		{
			if (sbx_usage->logins[k].role == copy[i].role)
			{
				if (sbx_usage->logins[k].at == copy[i].at)
				{
					sbx_usage->nused--;
					sbx_usage->logins[k] = sbx_usage->logins[sbx_usage->nused];
					sbx_usage->logins[sbx_usage->nused].role = InvalidOid;
				}
				break;
			}
		}
	}
	sbx_usage->overflow = false;
	LWLockRelease(sbx_usage->lock);
	pfree(copy);

	sbx_refusals_flush();
}
