/*-------------------------------------------------------------------------
 *
 * login_times.c
 *	  When each sandbox was last logged into, for idle expiry.
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
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgsandbox.h"
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

typedef struct SbxUsage
{
	LWLock	   *lock;
	int			nused;			/* entries in use, from the start */
	bool		overflow;		/* a login found the table full */
	SbxLogin	logins[SBX_MAX_NOTED_LOGINS];
} SbxUsage;

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
}
