/*-------------------------------------------------------------------------
 *
 * tenants.c
 *	  What the lifecycle worker does so that one sandbox takes no more of
 *	  the server than its share: the limits it gives each sandbox role as it
 *	  hands the sandbox out, and the old transactions it ends.
 *
 * As a sandbox is handed out (made ready, taken from a pool, or reset), its
 * role is given, by ALTER ROLE, which only a role with CREATEROLE could undo:
 *
 *	- CONNECTION LIMIT, the clone's connection_limit (-1 for none): the
 *	  login check (hooks/tenant_limits.c) applies the lower of it and
 *	  pgsandbox.max_connections_per_sandbox, which a reload changes for
 *	  every sandbox at once;
 *	- temp_file_limit, from pgsandbox.sandbox_temp_file_limit: a superuser's
 *	  setting, which the role cannot raise; a query that passes it fails
 *	  with PostgreSQL's own error, and the session goes on;
 *	- the settings pgsandbox.sandbox_settings lists, each in a
 *	  subtransaction: one the server refuses is left out and named in the
 *	  sandbox's event, and the others are given.  A setting any user may
 *	  change (work_mem, statement_timeout) the role may change in its
 *	  sessions; one only a superuser may set, it may not.
 *
 * They are given only then, not when the role is made: pg_restore runs as
 * the role, and a statement_timeout would cut a long restore short.  A
 * sandbox keeps what it was given until it is reset.
 *
 * On a timer, the worker ends what holds the server's xmin horizon back for
 * everyone (the vacuum of the shared catalogs pgsandbox itself churns, and
 * of every database): a sandbox session whose transaction has been open
 * longer than pgsandbox.max_transaction_age is terminated, and a
 * transaction prepared in a sandbox longer ago than
 * pgsandbox.max_prepared_age is rolled back by a janitor in its database.
 * Each gets an event.  Idle sessions are left alone: they hold a slot, which
 * the caps bound, but no snapshot.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "sbx_common.h"
#include "sbx_spi.h"
#include "sbx_worker.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

/*
 * Run one ALTER ROLE in a subtransaction; on failure, note why in *refused
 * and go on.
 */
static void
sbx_try_alter_role(const char *sql, const char *what, StringInfo refused)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		sbx_run_utility(sql, NULL);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		appendStringInfo(refused, "%s%s (%s)", refused->len > 0 ? ", " : "", what,
						 edata->message);
		FreeErrorData(edata);
	}
	PG_END_TRY();
}

/*
 * In a worker transaction: give sandbox 'id''s role its connection limit,
 * temp_file_limit and listed settings.  Returns what could not be given,
 * for the sandbox's event, or NULL.
 */
char *
sbx_give_tenant_limits(int64 id)
{
	char		idbuf[32];
	const char *args[1] = {idbuf};
	const char *role;
	int			limit = -1;
	bool		isnull;
	char	   *error;
	List	   *settings;
	ListCell   *lc;
	StringInfoData refused;

	if (!sbx_catalog_has_tenants())
		return NULL;
	snprintf(idbuf, sizeof(idbuf), INT64_FORMAT, id);
	sbx_spi("SELECT name, connection_limit FROM pgsandbox.sandbox WHERE id = $1::bigint",
			SPI_OK_SELECT, 1, args);
	if (SPI_processed != 1)
		elog(ERROR, "sandbox " INT64_FORMAT " is not in the catalog", id);
	role = quote_identifier(sbx_keep(sbx_spi_text(0, 1)));
	{
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);

		if (!isnull)
			limit = DatumGetInt32(d);
	}

	sbx_run_utility(psprintf("ALTER ROLE %s CONNECTION LIMIT %d", role, limit), NULL);
	if (sbx_sandbox_temp_file_limit >= 0)
		sbx_run_utility(psprintf("ALTER ROLE %s SET temp_file_limit = '%dkB'", role,
								 sbx_sandbox_temp_file_limit), NULL);
	else
		sbx_run_utility(psprintf("ALTER ROLE %s RESET temp_file_limit", role), NULL);

	initStringInfo(&refused);
	settings = sbx_parse_sandbox_settings(sbx_sandbox_settings, &error);
	foreach(lc, settings)
	{
		SbxSetting *s = lfirst(lc);

		sbx_try_alter_role(psprintf("ALTER ROLE %s SET %s = %s", role,
									quote_identifier(s->name), quote_literal_cstr(s->value)),
						   s->name, &refused);
	}
	return refused.len > 0 ? psprintf("settings left out: %s", refused.data) : NULL;
}

/* ------------------------------------------------------------------------
 * Old transactions
 * ------------------------------------------------------------------------
 */

/*
 * End the sandbox sessions whose transaction has been open longer than
 * pgsandbox.max_transaction_age: only the sandbox role's own client
 * sessions in its ready sandbox's database, never a clone's restore.
 */
static void
sbx_end_old_transactions(void)
{
	char		age[32];
	const char *args[1] = {age};
	uint64		n;

	if (sbx_max_transaction_age <= 0)
		return;
	snprintf(age, sizeof(age), "%d", sbx_max_transaction_age);
	sbx_xact_begin("pgsandbox: ending old transactions of sandboxes");
	sbx_spi("SELECT a.pid, s.name, a.xact_start FROM pg_catalog.pg_stat_activity a"
			"  JOIN pgsandbox.sandbox s ON s.db_oid = a.datid AND s.role_oid = a.usesysid"
			" WHERE s.status = 'ready' AND a.backend_type = 'client backend'"
			"   AND a.xact_start < pg_catalog.now() - pg_catalog.make_interval(secs => $1::float8)",
			SPI_OK_SELECT, 1, args);
	n = SPI_processed;
	if (n > 0)
	{
		SPITupleTable *old = SPI_tuptable;

		/* one at a time, each found above, and each with its event */
		for (uint64 i = 0; i < n; i++)
		{
			const char *row[4];

			row[0] = SPI_getvalue(old->vals[i], old->tupdesc, 1);
			row[1] = SPI_getvalue(old->vals[i], old->tupdesc, 2);
			row[2] = SPI_getvalue(old->vals[i], old->tupdesc, 3);
			row[3] = age;
			sbx_spi("INSERT INTO pgsandbox.event (sandbox, action, actor, detail)"
					" SELECT $2, 'session_ended', '" SBX_WORKER_ACTOR "',"
					"        pg_catalog.format('session %s ended: its transaction was open since %s,"
					" longer than pgsandbox.max_transaction_age (%s s)', $1, $3, $4)"
					"  WHERE pg_catalog.pg_terminate_backend($1::integer)",
					SPI_OK_INSERT, 4, row);
		}
	}
	sbx_xact_commit();
}

/*
 * Roll back the transactions prepared in sandboxes longer ago than
 * pgsandbox.max_prepared_age: a janitor does it in each database that holds
 * one (janitor.c), and the worker does not wait for it.  Each transaction
 * gets one event, however many passes see it before its janitor is done.
 */
static void
sbx_roll_back_old_prepared(void)
{
	char		age[32];
	const char *args[1] = {age};
	int			n;
	Oid		   *dbs;
	char	  **names;
	TimestampTz before;

	if (sbx_max_prepared_age <= 0)
		return;
	snprintf(age, sizeof(age), "%d", sbx_max_prepared_age);
	sbx_xact_begin("pgsandbox: looking for old prepared transactions in sandboxes");
	/* what now() - the age is below: the janitors judge by the same moment */
	before = GetCurrentTransactionStartTimestamp() -
		(TimestampTz) sbx_max_prepared_age * USECS_PER_SEC;
	sbx_spi("WITH old AS ("
			"  SELECT s.name, s.db_oid, p.gid, p.prepared"
			"    FROM pg_catalog.pg_prepared_xacts p"
			"    JOIN pg_catalog.pg_database d ON d.datname = p.database"
			"    JOIN pgsandbox.sandbox s ON s.db_oid = d.oid"
			"   WHERE s.status = 'ready'"
			"     AND p.prepared < pg_catalog.now() - pg_catalog.make_interval(secs => $1::float8)),"
			" logged AS ("
			"  INSERT INTO pgsandbox.event (sandbox, action, actor, detail)"
			"  SELECT o.name, 'prepared_rolled_back', '" SBX_WORKER_ACTOR "',"
			"         pg_catalog.format('prepared transaction %L, prepared at %s, is older than"
			" pgsandbox.max_prepared_age (%s s): rolling it back', o.gid, o.prepared, $1)"
			"    FROM old o"
			/* once each: a janitor still at work is looked at again */
			"   WHERE NOT EXISTS (SELECT 1 FROM pgsandbox.event e"
			"                      WHERE e.sandbox = o.name AND e.action = 'prepared_rolled_back'"
			"                        AND pg_catalog.starts_with(e.detail,"
			"                              pg_catalog.format('prepared transaction %L, prepared at %s,',"
			"                                                o.gid, o.prepared))))"
			" SELECT DISTINCT name, db_oid FROM old",
			SPI_OK_SELECT, 1, args);
	n = SPI_processed;
	/* out of the transaction's memory, which its commit frees */
	dbs = MemoryContextAlloc(sbx_outer_cxt, sizeof(Oid) * Max(n, 1));
	names = MemoryContextAlloc(sbx_outer_cxt, sizeof(char *) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		bool		isnull;

		names[i] = sbx_keep(sbx_spi_text(i, 1));
		dbs[i] = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
												SPI_tuptable->tupdesc, 2, &isnull));
	}
	sbx_xact_commit();
	for (int i = 0; i < n; i++)
		(void) sbx_janitor_start_aged(dbs[i], names[i], before);
}

static void
sbx_tenants_check_step(void *arg)
{
	bool		current;

	/* the catalog is read in a transaction: before 0.12, nothing to do */
	StartTransactionCommand();
	current = sbx_catalog_has_tenants();
	CommitTransactionCommand();
	if (!current)
		return;
	sbx_end_old_transactions();
	sbx_roll_back_old_prepared();
}

/* The timer's step: ends what is past its age.  Never fails the loop. */
void
sbx_tenants_check(void)
{
	(void) sbx_try_or_warn(sbx_tenants_check_step, NULL,
						   "could not end the old transactions of sandboxes");
}

/* How often the timer runs: a tenth of the shorter age, 1 to 60 s. */
long
sbx_tenants_interval(void)
{
	int			age = 0;

	if (sbx_max_transaction_age > 0)
		age = sbx_max_transaction_age;
	if (sbx_max_prepared_age > 0 && (age == 0 || sbx_max_prepared_age < age))
		age = sbx_max_prepared_age;
	if (age == 0)
		return -1;
	return Min(Max(age * 100L, 1000L), 60000L);
}
