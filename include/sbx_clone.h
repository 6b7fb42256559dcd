/*-------------------------------------------------------------------------
 *
 * sbx_clone.h
 *	  The clone worker: the dump and restore it runs as the sandbox role,
 *	  and what it sets up in the sandbox around them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SBX_CLONE_H
#define SBX_CLONE_H

#include "sbx_conn.h"
#include "sbx_shmem.h"

/* the clone worker (clone_worker.c) */
extern PGDLLEXPORT void sbx_clone_worker_main(Datum main_arg);

/* making and copying live snapshots (live_copy.c) */
extern char *sbx_live_build_begin(SbxCloneJob *job);
extern void sbx_live_build_end(SbxCloneJob *job, bool failed);
extern void sbx_live_check_left_out(PGconn *reader, const SbxCloneJob *job,
									List *left_out);
extern void sbx_live_subscribe(SbxCloneJob *job, List *left_out);
extern void sbx_live_copy_begin(SbxCloneJob *job);
extern void sbx_live_copy_end(SbxCloneJob *job);
extern void sbx_live_copy_sequences(SbxCloneJob *job);

/* how a copy of a database is made (copy_method.c) */
extern const char *sbx_choose_copy_method(Oid dboid, char *how, size_t howlen);

/* which archive entries the sandbox role restores (restore_list.c) */
struct SbxMasking;
extern void sbx_filter_restore_list(const char *listing, const char *to,
									const SbxSourceInfo *info,
									const struct SbxMasking *masking,
									StringInfo left_out);

/* what the sandbox role may do with its extensions (extension_access.c) */
extern void sbx_grant_extension_use(const char *rolename);

/* the source database's settings on the sandbox (db_settings.c) */
extern void sbx_apply_database_settings(const char *dbname, const char *rolename,
										List *settings, StringInfo refused);

/* restoring configuration tables' rows as superuser (config_data.c) */
extern void sbx_copy_config_data(PGconn *conn, const char *source,
								 const char *trusted_owners, List *config_rels);

/* what a clone must hold before it is served (verify.c) */
extern void sbx_verify_restore(PGconn *reader, const char *source, const char *sandbox);
extern char *sbx_inventory_digest(void);
extern void sbx_verify_copy(const char *expected, const char *got, const char *copy,
							const char *of);

/* a copy of a snapshot that waits out what holds it (template_wait.c) */
extern long sbx_copy_template_waiting(const char *sql, const char *activity, Oid template,
									  char **held_by);

/* every table that held rows received some (verify_rows.c) */
extern void sbx_verify_archive_rows(PGconn *reader, const char *source, const char *dir,
									const char *listing, const char *list);
extern void sbx_verify_stream_rows(PGconn *reader, const char *source);

/* large objects the worker copies (large_objects.c) */
extern bool sbx_large_objects_by_worker(const char *conninfo, bool untrusted);
extern int64 sbx_copy_large_objects(PGconn *reader, const char *source, const char *rolename);

/* the one large table the clone worker copies itself (bulk_copy.c) */
typedef struct SbxBulkTable
{
	Oid			relid;			/* on the source */
	char	   *schema;			/* in the source's encoding */
	char	   *name;
	char	   *sql_name;		/* quoted, qualified */
	char	   *display;		/* for notes and errors */
	char	   *columns;		/* quoted, in order, no generated column */
	char	   *encoding;		/* the source's */
	char	   *reader_encoding;	/* the reader's client encoding */
	bool		copy;			/* still qualifies, in the snapshot */
	bool		builtin_types;	/* every column may go in binary */
	bool		same_major;		/* the source runs this server's major version */
	bool		binary;			/* the rows went in binary (set by the copy) */
} SbxBulkTable;

/* which of pg_dump's runs, while the reader holds the table's lock */
typedef enum SbxBulkPart
{
	SBX_BULK_ANY,				/* a dump of it all */
	SBX_BULK_BEFORE,			/* pre-data, before the rows */
	SBX_BULK_AFTER				/* the rest, without them */
} SbxBulkPart;

extern SbxBulkTable *sbx_bulk_candidate(PGconn *reader, const char *source, bool schema_only);
extern void sbx_bulk_lock(PGconn *reader, SbxBulkTable *bulk, const char *source);
extern List *sbx_bulk_dump_options(const SbxBulkTable *bulk, SbxBulkPart part);
extern int64 sbx_bulk_copy(PGconn *reader, PGconn *sandbox, SbxBulkTable *bulk,
						   const char *source);

#endif							/* SBX_CLONE_H */
