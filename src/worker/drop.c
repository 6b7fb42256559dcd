/*-------------------------------------------------------------------------
 *
 * drop.c
 *	  Dropping sandboxes, snapshots, pool members and saves, and finishing
 *	  the drops that something blocked.
 *
 * A drop always finishes, whatever other roles hold or have granted:
 *
 * 1. From 0.9 the row is first marked 'dropping': from then on it is not
 *	  live (no quota or budget counts it), and the reaper finishes whatever
 *	  a blocked or interrupted attempt left, with a backoff.
 * 2. The way is cleared (lock_holders.c): prepared transactions that hold
 *	  the role or the database are rolled back wherever they are, and the
 *	  sandbox's sessions are ended.
 * 3. The role loses its login, then the database is dropped, each step
 *	  waiting at most pgsandbox.lock_timeout.
 * 4. The row is marked 'dropped': its database is gone.
 * 5. The role is dropped once every database that grants it something
 *	  (pg_shdepend says which: privileges, default privileges, policies,
 *	  which any login role can name it in) has revoked it (janitor.c).  A
 *	  role that cannot be dropped yet is left without login and dropped by
 *	  a later pass of the reaper (sbx_drop_one_leftover_role).
 *
 * A reset's databases beside the sandbox's (<name>_reset, <name>_old) are
 * dropped here too, by their name and their owner.
 *
 * Only what pgsandbox created and recorded is dropped: a role by its name
 * and recorded OID, a database by its name and its owner or recorded OID,
 * and in another database nothing is dropped where the role owns
 * something.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "sbx_common.h"
#include "sbx_shmem.h"
#include "sbx_spi.h"
#include "sbx_worker.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

/*
 * A condition, in SQL, on a row of pgsandbox.sandbox (0.7): idle, that is a
 * sandbox with an idle timeout, not used for that long by what the catalog
 * knows, and with no client session open in its database (autovacuum does
 * not count).  clone() keeps idle timeouts within pgsandbox.max_ttl, so the
 * sum cannot overflow.
 */
#define SBX_IDLE_SQL \
	"(sandbox.idle_timeout IS NOT NULL AND sandbox.kind = 'sandbox'" \
	" AND COALESCE(sandbox.last_used_at, sandbox.ready_at) + sandbox.idle_timeout" \
	"     <= pg_catalog.now()" \
	" AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a" \
	"                  WHERE a.datid = sandbox.db_oid" \
	"                    AND a.backend_type = 'client backend'))"

/*
 * A condition, in SQL, on a row of pgsandbox.sandbox, that it has expired:
 * past its expiry or (from 0.7) idle, with no session and no login noted in
 * the catalog for its idle timeout, and not protected (from 0.6).  A login
 * not yet flushed to the catalog is for the caller to check
 * (sbx_pending_login).  Needs a transaction.
 */
static const char *
sbx_expired_sql(void)
{
	if (!sbx_catalog_has_protection())
		return "(expires_at <= pg_catalog.now())";
	if (!sbx_catalog_has_usage())
		return "(expires_at <= pg_catalog.now()"
			" AND (protected_until IS NULL OR protected_until <= pg_catalog.now()))";
	return "((expires_at <= pg_catalog.now() OR " SBX_IDLE_SQL ")"
		" AND (protected_until IS NULL OR protected_until <= pg_catalog.now()))";
}

/* ------------------------------------------------------------------------
 * Databases and roles
 * ------------------------------------------------------------------------
 */

/*
 * Drop the database recorded for a sandbox, and what an interrupted reset
 * left beside it, after clearing the way and taking away the role's login.
 * With may_defer, janitors that must roll back prepared transactions first
 * are started and false returned: try again once they have stopped.  A
 * step blocked on a lock is recorded and raised (55P03).  Returns true once
 * the databases are gone; the role is for sbx_drop_role.
 */
bool
sbx_drop_resources(const char *name, const char *role_oid, const char *db_oid,
				   bool may_defer)
{
	MemoryContext cxt = CurrentMemoryContext;
	const char *args[3] = {name, role_oid, db_oid};
	Oid			role = InvalidOid;
	Oid			dboid = InvalidOid;
	bool		is_template = false;
	bool		leftovers = false;
	volatile bool cleared = false;
	bool		isnull;

	if (role_oid == NULL)
		return true;			/* the role was never made, so no database */

	sbx_xact_begin("pgsandbox: looking up sandbox resources");
	/* and whether a reset interrupted left databases the role owns */
	sbx_spi("SELECT oid, EXISTS (SELECT 1 FROM pg_catalog.pg_database"
			"                     WHERE datdba = $2::oid"
			"                       AND datname IN ($1 || '" SBX_RESET_SUFFIX "', $1 || '" SBX_OLD_SUFFIX "'))"
			"  FROM pg_catalog.pg_roles WHERE rolname = $1 AND oid = $2::oid",
			SPI_OK_SELECT, 2, args);
	if (SPI_processed > 0)
	{
		role = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
											  SPI_tuptable->tupdesc, 1, &isnull));
		leftovers = strcmp(sbx_spi_text(0, 2), "t") == 0;
	}
	/* an invalid database (a drop interrupted) can only be dropped */
	sbx_spi("SELECT d.oid, d.datistemplate AND d.datconnlimit <> -2"
			" FROM pg_catalog.pg_database d"
			" WHERE d.datname = $1 AND (d.datdba = $2::oid OR d.oid = $3::oid)",
			SPI_OK_SELECT, 3, args);
	if (SPI_processed > 0)
	{
		dboid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
											   SPI_tuptable->tupdesc, 1, &isnull));
		is_template = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
												 SPI_tuptable->tupdesc, 2, &isnull));
	}
	sbx_xact_commit();

	PG_TRY();
	{
		cleared = sbx_clear_way(name, role, dboid, may_defer);
		if (cleared)
		{
			/* the credentials open nothing even if what follows fails */
			if (OidIsValid(role))
				sbx_run_utility_xact(psprintf("ALTER ROLE %s NOLOGIN", quote_identifier(name)),
									 "pgsandbox: closing a sandbox role");
			/* DROP DATABASE refuses a template, which its owner could make it before 0.8 */
			if (is_template)
				sbx_run_utility_xact(psprintf("ALTER DATABASE %s IS_TEMPLATE false",
											  quote_identifier(name)),
									 "pgsandbox: dropping a sandbox database");
			if (OidIsValid(dboid))
			{
				/* a live snapshot's subscription, and its slot on the source */
				sbx_live_detach_database(dboid, name);
				sbx_run_utility_xact(psprintf("DROP DATABASE %s WITH (FORCE)",
											  quote_identifier(name)),
									 "pgsandbox: dropping a sandbox database");
			}
			/* what a reset interrupted may have left, which its role owns */
			if (leftovers)
				sbx_drop_reset_leftovers(name, role_oid, db_oid);
		}
	}
	PG_CATCH();
	{
		sbx_rethrow_blocked(sbx_catch_error(cxt), name, "drop", role, dboid,
							"The drop is finished by a later pass of the pgsandbox worker.");
	}
	PG_END_TRY();
	return cleared;
}

/*
 * Drop database 'name' if the sandbox's role or the reset's role owns it
 * and it is not 'keep'.
 */
void
sbx_drop_side_database(const char *name, const char *role_oid, const char *reset_role,
					   const char *keep)
{
	const char *args[4] = {name, role_oid, keep, reset_role};
	Oid			dboid = InvalidOid;
	bool		prepared = false;
	bool		isnull;

	/*
	 * An invalid database (its drop interrupted) may not be altered, only
	 * dropped; it has no prepared transactions and is no template.
	 */
	sbx_xact_begin("pgsandbox: looking for a reset's database");
	sbx_spi("SELECT d.oid, d.datconnlimit <> -2 AND EXISTS"
			"        (SELECT 1 FROM pg_catalog.pg_prepared_xacts p WHERE p.database = d.datname),"
			"       d.datistemplate AND d.datconnlimit <> -2"
			"  FROM pg_catalog.pg_database d"
			" WHERE d.datname = $1 AND (d.datdba = $2::oid OR d.datdba = $4::oid)"
			"   AND d.oid IS DISTINCT FROM $3::oid", SPI_OK_SELECT, 4, args);
	if (SPI_processed == 1)
	{
		dboid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
											   SPI_tuptable->tupdesc, 1, &isnull));
		prepared = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
											  SPI_tuptable->tupdesc, 2, &isnull));
		/* DROP DATABASE refuses a template */
		if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3,
									   &isnull)))
			sbx_run_utility(psprintf("ALTER DATABASE %s IS_TEMPLATE false",
									 quote_identifier(name)), NULL);
	}
	sbx_xact_commit();
	if (!OidIsValid(dboid))
		return;
	/* the janitor rolls back what DROP DATABASE would refuse */
	if (prepared)
	{
		sbx_janitor_start(dboid, name, InvalidOid, dboid, false);
		sbx_janitor_wait(dboid);
	}
	sbx_run_utility_xact(psprintf("DROP DATABASE %s WITH (FORCE)", quote_identifier(name)),
						 "pgsandbox: dropping a reset's database");
}

/*
 * Drop <name>_reset and <name>_old if the sandbox's role owns them: before
 * the role itself is dropped.
 */
void
sbx_drop_reset_leftovers(const char *name, const char *role_oid, const char *db_oid)
{
	sbx_drop_side_database(psprintf("%s" SBX_RESET_SUFFIX, name), role_oid, NULL, db_oid);
	sbx_drop_side_database(psprintf("%s" SBX_OLD_SUFFIX, name), role_oid, NULL, db_oid);
}

/*
 * Drop role 'name' (recorded as role_oid), whose databases are gone, once
 * no database grants it anything.  What keeps it (a lock, a grant in a
 * database where it also owns something) is logged, and the role, which
 * has no login, is left for a later pass of the reaper.  Returns whether
 * the role is gone.
 */
bool
sbx_drop_role(const char *name, const char *role_oid)
{
	MemoryContext cxt = CurrentMemoryContext;
	const char *args[2] = {name, role_oid};
	volatile Oid role = InvalidOid;
	List	   *volatile dbs = NIL;
	volatile bool dropped = false;
	ErrorData  *volatile failure = NULL;
	bool		isnull;

	if (role_oid == NULL)
		return true;
	PG_TRY();
	{
		/* the databases where something depends on the role */
		sbx_xact_begin("pgsandbox: looking up a sandbox role");
		/* (what shared objects grant, this database revokes) */
		sbx_spi(psprintf("SELECT r.oid, CASE s.dbid WHEN 0 THEN %u ELSE s.dbid END"
						 "  FROM pg_catalog.pg_roles r"
						 "  LEFT JOIN pg_catalog.pg_shdepend s"
						 "    ON s.refclassid = 'pg_catalog.pg_authid'::pg_catalog.regclass"
						 "   AND s.refobjid = r.oid"
						 " WHERE r.rolname = $1 AND r.oid = $2::oid", MyDatabaseId),
				SPI_OK_SELECT, 2, args);
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			Datum		d;

			role = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
												  SPI_tuptable->tupdesc, 1, &isnull));
			d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull);
			if (!isnull)
			{
				MemoryContext old = MemoryContextSwitchTo(sbx_outer_cxt);

				dbs = list_append_unique_oid(dbs, DatumGetObjectId(d));
				MemoryContextSwitchTo(old);
			}
		}
		sbx_xact_commit();

		if (OidIsValid(role))
		{
			ListCell   *lc;

			/* no login from now on, whatever follows */
			(void) sbx_clear_way(name, role, InvalidOid, false);
			sbx_run_utility_xact(psprintf("ALTER ROLE %s NOLOGIN", quote_identifier(name)),
								 "pgsandbox: closing a sandbox role");
			/*
			 * Each database revokes what it grants the role: this one here,
			 * the others by a janitor.
			 */
			foreach(lc, dbs)
			{
				if (lfirst_oid(lc) != MyDatabaseId)
					sbx_janitor_start(lfirst_oid(lc), name, role, InvalidOid, true);
			}
			if (list_member_oid(dbs, MyDatabaseId))
			{
				char	   *revoke;

				sbx_xact_begin("pgsandbox: revoking what a database grants a sandbox role");
				if ((revoke = sbx_role_to_revoke(role)) != NULL)
					sbx_run_utility(psprintf("DROP OWNED BY %s", quote_identifier(revoke)), NULL);
				sbx_xact_commit();
			}
			foreach(lc, dbs)
			{
				if (lfirst_oid(lc) != MyDatabaseId)
					sbx_janitor_wait(lfirst_oid(lc));
			}
			sbx_run_utility_xact(psprintf("DROP ROLE %s", quote_identifier(name)),
								 "pgsandbox: dropping a sandbox role");
		}
		dropped = true;
	}
	PG_CATCH();
	{
		failure = sbx_catch_error(cxt);
	}
	PG_END_TRY();
	list_free(dbs);
	if (failure == NULL)
		return dropped;

	ereport(WARNING,
			(errmsg("could not drop role \"%s\" yet; it has no login and is dropped later",
					name),
			 errdetail_internal("%s", failure->message)));
	/* what held it, in the event log */
	PG_TRY();
	{
		(void) sbx_record_blocked(failure, name, "drop the role of", role, InvalidOid);
	}
	PG_CATCH();
	{
		FreeErrorData(sbx_catch_error(cxt));
	}
	PG_END_TRY();
	FreeErrorData(failure);
	return false;
}

/*
 * The reaper's pass over roles left behind: the role of a dropped or failed
 * row, or of a reset that is over, which still exists (a drop that could
 * not drop it yet).  Drops the first one due; returns whether one was
 * found due, dropped or not.
 */
bool
sbx_drop_one_leftover_role(void)
{
	List	   *names;
	List	   *oids;
	ListCell   *l1,
			   *l2;
	bool		tried = false;

	sbx_xact_begin("pgsandbox: looking for roles left behind");
	if (!sbx_catalog_has_saves())
	{
		sbx_xact_commit();
		return false;
	}
	/* (never one that a live row or a reset under way records since) */
	sbx_spi("SELECT r.rolname, r.oid FROM pgsandbox.sandbox s"
			"  JOIN pg_catalog.pg_roles r ON r.oid = s.role_oid AND r.rolname = s.name"
			" WHERE s.status IN ('dropped', 'failed')"
			" UNION"
			" SELECT r.rolname, r.oid FROM pgsandbox.sandbox s"
			"  JOIN pg_catalog.pg_roles r ON r.oid = s.reset_role"
			"   AND r.rolname = s.name || '" SBX_RESET_SUFFIX "'"
			" WHERE s.reset_started_at IS NULL OR s.status <> 'ready'"
			" EXCEPT"
			" SELECT s.name, s.role_oid FROM pgsandbox.sandbox s"
			"  WHERE s.status IN ('cloning', 'ready', 'dropping')"
			" EXCEPT"
			" SELECT s.name || '" SBX_RESET_SUFFIX "', s.reset_role FROM pgsandbox.sandbox s"
			"  WHERE s.reset_started_at IS NOT NULL AND s.status = 'ready'",
			SPI_OK_SELECT, 0, NULL);
	names = sbx_keep_column(1);
	oids = sbx_keep_column(2);
	sbx_xact_commit();

	forboth(l1, names, l2, oids)
	{
		if (!sbx_backoff_due(lfirst(l1)))
			continue;
		tried = true;
		if (sbx_drop_role(lfirst(l1), lfirst(l2)))
		{
			const char *args[1] = {lfirst(l2)};

			sbx_backoff_done(lfirst(l1));
			sbx_xact_begin("pgsandbox: recording a role dropped");
			sbx_spi("UPDATE pgsandbox.sandbox SET reset_role = NULL"
					" WHERE reset_role = $1::oid AND reset_started_at IS NULL",
					SPI_OK_UPDATE, 1, args);
			sbx_log_event(lfirst(l1), "cleanup", SBX_WORKER_ACTOR,
						  "dropped the role a blocked drop had left without login");
			sbx_xact_commit();
		}
		else
			sbx_backoff_failed(lfirst(l1));
		break;
	}
	list_free_deep(names);
	list_free_deep(oids);
	return tried;
}

/* ------------------------------------------------------------------------
 * Sandboxes
 * ------------------------------------------------------------------------
 */

/* a row to drop, as sbx_drop reads it */
typedef struct SbxDropRow
{
	char	   *id;
	char	   *status;			/* NULL: no such row */
	char	   *role_oid;
	char	   *db_oid;
	bool		expired;
	bool		busy;			/* a reset or a save is under way */
	char	   *idle_secs;		/* expired by idleness alone: its timeout */
	char	   *idle_timeout;
	TimestampTz last_used;
} SbxDropRow;

/*
 * Read the row of sandbox 'name' for 'by' into *row.  A sandbox of another
 * owner is, for an actor who is not an admin, one that does not exist; the
 * worker itself may meet a snapshot or a pool member too.
 */
static void
sbx_drop_lookup(const char *name, const SbxActor *by, SbxDropRow *row)
{
	char		owner[16];
	const char *args[2] = {name, owner};
	const char *cols;

	memset(row, 0, sizeof(*row));
	snprintf(owner, sizeof(owner), "%u", by->role);
	sbx_xact_begin("pgsandbox: looking up a sandbox");
	/* from 0.7: the idle timeout of a sandbox expired by idleness alone */
	cols = sbx_catalog_has_usage()
		? ", CASE WHEN expires_at > pg_catalog.now()"
		"   THEN pg_catalog.date_part('epoch', idle_timeout)::bigint END,"
		" COALESCE(last_used_at, ready_at), idle_timeout"
		: ", NULL, NULL, NULL";
	/* from 0.8: a reset or a save under way holds the sandbox */
	cols = psprintf("%s, %s", cols,
					sbx_catalog_has_saves() ? "reset_started_at IS NOT NULL" : "false");
	sbx_spi(psprintf("SELECT status, role_oid, id, %s, db_oid%s"
					 " FROM pgsandbox.sandbox WHERE name = $1%s%s"
					 " ORDER BY status IN ('cloning', 'ready', 'dropping') DESC, id DESC",
					 sbx_expired_sql(), cols,
					 by->is_admin ? "" : " AND owner_oid = $2::oid",
					 by == &sbx_worker_actor ? "" : sbx_if_kinds(" AND kind = 'sandbox'")),
			SPI_OK_SELECT, 2, args);
	if (SPI_processed > 0)
	{
		char	   *exp = sbx_spi_text(0, 4);

		row->status = sbx_keep(sbx_spi_text(0, 1));
		row->role_oid = sbx_keep(sbx_spi_text(0, 2));
		row->id = sbx_keep(sbx_spi_text(0, 3));
		row->db_oid = sbx_keep(sbx_spi_text(0, 5));
		row->expired = (exp != NULL && strcmp(exp, "t") == 0);
		row->idle_secs = sbx_keep(sbx_spi_text(0, 6));
		if (row->idle_secs != NULL)
		{
			bool		isnull;

			row->last_used = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0],
															   SPI_tuptable->tupdesc, 7,
															   &isnull));
			row->idle_timeout = sbx_keep(sbx_spi_text(0, 8));
		}
		row->busy = (strcmp(sbx_spi_text(0, 9), "t") == 0);
	}
	sbx_xact_commit();
}

/*
 * Why sandbox 'name', found expired by the catalog, is to be dropped now:
 * "" past its expiry, the idle time for one expired by idleness alone, or
 * NULL if a login noted since its last flush keeps it alive.
 */
static char *
sbx_expiry_reason(const SbxDropRow *row)
{
	TimestampTz pending;

	if (row->idle_secs == NULL)
		return "";
	pending = sbx_pending_login(atooid(row->role_oid));
	if (pending != 0 &&
		GetCurrentTimestamp() < TimestampTzPlusMilliseconds(pending,
															pg_strtoint64(row->idle_secs) * 1000))
		return NULL;
	return psprintf("idle since %s (idle_timeout %s)",
					timestamptz_to_str(Max(row->last_used, pending)), row->idle_timeout);
}

/*
 * Mark row id dropped: its database is gone.  Its secret goes, and its
 * saves are retired (dropped by the upkeep once no copy reads them).
 */
static void
sbx_mark_dropped(const char *id, const char *name, const char *action,
				 const char *actor, const char *detail)
{
	const char *args[1] = {id};

	sbx_xact_begin("pgsandbox: marking a sandbox dropped");
	sbx_spi("UPDATE pgsandbox.sandbox SET status = 'dropped',"
			" dropped_at = pg_catalog.now() WHERE id = $1::bigint",
			SPI_OK_UPDATE, 1, args);
	sbx_spi("DELETE FROM pgsandbox.sandbox_secret WHERE sandbox_id = $1::bigint",
			SPI_OK_DELETE, 1, args);
	if (sbx_catalog_has_saves())
		sbx_spi("UPDATE pgsandbox.sandbox SET retired_at = pg_catalog.now()"
				" WHERE kind = 'save' AND parent_id = $1::bigint"
				"   AND status IN ('cloning', 'ready') AND retired_at IS NULL",
				SPI_OK_UPDATE, 1, args);
	sbx_log_event(name, action, actor, detail && detail[0] ? detail : NULL);
	sbx_xact_commit();
}

/*
 * Mark row id 'dropping' (from 0.9): no longer live, and finished by the
 * reaper whatever becomes of this attempt.
 */
static void
sbx_mark_dropping(const char *id)
{
	const char *args[1] = {id};

	sbx_xact_begin("pgsandbox: marking a sandbox dropping");
	if (sbx_catalog_has_dropping())
		sbx_spi("UPDATE pgsandbox.sandbox SET status = 'dropping',"
				" drop_started_at = pg_catalog.now()"
				" WHERE id = $1::bigint AND status = 'ready'",
				SPI_OK_UPDATE, 1, args);
	sbx_xact_commit();
}

/*
 * Drop a live sandbox for 'by', or finish the drop of one marked
 * 'dropping'.  With only_if_expired (the reaper), a sandbox that is not
 * (or no longer) expired, nor dropping, is left alone; otherwise such a
 * name is an error.  may_defer: see sbx_drop_resources.  action is 'drop',
 * 'expire' or 'cleanup'.
 */
SbxDropOutcome
sbx_drop(const char *name, const SbxActor *by, bool only_if_expired,
		 bool may_defer, const char *action)
{
	SbxDropRow	row;
	char	   *detail = NULL;
	bool		dropping;

	sbx_drop_lookup(name, by, &row);
	dropping = row.status != NULL && strcmp(row.status, "dropping") == 0;

	if (only_if_expired && !dropping)
	{
		if (row.busy || row.status == NULL || strcmp(row.status, "ready") != 0 ||
			!row.expired)
			return SBX_DROP_NOTHING;
		/* idle by the catalog, but logged into since its last flush */
		if ((detail = sbx_expiry_reason(&row)) == NULL)
			return SBX_DROP_NOTHING;
	}
	if (row.status == NULL || strcmp(row.status, "failed") == 0 ||
		strcmp(row.status, "dropped") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("sandbox \"%s\" does not exist", name),
				 row.status ? errdetail("It is %s.", row.status) : 0));
	if (strcmp(row.status, "cloning") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("sandbox \"%s\" is still being cloned", name),
				 errhint("Drop it once its clone has finished.")));
	if (row.busy && !dropping)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("sandbox \"%s\" is being reset or saved", name),
				 errhint("Drop it once reset() or save() has returned.")));

	if (!dropping)
		sbx_mark_dropping(row.id);
	if (!sbx_drop_resources(name, row.role_oid, row.db_oid, may_defer))
		return SBX_DROP_DEFERRED;
	/*
	 * The reaper finishing a drop that an earlier attempt began records
	 * what that drop was: an expiry, or a caller's drop.
	 */
	if (dropping && only_if_expired && !row.expired)
		action = "drop";
	sbx_mark_dropped(row.id, name, action, by->name, detail);
	(void) sbx_drop_role(name, row.role_oid);
	return SBX_DROP_DONE;
}

/* ------------------------------------------------------------------------
 * Snapshots, pool members and saves
 * ------------------------------------------------------------------------
 */

/*
 * Drop a ready snapshot, pool member or save, which no one is connected
 * to, and record why.  Returns false if the row is no longer one to drop.
 */
static bool
sbx_drop_tracked(int64 id, const char *reason)
{
	char		idbuf[32];
	const char *args[1] = {idbuf};
	char	   *name;
	char	   *role_oid;
	char	   *db_oid;

	snprintf(idbuf, sizeof(idbuf), INT64_FORMAT, id);
	sbx_xact_begin("pgsandbox: looking up a snapshot or pool member");
	sbx_spi("SELECT name, role_oid, db_oid FROM pgsandbox.sandbox"
			" WHERE id = $1::bigint AND status = 'ready' AND kind <> 'sandbox'",
			SPI_OK_SELECT, 1, args);
	if (SPI_processed != 1)
	{
		sbx_xact_commit();
		return false;
	}
	name = sbx_keep(sbx_spi_text(0, 1));
	role_oid = sbx_keep(sbx_spi_text(0, 2));
	db_oid = sbx_keep(sbx_spi_text(0, 3));
	sbx_xact_commit();

	sbx_mark_dropping(idbuf);
	(void) sbx_drop_resources(name, role_oid, db_oid, false);
	sbx_mark_dropped(idbuf, name, "drop", SBX_WORKER_ACTOR, reason);
	(void) sbx_drop_role(name, role_oid);
	return true;
}

/* Whether a running clone job copies snapshot id (it still reads its role). */
static bool
sbx_snapshot_in_use(int64 id)
{
	bool		in_use = false;

	LWLockAcquire(sbx_shared->lock, LW_SHARED);
	for (int j = 0; j < SBX_MAX_CLONE_JOBS; j++)
	{
		if (sbx_shared->jobs[j].in_use && sbx_shared->jobs[j].snapshot_id == id)
			in_use = true;
	}
	LWLockRelease(sbx_shared->lock);
	return in_use;
}

/*
 * sbx_drop_tracked for the worker's upkeep.  A snapshot that a copy still
 * reads is left for later; a drop that fails is logged and tried again
 * with a backoff (a row left 'dropping' is finished by the reaper), so
 * that it does not hold up the others.  Returns whether the row was
 * dropped.
 */
typedef struct SbxDropStep
{
	int64		id;				/* a snapshot or pool member; 0 for a name */
	const char *name;			/* an expired sandbox */
	const char *reason;
	bool		dropped;
} SbxDropStep;

static void
sbx_drop_tracked_step(void *arg)
{
	SbxDropStep *step = arg;

	step->dropped = sbx_drop_tracked(step->id, step->reason);
}

static bool
sbx_drop_tracked_or_wait(int64 id, const char *reason)
{
	SbxDropStep step = {.id = id, .reason = reason};
	char		key[32];

	snprintf(key, sizeof(key), INT64_FORMAT, id);
	if (sbx_snapshot_in_use(id))
		return false;
	return sbx_try_with_backoff(key, sbx_drop_tracked_step, &step,
								psprintf("could not drop snapshot or pool member " INT64_FORMAT
										 ", will try again later", id))
		&& step.dropped;
}

/*
 * Drop the first of these snapshots or pool members (ids as text, with the
 * reason of each) that can be dropped now.  Returns whether one was.
 */
static bool
sbx_drop_first_of(List *ids, List *reasons)
{
	ListCell   *lc1;
	ListCell   *lc2;

	forboth(lc1, ids, lc2, reasons)
	{
		if (sbx_drop_tracked_or_wait(pg_strtoint64(lfirst(lc1)), lfirst(lc2)))
			return true;
	}
	return false;
}

/*
 * In a worker transaction: run 'sql', which lists snapshots or pool members
 * to drop (id, and the reason of each), end the transaction, and drop the
 * first that can be dropped now.  Returns whether one was.
 */
bool
sbx_drop_first_found(const char *sql)
{
	List	   *ids;
	List	   *reasons;
	bool		dropped;

	sbx_spi(sql, SPI_OK_SELECT, 0, NULL);
	ids = sbx_keep_column(1);
	reasons = sbx_keep_column(2);
	sbx_xact_commit();
	dropped = sbx_drop_first_of(ids, reasons);
	list_free_deep(ids);
	list_free_deep(reasons);
	return dropped;
}

/* ------------------------------------------------------------------------
 * The reaper
 * ------------------------------------------------------------------------
 */

/*
 * Names of the rows the reaper is to drop: first those whose drop was
 * blocked or interrupted (0.9), then live sandboxes whose time is up,
 * oldest expiry first; those whose last attempt failed only once their
 * backoff is over.
 */
List *
sbx_expired_sandboxes(void)
{
	List	   *names;
	List	   *due = NIL;
	ListCell   *lc;

	sbx_xact_begin("pgsandbox: looking for expired sandboxes");
	sbx_spi(psprintf("SELECT name FROM pgsandbox.sandbox"
					 " WHERE %s (status = 'ready'%s%s AND %s)"
					 " ORDER BY status = 'ready', expires_at, name",
					 sbx_catalog_has_dropping() ? "status = 'dropping' OR" : "",
					 sbx_if_kinds(" AND kind = 'sandbox'"),
					 sbx_catalog_has_saves() ? " AND reset_started_at IS NULL" : "",
					 sbx_expired_sql()),
			SPI_OK_SELECT, 0, NULL);
	names = sbx_keep_column(1);
	sbx_xact_commit();

	foreach(lc, names)
	{
		if (sbx_backoff_due(lfirst(lc)))
			due = lappend(due, lfirst(lc));
	}
	list_free(names);
	return due;
}

/*
 * The reaper's drop of one of sbx_expired_sandboxes: a failure is logged
 * and its next attempt put off.  Returns whether it was dropped.
 */
static void
sbx_reap_step(void *arg)
{
	SbxDropStep *step = arg;

	/* a sandbox extended meanwhile is left alone */
	step->dropped = (sbx_drop(step->name, &sbx_worker_actor, true, true, "expire") == SBX_DROP_DONE);
}

bool
sbx_reap_one(const char *name)
{
	SbxDropStep step = {.name = name};

	return sbx_try_with_backoff(name, sbx_reap_step, &step,
								psprintf("could not drop sandbox \"%s\", will try again later", name))
		&& step.dropped;
}
