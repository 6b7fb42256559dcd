/*-------------------------------------------------------------------------
 *
 * sql_checks.c
 *	  What every SQL function of pgsandbox checks first: its arguments, and
 *	  that it runs in the database the worker serves.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/dbcommands.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "pgsandbox.h"
#include "sbx_shmem.h"
#include "sbx_sql.h"

/* Raise the "must not be null" error for argument n when it is NULL. */
void
sbx_require_arg(FunctionCallInfo fcinfo, int n, const char *argname)
{
	if (PG_ARGISNULL(n))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", argname)));
}

/*
 * Lifecycle functions work only in the database the worker serves.
 */
void
sbx_check_database(void)
{
	char	   *dbname = get_database_name(MyDatabaseId);

	sbx_queue_attach();
	if (dbname == NULL || strcmp(dbname, sbx_database) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pgsandbox serves database \"%s\", not \"%s\"",
						sbx_database, dbname ? dbname : "?"),
				 errhint("Call pgsandbox functions in database \"%s\", or set pgsandbox.database.",
						 sbx_database)));
}
