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
 * server's own large-object functions, acting as the sandbox's role, which
 * then owns each of them as it owns everything the restore made.  Each
 * keeps its OID, which the source's rows refer to, and its holes.  Their
 * privileges and comments are not copied, as pg_restore --no-privileges
 * copies none of anything.  The count copied is checked against the count
 * the snapshot holds.
 *
 * A source that names its login is dumped as that login, which reads the
 * large objects it may read, as pg_dump does.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "libpq-fe.h"
#include "libpq/libpq-be-fe-helpers.h"
#include "libpq/libpq-fs.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "sbx_clone.h"
#include "sbx_conn.h"
#include "storage/large_object.h"
#include "utils/acl.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

/* pages fetched at a time: at most 128 x 2 kB with the default block size */
#define SBX_LO_FETCH	"FETCH 128 FROM pgsandbox_large_objects"

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
		elog(ERROR, "unexpected length of a large object's page number");
	return ((uint32) p[0] << 24) | ((uint32) p[1] << 16) | ((uint32) p[2] << 8) | p[3];
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
	int64		expected;
	int64		copied = 0;
	int64		pagesize;
	Oid			roleid;
	Oid			save_userid;
	int			save_sec_context;
	Oid			current = InvalidOid;
	LargeObjectDesc *desc = NULL;
	MemoryContext batch;
	MemoryContext outer;

	res = sbx_remote_exec(reader,
						  "SELECT pg_catalog.count(*),"
						  "       pg_catalog.current_setting('block_size')::pg_catalog.int8"
						  "       OPERATOR(pg_catalog./) 4"
						  "  FROM pg_catalog.pg_largeobject_metadata",
						  0, NULL, PGRES_TUPLES_OK, what);
	expected = strtoi64(PQgetvalue(res, 0, 0), NULL, 10);
	pagesize = strtoi64(PQgetvalue(res, 0, 1), NULL, 10);
	PQclear(res);
	if (expected == 0)
		return 0;

	pgstat_report_activity(STATE_RUNNING, "pgsandbox: copying large objects");
	/* every large object, with its pages if it has any; no hole is a row */
	PQclear(sbx_remote_exec(reader,
							"DECLARE pgsandbox_large_objects NO SCROLL CURSOR FOR"
							" SELECT m.oid, l.pageno, l.data"
							"   FROM pg_catalog.pg_largeobject_metadata m"
							"   LEFT JOIN pg_catalog.pg_largeobject l"
							"     ON l.loid OPERATOR(pg_catalog.=) m.oid"
							"  ORDER BY m.oid, l.pageno",
							0, NULL, PGRES_COMMAND_OK, what));

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	roleid = get_role_oid(rolename, false);
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	outer = CurrentMemoryContext;
	batch = AllocSetContextCreate(CurrentMemoryContext, "pgsandbox large objects",
								  ALLOCSET_DEFAULT_SIZES);
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

				if (loid != current)
				{
					if (desc != NULL)
						inv_close(desc);
					/* in the transaction's context, which inv_close frees */
					inv_create(loid);
					desc = inv_open(loid, INV_WRITE, outer);
					current = loid;
					copied++;
				}
				if (PQgetisnull(res, i, 1))
					continue;	/* an empty large object */
				inv_seek(desc, (int64) sbx_binary_uint32(res, i, 1) * pagesize, SEEK_SET);
				inv_write(desc, PQgetvalue(res, i, 2), PQgetlength(res, i, 2));
			}
			MemoryContextSwitchTo(outer);
			PQclear(res);
			MemoryContextReset(batch);
			if (n == 0)
				break;
		}
		if (desc != NULL)
			inv_close(desc);
	}
	PG_FINALLY();
	{
		MemoryContextSwitchTo(outer);
		SetUserIdAndSecContext(save_userid, save_sec_context);
	}
	PG_END_TRY();
	MemoryContextDelete(batch);
	PopActiveSnapshot();
	CommitTransactionCommand();
	PQclear(sbx_remote_exec(reader, "CLOSE pgsandbox_large_objects", 0, NULL,
							PGRES_COMMAND_OK, what));
	pgstat_report_activity(STATE_IDLE, NULL);

	if (copied != expected)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("the sandbox received %lld of the %lld large objects of source \"%s\"",
						(long long) copied, (long long) expected, source)));
	return copied;
}
