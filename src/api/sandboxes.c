/*-------------------------------------------------------------------------
 *
 * sandboxes.c
 *	  The SQL functions that ask the lifecycle worker for something: clone,
 *	  drop, extend, protect, reset and save, and the drop of an expired
 *	  sandbox that gc() asks for.
 *
 * Arguments are checked here, in the caller's backend, so that bad input
 * fails at once and changes nothing.  The work is handed to the lifecycle
 * worker through the request queue; the worker owns the catalog rows, so
 * they outlive a rollback of the caller, and the caller may be inside a
 * transaction block.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "libpq-fe.h"
#include "libpq/libpq-be-fe-helpers.h"
#include "miscadmin.h"
#include "sbx_api.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_roles.h"
#include "sbx_shmem.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(pgsandbox_clone);
PG_FUNCTION_INFO_V1(pgsandbox_drop);
PG_FUNCTION_INFO_V1(pgsandbox_extend);
PG_FUNCTION_INFO_V1(pgsandbox_protect);
PG_FUNCTION_INFO_V1(pgsandbox_unprotect);
PG_FUNCTION_INFO_V1(pgsandbox_drop_expired);
PG_FUNCTION_INFO_V1(pgsandbox_reset);
PG_FUNCTION_INFO_V1(pgsandbox_save);
PG_FUNCTION_INFO_V1(pgsandbox_drop_save);

/*
 * Seconds in a ttl, checked: positive and at most pgsandbox.max_ttl.
 * Months count as 30 days, as in interval comparison.
 */
static int64
sbx_interval_seconds(Interval *span)
{
	return span->time / USECS_PER_SEC +
		(int64) span->day * SECS_PER_DAY +
		(int64) span->month * DAYS_PER_MONTH * SECS_PER_DAY;
}

static int64
sbx_ttl_seconds(Interval *ttl)
{
	int64		secs = sbx_interval_seconds(ttl);

	if (secs <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ttl must be positive")));
	if (secs > sbx_max_ttl)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ttl must not exceed pgsandbox.max_ttl"),
				 errdetail("pgsandbox.max_ttl is %s.",
						   GetConfigOptionByName("pgsandbox.max_ttl", NULL, false))));
	return secs;
}

/* Check that a sandbox name is a plausible one before asking the worker. */
static void
sbx_copy_sandbox_name(char *dest, const char *name)
{
	if (strlen(name) >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("sandbox does not exist"),
				 errdetail("No sandbox has a name that long.")));
	strlcpy(dest, name, NAMEDATALEN);
}

void
sbx_init_request(SbxRequest *req, SbxRequestKind kind)
{
	memset(req, 0, sizeof(*req));
	req->kind = kind;
	req->caller = sbx_caller();
	req->caller_is_admin = sbx_is_admin(req->caller);
	req->source_bytes = -1;
	strlcpy(req->actor, GetUserNameFromId(req->caller, false),
			sizeof(req->actor));
}

/*
 * The opening of every SQL function that asks the worker about the sandbox
 * named by its first argument: checked to run in the database the worker
 * serves, a request of 'kind' for the caller, and the name.
 */
static void
sbx_sandbox_request(SbxRequest *req, SbxRequestKind kind, FunctionCallInfo fcinfo)
{
	sbx_check_database();
	sbx_init_request(req, kind);
	sbx_copy_sandbox_name(req->name, text_to_cstring(PG_GETARG_TEXT_PP(0)));
}

/* Submit a request, wait for it and raise the worker's error if any. */
void
sbx_run_request(SbxRequest *req, SbxRequest *result)
{
	int			slot = sbx_queue_submit(req);

	sbx_queue_wait(slot, result);
	if (result->sqlerrcode != 0)
	{
		explicit_bzero(result->password, sizeof(result->password));
		ereport(ERROR,
				(errcode(result->sqlerrcode),
				 errmsg_internal("%s", result->message),
				 result->detail[0] ? errdetail_internal("%s", result->detail) : 0,
				 result->hint[0] ? errhint("%s", result->hint) : 0));
	}
}

/*
 * Check that the caller may clone a source as asked (with data only if the
 * source allows it, when check_data).  The worker checks again when it
 * takes the request; this is for failing early.
 */
void
sbx_check_request_source(const SbxRequest *req, bool check_data)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];
	bool		isnull;
	bool		allow_data;
	bool		changed_here;
	int			rc;

	SPI_connect();
	if (!sbx_may_clone(req->caller, req->caller_is_admin, req->source))
		sbx_report_source_denied(req->source, req->caller_is_admin);
	values[0] = CStringGetTextDatum(req->source);
	rc = SPI_execute_with_args("SELECT allow_data, xmin FROM pgsandbox.source WHERE name = $1",
							   1, argtypes, values, NULL, true, 1);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not look up source \"%s\"", req->source);
	allow_data = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
											SPI_tuptable->tupdesc, 1, &isnull));
	changed_here = TransactionIdIsCurrentTransactionId(
		DatumGetTransactionId(SPI_getbinval(SPI_tuptable->vals[0],
											SPI_tuptable->tupdesc, 2, &isnull)));
	SPI_finish();

	/*
	 * The worker reads the source's settings and rules as committed: a
	 * rule set in this transaction would not apply to the clone.
	 */
	if (changed_here)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("cannot clone source \"%s\" in the transaction that changed it",
						req->source),
				 errdetail("The clone worker sees only committed settings and masking rules."),
				 errhint("Commit the change first.")));

	if (check_data && !req->schema_only && !allow_data)
		sbx_report_data_denied(req->source);
}

/*
 * What a copy of the source is expected to take, for the disk budget: its
 * database's size, or -1 if it does not say; and how much of its tables'
 * pages its largest holds, which decides whether a dump of it may run in
 * parallel.
 */
static void
sbx_probe_source_size(PGconn *conn, SbxRequest *req)
{
	PGresult   *res;

	res = libpqsrv_exec(conn,
						"SELECT pg_catalog.pg_database_size(pg_catalog.current_database()),"
						"       (" SBX_LARGEST_SHARE_SQL ")",
						PG_WAIT_EXTENSION);
	req->source_bytes = -1;
	req->source_share = 1;
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
		!PQgetisnull(res, 0, 0) && !PQgetisnull(res, 0, 1))
	{
		req->source_bytes = strtoi64(PQgetvalue(res, 0, 0), NULL, 10);
		req->source_share = strtod(PQgetvalue(res, 0, 1), NULL);
	}
	PQclear(res);
}

/*
 * Whether the source has no extension and no event trigger, which the clone
 * worker would have to take care of before pg_dump starts: then it may start
 * pg_dump at once and read the source's catalog meanwhile.
 */
static void
sbx_probe_source_plain(PGconn *conn, SbxRequest *req)
{
	PGresult   *res;

	res = libpqsrv_exec(conn,
						"SELECT NOT EXISTS (SELECT FROM pg_catalog.pg_extension"
						"                    WHERE oid OPERATOR(pg_catalog.>=) 16384)"
						"   AND NOT EXISTS (SELECT FROM pg_catalog.pg_event_trigger)",
						PG_WAIT_EXTENSION);
	req->source_plain = -1;
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
		!PQgetisnull(res, 0, 0))
		req->source_plain = strcmp(PQgetvalue(res, 0, 0), "t") == 0 ? 1 : 0;
	PQclear(res);
}

/*
 * Read the source database's encoding and locale into req->locale, for the
 * worker to create the sandbox database with, and its size into
 * req->source_bytes.  If the source cannot be
 * read now, *locale stays empty: the clone worker then meets the same
 * trouble and the clone fails with a failed row that says why (or, if the
 * source is back by then, it checks the locale itself).  A source newer
 * than this server is refused here, before anything is asked of the worker.
 */
void
sbx_probe_source(const char *source, SbxRequest *req)
{
	SbxLocale  *locale = &req->locale;
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	PGconn	   *volatile conn = NULL;
	volatile int source_version = 0;

	memset(locale, 0, sizeof(*locale));
	req->source_plain = -1;
	BeginInternalSubTransaction(NULL);
	PG_TRY();
	{
		conn = sbx_source_connect(source);
		source_version = PQserverVersion(conn);
		sbx_read_source_locale(conn, source, locale);
		if (!req->schema_only)
			sbx_probe_source_size(conn, req);
		sbx_probe_source_plain(conn, req);
		libpqsrv_disconnect(conn);
		conn = NULL;
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		if (conn != NULL)
			libpqsrv_disconnect(conn);
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		memset(locale, 0, sizeof(*locale));
		req->source_bytes = -1;
		req->source_plain = -1;
		/* a cancel of the caller is not the source's trouble */
		if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED)
			ReThrowError(edata);
		FreeErrorData(edata);
	}
	PG_END_TRY();
	if (source_version > 0)
		sbx_check_source_version(source, source_version);
}

/*
 * Whether the source has a ready snapshot of the kind asked for, which (or
 * whose pool) will serve the clone.  The copy then has the snapshot's
 * encoding and locale, and the source need not be read now.  Should the
 * snapshot be dropped before the worker serves the clone, the clone worker
 * reads the source's locale itself and refuses a sandbox that differs.
 */
static bool
sbx_snapshot_serves(const SbxRequest *req)
{
	Oid			argtypes[2] = {TEXTOID, BOOLOID};
	Datum		values[2];
	bool		found;

	if (req->fresh || !sbx_catalog_has_kinds())
		return false;
	values[0] = CStringGetTextDatum(req->source);
	values[1] = BoolGetDatum(req->schema_only);
	SPI_connect();
	if (SPI_execute_with_args(psprintf("WITH %s SELECT 1 FROM current_snapshot"
									   " WHERE source = $1 AND schema_only = $2",
									   sbx_current_snapshots_cte()),
							  2, argtypes, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up the snapshots of source \"%s\"", req->source);
	found = (SPI_processed > 0);
	SPI_finish();
	return found;
}

/*
 * clone()'s idle_timeout in seconds: a fraction of a second counts as one,
 * not as none; negative, or longer than pgsandbox.max_ttl (which would mean
 * nothing, and could overflow a timestamp), is an error.
 */
static int64
sbx_idle_timeout_seconds(Interval *idle)
{
	int64		secs = sbx_interval_seconds(idle);

	if (secs == 0 && (idle->time > 0 || idle->day > 0 || idle->month > 0))
		secs = 1;
	if (secs < 0 || (secs == 0 && idle->time < 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("idle_timeout must not be negative")));
	if (secs > sbx_max_ttl)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("idle_timeout must not exceed pgsandbox.max_ttl"),
				 errdetail("pgsandbox.max_ttl is %s.",
						   GetConfigOptionByName("pgsandbox.max_ttl", NULL, false))));
	return secs;
}

/* clone()'s labels as text into out (SBX_LABELS_MAX): a JSON object. */
static void
sbx_labels_text(Jsonb *jb, char *out)
{
	char	   *labels;

	if (!JB_ROOT_IS_OBJECT(jb) || JB_ROOT_IS_SCALAR(jb))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("labels must be a JSON object")));
	labels = JsonbToCString(NULL, &jb->root, VARSIZE(jb));
	if (strlen(labels) >= SBX_LABELS_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("labels are too large"),
				 errdetail("Labels may take at most %d bytes as text.",
						   SBX_LABELS_MAX - 1)));
	strlcpy(out, labels, SBX_LABELS_MAX);
}

/*
 * clone()'s row: the sandbox's name, its conninfo, which is the only place
 * its password is ever shown (wiped from *result and from the text once
 * the row holds it), and its expiry.
 */
static Datum
sbx_clone_result(TupleDesc tupdesc, SbxRequest *result)
{
	Datum		values[3];
	bool		nulls[3] = {false, false, false};
	StringInfoData conninfo;
	char		portstr[16];

	initStringInfo(&conninfo);
	snprintf(portstr, sizeof(portstr), "%d", sbx_effective_port());
	sbx_append_conninfo_value(&conninfo, "host", sbx_effective_host());
	sbx_append_conninfo_value(&conninfo, "port", portstr);
	sbx_append_conninfo_value(&conninfo, "dbname", result->result_name);
	sbx_append_conninfo_value(&conninfo, "user", result->result_name);
	sbx_append_conninfo_value(&conninfo, "password", result->password);
	explicit_bzero(result->password, sizeof(result->password));

	tupdesc = BlessTupleDesc(tupdesc);
	values[0] = CStringGetTextDatum(result->result_name);
	values[1] = CStringGetTextDatum(conninfo.data);
	values[2] = TimestampTzGetDatum(result->expires_at);
	explicit_bzero(conninfo.data, conninfo.len);
	return HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls));
}

/*
 * clone(source text, schema_only boolean, ttl interval, labels jsonb,
 *		 fresh boolean, statistics boolean, idle_timeout interval)
 *	 RETURNS TABLE(name text, conninfo text, expires_at timestamptz)
 */
Datum
pgsandbox_clone(PG_FUNCTION_ARGS)
{
	SbxRequest	req;
	SbxRequest	result;
	char	   *source;
	TupleDesc	tupdesc;

	/* from 0.8, a clone of a save names the save instead of a source */
	if (PG_NARGS() > 7 && !PG_ARGISNULL(7))
	{
		if (!PG_ARGISNULL(0))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("clone() takes a source or from_save, not both")));
	}
	else
		sbx_require_arg(fcinfo, 0, "source");
	sbx_require_arg(fcinfo, 1, "schema_only");
	sbx_require_arg(fcinfo, 3, "labels");
	/* clone() of a catalog not yet updated has no fresh (0.3), statistics (0.5) */
	if (PG_NARGS() > 4)
		sbx_require_arg(fcinfo, 4, "fresh");
	if (PG_NARGS() > 5)
		sbx_require_arg(fcinfo, 5, "statistics");
	/* ... nor idle_timeout (0.7) */
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	sbx_init_request(&req, SBX_REQ_CLONE);
	source = PG_ARGISNULL(0) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(0));
	req.schema_only = PG_GETARG_BOOL(1);
	req.fresh = PG_NARGS() > 4 && PG_GETARG_BOOL(4);
	req.statistics = PG_NARGS() > 5 && PG_GETARG_BOOL(5);
	if (req.statistics)
	{
		/*
		 * The planner's statistics are dumped by pg_dump 18 and restored
		 * by its functions, from PostgreSQL 18 on.  A snapshot or a pool
		 * member has none: such a clone is a dump of the live source.
		 */
#if PG_VERSION_NUM < 180000
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a clone with the planner's statistics needs PostgreSQL 18 or later"),
				 errdetail("This server runs PostgreSQL %d.", PG_VERSION_NUM / 10000)));
#endif
		req.fresh = true;
	}
	req.ttl_secs = PG_ARGISNULL(2) ? sbx_default_ttl :
		sbx_ttl_seconds(PG_GETARG_INTERVAL_P(2));
	if (PG_ARGISNULL(2) && req.ttl_secs > sbx_max_ttl)
		req.ttl_secs = sbx_max_ttl;

	/* an idle timeout of 0 turns idle expiry off for this sandbox */
	req.idle_secs = PG_NARGS() > 6 && !PG_ARGISNULL(6)
		? sbx_idle_timeout_seconds(PG_GETARG_INTERVAL_P(6)) : sbx_default_idle_timeout;
	sbx_labels_text(PG_GETARG_JSONB_P(3), req.labels);

	/* from 0.12, fewer sessions than pgsandbox.max_connections_per_sandbox */
	if (PG_NARGS() > 8 && !PG_ARGISNULL(8))
	{
		req.connection_limit = PG_GETARG_INT32(8);
		if (req.connection_limit < 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("connection_limit must be at least 1"),
					 errdetail("A sandbox without sessions would be of no use; leave it NULL for pgsandbox.max_connections_per_sandbox.")));
	}

	sbx_check_database();
	if (source == NULL)
	{
		/* the worker finds the save, and checks its source */
		char	   *save = text_to_cstring(PG_GETARG_TEXT_PP(7));

		if (req.fresh || req.statistics)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("a clone of a save cannot be fresh or carry statistics")));
		if (strlen(save) >= NAMEDATALEN)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("save \"%s\" does not exist", save)));
		strlcpy(req.target, save, sizeof(req.target));
	}
	else
	{
		if (strlen(source) >= NAMEDATALEN)
			sbx_report_source_denied(source, req.caller_is_admin);
		strlcpy(req.source, source, sizeof(req.source));
		sbx_check_request_source(&req, true);
		if (!sbx_snapshot_serves(&req))
			sbx_probe_source(req.source, &req);
	}

	sbx_run_request(&req, &result);
	PG_RETURN_DATUM(sbx_clone_result(tupdesc, &result));
}

/*
 * drop(name text)
 */
Datum
pgsandbox_drop(PG_FUNCTION_ARGS)
{
	SbxRequest	req;
	SbxRequest	result;

	sbx_require_arg(fcinfo, 0, "sandbox name");
	sbx_sandbox_request(&req, SBX_REQ_DROP, fcinfo);
	sbx_run_request(&req, &result);
	PG_RETURN_VOID();
}

/*
 * _drop_expired(name text) RETURNS boolean: used by gc(); the worker drops
 * the sandbox only if it is still live and expired.
 */
Datum
pgsandbox_drop_expired(PG_FUNCTION_ARGS)
{
	SbxRequest	req;
	SbxRequest	result;

	sbx_sandbox_request(&req, SBX_REQ_DROP, fcinfo);
	req.only_if_expired = true;
	sbx_run_request(&req, &result);
	PG_RETURN_BOOL(result.dropped);
}

/*
 * protect(name text, until timestamptz) RETURNS timestamptz
 */
Datum
pgsandbox_protect(PG_FUNCTION_ARGS)
{
	SbxRequest	req;
	SbxRequest	result;
	TimestampTz until;
	TimestampTz now = GetCurrentTimestamp();

	sbx_require_arg(fcinfo, 0, "sandbox name");
	sbx_require_arg(fcinfo, 1, "until");
	until = PG_GETARG_TIMESTAMPTZ(1);
	if (TIMESTAMP_NOT_FINITE(until) || until <= now)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("protection must end at a finite moment in the future")));
	if (until > now + (TimestampTz) sbx_max_protect * USECS_PER_SEC)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("protection must not last longer than pgsandbox.max_protect"),
				 errdetail("pgsandbox.max_protect is %s.",
						   GetConfigOptionByName("pgsandbox.max_protect", NULL, false))));
	sbx_sandbox_request(&req, SBX_REQ_PROTECT, fcinfo);
	req.protect_until = until;
	sbx_run_request(&req, &result);
	PG_RETURN_TIMESTAMPTZ(result.expires_at);
}

/*
 * unprotect(name text)
 */
Datum
pgsandbox_unprotect(PG_FUNCTION_ARGS)
{
	SbxRequest	req;
	SbxRequest	result;

	sbx_require_arg(fcinfo, 0, "sandbox name");
	sbx_sandbox_request(&req, SBX_REQ_PROTECT, fcinfo);
	req.protect_until = 0;
	sbx_run_request(&req, &result);
	PG_RETURN_VOID();
}

/*
 * extend(name text, ttl interval) RETURNS timestamptz
 */
Datum
pgsandbox_extend(PG_FUNCTION_ARGS)
{
	SbxRequest	req;
	SbxRequest	result;
	int64		ttl_secs;

	sbx_require_arg(fcinfo, 0, "sandbox name");
	sbx_require_arg(fcinfo, 1, "ttl");
	ttl_secs = sbx_ttl_seconds(PG_GETARG_INTERVAL_P(1));
	sbx_sandbox_request(&req, SBX_REQ_EXTEND, fcinfo);
	req.ttl_secs = ttl_secs;
	sbx_run_request(&req, &result);
	PG_RETURN_TIMESTAMPTZ(result.expires_at);
}

/*
 * For the disk budget of a reset that dumps its source anew: the size of
 * the source of data sandbox req->name, probed as clone() probes it, or -1
 * (a schema-only sandbox, one the caller will be told does not exist, or
 * of a source it may no longer clone: its source is never connected to).
 * Runs as the function's owner, which may read the catalog.
 */
static void
sbx_probe_reset_source(SbxRequest *req)
{
	Oid			types[3] = {TEXTOID, OIDOID, BOOLOID};
	Datum		values[3];
	char	   *source = NULL;

	req->source_bytes = -1;
	values[0] = CStringGetTextDatum(req->name);
	values[1] = ObjectIdGetDatum(req->caller);
	values[2] = BoolGetDatum(req->caller_is_admin);
	SPI_connect();
	/* only a sandbox the caller may reset, of a source it may clone now */
	if (SPI_execute_with_args("SELECT source FROM pgsandbox.sandbox"
							  " WHERE name = $1 AND status = 'ready' AND kind = 'sandbox'"
							  "   AND NOT schema_only AND (owner_oid = $2 OR $3)",
							  3, types, values, NULL, true, 1) == SPI_OK_SELECT &&
		SPI_processed == 1)
	{
		source = MemoryContextStrdup(CurTransactionContext,
									 SPI_getvalue(SPI_tuptable->vals[0],
												  SPI_tuptable->tupdesc, 1));
		if (!sbx_may_clone(req->caller, req->caller_is_admin, source))
			source = NULL;
	}
	SPI_finish();
	if (source == NULL)
		return;
	req->schema_only = false;
	sbx_probe_source(source, req);
}

/*
 * reset(name text, target text, ttl interval) RETURNS timestamptz: the
 * sandbox's new data_as_of.  A notice says what it now holds.
 */
Datum
pgsandbox_reset(PG_FUNCTION_ARGS)
{
	SbxRequest	req;
	SbxRequest	result;
	char	   *target;
	int64		ttl_secs;

	sbx_require_arg(fcinfo, 0, "sandbox name");
	sbx_require_arg(fcinfo, 1, "target");
	ttl_secs = PG_ARGISNULL(2) ? 0 : sbx_ttl_seconds(PG_GETARG_INTERVAL_P(2));
	target = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (target[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("target must not be empty"),
				 errhint("reset() takes 'start', 'latest', or the name or label of one of the sandbox's saves.")));
	sbx_sandbox_request(&req, SBX_REQ_RESET, fcinfo);
	req.ttl_secs = ttl_secs;
	if (strlen(target) >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("save \"%s\" of sandbox \"%s\" does not exist", target, req.name)));
	strlcpy(req.target, target, sizeof(req.target));
	sbx_probe_reset_source(&req);
	sbx_run_request(&req, &result);
	ereport(NOTICE,
			(errmsg("sandbox \"%s\" now holds %s", req.name, result.detail)));
	PG_RETURN_TIMESTAMPTZ(result.taken_at);
}

/*
 * save(name text, label text) RETURNS text: the save's name.
 */
Datum
pgsandbox_save(PG_FUNCTION_ARGS)
{
	SbxRequest	req;
	SbxRequest	result;
	char	   *label;

	sbx_require_arg(fcinfo, 0, "sandbox name");
	sbx_require_arg(fcinfo, 1, "label");
	label = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (label[0] == '\0' || strlen(label) >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a save's label must have 1 to %d bytes", NAMEDATALEN - 1)));
	if (strcmp(label, "start") == 0 || strcmp(label, "latest") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"%s\" cannot label a save", label),
				 errdetail("reset() takes it to mean something else.")));
	sbx_sandbox_request(&req, SBX_REQ_SAVE, fcinfo);
	strlcpy(req.target, label, sizeof(req.target));
	sbx_run_request(&req, &result);
	PG_RETURN_TEXT_P(cstring_to_text(result.result_name));
}

/*
 * drop_save(name text): the save is dropped once no copy of it is under way.
 */
Datum
pgsandbox_drop_save(PG_FUNCTION_ARGS)
{
	SbxRequest	req;
	SbxRequest	result;
	char	   *name;

	sbx_require_arg(fcinfo, 0, "save name");
	sbx_check_database();
	sbx_init_request(&req, SBX_REQ_DROP_SAVE);
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	if (strlen(name) >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("save \"%s\" does not exist", name)));
	strlcpy(req.name, name, sizeof(req.name));
	sbx_run_request(&req, &result);
	PG_RETURN_VOID();
}
