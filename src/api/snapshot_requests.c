/*-------------------------------------------------------------------------
 *
 * snapshot_requests.c
 *	  The SQL functions through which admins manage snapshots and pools:
 *	  snapshot(), drop_snapshot(), schedule_snapshot() and set_pool().
 *
 * As in sandboxes.c, arguments are checked here, in the caller's backend,
 * so that bad input fails at once and changes nothing; the lifecycle worker
 * then writes the plan (pgsandbox.snapshot_plan), builds and drops the
 * snapshots and fills the pools.  The source's encoding and locale are read
 * here, as clone() does, and kept in the plan for the builds the worker
 * starts on its own.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "sbx_api.h"
#include "sbx_common.h"
#include "sbx_roles.h"
#include "sbx_schedule.h"
#include "sbx_shmem.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(pgsandbox_snapshot);
PG_FUNCTION_INFO_V1(pgsandbox_drop_snapshot);
PG_FUNCTION_INFO_V1(pgsandbox_schedule_snapshot);
PG_FUNCTION_INFO_V1(pgsandbox_set_pool);
PG_FUNCTION_INFO_V1(pgsandbox_current_snapshots);

/*
 * Check the caller (an admin) and the source, and fill the request's source
 * and kind.  A snapshot with data needs a source that allows copying data,
 * unless it is being removed (check_data false).
 */
static void
sbx_snapshot_request(SbxRequest *req, SbxRequestKind kind, const char *source,
					 bool schema_only, bool check_data)
{
	sbx_require_admin();
	sbx_check_database();
	sbx_init_request(req, kind);
	if (strlen(source) >= NAMEDATALEN)
		sbx_report_source_denied(source, true);
	strlcpy(req->source, source, sizeof(req->source));
	req->schema_only = schema_only;
	sbx_check_request_source(req, check_data);
}

/*
 * snapshot(source text, schema_only boolean)
 *	 RETURNS TABLE(source text, schema_only boolean, taken_at timestamptz,
 *				   size_bytes bigint)
 */
Datum
pgsandbox_snapshot(PG_FUNCTION_ARGS)
{
	SbxRequest	req;
	SbxRequest	result;
	TupleDesc	tupdesc;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};

	sbx_require_arg(fcinfo, 0, "source");
	sbx_require_arg(fcinfo, 1, "schema_only");
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	sbx_snapshot_request(&req, SBX_REQ_SNAPSHOT,
						 text_to_cstring(PG_GETARG_TEXT_PP(0)), PG_GETARG_BOOL(1), true);
	sbx_probe_source(req.source, &req);
	sbx_run_request(&req, &result);

	tupdesc = BlessTupleDesc(tupdesc);
	values[0] = CStringGetTextDatum(req.source);
	values[1] = BoolGetDatum(req.schema_only);
	values[2] = TimestampTzGetDatum(result.taken_at);
	values[3] = Int64GetDatum(result.size_bytes);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * drop_snapshot(source text, schema_only boolean): NULL drops both kinds.
 * The snapshots serve no new copy from now on and are dropped once no copy
 * of them is under way.
 */
Datum
pgsandbox_drop_snapshot(PG_FUNCTION_ARGS)
{
	SbxRequest	req;
	SbxRequest	result;
	bool		both = PG_ARGISNULL(1);

	sbx_require_arg(fcinfo, 0, "source");
	sbx_snapshot_request(&req, SBX_REQ_DROP_SNAPSHOT,
						 text_to_cstring(PG_GETARG_TEXT_PP(0)), true, false);
	req.both_kinds = both;
	req.schema_only = both ? true : PG_GETARG_BOOL(1);
	sbx_run_request(&req, &result);
	PG_RETURN_VOID();
}

/*
 * schedule_snapshot(source text, schedule text, schema_only boolean): the
 * worker retakes the snapshot on this schedule; NULL unschedules.
 */
Datum
pgsandbox_schedule_snapshot(PG_FUNCTION_ARGS)
{
	SbxRequest	req;
	SbxRequest	result;
	char	   *schedule = NULL;

	sbx_require_arg(fcinfo, 0, "source");
	sbx_require_arg(fcinfo, 2, "schema_only");
	if (!PG_ARGISNULL(1))
	{
		SbxSchedule parsed;

		schedule = text_to_cstring(PG_GETARG_TEXT_PP(1));
		if (strlen(schedule) >= SBX_SCHEDULE_MAX)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("schedule is too long"),
					 errdetail("A schedule may take at most %d bytes.", SBX_SCHEDULE_MAX - 1)));
		sbx_schedule_parse(schedule, &parsed);
	}
	sbx_snapshot_request(&req, SBX_REQ_SCHEDULE,
						 text_to_cstring(PG_GETARG_TEXT_PP(0)), PG_GETARG_BOOL(2),
						 schedule != NULL);
	if (schedule != NULL)
	{
		strlcpy(req.schedule, schedule, sizeof(req.schedule));
		sbx_probe_source(req.source, &req);
	}
	sbx_run_request(&req, &result);
	PG_RETURN_VOID();
}

/*
 * set_pool(source text, size integer, schema_only boolean): the worker keeps
 * size ready sandboxes made from the current snapshot; 0 removes the pool.
 */
Datum
pgsandbox_set_pool(PG_FUNCTION_ARGS)
{
	SbxRequest	req;
	SbxRequest	result;
	int32		size;

	sbx_require_arg(fcinfo, 0, "source");
	sbx_require_arg(fcinfo, 1, "size");
	sbx_require_arg(fcinfo, 2, "schema_only");
	size = PG_GETARG_INT32(1);
	if (size < 0 || size > sbx_max_sandboxes)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("pool size must be between 0 and %d", sbx_max_sandboxes),
				 errdetail("A pool holds at most pgsandbox.max_sandboxes sandboxes.")));
	sbx_snapshot_request(&req, SBX_REQ_SET_POOL,
						 text_to_cstring(PG_GETARG_TEXT_PP(0)), PG_GETARG_BOOL(2),
						 size > 0);
	req.pool_size = size;
	if (size > 0)
		sbx_probe_source(req.source, &req);
	sbx_run_request(&req, &result);
	PG_RETURN_VOID();
}

/*
 * _current_snapshots() RETURNS TABLE(source text, schema_only boolean,
 * id bigint): the current snapshot of each source and kind, as the worker
 * defines it (sbx_current_snapshots_cte), for the pools and metrics views.
 */
Datum
pgsandbox_current_snapshots(PG_FUNCTION_ARGS)
{
	/*
	 * The metrics view reads this at every scrape: its plan is kept for the
	 * session, made again if the query changes (the catalog's version does,
	 * by ALTER EXTENSION UPDATE); the plan cache remakes it when the tables
	 * it reads change.
	 */
	static SPIPlanPtr plan = NULL;
	static char *planned_query = NULL;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *query;

	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();
	query = psprintf("WITH %s SELECT source, schema_only, id FROM current_snapshot",
					 sbx_current_snapshots_cte());
	if (plan == NULL || strcmp(query, planned_query) != 0)
	{
		SPIPlanPtr	fresh = SPI_prepare(query, 0, NULL);

		if (fresh == NULL || SPI_keepplan(fresh) != 0)
			elog(ERROR, "could not plan the list of the current snapshots");
		if (plan != NULL)
			SPI_freeplan(plan);
		if (planned_query != NULL)
			pfree(planned_query);
		plan = fresh;
		planned_query = MemoryContextStrdup(TopMemoryContext, query);
	}
	if (SPI_execute_plan(plan, NULL, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not list the current snapshots");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		Datum		values[3];
		bool		nulls[3];

		for (int c = 0; c < 3; c++)
			values[c] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc,
									  c + 1, &nulls[c]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	SPI_finish();
	return (Datum) 0;
}
