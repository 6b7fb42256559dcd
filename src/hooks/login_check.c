/*-------------------------------------------------------------------------
 *
 * login_check.c
 *	  The hooks that keep every sandbox role inside its own sandbox.
 *
 * The login check runs as a ClientAuthentication_hook, after pg_hba.conf
 * has let the connection in, so it holds whatever pg_hba.conf says: a
 * direct member of pgsandbox_sandbox connects to the database of its own
 * name or not at all, within its sandbox's share of the server's
 * sessions (tenant_limits.c), and its login is noted for idle expiry;
 * pgsandbox_reader connects anywhere but pgsandbox's own database, and
 * pgsandbox_live, whose only sessions are live snapshots' apply (background
 * workers, which pass no ClientAuthentication_hook), nowhere.  A
 * ProcessUtility_hook keeps sandbox roles from granting themselves, or
 * anything, to other roles of that kind, from changing their database's
 * options, from giving themselves settings in another database, and from
 * preparing transactions past their share (tenant_limits.c).
 *
 * Those rules hold for the session of a sandbox role whatever role it has
 * become since it logged in (sbx_sandbox_acting_for): SET ROLE and
 * set_config('role', ...) may make it pgsandbox_sandbox, or
 * pg_database_owner, since it owns its database, and neither is a sandbox
 * role itself.
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
#include "sbx_common.h"
#include "sbx_hooks.h"
#include "sbx_shmem.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/catcache.h"
#include "utils/guc.h"
#include "utils/syscache.h"

static ClientAuthentication_hook_type prev_client_auth_hook = NULL;
static ProcessUtility_hook_type prev_process_utility_hook = NULL;

/*
 * Is role a sandbox role: a direct member of pgsandbox_sandbox?  Only
 * direct membership counts, since a sandbox role may grant itself to
 * others (PostgreSQL 15 lets a role grant membership in itself), and those
 * must not become sandbox roles.
 *
 * From PostgreSQL 16 on, pg_auth_members may hold several rows for one
 * (member, role) pair, one per grantor, and AUTHMEMMEMROLE's key is
 * (member, role, grantor); before, it was (member, role).  A lookup with
 * two keys then matches nothing on 16+, and every sandbox role would pass
 * for an ordinary one.  So list the member's rows by the first key alone,
 * which is the same on every version, and look for the group among them,
 * whoever granted it.
 */
static bool
sbx_is_sandbox_role(Oid role, Oid group)
{
	CatCList   *memlist;
	bool		found = false;

	/*
	 * By member: that cache's index is one the login path can read before a
	 * database is selected (it is how pg_hba.conf's group matching reads
	 * memberships), the (role, member) one is not.
	 */
	memlist = SearchSysCacheList1(AUTHMEMMEMROLE, ObjectIdGetDatum(role));
	for (int i = 0; i < memlist->n_members && !found; i++)
	{
		Form_pg_auth_members form =
			(Form_pg_auth_members) GETSTRUCT(&memlist->members[i]->tuple);

		found = (form->roleid == group);
	}
	ReleaseSysCacheList(memlist);
	return found;
}

/*
 * The sandbox role the session acts for, or InvalidOid if none: the rules
 * below are that role's.
 *
 * It is the session's login (the session user) if that is a sandbox role,
 * whatever the current role is.  Such a session may become another role
 * by SET ROLE or set_config('role', ...): pgsandbox_sandbox, of which it
 * is a member, or pg_database_owner, of which it is implicitly one as its
 * database's owner.  Neither is a sandbox role, so a test of the current
 * role alone would let the session prepare past its share, give itself
 * settings in another sandbox's database, or grant to another sandbox
 * role, as soon as it had switched.  Otherwise it is the current role if
 * that is a sandbox role: a superuser's session after SET ROLE sbx_..., or
 * a SECURITY DEFINER function a sandbox role owns, acts as that role and
 * keeps its rules.
 */
static Oid
sbx_sandbox_acting_for(void)
{
	Oid			group = get_role_oid(SBX_SANDBOX_GROUP, true);
	Oid			session_user;
	Oid			current_user;

	if (!OidIsValid(group))
		return InvalidOid;
	session_user = GetSessionUserId();
	if (sbx_is_sandbox_role(session_user, group))
		return session_user;
	current_user = GetUserId();
	if (current_user != session_user && sbx_is_sandbox_role(current_user, group))
		return current_user;
	return InvalidOid;
}

/*
 * A sandbox role may not hand out membership in itself, nor grant anything
 * to another sandbox role, nor name one in a row-level security policy:
 * each would reach beyond its own sandbox, and the last two would keep the
 * other's role (another sandbox's, a snapshot's or a pool member's) from
 * being dropped.  "Another" is any but the one the session acts for: as
 * pg_database_owner it may still grant to itself, the login, but not to
 * any other.
 */
static void
sbx_check_sandbox_grant(Node *stmt)
{
	Oid			group = get_role_oid(SBX_SANDBOX_GROUP, true);
	Oid			me = sbx_sandbox_acting_for();
	List	   *grantees = NIL;
	ListCell   *lc;

	if (!OidIsValid(me))
		return;
	if (IsA(stmt, GrantRoleStmt))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("a sandbox role may not grant role memberships")));
	if (IsA(stmt, GrantStmt))
		grantees = ((GrantStmt *) stmt)->grantees;
	else if (IsA(stmt, AlterDefaultPrivilegesStmt))
		grantees = ((AlterDefaultPrivilegesStmt *) stmt)->action->grantees;
	else if (IsA(stmt, CreatePolicyStmt))
		grantees = ((CreatePolicyStmt *) stmt)->roles;
	else if (IsA(stmt, AlterPolicyStmt))
		grantees = ((AlterPolicyStmt *) stmt)->roles;
	foreach(lc, grantees)
	{
		RoleSpec   *spec = lfirst(lc);
		Oid			grantee;

		/* CURRENT_USER too: after SET ROLE it need not be the sandbox's */
		if (spec->roletype == ROLESPEC_PUBLIC)
			continue;
		grantee = get_rolespec_oid(spec, true);
		if (OidIsValid(grantee) && grantee != me && sbx_is_sandbox_role(grantee, group))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 IsA(stmt, CreatePolicyStmt) || IsA(stmt, AlterPolicyStmt)
					 ? errmsg("a sandbox role may not name another sandbox role in a policy")
					 : errmsg("a sandbox role may not grant privileges to another sandbox role")));
	}
}

static void
sbx_process_utility(PlannedStmt *pstmt, const char *queryString,
					bool readOnlyTree, ProcessUtilityContext context,
					ParamListInfo params, QueryEnvironment *queryEnv,
					DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *stmt = pstmt->utilityStmt;

	/* a sandbox's share of the prepared-transaction slots */
	if (IsA(stmt, TransactionStmt) &&
		((TransactionStmt *) stmt)->kind == TRANS_STMT_PREPARE)
	{
		Oid			sandbox = sbx_sandbox_acting_for();

		if (OidIsValid(sandbox))
			sbx_check_sandbox_prepare(sandbox);
	}

	if (IsA(stmt, GrantRoleStmt) || IsA(stmt, GrantStmt) ||
		IsA(stmt, AlterDefaultPrivilegesStmt) || IsA(stmt, CreatePolicyStmt) ||
		IsA(stmt, AlterPolicyStmt))
		sbx_check_sandbox_grant(stmt);

	/*
	 * The owner of a database may make it a template, which DROP DATABASE
	 * refuses and any role with CREATEDB may copy: a sandbox's database
	 * keeps the options pgsandbox gave it.
	 */
	if (IsA(stmt, AlterDatabaseStmt) &&
		OidIsValid(sbx_sandbox_acting_for()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("a sandbox role may not change its database's options")));

	/*
	 * Nor may it give itself settings in another database: ALTER ROLE ...
	 * IN DATABASE locks that database, and a transaction left open or
	 * prepared so would keep the worker from dropping another owner's
	 * sandbox.  Whichever role the statement names (CURRENT_USER may be
	 * pgsandbox_sandbox or pg_database_owner by now), the database must be
	 * the sandbox's own: the one named like the role the session acts for.
	 */
	if (IsA(stmt, AlterRoleSetStmt) && ((AlterRoleSetStmt *) stmt)->database != NULL)
	{
		Oid			sandbox = sbx_sandbox_acting_for();

		if (OidIsValid(sandbox) &&
			strcmp(((AlterRoleSetStmt *) stmt)->database,
				   GetUserNameFromId(sandbox, false)) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("a sandbox role may not change settings in another database")));
	}

	/*
	 * A sandbox role restoring a source of another build: column options
	 * this server refuses are left out (restore_compat.c).
	 */
	if (IsA(stmt, AlterTableStmt) &&
		sbx_has_foreign_attoptions((AlterTableStmt *) stmt) &&
		OidIsValid(sbx_sandbox_acting_for()))
	{
		if (readOnlyTree)
		{
			pstmt = copyObject(pstmt);
			readOnlyTree = false;
		}
		if (!sbx_strip_foreign_attoptions((AlterTableStmt *) pstmt->utilityStmt))
		{
			if (qc)
				SetQueryCompletion(qc, CMDTAG_ALTER_TABLE, 0);
			return;
		}
	}

	if (prev_process_utility_hook)
		prev_process_utility_hook(pstmt, queryString, readOnlyTree, context,
								  params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
}

/*
 * After authentication: a member of pgsandbox_sandbox may connect only to
 * the database of its own name.  The role catalogs are shared, so they can
 * be read before the connection's database is entered, as pg_hba.conf's
 * group matching does.
 */
static void
sbx_client_auth(Port *port, int status)
{
	Oid			role;
	Oid			group;

	if (prev_client_auth_hook)
		prev_client_auth_hook(port, status);
	if (status != STATUS_OK || port->user_name == NULL)
		return;

	role = get_role_oid(port->user_name, true);

	/*
	 * pgsandbox's reader reads every table of the databases it logs into;
	 * pgsandbox's own holds the sources' secrets (source_reader.c).
	 */
	if (OidIsValid(role) && strcmp(port->user_name, SBX_READER_ROLE) == 0 &&
		port->database_name != NULL && strcmp(port->database_name, sbx_database) == 0)
		ereport(FATAL,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"%s\" may not connect to database \"%s\", where pgsandbox keeps its catalog",
						SBX_READER_ROLE, port->database_name),
				 errhint("A source in that database must name its user in its connection string.")));

	if (OidIsValid(role) && strcmp(port->user_name, SBX_LIVE_ROLE) == 0)
		ereport(FATAL,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"%s\" is the apply of live snapshots, and no client logs in as it",
						SBX_LIVE_ROLE)));

	group = get_role_oid(SBX_SANDBOX_GROUP, true);
	if (!OidIsValid(role) || !OidIsValid(group) || !sbx_is_sandbox_role(role, group))
		return;
	if (port->database_name != NULL &&
		strcmp(port->database_name, port->user_name) == 0)
	{
		/* its cap of sessions, and the slots left to others */
		sbx_check_sandbox_login(role, port->user_name);
		sbx_note_login(role);	/* for idle expiry (login_times.c) */
		return;
	}

	ereport(FATAL,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("sandbox role \"%s\" may connect only to its own database",
					port->user_name)));
}

void
sbx_install_login_check(void)
{
	prev_client_auth_hook = ClientAuthentication_hook;
	ClientAuthentication_hook = sbx_client_auth;
	prev_process_utility_hook = ProcessUtility_hook;
	ProcessUtility_hook = sbx_process_utility;
}
