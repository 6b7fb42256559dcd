/*-------------------------------------------------------------------------
 *
 * extension_access.c
 *	  What the sandbox role may do with the extensions of its sandbox.
 *
 * The clone worker creates a sandbox's extensions as superuser, so their
 * objects belong to the superuser; the grants the source's owner had on
 * them are not restored (pg_restore --no-privileges).  A sandbox of a
 * pg_partman source would then be one whose role cannot read its own
 * partitioning configuration, nor run the maintenance.
 *
 * So, right after the extensions are created (and again once a snapshot
 * copy has been given to its sandbox role, as DROP OWNED takes the
 * snapshot role's grants with it), the sandbox role is granted, in its
 * sandbox only:
 *
 *	- USAGE on the extensions' schemas, and on the schemas that hold their
 *	  configuration tables;
 *	- SELECT on their configuration tables and sequences;
 *	- INSERT, UPDATE and DELETE on those tables, USAGE and UPDATE on those
 *	  sequences, only for the extensions of sbx_writable_config below (only
 *	  pg_partman).  A configuration table may steer what the extension's C
 *	  code does with the server's own rights: orafce's utl_file.utl_file_dir
 *	  lists the directories its UTL_FILE functions may write, so a role
 *	  that could add a row to it could write any file the server can.  Only
 *	  extensions whose configuration is known to steer nothing of the kind
 *	  are listed.
 *
 * EXECUTE on functions is left as the extension set it: granted to PUBLIC
 * unless the extension revoked it, which it does for functions meant for
 * superusers only (pageinspect, adminpack).  Nothing of pg_catalog is
 * granted.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "sbx_clone.h"
#include "utils/builtins.h"

/*
 * Extensions whose configuration tables the sandbox role may write: what
 * they hold only shapes the sandbox role's own tables (pg_partman's
 * partition sets).  Not PostGIS: spatial_ref_sys's proj4text goes to PROJ,
 * which opens the files it names (+init=, +nadgrids=) with the server's
 * rights.
 */
static const char *const sbx_writable_config[] = {"pg_partman"};

/* Run one GRANT, or fail. */
static void
sbx_grant(const char *sql)
{
	if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not run \"%s\"", sql);
}

/*
 * In the caller's SPI connection, as superuser, connected to the sandbox:
 * grant role 'rolename' what it needs to use the sandbox's extensions.
 * The queries are not read-only, so that they see the extensions created
 * earlier in the same transaction.
 */
void
sbx_grant_extension_use(const char *rolename)
{
	const char *role = quote_identifier(rolename);
	StringInfoData writable;
	List	   *grants = NIL;
	ListCell   *lc;

	initStringInfo(&writable);
	for (int i = 0; i < lengthof(sbx_writable_config); i++)
		appendStringInfo(&writable, "%s%s", i > 0 ? ", " : "",
						 quote_literal_cstr(sbx_writable_config[i]));

	/* the schemas: the extensions' own, and those of their members */
	if (SPI_execute("SELECT DISTINCT pg_catalog.quote_ident(n.nspname)"
					"  FROM pg_catalog.pg_extension e"
					"  JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace"
					"    OR n.oid IN (SELECT d.objid FROM pg_catalog.pg_depend d"
					"                  WHERE d.classid = 'pg_catalog.pg_namespace'::pg_catalog.regclass"
					"                    AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass"
					"                    AND d.refobjid = e.oid AND d.deptype = 'e')"
					"    OR n.oid IN (SELECT c.relnamespace FROM pg_catalog.pg_class c"
					"                  WHERE c.oid = ANY (e.extconfig))"
					" WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')"
					" ORDER BY 1", false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the extensions' schemas");
	for (uint64 i = 0; i < SPI_processed; i++)
		grants = lappend(grants, psprintf("GRANT USAGE ON SCHEMA %s TO %s",
										  SPI_getvalue(SPI_tuptable->vals[i],
													   SPI_tuptable->tupdesc, 1),
										  role));

	/* the configuration tables and sequences */
	if (SPI_execute(psprintf("SELECT c.oid::pg_catalog.regclass::pg_catalog.text, c.relkind,"
							 "       e.extname IN (%s)"
							 "  FROM pg_catalog.pg_extension e"
							 "  JOIN pg_catalog.pg_class c ON c.oid = ANY (e.extconfig)"
							 "  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
							 " WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')"
							 " ORDER BY 1", writable.data), false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the extensions' configuration tables");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		char	   *rel = SPI_getvalue(tup, desc, 1);
		bool		sequence = SPI_getvalue(tup, desc, 2)[0] == 'S';
		bool		write = SPI_getvalue(tup, desc, 3)[0] == 't';

		if (sequence)
			grants = lappend(grants, psprintf("GRANT %s ON SEQUENCE %s TO %s",
											  write ? "SELECT, USAGE, UPDATE" : "SELECT",
											  rel, role));
		else
			grants = lappend(grants, psprintf("GRANT %s ON TABLE %s TO %s",
											  write ? "SELECT, INSERT, UPDATE, DELETE" : "SELECT",
											  rel, role));
	}

	/* the sequences that writable configuration tables' columns use */
	if (SPI_execute(psprintf("SELECT s.oid::pg_catalog.regclass::pg_catalog.text"
							 "  FROM pg_catalog.pg_extension e"
							 "  JOIN pg_catalog.pg_depend d ON d.refobjid = ANY (e.extconfig)"
							 "   AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass"
							 "   AND d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass"
							 "   AND d.deptype IN ('a', 'i')"
							 "  JOIN pg_catalog.pg_class s ON s.oid = d.objid AND s.relkind = 'S'"
							 " WHERE e.extname IN (%s)"
							 " ORDER BY 1", writable.data), false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the extensions' sequences");
	for (uint64 i = 0; i < SPI_processed; i++)
		grants = lappend(grants, psprintf("GRANT SELECT, USAGE, UPDATE ON SEQUENCE %s TO %s",
										  SPI_getvalue(SPI_tuptable->vals[i],
													   SPI_tuptable->tupdesc, 1),
										  role));

	foreach(lc, grants)
		sbx_grant(lfirst(lc));
	list_free_deep(grants);
	pfree(writable.data);
}
