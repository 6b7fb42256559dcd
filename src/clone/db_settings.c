/*-------------------------------------------------------------------------
 *
 * db_settings.c
 *	  Setting a source database's settings (ALTER DATABASE ... SET, for all
 *	  roles) on its sandbox.
 *
 * Code may rely on settings of its database: search_path, timezone,
 * statement_timeout, an application's own "app.*" variables.  pg_dump does
 * not copy them, so the clone worker does, but only those the sandbox role
 * could set for itself: each is set with the sandbox role as the current
 * user, so that PostgreSQL's own checks refuse what that role may not set.
 * A setting only a superuser may make never reaches a sandbox; nor does a
 * placeholder (a setting of a library this server has not loaded, or an
 * application's "app.x"), which only a superuser may store, as it may turn
 * out to be a superuser's setting once the library loads.  Each is set in
 * a subtransaction, so that one refused is left out, and named, rather
 * than failing the clone.
 * Settings for particular roles are not copied: those roles do not exist
 * in the sandbox.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "sbx_clone.h"
#include "sbx_conn.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/varlena.h"

/* Settings that name roles of the source, which the sandbox does not have */
static bool
sbx_setting_names_role(const char *name)
{
	return pg_strcasecmp(name, "role") == 0 ||
		pg_strcasecmp(name, "session_authorization") == 0;
}

/*
 * "name = value" for ALTER DATABASE ... SET, from a pg_db_role_setting
 * entry.  A list setting's entries are quoted one by one, as pg_dump does.
 */
static char *
sbx_setting_assignment(const SbxSetting *setting)
{
	StringInfoData buf;
	int			flags = GetConfigOptionFlags(setting->name, true);

	initStringInfo(&buf);
	appendStringInfo(&buf, "%s = ", quote_identifier(setting->name));
	if (flags & GUC_LIST_QUOTE)
	{
		List	   *items;
		ListCell   *lc;

		if (!SplitGUCList(pstrdup(setting->value), ',', &items))
			elog(ERROR, "could not split the value of setting \"%s\"", setting->name);
		foreach(lc, items)
			appendStringInfo(&buf, "%s%s", foreach_current_index(lc) > 0 ? ", " : "",
							 quote_literal_cstr(lfirst(lc)));
		if (items == NIL)
			appendStringInfoString(&buf, "''");
	}
	else
		appendStringInfoString(&buf, quote_literal_cstr(setting->value));
	return buf.data;
}

/*
 * Set the settings among 'settings' (of SbxSetting) that role 'rolename',
 * the owner of database dbname, may set there; this process is connected
 * to it.  One transaction.  The names of those left out are appended to
 * 'refused', separated by ", ".
 */
void
sbx_apply_database_settings(const char *dbname, const char *rolename, List *settings,
							StringInfo refused)
{
	ListCell   *lc;
	MemoryContext cxt;
	ResourceOwner owner;
	Oid			save_userid;
	int			save_sec_context;
	Oid			roleid;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	cxt = CurrentMemoryContext;
	owner = CurrentResourceOwner;
	roleid = get_role_oid(rolename, false);
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	foreach(lc, settings)
	{
		SbxSetting *setting = lfirst(lc);

		if (sbx_setting_names_role(setting->name))
		{
			appendStringInfo(refused, "%s%s", refused->len ? ", " : "", setting->name);
			continue;
		}
		BeginInternalSubTransaction(NULL);
		PG_TRY();
		{
			char	   *sql = psprintf("ALTER DATABASE %s SET %s",
									   quote_identifier(dbname),
									   sbx_setting_assignment(setting));

			/* as the sandbox role: what it may not set, it does not get */
			SetUserIdAndSecContext(roleid, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
			if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
				elog(ERROR, "could not apply setting \"%s\"", setting->name);
			SetUserIdAndSecContext(save_userid, save_sec_context);
			ReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(cxt);
			CurrentResourceOwner = owner;
		}
		PG_CATCH();
		{
			SetUserIdAndSecContext(save_userid, save_sec_context);
			MemoryContextSwitchTo(cxt);
			FlushErrorState();
			RollbackAndReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(cxt);
			CurrentResourceOwner = owner;
			appendStringInfo(refused, "%s%s", refused->len ? ", " : "", setting->name);
		}
		PG_END_TRY();
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}
