/*-------------------------------------------------------------------------
 *
 * clone_worker.c
 *	  A dynamic background worker that fills one new sandbox: it reads the
 *	  source's catalog, creates the source's extensions in the sandbox as
 *	  superuser, runs pg_dump of the source into pg_restore connected as the
 *	  sandbox's own role, then copies the extensions' configuration rows and
 *	  sets the source database's settings.
 *
 * The worker is connected to the sandbox database as the bootstrap
 * superuser, which it needs only for what the sandbox role may not do: CREATE
 * EXTENSION (an untrusted extension such as postgres_fdw cannot be created
 * by the sandbox role), writing the extensions' configuration tables
 * (config_data.c) and ALTER DATABASE ... SET (db_settings.c).  Everything
 * the archive holds is restored by pg_restore logged in as the sandbox role,
 * so every restored object belongs to it.
 *
 * Without extensions, event triggers or masking rules to take care of,
 * pg_dump streams into pg_restore through a pipe.  Otherwise the archive
 * goes to a private directory so that its table of contents can be
 * filtered and checked (restore_list.c); the directory is removed whatever
 * happens.  What is left
 * out or changed on the way is collected in the job's notes, which the
 * 'ready' event records.
 *
 * A data clone of a source with masking rules (masking.c) reads the source
 * in one exported snapshot: pg_dump leaves out the rows of masked and
 * excluded tables (and the archive is checked to hold none of them before
 * anything is restored), the restore runs in two parts, pre-data with data
 * then post-data, and the masked rows are copied in between.  A reduced
 * clone's rows are found on the source while pg_dump runs.
 *
 * A copy of a snapshot needs none of that, and takes two clone workers.
 * The first, connected to pgsandbox.database, runs CREATE DATABASE ...
 * TEMPLATE (which takes seconds for a large snapshot, and so is kept out of
 * the lifecycle worker).  The second, connected to the copy, gives the
 * snapshot role's objects to the sandbox role (REASSIGN OWNED, then DROP
 * OWNED for any privilege left) and sets the snapshot database's settings.
 *
 * A reset (reset.c) fills a database of another name, dbname, beside the
 * sandbox's, in the same ways; a dump as a role of its own, whose objects
 * are then given to the sandbox's role.  A save (save.c) is a copy of a
 * sandbox, as if it were a snapshot.
 *
 * The worker records its phase for the progress view, reports its outcome
 * in its clone job and exits; the lifecycle worker does the rest.  On
 * SIGTERM it kills its children on the way out.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "common/file_utils.h"
#include "common/string.h"
#include "executor/spi.h"
#include "libpq-fe.h"
#include "libpq/libpq-be-fe-helpers.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "sbx_clone.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_masking.h"
#include "sbx_roles.h"
#include "sbx_shmem.h"
#include "sbx_spi.h"
#include "storage/ipc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

/* what the exit callback must undo */
static SbxChild sbx_children[2];
static int	sbx_nchildren = 0;
static char sbx_archive_dir[MAXPGPATH] = "";

/* the job being served, and the secrets to keep out of messages */
static SbxCloneJob sbx_job;
static const char *sbx_secrets[3];

/* with masking: the hint of a restore that fails once masked rows are in */
static const char *sbx_restore_hint = NULL;

/* pg_dump's and pg_restore's jobs: 1 streams, more go through a directory */
static int	sbx_jobs = 1;
/* the most pg_restore --list may print: a table of contents of 256 MB */
#define SBX_TOC_MAX		(256 * 1024 * 1024)

/* the snapshot a plain dump reads, exported by the reader (sbx_open_reader) */
static char *sbx_dump_snapshot = NULL;

/* pg_dump streamed into pg_restore: no archive shows which tables had rows */
static bool sbx_streamed = false;

/*
 * The source's largest table, locked by the reader before its snapshot
 * (bulk_copy.c): every pg_dump then waits for locks no longer than
 * pgsandbox.lock_timeout, and a stream copies its rows if it qualifies.
 */
static SbxBulkTable *sbx_bulk = NULL;

/*
 * A live build's tables whose rows exclude_data leaves out, as exact
 * pg_dump patterns (masking.c): its subscription applies none of their
 * changes (live_copy.c).
 */
static List *sbx_live_left_out = NIL;

static SbxSourceInfo *sbx_fill_after_catalog(char **dump_env, char **restore_env,
											 bool masked, PGconn *snapshot_reader);

static void
sbx_step(SbxStep step)
{
	sbx_job.steps[step] = GetCurrentTimestamp();
}

static void
sbx_phase(SbxPhase phase, int64 total)
{
	sbx_progress_set(DatumGetInt32(MyBgworkerEntry->bgw_main_arg), phase, NULL, total);
}

/*
 * SIGQUIT, the postmaster's crash restart or immediate shutdown: leave at
 * once, as every backend does, but first kill the children's process
 * groups, which the postmaster's signal to this process's own group does
 * not reach (a parallel pg_dump's workers would outlive it).  Only
 * async-signal-safe calls.
 */
static void
sbx_clone_worker_quit(SIGNAL_ARGS)
{
	for (int i = 0; i < sbx_nchildren; i++)
	{
		if (sbx_children[i].pid > 0 && !sbx_children[i].exited)
			(void) kill(-sbx_children[i].pid, SIGKILL);
	}
	_exit(2);
}

static void
sbx_clone_worker_exit(int code, Datum arg)
{
	sbx_children_kill(sbx_children, sbx_nchildren);
	sbx_nchildren = 0;
	if (sbx_archive_dir[0] != '\0')
	{
		(void) rmtree(sbx_archive_dir, true);
		sbx_archive_dir[0] = '\0';
	}
	explicit_bzero(&sbx_job, sizeof(sbx_job));
}

/*
 * Read what the clone needs from the source's catalog.
 */
static SbxSourceInfo *
sbx_source_read(void)
{
	PGconn	   *conn = sbx_source_open(sbx_job.source, sbx_job.conninfo,
									   sbx_job.require_password);
	SbxSourceInfo *info = NULL;

	PG_TRY();
	{
		info = sbx_read_source_info(conn, sbx_job.source);
	}
	PG_FINALLY();
	{
		libpqsrv_disconnect(conn);
	}
	PG_END_TRY();
	return info;
}

/*
 * The sandbox database was created with the source's encoding and locale,
 * as the caller read them; check them against what the source says now.
 * A difference is an error, unless pgsandbox.locale_fallback allowed it.
 */
static void
sbx_check_locale(const SbxLocale *source)
{
	HeapTuple	tup;
	Form_pg_database db;
	const char *encoding = GetDatabaseEncodingName();
	char	   *collate;
	char	   *ctype;
	bool		isnull;
	bool		same;
	MemoryContext outer = CurrentMemoryContext;

	if (source->encoding[0] == '\0')
		return;
	StartTransactionCommand();
	MemoryContextSwitchTo(outer);	/* the strings outlive the transaction */
	tup = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(MyDatabaseId));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for database %u", MyDatabaseId);
	db = (Form_pg_database) GETSTRUCT(tup);
	collate = TextDatumGetCString(SysCacheGetAttr(DATABASEOID, tup,
												  Anum_pg_database_datcollate, &isnull));
	ctype = TextDatumGetCString(SysCacheGetAttr(DATABASEOID, tup,
												Anum_pg_database_datctype, &isnull));
	same = (strcmp(source->encoding, encoding) == 0 &&
			strcmp(source->collate, collate) == 0 &&
			strcmp(source->ctype, ctype) == 0 &&
			source->provider == db->datlocprovider);
	ReleaseSysCache(tup);
	CommitTransactionCommand();
	MemoryContextSwitchTo(outer);
	if (same)
		return;
	if (!sbx_job.locale_fallback)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("sandbox of source \"%s\" would not have the source's encoding and locale",
						sbx_job.source),
				 errdetail("The source has encoding \"%s\" and locale \"%s\"; the sandbox has \"%s\" and \"%s\".",
						   source->encoding, source->collate, encoding, collate),
				 errhint("Set pgsandbox.locale_fallback = on to accept the server's default.")));
	if (strstr(sbx_job.notes, "locale") == NULL)
		sbx_job_note(&sbx_job, "encoding and locale \"%s\", \"%s\" instead of the source's \"%s\", \"%s\" (pgsandbox.locale_fallback)",
				 encoding, collate, source->encoding, source->collate);
}

/*
 * Create the source's extensions in the sandbox, as superuser.  A schema
 * an extension lives in, other than public and pg_catalog, is created
 * first and given to the sandbox role.
 */
static void
sbx_create_extensions(List *extensions)
{
	ListCell   *lc;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "pgsandbox: creating extensions");

	foreach(lc, extensions)
	{
		SbxExtension *ext = lfirst(lc);
		char	   *sql;

		if (strcmp(ext->schema, "public") != 0 &&
			strcmp(ext->schema, "pg_catalog") != 0)
		{
			sql = psprintf("SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = %s",
						   quote_literal_cstr(ext->schema));
			if (SPI_execute(sql, true, 1) != SPI_OK_SELECT)
				elog(ERROR, "could not look up schema \"%s\"", ext->schema);
			if (SPI_processed == 0)
			{
				sql = psprintf("CREATE SCHEMA %s AUTHORIZATION %s",
							   quote_identifier(ext->schema),
							   quote_identifier(sbx_job.name));
				if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
					elog(ERROR, "could not create schema \"%s\"", ext->schema);
				ext->made_schema = true;
			}
		}
		sql = psprintf("CREATE EXTENSION IF NOT EXISTS %s WITH SCHEMA %s CASCADE",
					   quote_identifier(ext->name), quote_identifier(ext->schema));
		if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "could not create extension \"%s\"", ext->name);
	}
	/* what the sandbox role needs to use them (extension_access.c) */
	sbx_grant_extension_use(sbx_job.name);

	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
}

/* Full path of a client program, checked to be executable. */
static char *
sbx_program(const char *name)
{
	const char *dir = sbx_effective_bin_dir();
	char	   *path = psprintf("%s/%s", dir, name);

	if (access(path, X_OK) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FILE),
				 errmsg("could not find %s in \"%s\"", name, dir),
				 errhint("Set pgsandbox.bin_dir to the directory of PostgreSQL's client programs.")));
	return path;
}

static char **
sbx_argv(const char *const *args)
{
	int			n = 0;
	char	  **argv;

	while (args[n] != NULL)
		n++;
	argv = palloc0(sizeof(char *) * (n + 1));
	for (int i = 0; i < n; i++)
		argv[i] = pstrdup(args[i]);
	return argv;
}

/*
 * pg_dump's arguments: only options, never a connection parameter.  With
 * masking, its options (the snapshot, the tables whose rows are left out)
 * come in 'extra'; 'section' may name the one section to dump.
 */
static char **
sbx_dump_argv(const char *archive, const char *section, List *extra)
{
	const char **args = palloc0(sizeof(char *) * (20 + list_length(extra)));
	int			n = 0;
	ListCell   *lc;

	args[n++] = sbx_program("pg_dump");
	/* an archive is a directory, one file for each table's rows */
	if (archive)
	{
		args[n++] = "--format=directory";
		if (sbx_jobs > 1)
			args[n++] = psprintf("--jobs=%d", sbx_jobs);
	}
	else
		args[n++] = "--format=custom";
	if (sbx_dump_snapshot)
		args[n++] = psprintf("--snapshot=%s", sbx_dump_snapshot);
	/* read once, on this host: compressing it only costs (the setting) */
	args[n++] = psprintf("--compress=%s", sbx_dump_compression);
	args[n++] = "--no-owner";
	args[n++] = "--no-privileges";
	args[n++] = "--no-publications";
	args[n++] = "--no-subscriptions";
	args[n++] = "--no-security-labels";
	args[n++] = "--no-tablespaces";
	/* the reader may not open large objects: the worker copies them */
	if (sbx_large_objects_by_worker(sbx_job.conninfo, sbx_job.require_password))
		args[n++] = "-B";
	if (sbx_job.statistics)
	{
		/* pg_dump 18: the schema, the rows unless schema only, statistics */
		if (sbx_job.schema_only)
			args[n++] = "--no-data";
		args[n++] = "--statistics";
	}
	else if (sbx_job.schema_only)
		args[n++] = "--schema-only";
	if (archive)
		args[n++] = psprintf("--file=%s", archive);
	if (section)
		args[n++] = psprintf("--section=%s", section);
	foreach(lc, extra)
		args[n++] = lfirst(lc);
	args[n] = NULL;
	return sbx_argv(args);
}

/* pg_restore's arguments; the login is in its environment */
static char **
sbx_restore_argv(const char *list, const char *archive, const char *section,
				 const char *section2)
{
	const char *args[18];
	int			n = 0;

	args[n++] = sbx_program("pg_restore");
	args[n++] = "--no-owner";
	args[n++] = "--no-privileges";
	args[n++] = "--exit-on-error";

	/*
	 * One transaction, or several jobs: a failure leaves the new database
	 * half filled, and the lifecycle worker drops it whole either way.
	 */
	if (sbx_jobs > 1)
		args[n++] = psprintf("--jobs=%d", sbx_jobs);
	else
		args[n++] = "--single-transaction";
	args[n++] = "--no-publications";
	args[n++] = "--no-subscriptions";
	args[n++] = "--no-security-labels";
	args[n++] = "--no-tablespaces";
	args[n++] = psprintf("--dbname=%s", sbx_job.dbname);
	if (sbx_job.statistics)
		args[n++] = "--statistics";
	if (list)
		args[n++] = psprintf("--use-list=%s", list);
	if (section)
		args[n++] = psprintf("--section=%s", section);
	if (section2)
		args[n++] = psprintf("--section=%s", section2);
	if (archive)
		args[n++] = archive;
	args[n] = NULL;
	return sbx_argv(args);
}

/*
 * A restore's failure once masked rows are in: the values a unique or
 * foreign key names ("Key (email)=(p) already exists") are masked values,
 * which a poor mask leaves part of the real one in, so they are withheld.
 */
static char *
sbx_withhold_key_values(const char *text)
{
	StringInfoData buf;
	const char *p = text;

	initStringInfo(&buf);
	while (*p)
	{
		const char *eol = strchr(p, '\n');
		const char *end = eol ? eol : p + strlen(p);
		const char *key = strstr(p, "Key (");
		const char *eq = key && key < end ? strstr(key, ")=(") : NULL;
		const char *close = NULL;

		/* the values end at the line's last parenthesis */
		for (const char *c = end - 1; eq && eq < end && c > eq + 2; c--)
		{
			if (*c == ')')
			{
				close = c;
				break;
			}
		}
		if (close)
		{
			appendBinaryStringInfo(&buf, p, eq + 3 - p);
			appendStringInfoString(&buf, "masked values withheld");
			appendBinaryStringInfo(&buf, close, end - close);
		}
		else
			appendBinaryStringInfo(&buf, p, end - p);
		if (!eol)
			break;
		appendStringInfoChar(&buf, '\n');
		p = eol + 1;
	}
	return buf.data;
}

static void
sbx_check_child(const SbxChild *child, const char *what)
{
	char	   *detail;

	if (sbx_child_succeeded(child))
		return;
	detail = sbx_child_describe_failure(child, sbx_secrets);
	if (sbx_restore_hint)
		detail = sbx_withhold_key_values(detail);
	ereport(ERROR,
			(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
			 errmsg("%s", what),
			 errdetail_internal("%s", detail),
			 sbx_restore_hint ? errhint("%s", sbx_restore_hint) : 0));
}

/* Run one child to its end and check that it succeeded. */
static void
sbx_run_child(const char *label, char **argv, char **envp, int stdout_fd,
			  const char *what)
{
	sbx_child_start(&sbx_children[0], label, argv, envp, -1, stdout_fd);
	sbx_nchildren = 1;
	if (stdout_fd >= 0)
		close(stdout_fd);
	sbx_children_wait(sbx_children, 1);
	sbx_check_child(&sbx_children[0], what);
	sbx_nchildren = 0;
}

/*
 * Start pg_dump | pg_restore through a pipe, pg_dump given 'dump_options'
 * besides its own; sbx_stream_wait waits.
 */
static void
sbx_stream_start(char **dump_env, char **restore_env, List *dump_options)
{
	int			pipefd[2];

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create pipe: %m")));

	/* the first of the dumps a clone may stream */
	if (sbx_job.steps[SBX_STEP_DUMP_STARTED] == 0)
		sbx_step(SBX_STEP_DUMP_STARTED);
	sbx_streamed = true;
	sbx_child_start(&sbx_children[0], "pg_dump", sbx_dump_argv(NULL, NULL, dump_options),
					dump_env, -1, pipefd[1]);
	sbx_nchildren = 1;
	close(pipefd[1]);
	sbx_child_start(&sbx_children[1], "pg_restore", sbx_restore_argv(NULL, NULL, NULL, NULL),
					restore_env, pipefd[0], -1);
	sbx_nchildren = 2;
	close(pipefd[0]);
}

static void
sbx_stream_wait(void)
{
	sbx_children_wait(sbx_children, 2);

	/*
	 * When pg_restore gives up, pg_dump dies of a broken pipe: then the
	 * reason is pg_restore's.  Otherwise a failing pg_dump comes first, as
	 * pg_restore only complains of the archive it left unfinished.
	 */
	if (sbx_child_broken_pipe(&sbx_children[0]) && !sbx_child_succeeded(&sbx_children[1]))
		sbx_check_child(&sbx_children[1],
						psprintf("pg_restore into sandbox \"%s\" failed", sbx_job.name));
	sbx_check_child(&sbx_children[0],
					psprintf("pg_dump of source \"%s\" failed", sbx_job.source));
	sbx_check_child(&sbx_children[1],
					psprintf("pg_restore into sandbox \"%s\" failed", sbx_job.name));
	sbx_nchildren = 0;
}

/* pg_dump's options for the first (or only) stream of a plain clone */
static List *
sbx_bulk_stream_options(void)
{
	if (sbx_bulk == NULL)
		return NIL;
	return sbx_bulk_dump_options(sbx_bulk, sbx_bulk->copy ? SBX_BULK_BEFORE : SBX_BULK_ANY);
}

/*
 * The pre-data section is restored: the largest table's rows, copied by
 * this worker over a login as the sandbox role (bulk_copy.c), then the
 * other tables' rows and the post-data section, streamed.
 */
static void
sbx_stream_after_bulk(char **dump_env, char **restore_env, PGconn *reader,
					  SbxBulkTable *bulk)
{
	PGconn	   *conn = sbx_sandbox_login(sbx_job.dbname, sbx_job.name, sbx_job.password);
	int64		rows = 0;

	PG_TRY();
	{
		rows = sbx_bulk_copy(reader, conn, bulk, sbx_job.source);
	}
	PG_FINALLY();
	{
		libpqsrv_disconnect(conn);
	}
	PG_END_TRY();
	sbx_job_note(&sbx_job, "the rows of %s (" INT64_FORMAT ") copied by the worker, in %s",
				 bulk->display, rows, bulk->binary ? "binary" : "text");
	pgstat_report_activity(STATE_RUNNING, "pgsandbox: dumping and restoring");
	sbx_stream_start(dump_env, restore_env, sbx_bulk_dump_options(bulk, SBX_BULK_AFTER));
	sbx_stream_wait();
}

/*
 * With masking, between the restore's data and post-data sections: the
 * masked tables' rows, over a login as the sandbox role.  A failure of
 * post-data from then on may be a masked value that breaks a key.
 */
static void
sbx_copy_masked_rows(SbxMasking *masking)
{
	PGconn	   *conn = sbx_sandbox_login(sbx_job.dbname, sbx_job.name, sbx_job.password);

	PG_TRY();
	{
		sbx_masking_copy(masking, conn);
	}
	PG_FINALLY();
	{
		libpqsrv_disconnect(conn);
	}
	PG_END_TRY();
	sbx_restore_hint = psprintf("Masked values may break a unique key, a foreign key or a check: %s.",
								sbx_masking_summary(masking));
}

/*
 * pg_dump to a private archive, filter its contents, pg_restore it; with
 * masking, section by section, the masked rows copied between data and
 * post-data.
 */
static void
sbx_through_archive(char **dump_env, char **restore_env, const SbxSourceInfo *info,
					SbxMasking *masking, PGconn *reader)
{
	char		parent[MAXPGPATH];
	char	   *archive;
	char	   *listing;
	char	   *list;

	snprintf(parent, sizeof(parent), "%s/%s", DataDir, SBX_TMP_DIR);
	if (mkdir(parent, S_IRWXU) < 0 && errno != EEXIST)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create directory \"%s\": %m", parent)));
	snprintf(sbx_archive_dir, sizeof(sbx_archive_dir), "%s/%s", parent, sbx_job.dbname);
	if (mkdir(sbx_archive_dir, S_IRWXU) < 0)
	{
		int			save_errno = errno;

		sbx_archive_dir[0] = '\0';
		errno = save_errno;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create directory \"%s/%s\": %m", parent, sbx_job.dbname)));
	}
	/* a directory, which pg_dump makes */
	archive = psprintf("%s/archive", sbx_archive_dir);
	list = psprintf("%s/restore.toc", sbx_archive_dir);

	sbx_phase(SBX_PHASE_DUMPING, -1);
	sbx_step(SBX_STEP_DUMP_STARTED);
	sbx_child_start(&sbx_children[0], "pg_dump",
					sbx_dump_argv(archive, NULL,
								  masking ? sbx_masking_dump_options(masking) :
								  sbx_bulk ? sbx_bulk_dump_options(sbx_bulk, SBX_BULK_ANY) : NIL),
					dump_env, -1, -1);
	sbx_nchildren = 1;
	/* the rows a reduced clone keeps are found while pg_dump writes */
	if (masking)
		sbx_subset_compute(masking);
	sbx_children_wait(sbx_children, 1);
	sbx_check_child(&sbx_children[0], psprintf("pg_dump of source \"%s\" failed", sbx_job.source));
	sbx_nchildren = 0;
	sbx_step(SBX_STEP_DUMPED);

	/*
	 * The table of contents is read through a pipe, not left to a file
	 * pg_restore writes: a listing it could not write whole (a full disk)
	 * would otherwise restore nothing, with success.
	 */
	{
		const char *args[] = {sbx_program("pg_restore"), "--list", archive, NULL};

		listing = sbx_child_output("pg_restore", sbx_argv(args), restore_env, SBX_TOC_MAX);
		if (listing == NULL || strlen(listing) >= SBX_TOC_MAX ||
			strstr(listing, "TOC Entries:") == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
					 errmsg("could not list the contents of the source's archive"),
					 errdetail(listing == NULL ? "pg_restore --list failed."
							   : "pg_restore --list printed no table of contents, or one too long.")));
	}
	{
		StringInfoData left_out;

		initStringInfo(&left_out);
		sbx_filter_restore_list(listing, list, info, masking, &left_out);
		if (left_out.len > 0)
			sbx_job_note(&sbx_job, "left out, as only a superuser may own them: %s", left_out.data);
	}

	sbx_phase(SBX_PHASE_RESTORING, -1);
	if (masking == NULL)
		sbx_run_child("pg_restore", sbx_restore_argv(list, archive, NULL, NULL), restore_env, -1,
					  psprintf("pg_restore into sandbox \"%s\" failed", sbx_job.name));
	else
	{
		sbx_run_child("pg_restore", sbx_restore_argv(list, archive, "pre-data", "data"),
					  restore_env, -1,
					  psprintf("pg_restore into sandbox \"%s\" failed", sbx_job.name));
		sbx_copy_masked_rows(masking);
		sbx_run_child("pg_restore", sbx_restore_argv(list, archive, "post-data", NULL),
					  restore_env, -1,
					  psprintf("pg_restore into sandbox \"%s\" failed", sbx_job.name));
	}
	/* every table whose file holds rows received some (verify.c) */
	if (!sbx_job.schema_only)
		sbx_verify_archive_rows(reader, sbx_job.source, archive, listing, list);

	(void) rmtree(sbx_archive_dir, true);
	sbx_archive_dir[0] = '\0';
}

/*
 * The source database's settings, on the sandbox database; those left out
 * are named in the notes.
 */
static void
sbx_apply_settings(List *settings)
{
	StringInfoData refused;

	if (settings == NIL)
		return;
	initStringInfo(&refused);
	pgstat_report_activity(STATE_RUNNING, "pgsandbox: applying database settings");
	sbx_apply_database_settings(sbx_job.dbname, sbx_job.name, settings, &refused);
	pgstat_report_activity(STATE_IDLE, NULL);
	if (refused.len > 0)
		sbx_job_note(&sbx_job, "database settings left out: %s", refused.data);
}

/* Copy the extensions' configuration rows, over a new source connection. */
static void
sbx_restore_config_data(const SbxSourceInfo *info)
{
	PGconn	   *conn;

	if (info->config_rels == NIL || sbx_job.schema_only)
		return;
	conn = sbx_source_open(sbx_job.source, sbx_job.conninfo, sbx_job.require_password);
	PG_TRY();
	{
		sbx_copy_config_data(conn, sbx_job.source, sbx_job.trusted_owners,
							 info->config_rels);
	}
	PG_FINALLY();
	{
		libpqsrv_disconnect(conn);
	}
	PG_END_TRY();
}

/*
 * Dump the source into the sandbox; with masking, through an archive
 * checked first, section by section, the masked rows copied between data
 * and post-data.  'reader' reads the source in pg_dump's snapshot.
 */
static void
sbx_dump_and_restore(char **dump_env, char **restore_env, const SbxSourceInfo *info,
					 SbxMasking *masking, PGconn *reader)
{
	if (sbx_jobs > 1 || info->extensions != NIL || info->event_triggers != NIL ||
		masking != NULL)
		sbx_through_archive(dump_env, restore_env, info, masking, reader);
	else
	{
		sbx_phase(SBX_PHASE_RESTORING, -1);
		sbx_stream_start(dump_env, restore_env, sbx_bulk_stream_options());
		sbx_stream_wait();
		if (sbx_bulk && sbx_bulk->copy)
			sbx_stream_after_bulk(dump_env, restore_env, reader, sbx_bulk);
	}
	sbx_step(SBX_STEP_RESTORED);
}

/*
 * A clone whose source had, as its caller probed it, no extension and no
 * event trigger, and that was granted no slot to dump in parallel: pg_dump
 * streams into pg_restore at once, and the source's catalog is read
 * meanwhile, on a connection of its own.  If the catalog then shows what the stream could
 * not take care of (an extension or an event trigger made since the probe),
 * the clone fails and may be tried again.
 */
static SbxSourceInfo *
sbx_stream_first(char **dump_env, char **restore_env, PGconn *reader)
{
	SbxSourceInfo *info;

	sbx_phase(SBX_PHASE_RESTORING, sbx_job.source_bytes);
	sbx_job.data_as_of = GetCurrentTimestamp();
	sbx_stream_start(dump_env, restore_env, sbx_bulk_stream_options());
	pgstat_report_activity(STATE_RUNNING, "pgsandbox: reading the source's catalog");
	info = sbx_read_source_info(reader, sbx_job.source);
	sbx_check_locale(&info->locale);
	sbx_step(SBX_STEP_SOURCE_READ);
	if (info->extensions != NIL || info->event_triggers != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("source \"%s\" changed while it was being cloned", sbx_job.source),
				 errdetail("An extension or an event trigger was made in the source after the clone began."),
				 errhint("Clone it again.")));
	pgstat_report_activity(STATE_RUNNING, "pgsandbox: dumping and restoring");
	sbx_stream_wait();
	if (sbx_bulk && sbx_bulk->copy)
		sbx_stream_after_bulk(dump_env, restore_env, reader, sbx_bulk);
	sbx_step(SBX_STEP_RESTORED);
	if (sbx_job.statistics)
		sbx_job_note(&sbx_job, "with the planner's statistics of the source");
	return info;
}

/*
 * How many jobs pg_dump and pg_restore run with: one, and one more for each
 * clone slot the lifecycle worker granted the job (worker.c), which it did
 * for a large source none of whose tables held half the pages when clone()
 * probed it.  A reduced clone, or a source found otherwise now, streams with
 * one and gives the slots back.  (bench/cold_path.sh, 2 cores: pgbench -s 50,
 * one table, took 1.55x as long with 2 jobs as the stream.)
 */
static int
sbx_choose_jobs(const SbxSourceInfo *info, bool reduced)
{
	if (sbx_job.extra_slots == 0)
		return 1;
	if (reduced || info->largest_share >= 0.5 ||
		info->size_bytes < (int64) sbx_parallel_min_size * 1024 * 1024)
	{
		sbx_release_clone_slots(DatumGetInt32(MyBgworkerEntry->bgw_main_arg),
								sbx_job.sandbox_id);
		sbx_job.extra_slots = 0;
		return 1;
	}
	return 1 + sbx_job.extra_slots;
}

/*
 * A reset's dump is filled as a role of its own (reset.c): give everything
 * it made, the database too, to the sandbox's role, and what that role
 * needs of the extensions.
 */
static void
sbx_hand_over(void)
{
	char	   *sql;

	pgstat_report_activity(STATE_RUNNING, "pgsandbox: giving a reset's database to its sandbox");
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	sql = psprintf("REASSIGN OWNED BY %s TO %s", quote_identifier(sbx_job.name),
				   quote_identifier(sbx_job.reset_of));
	if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not reassign the reset's objects");
	sql = psprintf("DROP OWNED BY %s", quote_identifier(sbx_job.name));
	if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not drop the reset role's privileges");
	sbx_grant_extension_use(sbx_job.reset_of);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * What the database this worker filled holds, counted and hashed, for the
 * catalog: a copy of it is checked against it (verify.c).
 */
static void
sbx_record_digest(void)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	strlcpy(sbx_job.objects_digest, sbx_inventory_digest(), sizeof(sbx_job.objects_digest));
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/*
 * The large objects of a source pg_dump left out (large_objects.c), copied
 * through 'reader', in pg_dump's snapshot.
 */
static void
sbx_copy_large_objects_of_job(PGconn *reader)
{
	int64		copied;

	if (sbx_job.schema_only ||
		!sbx_large_objects_by_worker(sbx_job.conninfo, sbx_job.require_password))
		return;
	copied = sbx_copy_large_objects(reader, sbx_job.source, sbx_job.name);
	if (copied > 0)
		sbx_job_note(&sbx_job, "%lld large object%s copied by the worker", (long long) copied,
					 copied == 1 ? "" : "s");
}

/*
 * The rules' summary, a note per part ("; " between them), so that one that
 * does not fit the notes leaves the others whole (job_notes.c).
 */
static void
sbx_note_summary(char *summary)
{
	char	   *part = summary;

	while (part != NULL && *part != '\0')
	{
		char	   *next = strstr(part, "; ");

		if (next != NULL)
		{
			*next = '\0';
			next += 2;
		}
		sbx_job_note(&sbx_job, "%s", part);
		part = next;
	}
}

/*
 * The reader of a dump that is not masked: a connection to the source in a
 * repeatable-read transaction whose snapshot pg_dump dumps (--snapshot), so
 * that the source's catalog read here, and the inventory the sandbox is
 * checked against (verify.c), are what pg_dump saw.  (A masked dump has the
 * masking reader, masking.c.)
 */
static PGconn *
sbx_open_reader(void)
{
	PGconn	   *reader = sbx_source_open(sbx_job.source, sbx_job.conninfo,
										 sbx_job.require_password);

	PG_TRY();
	{
		PGresult   *res;
		const char *what = psprintf("could not read source \"%s\"", sbx_job.source);

		if (sbx_dump_snapshot != NULL)
		{
			/* a live build's: the snapshot of its slot's consistent point */
			sbx_source_read_begin(reader, what);
			PQclear(sbx_remote_exec(reader,
									psprintf("SET TRANSACTION SNAPSHOT %s",
											 quote_literal_cstr(sbx_dump_snapshot)),
									0, NULL, PGRES_COMMAND_OK, what));
		}
		else
		{
			/* the largest table is found, then locked before the snapshot */
			sbx_source_session_setup(reader, false, what);
			sbx_bulk = sbx_bulk_candidate(reader, sbx_job.source, sbx_job.schema_only);
			PQclear(sbx_remote_exec(reader, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
									0, NULL, PGRES_COMMAND_OK, what));
			if (sbx_bulk)
				sbx_bulk_lock(reader, sbx_bulk, sbx_job.source);
			res = sbx_remote_exec(reader, "SELECT pg_catalog.pg_export_snapshot()", 0, NULL,
								  PGRES_TUPLES_OK, what);
			sbx_dump_snapshot = MemoryContextStrdup(TopMemoryContext, PQgetvalue(res, 0, 0));
			PQclear(res);
		}
	}
	PG_CATCH();
	{
		libpqsrv_disconnect(reader);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return reader;
}

static void
sbx_fill_sandbox(void)
{
	SbxSourceInfo *info;
	char	  **dump_env;
	char	  **restore_env;
	bool		masked = sbx_job.masked && !sbx_job.schema_only;
	bool		live = sbx_job.live_slot[0] != '\0';
	PGconn	   *volatile reader = NULL;

	dump_env = sbx_child_environment(sbx_job.conninfo, sbx_job.require_password,
									 NULL, NULL, NULL);
	restore_env = sbx_child_environment(NULL, false, sbx_job.name,
										sbx_job.password, sbx_job.dbname);
	/* a live build reads its slot's snapshot (live_copy.c) */
	if (live)
		sbx_dump_snapshot = MemoryContextStrdup(TopMemoryContext,
												sbx_live_build_begin(&sbx_job));
	PG_TRY();
	{
		if (!masked)
			reader = sbx_open_reader();
		if (sbx_job.stream_early && !masked && sbx_job.extra_slots == 0)
			info = sbx_stream_first(dump_env, restore_env, reader);
		else
			info = sbx_fill_after_catalog(dump_env, restore_env, masked, reader);
		/* everything the source holds, by name (verify.c) */
		if (reader)
		{
			sbx_copy_large_objects_of_job(reader);
			sbx_verify_restore(reader, sbx_job.source, sbx_job.name);
			/* and every table that held rows received some (verify_rows.c) */
			if (sbx_streamed && !sbx_job.schema_only)
				sbx_verify_stream_rows(reader, sbx_job.source);
		}
		sbx_step(SBX_STEP_VERIFIED);
	}
	PG_CATCH();
	{
		if (reader)
			libpqsrv_disconnect(reader);
		if (live)
			sbx_live_build_end(&sbx_job, true);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (reader)
		libpqsrv_disconnect(reader);
	sbx_restore_hint = NULL;
	sbx_phase(SBX_PHASE_FINISHING, -1);
	sbx_restore_config_data(info);
	sbx_apply_settings(info->settings);
	if (sbx_job.reset)
		sbx_hand_over();
	if (sbx_jobs > 1)
		sbx_job_note(&sbx_job, "dumped and restored with %d jobs", sbx_jobs);
	sbx_record_digest();
	/* last, once nothing can fail the build: its subscription takes the slot */
	if (live)
	{
		PG_TRY();
		{
			sbx_live_subscribe(&sbx_job, sbx_live_left_out);
		}
		PG_CATCH();
		{
			sbx_live_build_end(&sbx_job, true);
			PG_RE_THROW();
		}
		PG_END_TRY();
	}
	sbx_step(SBX_STEP_FINISHED);
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * Read the source's catalog and make its extensions, then dump and restore
 * it: the way of every clone that sbx_stream_first does not take.
 */
static SbxSourceInfo *
sbx_fill_after_catalog(char **dump_env, char **restore_env, bool masked,
					   PGconn *snapshot_reader)
{
	SbxSourceInfo *info;
	PGconn	   *volatile reader = NULL;

	pgstat_report_activity(STATE_RUNNING, "pgsandbox: reading the source's catalog");
	info = masked ? sbx_source_read() : sbx_read_source_info(snapshot_reader, sbx_job.source);
	sbx_check_locale(&info->locale);
	sbx_phase(SBX_PHASE_EXTENSIONS, info->size_bytes);
	if (info->extensions != NIL)
		sbx_create_extensions(info->extensions);
	sbx_step(SBX_STEP_SOURCE_READ);

	pgstat_report_activity(STATE_RUNNING, "pgsandbox: dumping and restoring");
	if (!masked)
	{
		sbx_jobs = sbx_choose_jobs(info, false);
		/* pg_dump takes its snapshot of the source as it starts */
		sbx_job.data_as_of = GetCurrentTimestamp();
		sbx_dump_and_restore(dump_env, restore_env, info, NULL, snapshot_reader);
		if (sbx_job.statistics)
			sbx_job_note(&sbx_job, "with the planner's statistics of the source");
	}
	else
	{
		List	   *masks;
		List	   *patterns;
		List	   *subsets;

		sbx_unpack_rules(&sbx_job, &masks, &patterns, &subsets);
		sbx_jobs = sbx_choose_jobs(info, sbx_rules_reduce(&sbx_job));
		reader = sbx_source_open(sbx_job.source, sbx_job.conninfo,
								 sbx_job.require_password);
		PG_TRY();
		{
			SbxMasking *masking;

			/* every read of the clone uses the reader's snapshot */
			sbx_job.data_as_of = GetCurrentTimestamp();
			masking = sbx_masking_begin(reader, sbx_job.source, sbx_job.trusted_owners,
										masks, patterns, subsets,
										sbx_job.rules_encoding, sbx_dump_snapshot);
			if (sbx_dump_snapshot != NULL)
			{
				MemoryContext old;
				ListCell   *lc;

				sbx_live_check_left_out(reader, &sbx_job, masking->excluded);
				/* found by name in the snapshot's database, in its encoding */
				old = MemoryContextSwitchTo(TopMemoryContext);
				foreach(lc, masking->excluded)
					sbx_live_left_out =
						lappend(sbx_live_left_out,
								pstrdup(pg_any_to_server(lfirst(lc), strlen(lfirst(lc)),
														 pg_char_to_encoding(masking->encoding))));
				MemoryContextSwitchTo(old);
			}
			sbx_dump_and_restore(dump_env, restore_env, info, masking, reader);
			sbx_note_summary(sbx_masking_summary(masking));
			sbx_copy_large_objects_of_job(reader);
			/* everything but the rows, in the reader's snapshot (verify.c) */
			sbx_verify_restore(reader, sbx_job.source, sbx_job.name);
		}
		PG_FINALLY();
		{
			libpqsrv_disconnect(reader);
		}
		PG_END_TRY();
	}
	return info;
}

/*
 * In the first half of a copy, connected to pgsandbox's database: what the
 * snapshot or save copied recorded it holds, for the second half to check
 * the copy against.
 */
static void
sbx_read_expected_digest(void)
{
	char		id[32];
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(sbx_job.snapshot_id)};

	sbx_job.expected_digest[0] = '\0';
	/* a save copies a live sandbox, which changed since it was recorded */
	if (sbx_job.kind == SBX_KIND_SAVE || !sbx_catalog_has_digests())
		return;
	snprintf(id, sizeof(id), INT64_FORMAT, sbx_job.snapshot_id);
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (SPI_execute_with_args("SELECT objects_digest FROM pgsandbox.sandbox WHERE id = $1",
							  1, argtypes, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the inventory of snapshot %s", id);
	if (SPI_processed == 1)
	{
		char	   *digest = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);

		if (digest)
			strlcpy(sbx_job.expected_digest, digest, sizeof(sbx_job.expected_digest));
	}
	SPI_finish();
	PopActiveSnapshot();
}

/*
 * The first half of a copy of a snapshot: the database, made closed to
 * connections and owned by the sandbox role, with the strategy
 * pgsandbox.copy_strategy names or, for auto, the one the filesystem allows
 * (copy_method.c).
 */
static void
sbx_copy_snapshot(void)
{
	const char *strategy;
	MemoryContext outer;

	sbx_phase(SBX_PHASE_COPYING, -1);
	/* it reads the catalog; a setting it makes outlives the transaction */
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	sbx_read_expected_digest();
	strategy = sbx_choose_copy_method(sbx_job.snapshot_dboid, sbx_job.copy_how,
									  sizeof(sbx_job.copy_how));
	CommitTransactionCommand();
	outer = CurrentMemoryContext;
	/* a live snapshot's apply is paused while it is copied (live_copy.c) */
	if (sbx_job.snapshot_live)
		sbx_live_copy_begin(&sbx_job);
	PG_TRY();
	{
		char	   *held_by;
		long		waited;

		/*
		 * With the OID the lifecycle worker recorded for it (orphans.c),
		 * waiting out an autovacuum or a refresh that holds the snapshot for
		 * a moment (template_wait.c).
		 */
		waited = sbx_copy_template_waiting(psprintf("CREATE DATABASE %s OWNER %s TEMPLATE %s"
													" STRATEGY %s ALLOW_CONNECTIONS false%s",
													quote_identifier(sbx_job.dbname),
													quote_identifier(sbx_job.name),
													quote_identifier(sbx_job.snapshot_name),
													strategy,
													OidIsValid(sbx_job.planned_dboid)
													? psprintf(" OID %u", sbx_job.planned_dboid) : ""),
										   "pgsandbox: copying a snapshot",
										   sbx_job.snapshot_dboid, &held_by);
		if (waited > 0)
			sbx_job_note(&sbx_job, "the copy waited %.1f s for its snapshot, held by %s",
						 waited / 1000.0, held_by ? held_by : "a session gone since");
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		if (!sbx_job.snapshot_live)
			PG_RE_THROW();
		/* the pause is let go in a transaction of its own: keep the error */
		MemoryContextSwitchTo(outer);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		MemoryContextSwitchTo(outer);
		sbx_live_copy_end(&sbx_job);
		ReThrowError(edata);
	}
	PG_END_TRY();
	if (sbx_job.snapshot_live)
		sbx_live_copy_end(&sbx_job);
	sbx_step(SBX_STEP_COPIED);
}

/*
 * The second half of a copy of a snapshot: give the snapshot role's objects
 * to the sandbox role, take back whatever privilege the snapshot role still
 * holds here, and set the snapshot database's settings, which CREATE
 * DATABASE does not copy.
 */
static void
sbx_adopt_copy(void)
{
	List	   *settings = NIL;
	const char *from = quote_identifier(sbx_job.snapshot_role);
	char	   *sql;
	MemoryContext old;

	sbx_phase(SBX_PHASE_FINISHING, -1);
	pgstat_report_activity(STATE_RUNNING, "pgsandbox: taking ownership of a snapshot copy");
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	sql = psprintf("REASSIGN OWNED BY %s TO %s", from, quote_identifier(sbx_job.name));
	if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not reassign the snapshot's objects");
	sql = psprintf("DROP OWNED BY %s", from);
	if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not drop the snapshot role's privileges");
	/* which took its grants on the extensions' objects too */
	sbx_grant_extension_use(sbx_job.name);
	sql = psprintf("SELECT pg_catalog.unnest(setconfig) FROM pg_catalog.pg_db_role_setting"
				   " WHERE setdatabase = %u AND setrole = 0", sbx_job.snapshot_dboid);
	if (SPI_execute(sql, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the snapshot's database settings");
	/* the settings outlive the transaction; the worker exits after them */
	old = MemoryContextSwitchTo(TopMemoryContext);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		SbxSetting *setting = sbx_parse_setting(SPI_getvalue(SPI_tuptable->vals[i],
															 SPI_tuptable->tupdesc, 1));

		if (setting != NULL)
			settings = lappend(settings, setting);
	}
	MemoryContextSwitchTo(old);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	sbx_apply_settings(settings);
	/* logical replication does not carry sequences */
	if (sbx_job.snapshot_live)
		sbx_live_copy_sequences(&sbx_job);
	sbx_step(SBX_STEP_OWNED);
	/* it holds what its snapshot or save recorded (verify.c) */
	sbx_record_digest();
	sbx_verify_copy(sbx_job.expected_digest, sbx_job.objects_digest, sbx_job.name,
					sbx_job.snapshot_name);
	sbx_step(SBX_STEP_VERIFIED);
	sbx_step(SBX_STEP_FINISHED);
	pgstat_report_activity(STATE_IDLE, NULL);
}

static void
sbx_report(bool ok, int sqlerrcode, const char *message, const char *detail,
		   const char *hint)
{
	int			j = DatumGetInt32(MyBgworkerEntry->bgw_main_arg);
	SbxCloneJob *job = &sbx_shared->jobs[j];

	LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
	if (job->in_use && job->sandbox_id == sbx_job.sandbox_id)
	{
		job->finished = true;
		job->ok = ok;
		memcpy(job->notes, sbx_job.notes, sizeof(job->notes));
		job->notes_len = sbx_job.notes_len;
		job->notes_left_out = sbx_job.notes_left_out;
		strlcpy(job->copy_how, sbx_job.copy_how, sizeof(job->copy_how));
		strlcpy(job->objects_digest, sbx_job.objects_digest, sizeof(job->objects_digest));
		strlcpy(job->expected_digest, sbx_job.expected_digest, sizeof(job->expected_digest));
		strlcpy(job->live_tables, sbx_job.live_tables, sizeof(job->live_tables));
		job->live_slot_dropped = sbx_job.live_slot_dropped;
		job->data_as_of = sbx_job.data_as_of;
		memcpy(job->steps, sbx_job.steps, sizeof(job->steps));
		job->sqlerrcode = sqlerrcode;
		sbx_copy_bounded(job->message, sizeof(job->message), message);
		sbx_copy_bounded(job->detail, sizeof(job->detail), detail);
		sbx_copy_bounded(job->hint, sizeof(job->hint), hint);
	}
	LWLockRelease(sbx_shared->lock);
	/* a success is served before this process has ended */
	sbx_queue_wake_worker();
}

void
sbx_clone_worker_main(Datum main_arg)
{
	int			j = DatumGetInt32(main_arg);
	int64		sandbox_id;
	char	   *source_password;

	pqsignal(SIGTERM, die);
	pqsignal(SIGQUIT, sbx_clone_worker_quit);
	BackgroundWorkerUnblockSignals();

	LWLockAcquire(sbx_shared->lock, LW_SHARED);
	memcpy(&sbx_job, &sbx_shared->jobs[j], sizeof(sbx_job));
	LWLockRelease(sbx_shared->lock);
	before_shmem_exit(sbx_clone_worker_exit, (Datum) 0);
	memcpy(&sandbox_id, MyBgworkerEntry->bgw_extra, sizeof(sandbox_id));
	if (!sbx_job.in_use || sbx_job.sandbox_id != sandbox_id)
		proc_exit(0);
	/* the second half of a copy keeps the first's moment */
	if (sbx_job.steps[SBX_STEP_WORKER] == 0)
		sbx_step(SBX_STEP_WORKER);

	/* the first half of a copy makes the database it would connect to */
	if (sbx_job.copy_stage)
		BackgroundWorkerInitializeConnection(sbx_database, NULL, 0);
	else
		BackgroundWorkerInitializeConnectionByOid(sbx_job.dboid, InvalidOid, 0);
	pgstat_report_appname("pgsandbox clone");
	sbx_harden_session();

	source_password = sbx_conninfo_password(sbx_job.conninfo);
	sbx_secrets[0] = sbx_job.password;
	sbx_secrets[1] = source_password ? source_password : "";
	sbx_secrets[2] = NULL;

	PG_TRY();
	{
		if (sbx_job.copy_stage)
			sbx_copy_snapshot();
		else if (sbx_job.snapshot_id != 0)
			sbx_adopt_copy();
		else
			sbx_fill_sandbox();
		sbx_report(true, 0, NULL, NULL, NULL);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(TopMemoryContext);
		edata = CopyErrorData();
		FlushErrorState();
		sbx_report(false,
				   edata->sqlerrcode ? edata->sqlerrcode : ERRCODE_INTERNAL_ERROR,
				   sbx_redact(edata->message ? edata->message : "", sbx_secrets),
				   edata->detail ? sbx_redact(edata->detail, sbx_secrets) : NULL,
				   edata->hint ? sbx_redact(edata->hint, sbx_secrets) : NULL);
	}
	PG_END_TRY();

	proc_exit(0);
}
