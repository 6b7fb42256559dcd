/*-------------------------------------------------------------------------
 *
 * orphans.c
 *	  Database directories that a crash leaves behind: every database
 *	  pgsandbox makes gets an OID it chose and recorded first, so that the
 *	  directory of one whose CREATE DATABASE a crash interrupted is known to
 *	  be pgsandbox's, and removed.
 *
 * CREATE DATABASE writes base/<oid> before its catalog row commits.  Killed
 * half way (the clone worker killed, the server crashed), it leaves the
 * directory, as large as what it had copied, and no row: PostgreSQL does not
 * remove it, and nothing counted it.  So:
 *
 *	- before each CREATE DATABASE, the worker takes a new OID from the
 *	  server's counter (one whose directory does not exist), records it in
 *	  the sandbox's row (planned_db_oid) and commits, then creates the
 *	  database with OID = it;
 *	- once the clones a restart interrupted are undone (reconcile.c), the
 *	  worker removes base/<oid> for every recorded OID that no database has,
 *	  of a row that is not being made or reset, and records an event with
 *	  the size it gave back;
 *	- doctor() lists every directory of base/ that no database owns, with
 *	  its size, saying which are pgsandbox's; the others it never touches.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <dirent.h>
#include <sys/stat.h>

#include "access/table.h"
#include "catalog/catalog.h"
#include "catalog/pg_database.h"
#include "common/file_utils.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "sbx_common.h"
#include "sbx_spi.h"
#include "sbx_worker.h"
#include "storage/fd.h"
#include "utils/builtins.h"
#include "utils/rel.h"

/* The path of database oid's directory in the default tablespace. */
static char *
sbx_database_dir(Oid oid)
{
	return psprintf("%s/base/%u", DataDir, oid);
}

/*
 * Take a new database OID whose directory does not exist, and record it as
 * sandbox id's planned_db_oid (a reset's next database, for a reset), in a
 * transaction of its own.  InvalidOid before the catalog has the column:
 * then CREATE DATABASE chooses.
 */
Oid
sbx_plan_database_oid(int64 id)
{
	Relation	rel;
	Oid			oid;
	char		idbuf[32];
	char		oidbuf[16];
	const char *args[2] = {idbuf, oidbuf};
	bool		has;

	sbx_xact_begin("pgsandbox: choosing a database's OID");
	has = sbx_catalog_has_orphans();
	if (!has)
	{
		sbx_xact_commit();
		return InvalidOid;
	}
	rel = table_open(DatabaseRelationId, RowExclusiveLock);
	do
	{
		oid = GetNewOidWithIndex(rel, DatabaseOidIndexId, Anum_pg_database_oid);
	} while (access(sbx_database_dir(oid), F_OK) == 0);
	table_close(rel, RowExclusiveLock);
	snprintf(idbuf, sizeof(idbuf), INT64_FORMAT, id);
	snprintf(oidbuf, sizeof(oidbuf), "%u", oid);
	sbx_spi("UPDATE pgsandbox.sandbox SET planned_db_oid = $2::oid WHERE id = $1::bigint",
			SPI_OK_UPDATE, 2, args);
	sbx_xact_commit();
	return oid;
}

/*
 * In a worker transaction, SQL for the bytes of the directories a crash
 * left of databases pgsandbox was making and that are not removed yet, by
 * the size their clones expected: the disk budget counts them.
 */
const char *
sbx_orphan_bytes_sql(void)
{
	if (!sbx_catalog_has_orphans())
		return "0";
	return "(SELECT COALESCE(pg_catalog.sum(o.size_bytes), 0)::bigint FROM pgsandbox.sandbox o"
		" WHERE o.planned_db_oid IS NOT NULL AND o.status NOT IN ('cloning', 'ready')"
		"   AND NOT EXISTS (SELECT FROM pg_catalog.pg_database d WHERE d.oid = o.planned_db_oid)"
		"   AND (pg_catalog.pg_stat_file('base/' || o.planned_db_oid, true)).isdir)";
}

/* The OID clause of a CREATE DATABASE, for a planned OID. */
char *
sbx_database_oid_clause(Oid oid)
{
	return OidIsValid(oid) ? psprintf(" OID %u", oid) : pstrdup("");
}

/* The bytes under a directory, walking it. */
int64
sbx_directory_bytes(const char *path)
{
	DIR		   *dir = AllocateDir(path);
	struct dirent *de;
	int64		total = 0;

	if (dir == NULL)
		return 0;
	while ((de = ReadDirExtended(dir, path, LOG)) != NULL)
	{
		char	   *sub;
		struct stat st;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		sub = psprintf("%s/%s", path, de->d_name);
		if (lstat(sub, &st) == 0)
		{
			if (S_ISDIR(st.st_mode))
				total += sbx_directory_bytes(sub);
			else
				total += st.st_size;
		}
		pfree(sub);
	}
	FreeDir(dir);
	return total;
}

/*
 * Remove the directories of the databases pgsandbox planned and never
 * finished making: a recorded OID that no database has, of a row no clone
 * or reset is making now.  Each removal is an event of its sandbox.
 */
void
sbx_remove_orphan_directories(void)
{
	List	   *names;
	List	   *oids;
	ListCell   *ln;
	ListCell   *lo;

	sbx_xact_begin("pgsandbox: looking for orphaned database directories");
	if (!sbx_catalog_has_orphans())
	{
		sbx_xact_commit();
		return;
	}
	sbx_spi(psprintf("SELECT s.name, s.planned_db_oid FROM pgsandbox.sandbox s"
					 " WHERE s.planned_db_oid IS NOT NULL AND s.status <> 'cloning'%s"
					 "   AND NOT EXISTS (SELECT FROM pg_catalog.pg_database d"
					 "                    WHERE d.oid = s.planned_db_oid)",
					 sbx_catalog_has_saves() ? " AND s.reset_started_at IS NULL" : ""),
			SPI_OK_SELECT, 0, NULL);
	names = sbx_keep_column(1);
	oids = sbx_keep_column(2);
	sbx_xact_commit();

	forboth(ln, names, lo, oids)
	{
		Oid			oid = atooid(lfirst(lo));
		char	   *path = sbx_database_dir(oid);
		int64		bytes;
		const char *args[2];

		if (access(path, F_OK) == 0)
		{
			bytes = sbx_directory_bytes(path);
			if (!rmtree(path, true))
			{
				ereport(WARNING,
						(errmsg("could not remove the orphaned directory \"%s\" of sandbox \"%s\"",
								path, (char *) lfirst(ln))));
				continue;
			}
			ereport(LOG,
					(errmsg("removed directory \"%s\" (" INT64_FORMAT " bytes), left by a crash while sandbox \"%s\" was being made",
							path, bytes, (char *) lfirst(ln))));
			args[0] = lfirst(ln);
			args[1] = psprintf("removed directory base/%u (%.1f MB), which a crash left while its database was being made",
							   oid, bytes / (1024.0 * 1024.0));
			sbx_xact_begin("pgsandbox: recording an orphaned directory removed");
			sbx_spi("INSERT INTO pgsandbox.event (sandbox, action, actor, detail)"
					" VALUES ($1, 'cleanup', '" SBX_WORKER_ACTOR "', $2)",
					SPI_OK_INSERT, 2, args);
			sbx_xact_commit();
		}
		/* nothing of it is left to look for */
		args[0] = lfirst(ln);
		args[1] = lfirst(lo);
		sbx_xact_begin("pgsandbox: forgetting a database's planned OID");
		sbx_spi("UPDATE pgsandbox.sandbox SET planned_db_oid = NULL"
				" WHERE name = $1 AND planned_db_oid = $2::oid",
				SPI_OK_UPDATE, 2, args);
		sbx_xact_commit();
	}
}
