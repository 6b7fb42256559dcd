/*-------------------------------------------------------------------------
 *
 * db_settings.c
 *	  Setting a source database's settings (ALTER DATABASE ... SET, for all
 *	  roles) on its sandbox.
 *
 * Code may rely on settings of its database: search_path, timezone,
 * statement_timeout, an application's own "app.*" variables.  pg_dump does
 * not copy them, so the clone worker does, as superuser, but only those the
 * sandbox role could set for itself (context "user", and placeholders of
 * extensions' settings): a setting that only a superuser may make never
 * reaches a sandbox.  Each is set in a subtransaction, so that one whose
 * value this server refuses is left out rather than failing the clone.
 * Settings for particular roles are not copied: those roles do not exist
 * in the sandbox.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "pgsandbox.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/varlena.h"

/*
 * One entry of pg_db_role_setting.setconfig ("name=value") as a setting,
 * allocated in the current memory context; NULL if it has no '='.
 */
SbxSetting *
sbx_parse_setting(const char *item)
{
	const char *eq = strchr(item, '=');
	SbxSetting *setting;

	if (eq == NULL)
		return NULL;
	setting = palloc0(sizeof(SbxSetting));
	setting->name = pnstrdup(item, eq - item);
	setting->value = pstrdup(eq + 1);
	return setting;
}

/* Could any role set this setting for itself? */
static bool
sbx_setting_is_user_level(const char *name)
{
	Datum		arg = CStringGetTextDatum(name);
	Oid			argtype = TEXTOID;
	bool		user_level;
	char	   *context;

	/* these name roles of the source, which the sandbox does not have */
	if (pg_strcasecmp(name, "role") == 0 ||
		pg_strcasecmp(name, "session_authorization") == 0)
		return false;
	if (SPI_execute_with_args("SELECT context FROM pg_catalog.pg_settings WHERE name = $1",
							  1, &argtype, &arg, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up setting \"%s\"", name);
	if (SPI_processed == 0)
		return strchr(name, '.') != NULL;	/* a placeholder */
	context = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	user_level = (context != NULL && strcmp(context, "user") == 0);
	return user_level;
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
 * Set the user-level settings among 'settings' (of SbxSetting) on database
 * dbname, which this process is connected to, in one transaction.  The
 * names of those left out are appended to 'refused', separated by ", ".
 */
void
sbx_apply_database_settings(const char *dbname, List *settings, StringInfo refused)
{
	ListCell   *lc;
	MemoryContext cxt;
	ResourceOwner owner;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	cxt = CurrentMemoryContext;
	owner = CurrentResourceOwner;
	foreach(lc, settings)
	{
		SbxSetting *setting = lfirst(lc);

		if (!sbx_setting_is_user_level(setting->name))
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

			if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
				elog(ERROR, "could not apply setting \"%s\"", setting->name);
			ReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(cxt);
			CurrentResourceOwner = owner;
		}
		PG_CATCH();
		{
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
