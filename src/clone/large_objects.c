/*-------------------------------------------------------------------------
 *
 * large_objects.c
 *	  A source's large objects, copied by the clone worker where pg_dump's
 *	  login may not open them.
 *
 * pgsandbox_reader reads a source of this cluster as a member of
 * pg_read_all_data, which gives SELECT on every relation but no right on
 * a large object: pg_dump, which reads each one with lo_open(), fails on
 * the first ("permission denied for large object").  Giving the reader
 * those rights would mean granting on every large object of the source
 * (writing to it) or lo_compat_privileges (which lets a session write and
 * unlink any).  Neither is needed: pg_largeobject is a relation, which
 * pg_read_all_data reads, and reading it runs no code of anyone's.
 *
 * So a source read as the reader is dumped without its large objects
 * (pg_dump -B), and the clone worker copies them itself once the restore
 * is done: it reads their pages through the reader's connection, in the
 * snapshot pg_dump dumped, and writes them into the sandbox with the
 * server's own large-object functions (lo_create, lo_put, lo_truncate),
 * acting as the sandbox's role, which then owns each of them as it owns
 * everything the restore made.  Each keeps its OID, which the source's
 * rows refer to, its holes and its length.  Their privileges and comments
 * are not copied, as pg_restore --no-privileges copies none of anything.
 * What the sandbox then holds (large objects, pages and bytes) is checked
 * against what the snapshot holds.
 *
 * A source that names its login is dumped as that login, which reads the
 * large objects it may read, as pg_dump does.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "libpq-fe.h"
#include "libpq/libpq-be-fe-helpers.h"
#include "libpq/libpq-fs.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "sbx_clone.h"
#include "sbx_conn.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

/* pages fetched at a time: at most 128 x 2 kB with the default block size */
#define SBX_LO_FETCH	"FETCH 128 FROM pgsandbox_large_objects"

/* large objects, pages, bytes: what the source's snapshot and the sandbox hold */
#define SBX_LO_TOTALS \
	"SELECT (SELECT pg_catalog.count(*) FROM pg_catalog.pg_largeobject_metadata)," \
	"       pg_catalog.count(*)," \
	"       COALESCE(pg_catalog.sum(pg_catalog.length(data)), 0)" \
	"  FROM pg_catalog.pg_largeobject"

/* Whether a source's large objects are the worker's to copy (see above). */
bool
sbx_large_objects_by_worker(const char *conninfo, bool untrusted)
{
	return sbx_conninfo_local_default(conninfo, untrusted);
}

/* a 4-byte integer of a binary result, in network order */
static uint32
sbx_binary_uint32(const PGresult *res, int row, int col)
{
	const unsigned char *p = (const unsigned char *) PQgetvalue(res, row, col);

	if (PQgetlength(res, row, col) != 4)
		elog(ERROR, "unexpected length of a large object's OID or page number");
	return ((uint32) p[0] << 24) | ((uint32) p[1] << 16) | ((uint32) p[2] << 8) | p[3];
}

/*
 * Write one page of large object 'loid' at 'offset': its bytes, or, for a
 * page of none (which lo_truncate leaves to mark a length on a page's
 * boundary), the length itself.
 */
static void
sbx_write_page(Oid loid, int64 offset, const char *data, int len)
{
	if (len > 0)
	{
		bytea	   *bytes = palloc(VARHDRSZ + len);

		SET_VARSIZE(bytes, VARHDRSZ + len);
		memcpy(VARDATA(bytes), data, len);
		DirectFunctionCall3(be_lo_put, ObjectIdGetDatum(loid), Int64GetDatum(offset),
							PointerGetDatum(bytes));
	}
	else
	{
		int32		fd = DatumGetInt32(DirectFunctionCall2(be_lo_open, ObjectIdGetDatum(loid),
														   Int32GetDatum(INV_WRITE)));

		DirectFunctionCall2(be_lo_truncate64, Int32GetDatum(fd), Int64GetDatum(offset));
		DirectFunctionCall1(be_lo_close, Int32GetDatum(fd));
	}
}

/* SBX_LO_TOTALS of the database this worker is connected to, as text */
static void
sbx_local_totals(char **objects, char **pages, char **bytes)
{
	MemoryContext outer = CurrentMemoryContext;

	SPI_connect();
	/* not read-only: a snapshot of its own, which sees what was written */
	if (SPI_execute(SBX_LO_TOTALS, false, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not count the sandbox's large objects");
	*objects = MemoryContextStrdup(outer, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
	*pages = MemoryContextStrdup(outer, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2));
	*bytes = MemoryContextStrdup(outer, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3));
	SPI_finish();
}

/*
 * Copy every large object of the source, through 'reader' (in the snapshot
 * pg_dump dumped, in a transaction), into the database this worker is
 * connected to, owned by role 'rolename'.  Returns how many were copied.
 */
int64
sbx_copy_large_objects(PGconn *reader, const char *source, const char *rolename)
{
	const char *what = psprintf("could not copy the large objects of source \"%s\"", source);
	PGresult   *res;
	char	   *want[3];
	char	   *got[3];
	int64		pagesize;
	Oid			roleid;
	Oid			save_userid;
	int			save_sec_context;
	MemoryContext batch;
	MemoryContext outer;

	res = sbx_remote_exec(reader, SBX_LO_TOTALS, 0, NULL, PGRES_TUPLES_OK, what);
	for (int i = 0; i < 3; i++)
		want[i] = pstrdup(PQgetvalue(res, 0, i));
	PQclear(res);
	if (strcmp(want[0], "0") == 0)
		return 0;
	pagesize = strtoi64(sbx_remote_value(reader, "SELECT pg_catalog.current_setting('block_size')", what),
						NULL, 10) / 4;

	pgstat_report_activity(STATE_RUNNING, "pgsandbox: copying large objects");

	/*
	 * First every large object, then their pages, in whatever order the
	 * source reads them: nothing to sort there, and lo_put() writes a page
	 * wherever it falls.
	 */
	PQclear(sbx_remote_exec(reader,
							"DECLARE pgsandbox_large_objects NO SCROLL CURSOR FOR"
							" SELECT m.oid, NULL::pg_catalog.int4, NULL::pg_catalog.bytea"
							"   FROM pg_catalog.pg_largeobject_metadata m"
							"  UNION ALL"
							" SELECT l.loid, l.pageno, l.data FROM pg_catalog.pg_largeobject l",
							0, NULL, PGRES_COMMAND_OK, what));

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	roleid = get_role_oid(rolename, false);
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	outer = CurrentMemoryContext;
	batch = AllocSetContextCreate(outer, "pgsandbox large objects", ALLOCSET_DEFAULT_SIZES);
	/* as the sandbox's role: each large object is made its own */
	SetUserIdAndSecContext(roleid, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	PG_TRY();
	{
		for (;;)
		{
			int			n;

			CHECK_FOR_INTERRUPTS();
			res = libpqsrv_exec_params(reader, SBX_LO_FETCH, 0, NULL, NULL, NULL, NULL, 1,
									   PG_WAIT_EXTENSION);
			if (PQresultStatus(res) != PGRES_TUPLES_OK)
			{
				char	   *msg = sbx_remote_message(reader, res);

				PQclear(res);
				ereport(ERROR,
						(errcode(ERRCODE_CONNECTION_FAILURE),
						 errmsg_internal("%s", what),
						 errdetail_internal("%s", msg)));
			}
			n = PQntuples(res);
			MemoryContextSwitchTo(batch);
			for (int i = 0; i < n; i++)
			{
				Oid			loid = (Oid) sbx_binary_uint32(res, i, 0);

				if (PQgetisnull(res, i, 1))
					DirectFunctionCall1(be_lo_create, ObjectIdGetDatum(loid));
				else
					sbx_write_page(loid, (int64) sbx_binary_uint32(res, i, 1) * pagesize,
								   PQgetvalue(res, i, 2), PQgetlength(res, i, 2));
			}
			MemoryContextSwitchTo(outer);
			PQclear(res);
			MemoryContextReset(batch);
			if (n == 0)
				break;
		}
	}
	PG_FINALLY();
	{
		MemoryContextSwitchTo(outer);
		SetUserIdAndSecContext(save_userid, save_sec_context);
	}
	PG_END_TRY();
	MemoryContextDelete(batch);
	sbx_local_totals(&got[0], &got[1], &got[2]);
	PopActiveSnapshot();
	CommitTransactionCommand();
	PQclear(sbx_remote_exec(reader, "CLOSE pgsandbox_large_objects", 0, NULL,
							PGRES_COMMAND_OK, what));
	pgstat_report_activity(STATE_IDLE, NULL);

	if (strcmp(want[0], got[0]) != 0 || strcmp(want[1], got[1]) != 0 ||
		strcmp(want[2], got[2]) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("the sandbox did not receive the large objects of source \"%s\" whole", source),
				 errdetail("The source holds %s large objects of %s pages and %s bytes, the sandbox %s of %s pages and %s bytes.",
						   want[0], want[1], want[2], got[0], got[1], got[2])));
	return strtoi64(got[0], NULL, 10);
}
