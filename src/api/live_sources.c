/*-------------------------------------------------------------------------
 *
 * live_sources.c
 *	  set_live() and unset_live(): an admin makes a source live, so that its
 *	  data snapshot follows it by logical replication from a publication
 *	  the admin made there, or stops that.
 *
 * set_live() checks, on the source, everything a live snapshot needs
 * before anything is made: wal_level, a login that may replicate, the
 * publication and what it publishes (each table with a replica identity
 * where updates and deletes are published, all of trusted owners, since
 * the apply runs their code: live_checks.c, which each build runs again),
 * and no rule of any kind on the source.  It records the publication
 * and the source's locale; the worker builds the live snapshot
 * (worker/live.c) and keeps it following.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/string.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "libpq-fe.h"
#include "libpq/libpq-be-fe-helpers.h"
#include "miscadmin.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_masking.h"
#include "sbx_roles.h"
#include "sbx_shmem.h"
#include "utils/builtins.h"

PG_FUNCTION_INFO_V1(pgsandbox_set_live);
PG_FUNCTION_INFO_V1(pgsandbox_unset_live);

/* what set_live() reads of a source's catalog row */
typedef struct SbxLiveSource
{
	char	   *conninfo;
	bool		require_password;
	bool		allow_data;
	char	   *trusted_owners;
} SbxLiveSource;

static void
sbx_require_live_catalog(void)
{
	if (!sbx_catalog_has_live())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("live sources need pgsandbox 0.12"),
				 errhint("Run ALTER EXTENSION pgsandbox UPDATE.")));
}

/* In SPI: the source's row (locked by sbx_lock_source) and its rules. */
static void
sbx_live_source_row(const char *source, SbxLiveSource *row)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(source)};
	bool		isnull;

	memset(row, 0, sizeof(*row));
	if (SPI_execute_with_args("SELECT conninfo, require_password, allow_data,"
							  "       trusted_owners::text FROM pgsandbox.source WHERE name = $1",
							  1, argtypes, values, NULL, true, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "could not read source \"%s\"", source);
	row->conninfo = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	row->require_password = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
													   SPI_tuptable->tupdesc, 2, &isnull));
	row->allow_data = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
												 SPI_tuptable->tupdesc, 3, &isnull));
	row->trusted_owners = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4);

	/* exclude_data rules are kept: a live build leaves those rows out */
	if (SPI_execute_with_args("SELECT kind, target FROM pgsandbox.source_rule"
							  " WHERE source = $1 AND kind <> 'exclude_data' ORDER BY kind, target",
							  1, argtypes, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the rules of source \"%s\"", source);
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("source \"%s\" has rule %s(%s), and cannot be live", source,
						SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1),
						SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2)),
				 errdetail("A live snapshot is filled by the source's changes as they come, which no masking, subset, follow or relate rule acts on."),
				 errhint("Remove the source's rules first.")));
}

/*
 * set_live(source text, publication text)
 */
Datum
pgsandbox_set_live(PG_FUNCTION_ARGS)
{
	char	   *source;
	char	   *publication;
	char	   *password;
	SbxLiveSource row;
	SbxLocale	locale;
	PGconn	   *volatile conn;
	PGconn	   *sub;
	int			code;
	char	   *message;
	char	   *detail;
	Oid			argtypes[7] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		values[7];

	sbx_require_arg(fcinfo, 0, "source name");
	sbx_require_arg(fcinfo, 1, "publication");
	sbx_check_database();
	sbx_require_admin();
	sbx_require_live_catalog();
	source = text_to_cstring(PG_GETARG_TEXT_PP(0));
	publication = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (publication[0] == '\0' || strlen(publication) >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("invalid publication name"),
				 errdetail("A publication name has 1 to %d bytes.", NAMEDATALEN - 1)));
	/* it is named in the snapshot's database, whose encoding is the source's */
	if (!pg_is_ascii(publication))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("invalid publication name"),
				 errdetail("A live source's publication name is ASCII, since the source's encoding may differ from this database's.")));

	SPI_connect();
	sbx_lock_source(source);
	sbx_live_source_row(source, &row);
	if (!row.allow_data)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("source \"%s\" is not approved for data clones", source),
				 errhint("A live snapshot holds the source's rows: add the source with allow_data => true.")));
	password = sbx_conninfo_password(row.conninfo);
	if (password == NULL || !sbx_conninfo_names_user(row.conninfo))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the connection string of source \"%s\" must name a user and give its password to be live",
						source),
				 errdetail("The live snapshot's subscription logs in with it as the snapshot's own role, which no identity of this server backs.")));
	explicit_bzero(password, strlen(password));

	conn = sbx_source_open(source, row.conninfo, row.require_password);
	PG_TRY();
	{
		sbx_source_read_begin(conn, psprintf("could not read source \"%s\"", source));
		sbx_check_live_source(conn, source, publication, row.trusted_owners);
		sbx_read_source_locale(conn, source, &locale);
	}
	PG_FINALLY();
	{
		libpqsrv_disconnect(conn);
	}
	PG_END_TRY();

	/*
	 * Last, log in as the subscription will: with the parameters a source
	 * added by a non-superuser may use, and its password used, which
	 * PostgreSQL 16 and later require of a subscription no superuser owns.
	 */
	sub = sbx_source_try_connect(source, row.conninfo, true, 0, &code, &message, &detail);
	if (sub == NULL)
		ereport(ERROR,
				(errcode(code),
				 errmsg_internal("%s", message),
				 code == ERRCODE_INSUFFICIENT_PRIVILEGE
				 ? errdetail("A live snapshot's subscription logs in with the source's password, which PostgreSQL 16 and later require of a subscription that no superuser owns.")
				 : errdetail_internal("%s", detail),
				 code == ERRCODE_INSUFFICIENT_PRIVILEGE
				 ? errhint("Have the source's server ask this login for its password (scram-sha-256 in pg_hba.conf).")
				 : 0));
	libpqsrv_disconnect(sub);
	explicit_bzero(row.conninfo, strlen(row.conninfo));

	values[0] = CStringGetTextDatum(source);
	values[1] = CStringGetTextDatum(publication);
	values[2] = CStringGetTextDatum(locale.encoding);
	values[3] = CStringGetTextDatum(locale.collate);
	values[4] = CStringGetTextDatum(locale.ctype);
	values[5] = CStringGetTextDatum(psprintf("%c", locale.provider ? locale.provider : 'c'));
	values[6] = CStringGetTextDatum(locale.icu_locale);
	if (SPI_execute_with_args("UPDATE pgsandbox.source SET live_publication = $2 WHERE name = $1",
							  2, argtypes, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not make source \"%s\" live", source);
	/* the worker builds the live snapshot as it builds a planned one */
	if (SPI_execute_with_args("INSERT INTO pgsandbox.snapshot_plan AS p (source, schema_only, source_locale)"
							  " VALUES ($1, false, ARRAY[$3, $4, $5, $6, $7])"
							  " ON CONFLICT (source, schema_only) DO UPDATE"
							  " SET source_locale = excluded.source_locale",
							  7, argtypes, values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not plan the live snapshot of source \"%s\"", source);
	SPI_finish();
	sbx_queue_wake_worker();
	PG_RETURN_VOID();
}

/*
 * unset_live(source text)
 */
Datum
pgsandbox_unset_live(PG_FUNCTION_ARGS)
{
	char	   *source;
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];

	sbx_require_arg(fcinfo, 0, "source name");
	sbx_check_database();
	sbx_require_admin();
	sbx_require_live_catalog();
	source = text_to_cstring(PG_GETARG_TEXT_PP(0));
	values[0] = CStringGetTextDatum(source);

	SPI_connect();
	sbx_lock_source(source);
	if (SPI_execute_with_args("UPDATE pgsandbox.source SET live_publication = NULL"
							  " WHERE name = $1 AND live_publication IS NOT NULL",
							  1, argtypes, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not stop following source \"%s\"", source);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("source \"%s\" is not live", source)));
	SPI_finish();
	sbx_queue_wake_worker();
	PG_RETURN_VOID();
}
