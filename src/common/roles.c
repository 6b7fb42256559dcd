/*-------------------------------------------------------------------------
 *
 * roles.c
 *	  Who pgsandbox acts for: the caller's identity, the admin check,
 *	  whether a role may clone a source, and the hardening of a superuser's
 *	  session inside a sandbox.
 *
 * The SQL functions are SECURITY DEFINER, so that they can read the
 * catalog on the caller's behalf; the caller is the session's current role
 * as SET ROLE left it (GetOuterUserId), which SECURITY DEFINER does not
 * change.  Superusers and roles with the privileges of pgsandbox_admin are
 * admins; everyone else who may execute the functions (pgsandbox_user) acts
 * on its own sandboxes and the sources granted to it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_auth_members.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "libpq/auth.h"
#include "libpq/libpq-be.h"
#include "miscadmin.h"
#include "sbx_common.h"
#include "sbx_roles.h"
#include "sbx_spi.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/catcache.h"
#include "utils/guc.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

/* The role pgsandbox acts for. */
Oid
sbx_caller(void)
{
	return GetOuterUserId();
}

bool
sbx_is_admin(Oid role)
{
	Oid			admin = get_role_oid(SBX_ADMIN_GROUP, true);

	if (superuser_arg(role))
		return true;
	return OidIsValid(admin) && has_privs_of_role(role, admin);
}

void
sbx_require_admin(void)
{
	if (!sbx_is_admin(sbx_caller()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to manage pgsandbox sources"),
				 errhint("Only superusers and members of %s manage sources.",
						 SBX_ADMIN_GROUP)));
}

/*
 * May 'role' clone 'source'?  Admins may clone every source; anyone else
 * needs a grant to itself or to a role it is a member of.  Must be called
 * with SPI connected.  Returns false for an unknown source too.
 */
bool
sbx_may_clone(Oid role, bool is_admin, const char *source)
{
	Oid			argtypes[2] = {TEXTOID, OIDOID};
	Datum		values[2];
	int			rc;

	values[0] = CStringGetTextDatum(source);
	values[1] = ObjectIdGetDatum(role);
	if (is_admin)
		rc = SPI_execute_with_args("SELECT 1 FROM pgsandbox.source WHERE name = $1",
								   1, argtypes, values, NULL, true, 1);
	else
		rc = SPI_execute_with_args("SELECT 1 FROM pgsandbox.source_grant g"
								   " WHERE g.source = $1"
								   "   AND pg_catalog.pg_has_role($2, g.grantee, 'MEMBER')",
								   2, argtypes, values, NULL, true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not check the grants of source \"%s\"", source);
	return SPI_processed > 0;
}

/*
 * The error for a source the caller may not clone.  An admin learns that
 * it does not exist; anyone else is only told no, whether it exists or not.
 */
void
sbx_report_source_denied(const char *source, bool is_admin)
{
	bool		showable = strlen(source) < NAMEDATALEN;

	if (is_admin)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 showable ? errmsg("source \"%s\" does not exist", source)
				 : errmsg("source does not exist"),
				 errhint("Sources are approved with pgsandbox.add_source().")));
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 showable ? errmsg("permission denied for source \"%s\"", source)
			 : errmsg("permission denied for source"),
			 errhint("An administrator approves sources and grants them with pgsandbox.grant_source().")));
}

void
sbx_report_data_denied(const char *source)
{
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("source \"%s\" does not allow copying data", source),
			 errhint("Clone it with schema_only => true, or have it approved with allow_data => true.")));
}

/*
 * For a superuser session inside a sandbox (the clone worker, the
 * janitor): the sandbox role owns the database and may have given it
 * settings (ALTER DATABASE ... SET) meant to trap such a session, such as a
 * search_path that puts its own operators first.  Override them.
 */
void
sbx_harden_session(void)
{
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("default_transaction_read_only", "off", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("statement_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("lock_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("idle_in_transaction_session_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("session_replication_role", "origin", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("pgsandbox.read_only", "off", PGC_SUSET, PGC_S_OVERRIDE);
}

/*
 * From PostgreSQL 16 on, sandbox roles made before pgsandbox granted their
 * membership of pgsandbox_sandbox WITH SET FALSE (lifecycle.c) lose the
 * right to SET ROLE to the group: the lifecycle worker calls this once per
 * start.  Returns how many memberships it changed.  On 15 there is no such
 * option, and the hooks hold the rules alone.
 */
int
sbx_withdraw_group_set_option(void)
{
	int			changed = 0;

#if PG_VERSION_NUM >= 160000
	List	   *members = NIL;
	ListCell   *lc;
	MemoryContext outer;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	outer = CurrentMemoryContext;
	SPI_connect();
	if (SPI_execute("SELECT pg_catalog.quote_ident(r.rolname) FROM pg_catalog.pg_auth_members m"
					"  JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) m.member"
					" WHERE m.roleid OPERATOR(pg_catalog.=) pg_catalog.to_regrole('" SBX_SANDBOX_GROUP "')"
					"   AND m.set_option",
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the members of " SBX_SANDBOX_GROUP);
	for (uint64 i = 0; i < SPI_processed; i++)
		members = lappend(members,
						  MemoryContextStrdup(outer, SPI_getvalue(SPI_tuptable->vals[i],
																   SPI_tuptable->tupdesc, 1)));
	SPI_finish();
	foreach(lc, members)
	{
		sbx_run_utility(psprintf(SBX_SANDBOX_MEMBERSHIP, (char *) lfirst(lc)), NULL);
		CommandCounterIncrement();
		changed++;
	}
	PopActiveSnapshot();
	CommitTransactionCommand();
#endif
	return changed;
}
