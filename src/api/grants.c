/*-------------------------------------------------------------------------
 *
 * grants.c
 *	  The SQL functions of who may do what: caller(), caller_is_admin(),
 *	  grant_source() and revoke_source().
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_auth_members.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "libpq/auth.h"
#include "libpq/libpq-be.h"
#include "miscadmin.h"
#include "sbx_roles.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/catcache.h"
#include "utils/guc.h"
#include "utils/syscache.h"

PG_FUNCTION_INFO_V1(pgsandbox_caller);
PG_FUNCTION_INFO_V1(pgsandbox_caller_is_admin);
PG_FUNCTION_INFO_V1(pgsandbox_grant_source);
PG_FUNCTION_INFO_V1(pgsandbox_revoke_source);

Datum
pgsandbox_caller(PG_FUNCTION_ARGS)
{
	PG_RETURN_OID(sbx_caller());
}

Datum
pgsandbox_caller_is_admin(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(sbx_is_admin(sbx_caller()));
}

/* Change a grant: add it (grant) or take it back. */
static void
sbx_change_grant(FunctionCallInfo fcinfo, bool grant)
{
	char	   *source;
	Oid			grantee;
	Oid			argtypes[2] = {TEXTOID, OIDOID};
	Datum		values[2];
	int			rc;

	sbx_require_admin();
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("source must not be null")));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("grantee must not be null")));
	source = text_to_cstring(PG_GETARG_TEXT_PP(0));
	grantee = PG_GETARG_OID(1);
	values[0] = CStringGetTextDatum(source);
	values[1] = ObjectIdGetDatum(grantee);

	SPI_connect();
	rc = SPI_execute_with_args("SELECT 1 FROM pgsandbox.source WHERE name = $1",
							   1, argtypes, values, NULL, true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not look up source");
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("source \"%s\" does not exist", source)));
	if (grant)
		rc = SPI_execute_with_args("INSERT INTO pgsandbox.source_grant (source, grantee)"
								   " VALUES ($1, $2) ON CONFLICT DO NOTHING",
								   2, argtypes, values, NULL, false, 0);
	else
		rc = SPI_execute_with_args("DELETE FROM pgsandbox.source_grant"
								   " WHERE source = $1 AND grantee = $2",
								   2, argtypes, values, NULL, false, 0);
	if (rc != SPI_OK_INSERT && rc != SPI_OK_DELETE)
		elog(ERROR, "could not change the grants of source \"%s\"", source);
	if (!grant && SPI_processed == 0)
		ereport(WARNING,
				(errmsg("role \"%s\" had no grant on source \"%s\"",
						GetUserNameFromId(grantee, false), source)));
	SPI_finish();
}

/* grant_source(source text, grantee regrole) */
Datum
pgsandbox_grant_source(PG_FUNCTION_ARGS)
{
	sbx_change_grant(fcinfo, true);
	PG_RETURN_VOID();
}

/* revoke_source(source text, grantee regrole) */
Datum
pgsandbox_revoke_source(PG_FUNCTION_ARGS)
{
	sbx_change_grant(fcinfo, false);
	PG_RETURN_VOID();
}
