/*-------------------------------------------------------------------------
 *
 * sbx_common.h
 *	  What every part of pgsandbox shares: its limits and names, its
 *	  settings, which version of the catalog it serves, and a database's
 *	  encoding and locale.
 *
 * Each header declares what the files of one layer (src/<layer>/) define.
 * The common layer: this one, sbx_roles.h (who may do what), sbx_spi.h
 * (the catalog transactions of background workers), sbx_schedule.h and
 * sbx_conn.h (connections, source catalogs, child processes).  The others:
 * sbx_shmem.h (the request queue and shared memory), sbx_masking.h and
 * pii.h, sbx_clone.h (the clone worker), sbx_worker.h (the lifecycle
 * worker), sbx_hooks.h (the hooks a backend runs) and sbx_api.h (what the
 * SQL functions share).
 *
 *-------------------------------------------------------------------------
 */
#ifndef SBX_COMMON_H
#define SBX_COMMON_H

#include "datatype/timestamp.h"
#include "lib/stringinfo.h"
#include "nodes/pg_list.h"
#include "utils/guc.h"

#include "pg_compat.h"

/* Limits of what travels through shared memory. */
#define SBX_LABELS_MAX			4096	/* text form of the labels object */
#define SBX_CONNINFO_MAX		2048	/* a source's connection string */
#define SBX_PASSWORD_LEN		32		/* characters of a sandbox password */
#define SBX_MESSAGE_MAX			1024	/* an error's message (bounded_text.c) */
#define SBX_DETAIL_MAX			4096	/* an error's detail */
#define SBX_COPY_HOW_MAX		256
#define SBX_SCHEDULE_MAX		128		/* text of a snapshot schedule */
#define SBX_RULES_MAX			16384	/* a source's rules, packed for a job */
#define SBX_NOTES_MAX			16384	/* a clone job's notes, for its event */
#define SBX_HINT_MAX			2048	/* an error's hint, carried to its caller */
#define SBX_TRUSTED_MAX			1024	/* a source's trusted owners, as text[] */
#define SBX_DIGEST_MAX			64		/* "<objects>:<md5>" of a database */
#define SBX_MAX_CLONE_JOBS		64		/* upper bound of max_concurrent_clones */
#define SBX_NAME_PREFIX			"sbx_"
#define SBX_RESET_SUFFIX		"_reset"	/* a reset's new database */
#define SBX_OLD_SUFFIX			"_old"	/* the one it replaced */
#define SBX_SANDBOX_GROUP		"pgsandbox_sandbox"

/*
 * How a new sandbox role joins SBX_SANDBOX_GROUP (%s its quoted name): from
 * PostgreSQL 16 on, without the right to SET ROLE to the group, which
 * needs none of its members' rights.  The hooks hold a session to its
 * login's rules whatever role it becomes (login_check.c); this closes the
 * door as well.
 */
#if PG_VERSION_NUM >= 160000
#define SBX_SANDBOX_MEMBERSHIP	"GRANT " SBX_SANDBOX_GROUP " TO %s WITH SET FALSE"
#else
#define SBX_SANDBOX_MEMBERSHIP	"GRANT " SBX_SANDBOX_GROUP " TO %s"
#endif
#define SBX_ADMIN_GROUP			"pgsandbox_admin"
#define SBX_USER_GROUP			"pgsandbox_user"
#define SBX_READER_ROLE			"pgsandbox_reader"	/* reads local sources */
#define SBX_LIVE_ROLE			"pgsandbox_live"	/* owns live subscriptions */
#define SBX_WORKER_ACTOR		"pgsandbox worker"
#define SBX_TMP_DIR				"pgsandbox_tmp" /* in the data directory */

/* defaults of the copy settings, chosen by bench/cold_path.sh */
#define SBX_DEFAULT_CLONE_JOBS			2
#define SBX_DEFAULT_PARALLEL_MIN_SIZE	128		/* MB */
#define SBX_DEFAULT_BULK_COPY_MIN_SIZE	64		/* MB */
#define SBX_DEFAULT_FILE_COPY_MIN_SIZE	256		/* MB */

/* settings (settings.c) */
extern char *sbx_database;
extern int	sbx_gc_interval;
extern int	sbx_default_ttl;
extern int	sbx_max_ttl;
extern int	sbx_max_protect;
extern int	sbx_max_concurrent_clones;
extern char *sbx_host;
extern int	sbx_port;
extern char *sbx_bin_dir;
extern int	sbx_max_sandboxes;
extern int	sbx_max_sandboxes_per_owner;
extern int	sbx_max_saves_per_sandbox;
extern bool sbx_locale_fallback;
extern int	sbx_copy_strategy;
extern int	sbx_default_idle_timeout;
extern int	sbx_max_total_size;		/* MB; 0: off */
extern int	sbx_max_size_per_owner; /* MB; 0: off */
extern int	sbx_max_sandbox_size;	/* MB; 0: off */
extern int	sbx_size_check_interval;
extern bool sbx_read_only_setting;	/* pgsandbox.read_only */
extern int	sbx_lock_timeout;		/* ms */
extern int	sbx_copy_lock_wait;		/* ms: a copy waits out its template's locks */
extern int	sbx_live_catchup_timeout;	/* ms */
extern int	sbx_live_max_lag;	/* s */
extern int	sbx_live_look_interval;	/* ms */
extern char *sbx_dump_compression;	/* pg_dump's --compress */
extern int	sbx_clone_jobs;			/* jobs of a parallel dump and restore */
extern int	sbx_parallel_min_size;	/* MB: a smaller source streams */
extern int	sbx_bulk_copy_min_size;	/* MB: -1 never copies a table by the worker */
extern int	sbx_file_copy_min_size; /* MB: auto's FILE_COPY; -1: never */

/* a setting and its value: a source database's, or one a role is given */
typedef struct SbxSetting
{
	char	   *name;
	char	   *value;
} SbxSetting;

/* what one sandbox may take of the server (tenant_settings.c) */
extern int	sbx_max_connections_per_sandbox;
extern int	sbx_reserved_connections;
extern int	sbx_sandbox_temp_file_limit;	/* kB; -1: none */
extern int	sbx_max_prepared_per_sandbox;
extern int	sbx_max_prepared_age;	/* s; 0: off */
extern int	sbx_max_transaction_age;	/* s; 0: off */
extern char *sbx_sandbox_settings;
extern void sbx_define_tenant_settings(void);
extern List *sbx_parse_sandbox_settings(const char *value, char **error);
extern int	sbx_prepared_cap(void);

typedef enum SbxCopyStrategy
{
	SBX_COPY_WAL_LOG,
	SBX_COPY_FILE_COPY,
	SBX_COPY_AUTO
} SbxCopyStrategy;

extern void sbx_define_settings(void);
extern const char *sbx_effective_host(void);
extern const char *sbx_local_socket_host(void);
extern int	sbx_effective_port(void);
extern const char *sbx_effective_bin_dir(void);

/* what every SQL function checks first (sql_checks.c) */
struct FunctionCallInfoBaseData;
extern void sbx_require_arg(struct FunctionCallInfoBaseData *fcinfo, int n,
							const char *argname);

/* the catalog's version, and SQL that differs between versions (catalog_level.c) */
extern bool sbx_catalog_has_kinds(void);
extern const char *sbx_if_kinds(const char *fragment);
extern bool sbx_catalog_has_generations(void);
extern bool sbx_catalog_has_protection(void);
extern bool sbx_catalog_has_usage(void);
extern bool sbx_catalog_has_saves(void);
extern bool sbx_catalog_has_dropping(void);
extern bool sbx_catalog_has_reduced(void);
extern bool sbx_catalog_has_trust(void);
extern bool sbx_catalog_has_key_masks(void);
extern bool sbx_catalog_has_tenants(void);
extern bool sbx_catalog_has_digests(void);
extern bool sbx_catalog_has_orphans(void);
extern bool sbx_catalog_has_live(void);
extern bool sbx_catalog_has_live_state(void);
extern const char *sbx_same_source_sql(void);
extern bool sbx_catalog_has_rules(void);
extern const char *sbx_if_rules(const char *fragment, const char *otherwise);
extern const char *sbx_current_snapshots_cte(void);

/* text into the fixed buffers of shared memory (bounded_text.c) */
extern void sbx_copy_bounded(char *dst, size_t size, const char *src);

/*
 * A database's encoding and locale, as pg_database records them; empty
 * strings when not known.
 */
typedef struct SbxLocale
{
	char		encoding[NAMEDATALEN];
	char		collate[NAMEDATALEN];
	char		ctype[NAMEDATALEN];
	char		provider;		/* 'c' libc, 'i' ICU, 'b' builtin (17+), '\0'
								 * not known */
	char		icu_locale[NAMEDATALEN];	/* the ICU or builtin provider's
											 * locale (datlocale from 17) */
} SbxLocale;

/* libpq's connection and result, for the layers that pass them around */
typedef struct pg_conn PGconn;
typedef struct pg_result PGresult;

/* starting dynamic workers of this module (dynworker.c) */
struct BackgroundWorker;
struct BackgroundWorkerHandle;
extern struct BackgroundWorkerHandle *sbx_start_dynamic_worker(const char *function,
															   const char *type,
															   const char *name,
															   Datum arg,
															   const void *extra,
															   Size extra_len);
extern bool sbx_dynamic_worker_stopped(struct BackgroundWorkerHandle *handle);

#endif							/* SBX_COMMON_H */
