/*-------------------------------------------------------------------------
 *
 * tenant_settings.c
 *	  The settings that ration what every sandbox shares with the others on
 *	  one server: sessions, temporary files, prepared transactions, old
 *	  transactions, and the settings each sandbox role is given.
 *
 * The login check (hooks/tenant_limits.c) refuses the sessions past a
 * sandbox's cap and past the reserved slots; the ProcessUtility hook
 * refuses a PREPARE TRANSACTION past a sandbox's share; the lifecycle
 * worker gives each sandbox role its connection limit, its
 * temp_file_limit and the listed settings when it hands the sandbox out
 * (worker/tenants.c), and rolls back prepared transactions and ends
 * sessions past their age.  Every one of them is read when it is used, so
 * a reload changes them for every sandbox at once, but what a role was
 * given (its connection limit, its settings), which it keeps until reset.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/twophase.h"
#include "sbx_common.h"
#include "utils/guc.h"

int			sbx_max_connections_per_sandbox = 10;
int			sbx_reserved_connections = 10;
int			sbx_sandbox_temp_file_limit = 1024 * 1024; /* kB: 1GB */
int			sbx_max_prepared_per_sandbox = -1;
int			sbx_max_prepared_age = 3600;
int			sbx_max_transaction_age = 3600;
char	   *sbx_sandbox_settings = NULL;

/* One "name = value" item of pgsandbox.sandbox_settings, or an error. */
static bool
sbx_parse_setting_item(const char *item, SbxSetting *setting, char **error)
{
	const char *p = item;
	const char *name;
	size_t		namelen;
	StringInfoData value;

	while (*p == ' ' || *p == '\t')
		p++;
	name = p;
	while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		   (*p >= '0' && *p <= '9') || *p == '_' || *p == '.')
		p++;
	namelen = p - name;
	while (*p == ' ' || *p == '\t')
		p++;
	if (namelen == 0 || namelen >= NAMEDATALEN || *p != '=')
	{
		*error = psprintf("\"%s\" is not of the form name = value", item);
		return false;
	}
	p++;
	while (*p == ' ' || *p == '\t')
		p++;
	initStringInfo(&value);
	if (*p == '\'')
	{
		for (p++;; p++)
		{
			if (*p == '\0')
			{
				*error = psprintf("the value in \"%s\" has no closing quote", item);
				return false;
			}
			if (*p == '\'' && p[1] == '\'')
				p++;
			else if (*p == '\'')
			{
				p++;
				break;
			}
			appendStringInfoChar(&value, *p);
		}
	}
	else
	{
		while (*p != '\0' && *p != ' ' && *p != '\t')
			appendStringInfoChar(&value, *p++);
	}
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p != '\0' || value.len == 0)
	{
		*error = psprintf("\"%s\" is not of the form name = value", item);
		return false;
	}
	setting->name = pnstrdup(name, namelen);
	setting->value = value.data;
	return true;
}

/*
 * The items of a pgsandbox.sandbox_settings value ("statement_timeout =
 * '5min', work_mem = '16MB'"), in order, as SbxSetting; NIL and *error
 * set if one is not "name = value" or names no setting this server knows.
 */
List *
sbx_parse_sandbox_settings(const char *value, char **error)
{
	List	   *result = NIL;
	StringInfoData item;
	bool		quoted = false;

	*error = NULL;
	if (value == NULL)
		return NIL;
	initStringInfo(&item);
	for (const char *p = value;; p++)
	{
		if (*p == '\'')
			quoted = !quoted;
		if (*p == '\0' || (*p == ',' && !quoted))
		{
			SbxSetting *setting = palloc(sizeof(SbxSetting));
			const char *s = item.data;

			while (*s == ' ' || *s == '\t')
				s++;
			if (*s != '\0' || *p == ',')
			{
				if (!sbx_parse_setting_item(item.data, setting, error))
					return NIL;
				if (GetConfigOption(setting->name, true, false) == NULL)
				{
					*error = psprintf("\"%s\" is not a setting of this server", setting->name);
					return NIL;
				}
				result = lappend(result, setting);
			}
			if (*p == '\0')
				break;
			resetStringInfo(&item);
			continue;
		}
		appendStringInfoChar(&item, *p);
	}
	return result;
}

static bool
sbx_check_sandbox_settings(char **newval, void **extra, GucSource source)
{
	char	   *error;

	(void) sbx_parse_sandbox_settings(*newval, &error);
	if (error != NULL)
	{
		GUC_check_errdetail("%s", error);
		return false;
	}
	return true;
}

/*
 * How many prepared transactions one sandbox may hold at once: the
 * setting, or, at -1, a quarter of max_prepared_transactions and at least
 * one.
 */
int
sbx_prepared_cap(void)
{
	if (sbx_max_prepared_per_sandbox >= 0)
		return sbx_max_prepared_per_sandbox;
	return Max(1, max_prepared_xacts / 4);
}

void
sbx_define_tenant_settings(void)
{
	DefineCustomIntVariable("pgsandbox.max_connections_per_sandbox",
							"Sessions one sandbox may have open at once.",
							"A clone's connection_limit may ask for fewer; -1 sets no cap.",
							&sbx_max_connections_per_sandbox,
							10, -1, 10000,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("pgsandbox.reserved_connections",
							"Connection slots that sandbox logins may not take.",
							"They are left to administrators, callers of pgsandbox's functions and its own pg_dump and pg_restore; 0 reserves none.",
							&sbx_reserved_connections,
							10, 0, 10000,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("pgsandbox.sandbox_temp_file_limit",
							"temp_file_limit of every sandbox role, which it cannot raise.",
							"It bounds each of the sandbox's processes; -1 sets none.",
							&sbx_sandbox_temp_file_limit,
							1024 * 1024, -1, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_KB,
							NULL, NULL, NULL);
	DefineCustomIntVariable("pgsandbox.max_prepared_per_sandbox",
							"Prepared transactions one sandbox may hold at once.",
							"-1: a quarter of max_prepared_transactions, and at least one.",
							&sbx_max_prepared_per_sandbox,
							-1, -1, INT_MAX,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("pgsandbox.max_prepared_age",
							"Age past which the worker rolls back a transaction prepared in a sandbox.",
							"0 rolls back none.",
							&sbx_max_prepared_age,
							3600, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("pgsandbox.max_transaction_age",
							"Age past which the worker ends a sandbox session's open transaction, and the session.",
							"0 ends none.",
							&sbx_max_transaction_age,
							3600, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomStringVariable("pgsandbox.sandbox_settings",
							   "Settings every new sandbox role is given, as name = value pairs.",
							   "For example: statement_timeout = '5min', work_mem = '16MB'. A role may change the ones any user may set.",
							   &sbx_sandbox_settings,
							   "",
							   PGC_SIGHUP, 0,
							   sbx_check_sandbox_settings, NULL, NULL);
}
