/*-------------------------------------------------------------------------
 *
 * live_copy.c
 *	  The clone worker's part in live snapshots: making one (a slot on the
 *	  source whose snapshot the dump reads, then a subscription to the
 *	  source's publication on that slot), and copying one (its apply paused
 *	  once it has reached the source's present, the copy's data_as_of, and
 *	  its sequences, which logical replication does not carry).
 *
 * The subscription is owned by pgsandbox_live, a role pgsandbox made that
 * is a member of each live snapshot's role and nothing more (its apply
 * runs with the rights of the snapshot's role, which owns the snapshot's
 * tables and nothing outside them).  CREATE SUBSCRIPTION needs a superuser
 * (before PostgreSQL 16, so does owning one): pgsandbox_live is made one
 * for the transaction that creates it, and is not one once it commits.
 * The connection string, with the source's password, is put into the
 * statement's parse tree, so that no statement text, log line or error
 * context holds it.  The subscription takes the slot the
 * dump read, with no initial copy (the dump is it) and no streaming of
 * transactions in progress, so that an applied position means every
 * transaction before it is in.  The tables whose rows exclude_data leaves
 * out keep no state in the subscription, so the apply passes over their
 * changes; a partition among them whose changes would come through a
 * partitioned table that is kept refuses the build.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_subscription_rel.h"
#include "executor/spi.h"
#include "libpq-fe.h"
#include "libpq/libpq-be-fe-helpers.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "sbx_clone.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_masking.h"
#include "sbx_shmem.h"
#include "sbx_spi.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

/* the replication connection that made a live build's slot */
static PGconn *sbx_slot_conn = NULL;

/* the live snapshot whose pause this copy holds, 0 for none */
static int64 sbx_pause_held = 0;
/* the live snapshot whose apply this copy resumes, 0 for none */
static int64 sbx_pause_resuming = 0;

/*
 * What set_live() checked of the source may have changed since (a table
 * of an untrusted role added to a publication FOR ALL TABLES, a trigger,
 * a publication dropped): a build checks it again, as the subscription
 * will log in.
 */
static void
sbx_live_recheck(const SbxCloneJob *job)
{
	PGconn	   *volatile conn = sbx_source_open(job->source, job->conninfo, true);

	PG_TRY();
	{
		sbx_source_read_begin(conn, psprintf("could not read source \"%s\"", job->source));
		sbx_check_live_source(conn, job->source, job->live_publication, job->trusted_owners);
	}
	PG_FINALLY();
	{
		libpqsrv_disconnect(conn);
	}
	PG_END_TRY();
}

/*
 * A live build, before its dump: make the slot on the source, and return
 * the snapshot it exported, which the dump and the reader read in.  The
 * replication connection stays open (it holds the snapshot) until
 * sbx_live_build_end.
 */
char *
sbx_live_build_begin(SbxCloneJob *job)
{
	char	   *snapshot;

	/*
	 * A source that cannot be followed costs no dump (checked again later);
	 * its build made no slot, so the worker has none to drop.
	 */
	PG_TRY();
	{
		sbx_live_recheck(job);
	}
	PG_CATCH();
	{
		job->live_slot_dropped = true;
		PG_RE_THROW();
	}
	PG_END_TRY();

	sbx_slot_conn = sbx_live_slot_create(job->source, job->conninfo, job->require_password,
										 job->live_slot, &snapshot);
	return snapshot;
}

/*
 * A live build is over: close the slot's replication connection and, if
 * the build failed, drop the slot (which no subscription reads yet).  A
 * slot this cannot drop (the connection was given up to the subscription,
 * or the drop failed) stays named in the build's row, and the lifecycle
 * worker drops it later (live.c).
 */
void
sbx_live_build_end(SbxCloneJob *job, bool failed)
{
	if (sbx_slot_conn != NULL && failed)
	{
		PGresult   *res = libpqsrv_exec(sbx_slot_conn,
										psprintf("DROP_REPLICATION_SLOT %s",
												 quote_identifier(job->live_slot)),
										PG_WAIT_EXTENSION);

		if (PQresultStatus(res) != PGRES_COMMAND_OK)
			ereport(WARNING,
					(errmsg("could not drop the replication slot \"%s\" of a failed live build on source \"%s\"",
							job->live_slot, job->source)));
		else
			job->live_slot_dropped = true;	/* the worker forgets its name */
		PQclear(res);
	}
	if (sbx_slot_conn != NULL)
		libpqsrv_disconnect(sbx_slot_conn);
	sbx_slot_conn = NULL;
}

/*
 * A live build, once its database holds the dump and passed its check: in
 * this database, the subscription that follows the source from the slot's
 * consistent point on, owned by pgsandbox_live.
 */
void
sbx_live_subscribe(SbxCloneJob *job, List *left_out)
{
	const char *role = quote_identifier(job->name);
	char	   *conninfo;
	int			nskipped = 0;
	ListCell   *lc;

	/*
	 * Again now, before the apply runs any of it: what was checked before
	 * the dump may have changed during it.  The slot stays the replication
	 * connection's until then, so that a refusal drops it.
	 */
	sbx_live_recheck(job);

	/* the slot is no longer the replication connection's */
	if (sbx_slot_conn != NULL)
		libpqsrv_disconnect(sbx_slot_conn);
	sbx_slot_conn = NULL;

	pgstat_report_activity(STATE_RUNNING, "pgsandbox: subscribing a live snapshot");
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	/* a member of pgsandbox_live would get every live snapshot's rights */
	sbx_spi("SELECT 1 FROM pg_catalog.pg_auth_members"
			" WHERE roleid OPERATOR(pg_catalog.=) '" SBX_LIVE_ROLE "'::pg_catalog.regrole",
			SPI_OK_SELECT, 0, NULL);
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"%s\" has members, and a live snapshot's subscription may not be owned by it",
						SBX_LIVE_ROLE),
				 errhint("Revoke the role from its members.")));
	/* the apply's role: the snapshot role's rights, and its login alone */
	sbx_spi(psprintf("GRANT %s TO " SBX_LIVE_ROLE, role), SPI_OK_UTILITY, 0, NULL);
	sbx_spi("ALTER ROLE " SBX_LIVE_ROLE " LOGIN PASSWORD NULL SUPERUSER", SPI_OK_UTILITY, 0, NULL);
	sbx_spi("SET LOCAL ROLE " SBX_LIVE_ROLE, SPI_OK_UTILITY, 0, NULL);
	/* the connection string, with its password, in the parse tree alone */
	conninfo = sbx_conninfo_for_subscription(job->conninfo);
	sbx_run_utility(psprintf("CREATE SUBSCRIPTION %s CONNECTION '' PUBLICATION %s"
							 " WITH (create_slot = false, slot_name = %s, copy_data = false,"
							 "       streaming = off, enabled = true)",
							 role, quote_identifier(job->live_publication),
							 quote_literal_cstr(job->live_slot)),
					conninfo);
	explicit_bzero(conninfo, strlen(conninfo));
	sbx_spi("RESET ROLE", SPI_OK_UTILITY, 0, NULL);
	sbx_spi("ALTER ROLE " SBX_LIVE_ROLE " NOSUPERUSER", SPI_OK_UTILITY, 0, NULL);
	/* what it subscribed to, for the worker to tell a publication changed */
	sbx_spi("SELECT pg_catalog.count(*) || ':' || pg_catalog.md5(COALESCE(pg_catalog.string_agg("
			"        pg_catalog.format('%I.%I', n.nspname, c.relname), ',' ORDER BY n.nspname, c.relname), ''))"
			"  FROM pg_catalog.pg_subscription s"
			"  JOIN pg_catalog.pg_subscription_rel r ON r.srsubid = s.oid"
			"  JOIN pg_catalog.pg_class c ON c.oid = r.srrelid"
			"  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
			" WHERE s.subdbid = (SELECT oid FROM pg_catalog.pg_database"
			"                     WHERE datname = pg_catalog.current_database())"
			"   AND s.subname = $1", SPI_OK_SELECT, 1, (const char *[]) {job->name});
	strlcpy(job->live_tables, sbx_spi_text(0, 1), sizeof(job->live_tables));

	/*
	 * The published tables whose rows exclude_data leaves out: none of
	 * their changes is applied.  An apply passes over the changes of a
	 * table its subscription keeps no state for (as it does those of a
	 * table published since its last refresh), so their states go now,
	 * before its first start, which waits for this transaction's commit.
	 * Each one must be found: a table missed would have its changes
	 * applied.
	 */
	foreach(lc, left_out)
	{
		bool		isnull;

		sbx_spi("SELECT s.oid, c.oid, EXISTS (SELECT 1 FROM pg_catalog.pg_subscription_rel r"
				"                       WHERE r.srsubid = s.oid AND r.srrelid = c.oid)"
				"  FROM pg_catalog.pg_class c"
				"  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
				"  JOIN pg_catalog.pg_subscription s ON s.subname = $1"
				"   AND s.subdbid = (SELECT oid FROM pg_catalog.pg_database"
				"                     WHERE datname = pg_catalog.current_database())"
				" WHERE c.relkind IN ('r', 'p')"
				"   AND '\"' || pg_catalog.replace(n.nspname, '\"', '\"\"') || '\".\"'"
				"       || pg_catalog.replace(c.relname, '\"', '\"\"') || '\"' = $2",
				SPI_OK_SELECT, 2, (const char *[]) {job->name, lfirst(lc)});
		if (SPI_processed != 1)
			elog(ERROR, "table %s, whose rows exclude_data leaves out, is not in live snapshot \"%s\"",
				 (char *) lfirst(lc), job->name);
		if (!DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull)))
			continue;			/* not published */
		RemoveSubscriptionRel(DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
															 SPI_tuptable->tupdesc, 1, &isnull)),
							  DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
															 SPI_tuptable->tupdesc, 2, &isnull)));
		nskipped++;
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	sbx_job_note(job, "following publication \"%s\" of the source through slot \"%s\"",
			 job->live_publication, job->live_slot);
	if (nskipped > 0)
		sbx_job_note(job, "the changes of %d published table%s whose rows exclude_data leaves out are not applied",
					 nskipped, nskipped == 1 ? "" : "s");
}

/*
 * A live build, on the reader of its slot's snapshot, once exclude_data's
 * tables are found (left_out, as exact patterns): none may be a partition
 * whose changes the publication sends through a partitioned table that is
 * not left out too (publish_via_partition_root).  Those changes would be
 * applied to that table, and routed into the partition.  Checked before
 * the dump, so that a build refused costs none.
 */
void
sbx_live_check_left_out(PGconn *reader, const SbxCloneJob *job, List *left_out)
{
	ListCell   *lc;

	/* before 13, a publication sends each partition's changes as its own */
	if (left_out == NIL || PQserverVersion(reader) < 130000)
		return;
	foreach(lc, left_out)
	{
		const char *params[2] = {job->live_publication, lfirst(lc)};
		PGresult   *res;

		res = sbx_remote_exec(reader,
							  "SELECT '\"' || pg_catalog.replace(an.nspname, '\"', '\"\"') || '\".\"'"
							  "       || pg_catalog.replace(ac.relname, '\"', '\"\"') || '\"'"
							  "  FROM pg_catalog.pg_class c"
							  "  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
							  " CROSS JOIN LATERAL pg_catalog.pg_partition_ancestors(c.oid) a"
							  "  JOIN pg_catalog.pg_class ac ON ac.oid = a.relid"
							  "  JOIN pg_catalog.pg_namespace an ON an.oid = ac.relnamespace"
							  "  JOIN pg_catalog.pg_publication_tables t ON t.pubname = $1"
							  "   AND t.schemaname = an.nspname AND t.tablename = ac.relname"
							  " WHERE a.relid <> c.oid AND c.relispartition"
							  "   AND '\"' || pg_catalog.replace(n.nspname, '\"', '\"\"') || '\".\"'"
							  "       || pg_catalog.replace(c.relname, '\"', '\"\"') || '\"' = $2",
							  2, params, PGRES_TUPLES_OK,
							  psprintf("could not read source \"%s\"", job->source));
		for (int i = 0; i < PQntuples(res); i++)
		{
			const char *root = PQgetvalue(res, i, 0);
			ListCell   *lr;
			bool		also_left_out = false;

			foreach(lr, left_out)
				also_left_out |= (strcmp(lfirst(lr), root) == 0);
			if (!also_left_out)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("publication \"%s\" of source \"%s\" sends the changes of table %s through %s, whose rows exclude_data does not leave out",
								job->live_publication, job->source, (char *) lfirst(lc), root),
						 errdetail("The publication publishes with publish_via_partition_root: the apply would route those changes into the table."),
						 errhint("Leave out the partitioned table's rows too, or publish with publish_via_partition_root = false.")));
		}
		PQclear(res);
	}
}

/*
 * Outside a transaction, in the admin database: how many bytes of the
 * source's WAL the apply of the live snapshot (database dboid, subscription
 * 'name') has still to pass to reach position 'lsn'; 0 once it has, -1 if
 * it is not running (and has not), -2 if it runs and has applied nothing
 * yet.  What it has certainly applied: the end of the last source
 * transaction it committed (its replication origin), and the last
 * keepalive it took, which comes after every message it applied (not
 * received_lsn, which names a message before it is applied).
 */
static int64
sbx_live_behind(Oid dboid, const char *name, const char *lsn)
{
	char		dbbuf[16];
	const char *args[3] = {dbbuf, name, lsn};
	int64		behind = -1;

	snprintf(dbbuf, sizeof(dbbuf), "%u", dboid);
	sbx_xact_begin("pgsandbox: waiting for a live snapshot's apply");
	sbx_spi("SELECT GREATEST(0, pg_catalog.pg_wal_lsn_diff($3::pg_lsn,"
			"                   GREATEST(o.remote_lsn, a.latest_end_lsn)))::int8,"
			"       a.pid IS NOT NULL"
			"  FROM pg_catalog.pg_subscription s"
			"  LEFT JOIN pg_catalog.pg_stat_subscription a"
			"    ON a.subid = s.oid AND a.relid IS NULL AND a.pid IS NOT NULL"
			"  LEFT JOIN pg_catalog.pg_replication_origin_status o"
			"    ON o.external_id = 'pg_' || s.oid"
			" WHERE s.subdbid = $1::oid AND s.subname = $2"
			" ORDER BY 1 NULLS LAST LIMIT 1",
			SPI_OK_SELECT, 3, args);
	if (SPI_processed > 0)
	{
		bool		isnull;
		bool		running_isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		bool		running = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
														 SPI_tuptable->tupdesc, 2,
														 &running_isnull));

		if (!isnull && DatumGetInt64(d) == 0)
			behind = 0;
		else if (!running)
			behind = -1;
		else
			behind = isnull ? -2 : DatumGetInt64(d);
	}
	sbx_xact_commit();
	return behind;
}

/*
 * In a worker transaction: live snapshot 'id' holds every change its source
 * made up to 'as_of', as a copy's look found: live_as_of moves on to it, so
 * that a copy that follows closely, finding the apply not running yet, holds
 * this moment.
 */
static void
sbx_live_record_as_of(int64 id, TimestampTz as_of)
{
	char		idbuf[32];
	char		asofbuf[MAXDATELEN + 1];
	const char *args[2] = {idbuf, asofbuf};

	snprintf(idbuf, sizeof(idbuf), INT64_FORMAT, id);
	strlcpy(asofbuf, timestamptz_to_str(as_of), sizeof(asofbuf));
	sbx_spi("UPDATE pgsandbox.sandbox SET live_as_of = GREATEST(live_as_of, $2::timestamptz)"
			" WHERE id = $1::bigint", SPI_OK_UPDATE, 2, args);
}

/*
 * The data_as_of of a pause: the source's time at a look, if the subscriber
 * had confirmed that look's WAL position already, or if the apply passes it
 * within pgsandbox.live_catchup_timeout; else what the worker or an earlier
 * copy last found the apply had reached (live_as_of), or the snapshot's own
 * data_as_of.
 *
 * An apply that is not running is not waited for while what it had
 * applied is recent: no older than pgsandbox.live_catchup_timeout, the
 * staleness a copy accepts anyway.  On PostgreSQL 15, after a copy
 * resumes the apply, the launcher starts it again at most once per
 * wal_retrieve_retry_interval (5 s by default), so a copy that follows
 * within that time would wait out the delay for nothing: it holds what the
 * apply had applied, with the copy before it's moment as its data_as_of,
 * as a copy made in the same pause would.  Once that moment is older, a
 * copy waits for the apply as before, so that copies asked one after
 * another cannot keep it from running.
 */
static TimestampTz
sbx_live_catch_up(SbxCloneJob *job)
{
	char		idbuf[32];
	const char *args[1] = {idbuf};
	char	   *slot;
	TimestampTz fallback;
	TimestampTz look_at;
	SbxLiveProbe probe;
	TimestampTz deadline;
	bool		isnull;
	int			progress = DatumGetInt32(MyBgworkerEntry->bgw_main_arg);
	int64		copy_total = sbx_progress_total(progress);

	snprintf(idbuf, sizeof(idbuf), INT64_FORMAT, job->snapshot_id);
	sbx_xact_begin("pgsandbox: reading a live snapshot");
	sbx_spi("SELECT live_slot, COALESCE(GREATEST(live_as_of, data_as_of), data_as_of)"
			"  FROM pgsandbox.sandbox WHERE id = $1::bigint", SPI_OK_SELECT, 1, args);
	if (SPI_processed != 1)
		elog(ERROR, "live snapshot %s is gone", idbuf);
	slot = sbx_keep(sbx_spi_text(0, 1));
	fallback = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0],
												 SPI_tuptable->tupdesc, 2, &isnull));
	sbx_xact_commit();

	if (!sbx_live_probe(job->source, job->conninfo, job->require_password, slot, "",
						5, &probe))
	{
		sbx_job_note(job, "the source could not be reached (%s): the copy holds what the apply had reached",
				 probe.why);
		return fallback;
	}
	look_at = DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in,
													  CStringGetDatum(probe.now),
													  ObjectIdGetDatum(InvalidOid),
													  Int32GetDatum(-1)));
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), sbx_live_catchup_timeout);
	for (bool shown = false;;)
	{
		int64		behind = sbx_live_behind(job->snapshot_dboid, job->snapshot_name, probe.lsn);

		/* the subscriber had confirmed the look's position: nothing to wait for */
		if (behind != 0 && probe.confirmed != NULL &&
			DatumGetLSN(DirectFunctionCall1(pg_lsn_in, CStringGetDatum(probe.confirmed))) >=
			DatumGetLSN(DirectFunctionCall1(pg_lsn_in, CStringGetDatum(probe.lsn))))
			behind = 0;
		if (behind == 0)
		{
			sbx_progress_set(progress, SBX_PHASE_COPYING, NULL, Max(copy_total, 0));
			sbx_xact_begin("pgsandbox: recording how far a live snapshot holds its source");
			sbx_live_record_as_of(job->snapshot_id, look_at);
			sbx_xact_commit();
			return look_at;
		}
		if (behind == -1 &&
			!TimestampDifferenceExceeds(fallback, GetCurrentTimestamp(), sbx_live_catchup_timeout))
		{
			sbx_job_note(job, "the apply was not running (PostgreSQL starts it again at most once per wal_retrieve_retry_interval): the copy holds what it had applied, up to %s",
						 timestamptz_to_str(fallback));
			return fallback;
		}
		/* the progress view shows what the apply had left at the look */
		if (!shown && behind > 0)
		{
			sbx_progress_set(progress, SBX_PHASE_CATCHING_UP, NULL, behind);
			shown = true;
		}
		if (GetCurrentTimestamp() >= deadline)
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 20L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	sbx_progress_set(progress, SBX_PHASE_COPYING, NULL, Max(copy_total, 0));
	sbx_job_note(job, "the apply did not reach the source's present within pgsandbox.live_catchup_timeout");
	return fallback;
}

/* On exit, a pause this copy holds is let go (the last one resumes it). */
static void
sbx_live_release_at_exit(int code, Datum arg)
{
	double		secs;

	/*
	 * A copy that ends (an error, or a FATAL that runs no handler) lets go
	 * of its pause, or of the resume it was making, so that later copies do
	 * not wait for it; the lifecycle worker resumes an apply left paused
	 * (live.c).
	 */
	if (sbx_pause_held != 0 && sbx_live_pause_leave(sbx_pause_held, &secs))
		sbx_live_pause_resumed(sbx_pause_held);
	if (sbx_pause_resuming != 0)
		sbx_live_pause_resumed(sbx_pause_resuming);
	sbx_pause_held = 0;
	sbx_pause_resuming = 0;
}

/*
 * Before a copy of a live snapshot: have its apply paused, by this copy or
 * by one under way, and take the pause's data_as_of.
 */
void
sbx_live_copy_begin(SbxCloneJob *job)
{
	TimestampTz as_of = 0;
	SbxPauseTurn turn;

	before_shmem_exit(sbx_live_release_at_exit, (Datum) 0);
	while ((turn = sbx_live_pause_join(job->snapshot_id, &as_of)) == SBX_PAUSE_WAIT)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 10L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	sbx_pause_held = job->snapshot_id;
	if (turn == SBX_PAUSE_MINE)
	{
		as_of = sbx_live_catch_up(job);
		sbx_live_command(job->snapshot_dboid, job->snapshot_name, job->snapshot_name,
						 SBX_LIVE_PAUSE);
		sbx_live_pause_ready(job->snapshot_id, as_of);
	}
	job->data_as_of = as_of;
	if (sbx_test_copy_pause != 0)
	{
		char		key[16];
		const char *args[1] = {key};

		/* a test kills or restarts what it likes here, the apply paused */
		snprintf(key, sizeof(key), "%d", sbx_test_copy_pause);
		sbx_xact_begin("pgsandbox: waiting for a test");
		sbx_spi("SELECT pg_catalog.pg_advisory_xact_lock_shared($1::pg_catalog.int8)",
				SPI_OK_SELECT, 1, args);
		sbx_xact_commit();
	}
}

/*
 * After the copy (or its failure): let go of the pause; the last copy
 * resumes the apply.  A resume that fails is a warning: the worker resumes
 * an apply left paused (live.c).
 */
void
sbx_live_copy_end(SbxCloneJob *job)
{
	double		secs;

	if (sbx_pause_held == 0)
		return;
	if (!sbx_live_pause_leave(job->snapshot_id, &secs))
	{
		sbx_pause_held = 0;
		return;
	}
	/* from here, the exit callback ends the resume this copy makes */
	sbx_pause_resuming = job->snapshot_id;
	sbx_pause_held = 0;
	PG_TRY();
	{
		sbx_live_command(job->snapshot_dboid, job->snapshot_name, job->snapshot_name,
						 SBX_LIVE_RESUME);
	}
	PG_CATCH();
	{
		/* the caller has no error pending here: report this one, go on */
		EmitErrorReport();
		FlushErrorState();
		AbortCurrentTransaction();
	}
	PG_END_TRY();
	sbx_live_pause_resumed(job->snapshot_id);
	sbx_pause_resuming = 0;
	sbx_job_note(job, "the live snapshot's apply was paused for %.2f s", secs);
}

/*
 * In a copy of a live snapshot, connected to it: set its sequences as the
 * source has them now.  Logical replication does not carry sequences; a
 * sequence the source's login may not read keeps the snapshot's value, and
 * the ready event counts it, as it says when the source cannot be reached.
 */
void
sbx_live_copy_sequences(SbxCloneJob *job)
{
	int			code;
	char	   *message;
	char	   *detail;
	PGconn	   *conn = sbx_source_try_connect(job->source, job->conninfo, job->require_password,
											  5, &code, &message, &detail);
	PGresult   *res;
	int			set = 0;
	int			unread = 0;

	if (conn == NULL)
	{
		sbx_job_note(job, "the source could not be reached (%s): its sequences hold the snapshot's values",
				 detail);
		return;
	}

	/*
	 * Bounded: anyone who may lock a sequence on the source could otherwise
	 * hold every copy here.  A read that fails or times out leaves the
	 * snapshot's values, and says so, as an unreachable source does.
	 */
	res = libpqsrv_exec(conn, "SET statement_timeout = '5s'; SET lock_timeout = '1s'",
						PG_WAIT_EXTENSION);
	if (PQresultStatus(res) == PGRES_COMMAND_OK)
	{
		PQclear(res);
		res = libpqsrv_exec(conn,
							"SELECT pg_catalog.format('%I.%I', schemaname, sequencename),"
							"       last_value::text"
							"  FROM pg_catalog.pg_sequences"
							" WHERE schemaname <> 'information_schema' AND schemaname !~ '^pg_'",
							PG_WAIT_EXTENSION);
	}
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		char	   *why = pstrdup(PQerrorMessage(conn));

		why[strcspn(why, "\n")] = '\0';
		PQclear(res);
		libpqsrv_disconnect(conn);
		sbx_job_note(job, "the sequences of the source could not be read (%s): they hold the snapshot's values",
					 why);
		return;
	}
	libpqsrv_disconnect(conn);

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	for (int i = 0; i < PQntuples(res); i++)
	{
		const char *args[2] = {PQgetvalue(res, i, 0), PQgetvalue(res, i, 1)};

		if (PQgetisnull(res, i, 1))
		{
			unread++;
			continue;
		}
		/* a name that is no sequence here, or a value out of its bounds, is skipped */
		sbx_spi("SELECT pg_catalog.setval(s.seqrelid, $2::bigint, true)"
				"  FROM pg_catalog.pg_sequence s"
				" WHERE s.seqrelid = pg_catalog.to_regclass($1)"
				"   AND $2::bigint BETWEEN s.seqmin AND s.seqmax", SPI_OK_SELECT, 2, args);
		set += (int) SPI_processed;
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	PQclear(res);
	sbx_job_note(job, "%d sequences set as the source has them%s", set,
			 unread > 0 ? psprintf(" (%d it never used, or its login may not read)", unread) : "");
}
