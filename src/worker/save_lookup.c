/*-------------------------------------------------------------------------
 *
 * save_lookup.c
 *	  Finding a save to copy: for a reset to it (reset.c) or a clone of it
 *	  (clone(from_save)), as a snapshot is found to copy (snapshot.c).
 *
 * A save is copied only while it serves: ready, not retired, its database
 * still there, and its rows read under the masking rules its source has
 * now.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "sbx_common.h"
#include "sbx_spi.h"
#include "sbx_worker.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/*
 * Fill *ref from row 0 of a query's id, name, db_oid, data_as_of and size,
 * of a save or a snapshot: the role that owns its objects has its name.
 */
void
sbx_ref_from_row(SbxSnapshotRef *ref)
{
	HeapTuple	tup = SPI_tuptable->vals[0];
	TupleDesc	desc = SPI_tuptable->tupdesc;
	bool		isnull;

	memset(ref, 0, sizeof(*ref));
	ref->id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
	strlcpy(ref->name, sbx_spi_text(0, 2), sizeof(ref->name));
	strlcpy(ref->role, ref->name, sizeof(ref->role));
	ref->dboid = DatumGetObjectId(SPI_getbinval(tup, desc, 3, &isnull));
	ref->data_as_of = DatumGetTimestampTz(SPI_getbinval(tup, desc, 4, &isnull));
	ref->size_bytes = DatumGetInt64(SPI_getbinval(tup, desc, 5, &isnull));
}

#define SBX_SAVE_COLUMNS \
	"SELECT s.id, s.name, s.db_oid, s.data_as_of, COALESCE(s.size_bytes, 0), s.source"
#define SBX_SAVE_USABLE \
	"  FROM pgsandbox.sandbox s" \
	"  JOIN pg_catalog.pg_database d ON d.oid = s.db_oid AND d.datname = s.name" \
	" WHERE s.kind = 'save' AND s.status = 'ready' AND s.retired_at IS NULL"

/*
 * In a worker transaction, after a query of SBX_SAVE_COLUMNS and the
 * condition below as its next column: a save whose rows were read under
 * rules its source no longer has (or of a source removed since) is not
 * copied, as a snapshot would not be.
 */
static const char *
sbx_save_current_sql(void)
{
	/* saves came with 0.8, so the catalog has rules and generations */
	return psprintf(", EXISTS (SELECT 1 FROM pgsandbox.source o"
					"           WHERE o.name = s.source AND %s"
					"             AND (s.schema_only OR s.rules_version = o.rules_version))",
					sbx_same_source_sql());
}

static void
sbx_check_save_current(const char *name, int col)
{
	bool		isnull;

	if (!DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col,
									&isnull)))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("save \"%s\" can no longer be copied", name),
				 errdetail("Source \"%s\" was removed, or its masking rules changed, since its rows were read.",
						   sbx_spi_text(0, 6)),
				 errhint("Drop the save with drop_save().")));
}

/*
 * In a worker transaction: the usable save of sandbox parent_id whose
 * label, or else whose name, is 'target'.
 */
bool
sbx_find_save(int64 parent_id, const char *target, SbxSnapshotRef *ref)
{
	char		idbuf[32];
	const char *args[2] = {idbuf, target};

	snprintf(idbuf, sizeof(idbuf), INT64_FORMAT, parent_id);
	sbx_spi(psprintf(SBX_SAVE_COLUMNS "%s" SBX_SAVE_USABLE
					 " AND s.parent_id = $1::bigint AND (s.label = $2 OR s.name = $2)"
					 " ORDER BY s.label = $2 DESC LIMIT 1", sbx_save_current_sql()),
			SPI_OK_SELECT, 2, args);
	if (SPI_processed != 1)
		return false;
	sbx_check_save_current(target, 7);
	sbx_ref_from_row(ref);
	return true;
}

/*
 * The save 'name' that 'by' may clone (its own, or any for an admin), with
 * its source and kind; an error if there is none.
 */
void
sbx_save_to_clone(const SbxActor *by, const char *name, SbxSnapshotRef *ref,
				  char *source, bool *schema_only)
{
	char		owner[16];
	const char *args[2] = {name, owner};
	bool		isnull;

	snprintf(owner, sizeof(owner), "%u", by->role);
	sbx_xact_begin("pgsandbox: looking up a save");
	if (!sbx_catalog_has_saves())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("clones of saves need version 0.8 of extension \"pgsandbox\""),
				 errhint("Run ALTER EXTENSION pgsandbox UPDATE.")));
	sbx_spi(psprintf(SBX_SAVE_COLUMNS "%s, s.schema_only" SBX_SAVE_USABLE
					 " AND s.name = $1%s", sbx_save_current_sql(),
					 by->is_admin ? "" : " AND s.owner_oid = $2::oid"),
			SPI_OK_SELECT, by->is_admin ? 1 : 2, args);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("save \"%s\" does not exist", name)));
	sbx_check_save_current(name, 7);
	sbx_ref_from_row(ref);
	strlcpy(source, sbx_spi_text(0, 6), NAMEDATALEN);
	*schema_only = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
											  SPI_tuptable->tupdesc, 8, &isnull));
	sbx_xact_commit();
}
