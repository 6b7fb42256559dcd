/*-------------------------------------------------------------------------
 *
 * sources.c
 *	  The SQL functions that approve and withdraw sources: add_source and
 *	  remove_source.  Who may clone a source is in roles.c and grants.c.
 *
 * A source's connection string may hold a password: it is validated here
 * (a source added by a non-superuser may not borrow the server's identity,
 * see conninfo.c), and kept out of every message and logged statement.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_roles.h"
#include "sbx_shmem.h"
#include "utils/array.h"
#include "utils/builtins.h"

PG_FUNCTION_INFO_V1(pgsandbox_add_source);
PG_FUNCTION_INFO_V1(pgsandbox_remove_source);
PG_FUNCTION_INFO_V1(pgsandbox_trust_owners);

/*
 * In a PG_CATCH block: raise the error again without the statement, whose
 * text may hold a secret.
 */
pg_noreturn static void
sbx_rethrow_hiding_statement(MemoryContext cxt)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	FlushErrorState();
	edata->hide_stmt = true;
	ReThrowError(edata);
}

static void
sbx_check_source_name(const char *name)
{
	size_t		len = strlen(name);
	bool		ok = (len > 0 && len < NAMEDATALEN);

	for (const char *p = name; ok && *p; p++)
	{
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			  (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' || *p == '.'))
			ok = false;
	}
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("invalid source name"),
				 errdetail("A source name has 1 to %d letters, digits, underscores, hyphens or dots.",
						   NAMEDATALEN - 1)));
}

/*
 * add_source(name text, conninfo text, allow_data boolean)
 */
Datum
pgsandbox_add_source(PG_FUNCTION_ARGS)
{
	char	   *name;
	char	   *conninfo;
	bool		allow_data;
	bool		trusted;
	MemoryContext cxt = CurrentMemoryContext;
	SbxConninfoParts parts;
	Oid			argtypes[9] = {TEXTOID, TEXTOID, BOOLOID, TEXTOID, TEXTOID,
	TEXTOID, TEXTOID, BOOLOID, BOOLOID};
	Datum		values[9];
	char		nulls[9];
	bool		allow_statistics;
	int			rc;

	sbx_require_arg(fcinfo, 0, "source name");
	sbx_require_arg(fcinfo, 1, "conninfo");
	sbx_require_arg(fcinfo, 2, "allow_data");
	/* add_source() of a catalog not yet updated to 0.5 has no statistics */
	if (PG_NARGS() > 3)
		sbx_require_arg(fcinfo, 3, "allow_statistics");
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	conninfo = text_to_cstring(PG_GETARG_TEXT_PP(1));
	allow_data = PG_GETARG_BOOL(2);
	allow_statistics = PG_NARGS() > 3 && PG_GETARG_BOOL(3);

	sbx_check_database();
	sbx_require_admin();
	sbx_check_source_name(name);
	trusted = superuser_arg(sbx_caller());

	/*
	 * The call's text holds the connection string: keep it out of the
	 * STATEMENT line that log_min_error_statement adds to a logged error.
	 */
	PG_TRY();
	{
		sbx_conninfo_validate(conninfo, trusted, &parts);
	}
	PG_CATCH();
	{
		sbx_rethrow_hiding_statement(cxt);
	}
	PG_END_TRY();

	values[0] = CStringGetTextDatum(name);
	values[1] = CStringGetTextDatum(conninfo);
	values[2] = BoolGetDatum(allow_data);
	memset(nulls, ' ', sizeof(nulls));
#define SBX_PART(i, v) \
	do { if (v) values[i] = CStringGetTextDatum(v); else nulls[i] = 'n'; } while (0)
	SBX_PART(3, parts.host);
	SBX_PART(4, parts.port);
	SBX_PART(5, parts.dbname);
	SBX_PART(6, parts.user);
#undef SBX_PART
	values[7] = BoolGetDatum(!trusted);
	values[8] = BoolGetDatum(allow_statistics);

	SPI_connect();
	rc = SPI_execute_with_args("SELECT 1 FROM pgsandbox.source WHERE name = $1",
							   1, argtypes, values, nulls, true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not look up source: %s", SPI_result_code_string(rc));
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("source \"%s\" already exists", name),
				 errhidestmt(true)));
	if (PG_NARGS() > 3)
		rc = SPI_execute_with_args("INSERT INTO pgsandbox.source "
								   "(name, conninfo, allow_data, host, port, dbname, \"user\","
								   " require_password, allow_statistics) "
								   "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
								   9, argtypes, values, nulls, false, 0);
	else
		rc = SPI_execute_with_args("INSERT INTO pgsandbox.source "
								   "(name, conninfo, allow_data, host, port, dbname, \"user\","
								   " require_password) "
								   "VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
								   8, argtypes, values, nulls, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "could not add source: %s", SPI_result_code_string(rc));
	SPI_finish();

	PG_RETURN_VOID();
}

/*
 * remove_source(name text)
 */
Datum
pgsandbox_remove_source(PG_FUNCTION_ARGS)
{
	char	   *name;
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];
	int			rc;

	sbx_require_arg(fcinfo, 0, "source name");
	sbx_check_database();
	sbx_require_admin();
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	values[0] = CStringGetTextDatum(name);

	SPI_connect();
	rc = SPI_execute_with_args("DELETE FROM pgsandbox.source WHERE name = $1",
							   1, argtypes, values, NULL, false, 0);
	if (rc != SPI_OK_DELETE)
		elog(ERROR, "could not remove source: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 strlen(name) < NAMEDATALEN ?
				 errmsg("source \"%s\" does not exist", name) :
				 errmsg("source does not exist")));
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * trust_owners(source text, owners text[])
 *
 * Name the roles of the source whose code pgsandbox may run when it plans
 * a query on the source's tables (source_trust.c), besides superusers and
 * the source's login; an empty array trusts none.  Trusting a role lets
 * its code run with the rights of the source's login: an admin who is not
 * a superuser may do so only for a source whose login is its own, one it
 * added with a password.
 */
Datum
pgsandbox_trust_owners(PG_FUNCTION_ARGS)
{
	char	   *name;
	ArrayType  *owners;
	Datum	   *elems;
	bool	   *elemnulls;
	int			nelems;
	StringInfoData list;
	Oid			argtypes[2] = {TEXTOID, TEXTOID};
	Datum		values[2];
	bool		isnull;
	bool		require_password;

	sbx_require_arg(fcinfo, 0, "source name");
	sbx_require_arg(fcinfo, 1, "owners");
	sbx_check_database();
	sbx_require_admin();
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	owners = PG_GETARG_ARRAYTYPE_P(1);
	if (!sbx_catalog_has_trust())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("trusted owners need pgsandbox 0.12"),
				 errhint("Run ALTER EXTENSION pgsandbox UPDATE.")));
	if (ARR_NDIM(owners) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("owners must be a one-dimensional array")));
	deconstruct_array(owners, TEXTOID, -1, false, TYPALIGN_INT, &elems, &elemnulls, &nelems);
	initStringInfo(&list);
	appendStringInfoChar(&list, '{');
	for (int i = 0; i < nelems; i++)
	{
		char	   *role;

		if (elemnulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("owners may not hold NULL")));
		role = TextDatumGetCString(elems[i]);
		if (role[0] == '\0' || strlen(role) >= NAMEDATALEN)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_NAME),
					 errmsg("invalid role name in owners"),
					 errdetail("A role name has 1 to %d bytes.", NAMEDATALEN - 1)));
		appendStringInfoString(&list, i > 0 ? "," : "");
		appendStringInfoChar(&list, '"');
		for (const char *p = role; *p; p++)
		{
			if (*p == '"' || *p == '\\')
				appendStringInfoChar(&list, '\\');
			appendStringInfoChar(&list, *p);
		}
		appendStringInfoChar(&list, '"');
	}
	appendStringInfoChar(&list, '}');
	if (list.len >= SBX_TRUSTED_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many trusted owners"),
				 errdetail("The list may take at most %d bytes as text.", SBX_TRUSTED_MAX - 1)));

	values[0] = CStringGetTextDatum(name);
	values[1] = CStringGetTextDatum(list.data);
	SPI_connect();
	if (SPI_execute_with_args("SELECT require_password FROM pgsandbox.source WHERE name = $1 FOR UPDATE",
							  1, argtypes, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up source \"%s\"", name);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 strlen(name) < NAMEDATALEN ?
				 errmsg("source \"%s\" does not exist", name) :
				 errmsg("source does not exist")));
	require_password = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
												  SPI_tuptable->tupdesc, 1, &isnull));
	if (!require_password && !superuser_arg(sbx_caller()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("only a superuser may name the trusted owners of source \"%s\"", name),
				 errdetail("A superuser added the source: the code of a role it trusts would run with the rights of a login that a superuser chose.")));
	if (SPI_execute_with_args("UPDATE pgsandbox.source SET trusted_owners = $2::text[] WHERE name = $1",
							  2, argtypes, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not update source \"%s\"", name);
	SPI_finish();
	PG_RETURN_VOID();
}
