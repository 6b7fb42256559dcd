/*-------------------------------------------------------------------------
 *
 * metrics.c
 *	  The counters behind the metrics view, and the depth of the request
 *	  queue it reports.
 *
 * Counters live in the catalog table pgsandbox.counter, so that they
 * survive a restart, and only the lifecycle worker writes them: a clone
 * that becomes ready is counted in the transaction that marks it ready, a
 * failure in a transaction of its own.  Every other series of the view is
 * read from the catalog or from shared memory when it is scraped.
 *
 * Clone latency is a Prometheus histogram: cumulative buckets with an "le"
 * label, a sum and a count, per method (dump, snapshot, pool).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "sbx_common.h"
#include "sbx_shmem.h"
#include "sbx_spi.h"
#include "utils/builtins.h"
#include "utils/elog.h"

PG_FUNCTION_INFO_V1(pgsandbox_queue_depth);

/* upper bounds of the latency histogram's buckets, in seconds */
#define SBX_LATENCY_BUCKETS \
	"{0.1,0.25,0.5,1,2.5,5,10,30,60,120,300,600,1800,+Inf}"

/*
 * In a worker transaction: count a clone made ready (or handed out) by
 * method, and its latency.  Before the catalog has counters, nothing.
 */
void
sbx_count_clone(const char *method, double seconds)
{
	char		secs[64];
	const char *args[2] = {method, secs};

	if (!sbx_catalog_has_usage())
		return;
	snprintf(secs, sizeof(secs), "%.6f", seconds);
	sbx_spi("INSERT INTO pgsandbox.counter AS c (name, labels, value)"
			" SELECT 'pgsandbox_clone_duration_seconds_bucket',"
			"        pg_catalog.jsonb_build_object('method', $1, 'le', le),"
			"        CASE WHEN $2::float8 <= le::float8 THEN 1 ELSE 0 END"
			"   FROM pg_catalog.unnest('" SBX_LATENCY_BUCKETS "'::text[]) AS le"
			" UNION ALL"
			" SELECT 'pgsandbox_clone_duration_seconds_sum',"
			"        pg_catalog.jsonb_build_object('method', $1), $2::float8"
			" UNION ALL"
			" SELECT 'pgsandbox_clone_duration_seconds_count',"
			"        pg_catalog.jsonb_build_object('method', $1), 1"
			" UNION ALL"
			" SELECT 'pgsandbox_clones_total',"
			"        pg_catalog.jsonb_build_object('method', $1, 'outcome', 'ok'), 1"
			" ON CONFLICT (name, labels) DO UPDATE SET value = c.value + excluded.value",
			SPI_OK_INSERT, 2, args);
}

/* What a failure's SQLSTATE says its cause was, as a label. */
static const char *
sbx_failure_cause(int sqlerrcode)
{
	switch (sqlerrcode)
	{
		case ERRCODE_DISK_FULL:
			return "disk_budget";
		case ERRCODE_CONFIGURATION_LIMIT_EXCEEDED:
			return "quota";
		case ERRCODE_INSUFFICIENT_PRIVILEGE:
			return "permission";
		case ERRCODE_QUERY_CANCELED:
			return "canceled";
		case ERRCODE_FEATURE_NOT_SUPPORTED:
			return "not_supported";
		default:
			break;
	}
	switch (ERRCODE_TO_CATEGORY(sqlerrcode))
	{
		case ERRCODE_CONNECTION_EXCEPTION:
			return "source_unreachable";
		case ERRCODE_INSUFFICIENT_RESOURCES:
		case ERRCODE_PROGRAM_LIMIT_EXCEEDED:
			return "resources";
		case ERRCODE_OPERATOR_INTERVENTION:
			return "shutdown";
		case ERRCODE_INTERNAL_ERROR:
			return "internal";
		default:
			return "other";
	}
}

/*
 * Count a clone that failed or was refused, in a transaction of its own.
 * Counting never fails the caller: an error is logged and forgotten.
 */
static void
sbx_count_clone_failure_step(void *arg)
{
	const char *const *args = arg;

	sbx_xact_begin("pgsandbox: counting a failed clone");
	if (sbx_catalog_has_usage())
		sbx_spi("INSERT INTO pgsandbox.counter AS c (name, labels, value)"
				" VALUES ('pgsandbox_clones_total',"
				"         pg_catalog.jsonb_build_object('method', $1, 'outcome', 'failed'), 1),"
				"        ('pgsandbox_clone_failures_total',"
				"         pg_catalog.jsonb_build_object('cause', $2), 1)"
				" ON CONFLICT (name, labels) DO UPDATE SET value = c.value + excluded.value",
				SPI_OK_INSERT, 2, args);
	sbx_xact_commit();
}

void
sbx_count_clone_failure(const char *method, int sqlerrcode)
{
	const char *args[2] = {method, sbx_failure_cause(sqlerrcode)};

	(void) sbx_try_or_warn(sbx_count_clone_failure_step, args,
						   "could not count a failed clone");
}

/*
 * _queue_depth() RETURNS TABLE(state text, requests integer): requests
 * waiting in the queue (pending) and taken by the worker (running).
 */
Datum
pgsandbox_queue_depth(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	SbxShared  *shared = sbx_queue_attach();
	int			pending = 0;
	int			running = 0;
	Datum		values[2];
	bool		nulls[2] = {false, false};

	InitMaterializedSRF(fcinfo, 0);
	LWLockAcquire(shared->lock, LW_SHARED);
	for (int i = 0; i < shared->nrequests; i++)
	{
		if (shared->requests[i].state == SBX_SLOT_PENDING)
			pending++;
		else if (shared->requests[i].state == SBX_SLOT_RUNNING)
			running++;
	}
	LWLockRelease(shared->lock);

	values[0] = CStringGetTextDatum("pending");
	values[1] = Int32GetDatum(pending);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	values[0] = CStringGetTextDatum("running");
	values[1] = Int32GetDatum(running);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	return (Datum) 0;
}
