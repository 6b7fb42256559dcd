/*-------------------------------------------------------------------------
 *
 * sql_checks.c
 *	  What every SQL function of pgsandbox checks first: its arguments.  That
 *	  it runs in the database the worker serves is the queue's to check
 *	  (sbx_check_database, queue.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/dbcommands.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "sbx_common.h"

/* Raise the "must not be null" error for argument n when it is NULL. */
void
sbx_require_arg(FunctionCallInfo fcinfo, int n, const char *argname)
{
	if (PG_ARGISNULL(n))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", argname)));
}

