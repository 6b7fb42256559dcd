/*-------------------------------------------------------------------------
 *
 * copy_method.c
 *	  How a clone copies a snapshot: CREATE DATABASE's strategy, chosen per
 *	  copy from pgsandbox.copy_strategy and from what the filesystem under
 *	  the snapshot can do.
 *
 * With copy_strategy = auto (the default), a copy on PostgreSQL 18 or later
 * whose snapshot lies on a filesystem that clones files (XFS with reflink,
 * Btrfs, and the like) is made with STRATEGY FILE_COPY and file_copy_method
 * = clone: the new database shares the snapshot's blocks, so the copy costs
 * the same whatever the size, and takes no disk until it is written.  Where
 * files cannot be cloned, a snapshot of pgsandbox.file_copy_min_size or more
 * is copied file by file (STRATEGY FILE_COPY: a checkpoint before and after,
 * then the kernel copies each file), which writes each page once rather than
 * twice, to the WAL and to the new database; a smaller one uses WAL_LOG,
 * which costs no checkpoint.  bench/cold_path.sh measured the threshold.
 *
 * Whether the filesystem clones is not guessed from its name: the clone
 * worker asks it, with FICLONE, on two small files it makes in the
 * tablespace's temporary directory (where a server restart removes any left
 * behind), having checked that this directory and the snapshot's own are on
 * one filesystem.  The question is asked for every copy, at the cost of two
 * 8 kB files, so a filesystem remounted or a snapshot moved is seen at once.
 * ext4 answers EOPNOTSUPP; copy_file_range() would still copy there, in the
 * kernel, but every block again, so it is not taken for a clone.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/ioctl.h>
#include <linux/fs.h>
#endif

#include "access/htup_details.h"
#include "catalog/pg_database.h"
#include "common/file_perm.h"
#include "common/file_utils.h"
#include "common/relpath.h"
#include "miscadmin.h"
#include "sbx_clone.h"
#include "sbx_common.h"
#if PG_VERSION_NUM >= 180000
#include "storage/copydir.h"
#endif
#include "storage/fd.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/syscache.h"

#define SBX_PROBE_BYTES 8192

#if PG_VERSION_NUM >= 180000

/*
 * Whether files in directory dir are cloned (share their blocks) by the
 * filesystem.  Sets *why to the reason when they are not.
 */
static bool
sbx_dir_clones_files(const char *dir, const char **why)
{
#ifdef FICLONE
	char		from[MAXPGPATH];
	char		to[MAXPGPATH];
	char		block[SBX_PROBE_BYTES];
	int			src = -1;
	int			dst = -1;
	bool		clones = false;
	int			save_errno = 0;

	snprintf(from, sizeof(from), "%s/%spgsandbox_probe.%d", dir, PG_TEMP_FILE_PREFIX, MyProcPid);
	snprintf(to, sizeof(to), "%s.clone", from);
	memset(block, 'p', sizeof(block));

	src = open(from, O_RDWR | O_CREAT | O_EXCL | PG_BINARY, pg_file_create_mode);
	if (src >= 0 && write(src, block, sizeof(block)) == sizeof(block))
	{
		dst = open(to, O_RDWR | O_CREAT | O_EXCL | PG_BINARY, pg_file_create_mode);
		if (dst >= 0)
		{
			clones = (ioctl(dst, FICLONE, src) == 0);
			save_errno = errno;
		}
	}
	if (!clones && save_errno == 0)
		save_errno = errno;
	if (dst >= 0)
		close(dst);
	if (src >= 0)
		close(src);
	(void) unlink(to);
	(void) unlink(from);

	if (!clones)
		*why = psprintf("the filesystem of \"%s\" does not clone files: %s", dir,
						strerror(save_errno));
	return clones;
#else
	*why = "this platform cannot clone files";
	return false;
#endif
}

/*
 * Whether a copy of database dboid, whose files are in tablespace spcoid,
 * may clone them.  The new database goes to the same tablespace.
 */
static bool
sbx_database_clones(Oid dboid, Oid spcoid, const char **why)
{
	char		tmpdir[MAXPGPATH];
	char	   *dbdir = GetDatabasePath(dboid, spcoid);
	struct stat db_st;
	struct stat tmp_st;

	TempTablespacePath(tmpdir, spcoid);
	if (MakePGDirectory(tmpdir) < 0 && errno != EEXIST)
	{
		*why = psprintf("\"%s\" cannot be made: %m", tmpdir);
		return false;
	}
	if (stat(dbdir, &db_st) != 0)
	{
		*why = psprintf("\"%s\" cannot be read: %m", dbdir);
		return false;
	}
	if (stat(tmpdir, &tmp_st) != 0)
	{
		*why = psprintf("\"%s\" cannot be read: %m", tmpdir);
		return false;
	}
	if (db_st.st_dev != tmp_st.st_dev)
	{
		*why = psprintf("\"%s\" is on another filesystem than its tablespace", dbdir);
		return false;
	}
	return sbx_dir_clones_files(tmpdir, why);
}

/*
 * Whether a copy of the snapshot database dboid may clone its files.
 */
static bool
sbx_snapshot_clones(Oid dboid, const char **why)
{
	HeapTuple	tuple;
	Oid			spcoid;

	tuple = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(dboid));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "snapshot database %u is gone", dboid);
	spcoid = ((Form_pg_database) GETSTRUCT(tuple))->dattablespace;
	ReleaseSysCache(tuple);
	return sbx_database_clones(dboid, spcoid, why);
}
#endif							/* PG_VERSION_NUM >= 180000 */

/*
 * The CREATE DATABASE strategy for a copy of the snapshot database dboid,
 * and a few words for the event that records the copy.  Sets
 * file_copy_method = clone in this process when it clones: the clone worker
 * makes this one copy and exits.
 */
const char *
sbx_choose_copy_method(Oid dboid, char *how, size_t howlen)
{
	const char *why;

	if (sbx_copy_strategy == SBX_COPY_WAL_LOG)
	{
		strlcpy(how, "WAL log", howlen);
		return "wal_log";
	}
	if (sbx_copy_strategy == SBX_COPY_FILE_COPY)
	{
#if PG_VERSION_NUM >= 180000
		strlcpy(how, file_copy_method == FILE_COPY_METHOD_CLONE
				? "file copy, file_copy_method = clone" : "file copy",
				howlen);
#else
		strlcpy(how, "file copy", howlen);
#endif
		return "file_copy";
	}

	/* auto */
#if PG_VERSION_NUM >= 180000
	if (sbx_snapshot_clones(dboid, &why))
	{
		(void) set_config_option("file_copy_method", "clone", PGC_SUSET, PGC_S_SESSION,
								 GUC_ACTION_SET, true, ERROR, false);
		strlcpy(how, "file clone", howlen);
		return "file_copy";
	}
#else
	why = "cloning files needs PostgreSQL 18";
#endif
	if (sbx_file_copy_min_size >= 0)
	{
		int64		size = DatumGetInt64(DirectFunctionCall1(pg_database_size_oid,
															 ObjectIdGetDatum(dboid)));

		if (size >= (int64) sbx_file_copy_min_size * 1024 * 1024)
		{
			snprintf(how, howlen, "file copy of %s; %s",
					 text_to_cstring(DatumGetTextPP(DirectFunctionCall1(pg_size_pretty,
																		Int64GetDatum(size)))),
					 why);
			return "file_copy";
		}
	}
	snprintf(how, howlen, "WAL log; %s", why);
	return "wal_log";
}
