/*-------------------------------------------------------------------------
 *
 * read_only.c
 *	  Keeping a sandbox that grew past pgsandbox.max_sandbox_size
 *	  read-only.
 *
 * The worker sets default_transaction_read_only on such a sandbox's
 * database, which tells its users, but which any session may turn off for
 * itself: SET, BEGIN READ WRITE, and the database's owner (the sandbox
 * role) may even reset it for the database.  So the worker also sets
 * pgsandbox.read_only there, a setting only a superuser may change, and
 * in a session where it is on, every statement runs in a read-only
 * transaction: the executor and utility hooks below make the transaction
 * read-only before PostgreSQL's own checks run, which then refuse writes
 * (and the creation of temporary tables) with SQLSTATE 25006.
 *
 * Functions called through the fast-path protocol run no statement: a
 * session that turned default_transaction_read_only off could still write
 * large objects that way.  Its next measurement shows the growth.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/executor.h"
#include "pgsandbox.h"
#include "tcop/utility.h"

static ExecutorStart_hook_type prev_executor_start_hook = NULL;
static ProcessUtility_hook_type prev_process_utility_hook = NULL;

static void
sbx_read_only_executor_start(QueryDesc *queryDesc, int eflags)
{
	if (sbx_read_only_setting)
		XactReadOnly = true;
	if (prev_executor_start_hook)
		prev_executor_start_hook(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

static void
sbx_read_only_process_utility(PlannedStmt *pstmt, const char *queryString,
							  bool readOnlyTree, ProcessUtilityContext context,
							  ParamListInfo params, QueryEnvironment *queryEnv,
							  DestReceiver *dest, QueryCompletion *qc)
{
	/* a transaction's first statement may be BEGIN: it starts read-only */
	if (sbx_read_only_setting && IsTransactionState())
		XactReadOnly = true;
	if (prev_process_utility_hook)
		prev_process_utility_hook(pstmt, queryString, readOnlyTree, context,
								  params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
	if (sbx_read_only_setting && IsTransactionState())
		XactReadOnly = true;
}

void
sbx_install_read_only_check(void)
{
	prev_executor_start_hook = ExecutorStart_hook;
	ExecutorStart_hook = sbx_read_only_executor_start;
	prev_process_utility_hook = ProcessUtility_hook;
	ProcessUtility_hook = sbx_read_only_process_utility;
}
