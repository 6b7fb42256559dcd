/*-------------------------------------------------------------------------
 *
 * read_only.c
 *	  Keeping a sandbox that grew past pgsandbox.max_sandbox_size
 *	  read-only.
 *
 * The worker sets default_transaction_read_only on such a sandbox's
 * database, which tells its users, but which any session may turn off for
 * itself: SET, PGOPTIONS, BEGIN READ WRITE, and the database's owner (the
 * sandbox role) may even reset it for the database.  So the worker also
 * sets pgsandbox.read_only there, a setting only a superuser may change,
 * and in a session where it is on two checks hold:
 *
 * - Every statement runs in a read-only transaction: the executor and
 *	 utility hooks below make the transaction read-only before PostgreSQL's
 *	 own checks run, which then refuse writes (and the creation of temporary
 *	 tables) with SQLSTATE 25006.
 *
 * - No transaction that wrote anything commits: a transaction that was
 *	 given a transaction ID is refused at commit (and at PREPARE
 *	 TRANSACTION), again with 25006.  This catches the writes that run no
 *	 statement of their own, and so pass the hooks: large-object functions
 *	 (PostgreSQL 15 does not check them for read-only transactions),
 *	 functions called through the fast-path protocol, PL/pgSQL assignments
 *	 in a transaction a COMMIT inside a procedure began, functions folded
 *	 by the planner, and commands allowed in read-only transactions that
 *	 still rewrite data (VACUUM FULL, CLUSTER, REINDEX, ANALYZE).
 *
 * - No prepared transaction commits (COMMIT PREPARED is refused with 25006):
 *	 the worker rolls back those prepared while the sandbox was writable
 *	 when it makes it read-only, and this stops one prepared in between.
 *
 * What such a transaction wrote before its commit was refused is rolled
 * back: a rewritten relation's new files are removed, and space taken in
 * existing ones is reused once vacuumed; it does not add up across
 * transactions.  Autovacuum is left to do its work.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "sbx_common.h"
#include "sbx_hooks.h"
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
	if (sbx_read_only_setting && IsA(pstmt->utilityStmt, TransactionStmt) &&
		((TransactionStmt *) pstmt->utilityStmt)->kind == TRANS_STMT_COMMIT_PREPARED)
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot commit a prepared transaction in a read-only sandbox"),
				 errdetail("The sandbox grew past pgsandbox.max_sandbox_size: pgsandbox.read_only is on in its database."),
				 errhint("Roll it back with ROLLBACK PREPARED.")));
	if (prev_process_utility_hook)
		prev_process_utility_hook(pstmt, queryString, readOnlyTree, context,
								  params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
	if (sbx_read_only_setting && IsTransactionState())
		XactReadOnly = true;
}

/* At commit or PREPARE TRANSACTION: refuse a transaction that wrote. */
static void
sbx_read_only_xact_callback(XactEvent event, void *arg)
{
	if ((event != XACT_EVENT_PRE_COMMIT && event != XACT_EVENT_PRE_PREPARE) ||
		!sbx_read_only_setting || sbx_am_autovacuum_worker_compat())
		return;
	if (TransactionIdIsValid(GetTopTransactionIdIfAny()))
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot commit a transaction that wrote to a read-only sandbox"),
				 errdetail("The sandbox grew past pgsandbox.max_sandbox_size: pgsandbox.read_only is on in its database.")));
}

void
sbx_install_read_only_check(void)
{
	RegisterXactCallback(sbx_read_only_xact_callback, NULL);
	prev_executor_start_hook = ExecutorStart_hook;
	ExecutorStart_hook = sbx_read_only_executor_start;
	prev_process_utility_hook = ProcessUtility_hook;
	ProcessUtility_hook = sbx_read_only_process_utility;
}
