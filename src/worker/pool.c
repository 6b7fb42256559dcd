/*-------------------------------------------------------------------------
 *
 * pool.c
 *	  Pools of ready sandboxes: handing one out to a caller of clone(), and
 *	  deciding which member to fill or to drop next.
 *
 * A pool member is a copy of its source's current snapshot, made by a clone
 * job no caller waits for, and tracked by a row of kind 'pool'.  Until it is
 * handed out its role cannot log in, no one has seen its password and it
 * counts against no quota.  Handing it out is a few catalog updates in one
 * transaction: the row becomes the caller's sandbox, and the role gets its
 * login back with a new password, which only the caller learns.
 *
 * Members made from a snapshot that is no longer current are dropped and
 * replaced in the background, so that a hand-out never gives data older
 * than the current snapshot; so are members beyond the pool's size.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "libpq/crypt.h"
#include "sbx_common.h"
#include "sbx_shmem.h"
#include "sbx_spi.h"
#include "sbx_worker.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/*
 * Hand a ready member of the pool of the source a clone request asks for to
 * 'by' as its sandbox, if there is one, filling *outcome with its name, new
 * password and expiry.  Returns false, changing nothing, if the pool has
 * none ready.  The source, the quotas and the owner's disk budget are
 * checked as for any clone; the member is on disk already, so the total
 * budget does not change.
 */
bool
sbx_pool_handout(const SbxActor *by, const SbxRequest *req, SbxRequest *outcome)
{
	char		owner[16];
	char		ttl[32];
	char		idle[32];
	const char *args[6];
	SbxCloneJob job;
	char	   *id;
	char	   *name;
	char	   *size;
	char	   *verifier;
	char	   *data_as_of;
	char	   *left_out;
	bool		isnull;
	TimestampTz started = GetCurrentTimestamp();
	long		secs;
	int			usecs;

	sbx_xact_begin("pgsandbox: handing out a pool member");
	sbx_check_clone_allowed(by, req->source, req->schema_only, &job);
	explicit_bzero(job.conninfo, sizeof(job.conninfo));
	args[0] = req->source;
	args[1] = req->schema_only ? "true" : "false";
	sbx_spi(psprintf("WITH %s"
					 " SELECT s.id, s.name, s.size_bytes FROM pgsandbox.sandbox s"
					 "   JOIN current_snapshot c ON c.source = s.source"
					 "    AND c.schema_only = s.schema_only AND c.id = s.snapshot_id"
					 "  WHERE s.kind = 'pool' AND s.status = 'ready'"
					 "    AND s.source = $1 AND s.schema_only = $2::boolean"
					 "  ORDER BY s.id LIMIT 1", sbx_current_snapshots_cte()),
			SPI_OK_SELECT, 2, args);
	if (SPI_processed == 0)
	{
		sbx_xact_commit();
		return false;
	}
	id = sbx_spi_text(0, 1);
	name = sbx_spi_text(0, 2);
	size = sbx_spi_text(0, 3);
	sbx_check_quotas(by);
	sbx_check_budget(by, SBX_KIND_SANDBOX, size ? pg_strtoint64(size) : 0, false);

	/* a password no one has seen, and the login back */
	sbx_random_string(outcome->password, SBX_PASSWORD_LEN, SBX_PASSWORD_ALPHABET);
	verifier = encrypt_password(PASSWORD_TYPE_SCRAM_SHA_256, name, outcome->password);
	sbx_run_utility(psprintf("ALTER ROLE %s LOGIN", quote_identifier(name)), verifier);
	explicit_bzero(verifier, strlen(verifier));

	snprintf(owner, sizeof(owner), "%u", by->role);
	snprintf(ttl, sizeof(ttl), INT64_FORMAT, req->ttl_secs);
	snprintf(idle, sizeof(idle), INT64_FORMAT, req->idle_secs);
	args[0] = id;
	args[1] = owner;
	args[2] = by->name;
	args[3] = req->labels;
	args[4] = ttl;
	args[5] = idle;
	/* from 0.7, also its idle timeout, counted from the hand-out */
	sbx_spi(psprintf("UPDATE pgsandbox.sandbox SET kind = 'sandbox', method = 'pool',"
					 " owner_oid = $2::oid, requested_by = $3::name, labels = $4::jsonb,"
					 " ttl = pg_catalog.make_interval(secs => $5::float8),"
					 " ready_at = pg_catalog.now(),"
					 " expires_at = pg_catalog.now() + pg_catalog.make_interval(secs => $5::float8)%s"
					 " WHERE id = $1::bigint RETURNING expires_at, data_as_of",
					 sbx_catalog_has_usage()
					 ? ", last_used_at = pg_catalog.now(),"
					 " idle_timeout = CASE WHEN $6::bigint > 0"
					 "  THEN pg_catalog.make_interval(secs => $6::float8) END"
					 : ""),
			SPI_OK_UPDATE_RETURNING, 6, args);
	outcome->expires_at = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0],
															SPI_tuptable->tupdesc, 1, &isnull));
	data_as_of = sbx_spi_text(0, 2);

	/* its share of the server, with the cap of sessions this caller asked */
	if (sbx_catalog_has_tenants())
	{
		char		limit[16];

		snprintf(limit, sizeof(limit), "%d", req->connection_limit);
		args[1] = req->connection_limit > 0 ? limit : NULL;
		sbx_spi("UPDATE pgsandbox.sandbox SET connection_limit = $2::integer WHERE id = $1::bigint",
				SPI_OK_UPDATE, 2, args);
	}
	left_out = sbx_give_tenant_limits(pg_strtoint64(id));
	args[1] = outcome->password;
	sbx_spi("INSERT INTO pgsandbox.sandbox_secret (sandbox_id, password)"
			" VALUES ($1::bigint, $2)", SPI_OK_INSERT, 2, args);
	sbx_log_event(name, "handout", by->name,
				  psprintf("from the pool of source \"%s\", data as of %s%s%s",
						   req->source, data_as_of, left_out ? "; " : "",
						   left_out ? left_out : ""));
	strlcpy(outcome->result_name, name, sizeof(outcome->result_name));
	TimestampDifference(started, GetCurrentTimestamp(), &secs, &usecs);
	sbx_count_clone("pool", secs + usecs / 1000000.0);
	sbx_xact_commit();
	return true;
}

/*
 * Drop one pool member that should not be handed out: made from a snapshot
 * that is no longer current, beyond its pool's size, or of a pool or source
 * removed.  Returns whether one was dropped (there may be more).
 */
bool
sbx_pool_drop_one_stale(void)
{
	sbx_xact_begin("pgsandbox: looking for stale pool members");
	return sbx_drop_first_found(psprintf("WITH %s" ","
				" member AS ("
				"  SELECT s.id, s.snapshot_id, c.id AS current_id, p.pool_size,"
				"         pg_catalog.row_number() OVER (PARTITION BY s.source, s.schema_only"
				"                                       ORDER BY s.id) AS rank"
				"    FROM pgsandbox.sandbox s"
				"    LEFT JOIN pgsandbox.snapshot_plan p"
				"      ON p.source = s.source AND p.schema_only = s.schema_only"
				"    LEFT JOIN current_snapshot c"
				"      ON c.source = s.source AND c.schema_only = s.schema_only"
				"   WHERE s.kind = 'pool' AND s.status = 'ready')"
				" SELECT id, CASE WHEN COALESCE(pool_size, 0) = 0 THEN 'pool removed'"
				"                 WHEN current_id IS DISTINCT FROM snapshot_id"
				"                   THEN 'pool member of an older snapshot'"
				"                 ELSE 'pool member beyond the pool''s size' END"
				"   FROM member"
				"  WHERE COALESCE(pool_size, 0) = 0 OR current_id IS DISTINCT FROM snapshot_id"
				"     OR rank > pool_size"
				"  ORDER BY id", sbx_current_snapshots_cte()));
}

/*
 * The next pool to fill: one with fewer members ready or being filled than
 * its size.  If its snapshot is missing, *need_snapshot is set and the
 * snapshot is to be built first (unless a build is under way).  A pool or
 * snapshot that failed within the last minute waits, so that a broken
 * source is not retried without pause; one cut short by a restart (its
 * 'cleanup' event) does not.  Returns false if none is to fill.
 */
bool
sbx_pool_next_fill(char *source, bool *schema_only, bool *need_snapshot)
{
	bool		found;
	bool		isnull;

	sbx_xact_begin("pgsandbox: looking for pools to fill");
	sbx_spi(psprintf("WITH %s"
				" SELECT p.source, p.schema_only, c.id IS NULL"
				"   FROM pgsandbox.snapshot_plan p"
				"   LEFT JOIN current_snapshot c"
				"     ON c.source = p.source AND c.schema_only = p.schema_only"
				"  WHERE p.pool_size > 0"
				"    AND p.pool_size > (SELECT pg_catalog.count(*) FROM pgsandbox.sandbox s"
				"                        WHERE s.kind = 'pool' AND s.source = p.source"
				"                          AND s.schema_only = p.schema_only"
				"                          AND (s.status = 'cloning'"
				"                               OR (s.status = 'ready' AND s.snapshot_id = c.id)))"
				"    AND NOT EXISTS (SELECT 1 FROM pgsandbox.sandbox s"
				"                     WHERE s.kind = 'snapshot' AND s.status = 'cloning'"
				"                       AND s.source = p.source AND s.schema_only = p.schema_only)"
				"    AND NOT EXISTS (SELECT 1 FROM pgsandbox.sandbox s"
				"                     WHERE s.kind IN ('snapshot', 'pool') AND s.status = 'failed'"
				"                       AND s.source = p.source AND s.schema_only = p.schema_only"
				"                       AND s.created_at > pg_catalog.now() - interval '1 minute'"
				"                       AND NOT EXISTS (SELECT 1 FROM pgsandbox.event e"
				"                                        WHERE e.sandbox = s.name"
				"                                          AND e.action = 'cleanup'))"
				"  ORDER BY p.source, p.schema_only LIMIT 1", sbx_current_snapshots_cte()),
			SPI_OK_SELECT, 0, NULL);
	found = (SPI_processed == 1);
	if (found)
	{
		strlcpy(source, sbx_spi_text(0, 1), NAMEDATALEN);
		*schema_only = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
												  SPI_tuptable->tupdesc, 2, &isnull));
		*need_snapshot = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
													SPI_tuptable->tupdesc, 3, &isnull));
	}
	sbx_xact_commit();
	return found;
}
