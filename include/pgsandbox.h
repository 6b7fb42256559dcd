/*-------------------------------------------------------------------------
 *
 * pgsandbox.h
 *	  Declarations shared by the parts of pgsandbox: settings, the request
 *	  queue in shared memory, the lifecycle worker and the clone workers.
 *
 * A caller's SQL function never does lifecycle work itself.  It puts a
 * request into a slot of the queue, wakes the lifecycle worker and waits on
 * its own latch until the slot says DONE.  The lifecycle worker owns the
 * catalog rows; for a clone it creates the role and the database and hands
 * the dump and restore to a dynamic clone worker, whose job lives in a
 * clone-job entry.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PGSANDBOX_H
#define PGSANDBOX_H

#include "datatype/timestamp.h"
#include "lib/stringinfo.h"
#include "nodes/pg_list.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
#include "utils/guc.h"

#include "pg_compat.h"

/* Limits of what travels through shared memory. */
#define SBX_LABELS_MAX			4096	/* text form of the labels object */
#define SBX_CONNINFO_MAX		2048	/* a source's connection string */
#define SBX_PASSWORD_LEN		32		/* characters of a sandbox password */
#define SBX_MESSAGE_MAX			256
#define SBX_DETAIL_MAX			1024
#define SBX_COPY_HOW_MAX		256
#define SBX_SCHEDULE_MAX		128		/* text of a snapshot schedule */
#define SBX_RULES_MAX			16384	/* a source's rules, packed for a job */
#define SBX_MAX_CLONE_JOBS		64		/* upper bound of max_concurrent_clones */
#define SBX_NAME_PREFIX			"sbx_"
#define SBX_SANDBOX_GROUP		"pgsandbox_sandbox"
#define SBX_ADMIN_GROUP			"pgsandbox_admin"
#define SBX_USER_GROUP			"pgsandbox_user"
#define SBX_WORKER_ACTOR		"pgsandbox worker"
#define SBX_TMP_DIR				"pgsandbox_tmp" /* in the data directory */

/* settings (pgsandbox.c) */
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
extern bool sbx_locale_fallback;
extern int	sbx_copy_strategy;
extern int	sbx_default_idle_timeout;
extern int	sbx_max_total_size;		/* MB; 0: off */
extern int	sbx_max_size_per_owner; /* MB; 0: off */
extern int	sbx_max_sandbox_size;	/* MB; 0: off */
extern int	sbx_size_check_interval;
extern bool sbx_read_only_setting;	/* pgsandbox.read_only */

typedef enum SbxCopyStrategy
{
	SBX_COPY_WAL_LOG,
	SBX_COPY_FILE_COPY,
	SBX_COPY_AUTO
} SbxCopyStrategy;

/* copy_method.c */
extern const char *sbx_choose_copy_method(Oid dboid, char *how, size_t howlen);

struct FunctionCallInfoBaseData;
extern void sbx_require_arg(struct FunctionCallInfoBaseData *fcinfo, int n,
							const char *argname);
extern void sbx_check_database(void);
extern bool sbx_catalog_has_kinds(void);
extern const char *sbx_if_kinds(const char *fragment);
extern bool sbx_catalog_has_generations(void);
extern bool sbx_catalog_has_protection(void);
extern bool sbx_catalog_has_usage(void);
extern const char *sbx_same_source(void);
extern const char *sbx_effective_host(void);
extern const char *sbx_local_socket_host(void);
extern int	sbx_effective_port(void);
extern const char *sbx_effective_bin_dir(void);

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

/* request queue (queue.c) */
typedef enum SbxRequestKind
{
	SBX_REQ_CLONE,
	SBX_REQ_DROP,
	SBX_REQ_EXTEND,
	SBX_REQ_SNAPSHOT,			/* take a snapshot now, waiting for it */
	SBX_REQ_DROP_SNAPSHOT,
	SBX_REQ_SCHEDULE,			/* set or clear a snapshot schedule */
	SBX_REQ_SET_POOL,
	SBX_REQ_PROTECT				/* protect, or unprotect */
} SbxRequestKind;

/* requests that need a clone job */
#define SBX_REQ_NEEDS_JOB(kind) ((kind) == SBX_REQ_CLONE || (kind) == SBX_REQ_SNAPSHOT)

/*
 * What a row of the sandbox table is (its kind column), and so what a clone
 * job makes: a sandbox for a caller, a snapshot of a source that later
 * clones copy, or a pool member waiting to be handed out.
 */
typedef enum SbxCopyKind
{
	SBX_KIND_SANDBOX,
	SBX_KIND_SNAPSHOT,
	SBX_KIND_POOL
} SbxCopyKind;

extern const char *const sbx_kind_names[];	/* "sandbox", "snapshot", "pool" */

/* How far a clone job has come, for the progress view. */
typedef enum SbxPhase
{
	SBX_PHASE_QUEUED,
	SBX_PHASE_CREATING,			/* role and database */
	SBX_PHASE_COPYING,			/* CREATE DATABASE ... TEMPLATE snapshot */
	SBX_PHASE_EXTENSIONS,
	SBX_PHASE_DUMPING,			/* pg_dump to an archive */
	SBX_PHASE_RESTORING,		/* pg_restore (with pg_dump, when streaming) */
	SBX_PHASE_FINISHING			/* configuration rows, settings, ownership */
} SbxPhase;

extern const char *const sbx_phase_names[];

typedef enum SbxSlotState
{
	SBX_SLOT_FREE = 0,
	SBX_SLOT_PENDING,			/* filled by a caller, not yet taken */
	SBX_SLOT_RUNNING,			/* taken by the lifecycle worker */
	SBX_SLOT_DONE				/* outcome written, caller may read it */
} SbxSlotState;

typedef struct SbxRequest
{
	SbxSlotState state;
	bool		abandoned;		/* the caller stopped waiting */
	SbxRequestKind kind;
	uint64		serial;			/* distinguishes reuses of the slot */
	Latch	   *caller_latch;
	Oid			caller;			/* the role asking (access.c) */
	bool		caller_is_admin;
	char		actor[NAMEDATALEN]; /* its name */

	/* arguments */
	char		name[NAMEDATALEN];	/* DROP, EXTEND */
	char		source[NAMEDATALEN];	/* CLONE, SNAPSHOT, DROP_SNAPSHOT */
	bool		schema_only;	/* CLONE, SNAPSHOT, DROP_SNAPSHOT */
	bool		only_if_expired;	/* DROP on behalf of gc() */
	bool		fresh;			/* CLONE: dump the live source */
	bool		statistics;		/* CLONE: with the planner's statistics */
	bool		both_kinds;		/* DROP_SNAPSHOT: schema-only and data */
	char		schedule[SBX_SCHEDULE_MAX]; /* SCHEDULE; "" unschedules */
	int			pool_size;		/* SET_POOL */
	int64		ttl_secs;		/* CLONE, EXTEND */
	TimestampTz protect_until;	/* PROTECT; 0 unprotects */
	int64		idle_secs;		/* CLONE: idle timeout, 0 for none */
	int64		source_bytes;	/* CLONE, SNAPSHOT: the source database's
								 * size as probed, -1 if not known */
	char		labels[SBX_LABELS_MAX]; /* CLONE */
	SbxLocale	locale;			/* CLONE: the source's, if known */

	/* outcome */
	int			sqlerrcode;		/* 0 on success */
	char		message[SBX_MESSAGE_MAX];
	char		detail[SBX_DETAIL_MAX];
	bool		dropped;		/* DROP: something was dropped */
	char		result_name[NAMEDATALEN];	/* CLONE */
	char		password[SBX_PASSWORD_LEN + 1]; /* CLONE */
	TimestampTz expires_at;		/* CLONE, EXTEND; PROTECT: its end */
	TimestampTz taken_at;		/* SNAPSHOT */
	int64		size_bytes;		/* SNAPSHOT */
	int			clone_job;		/* CLONE while running: job index or -1 */
	int64		sandbox_id;		/* CLONE while running */
} SbxRequest;

/* What a clone worker needs, and what it reports back. */
typedef struct SbxCloneJob
{
	bool		in_use;
	SbxCopyKind kind;			/* what the job makes */
	int			request;		/* index of the request slot, -1 if no
								 * caller waits for this clone */
	uint64		request_serial; /* the request's serial in that slot */
	int64		sandbox_id;
	Oid			dboid;
	char		name[NAMEDATALEN];	/* database and role */
	char		password[SBX_PASSWORD_LEN + 1];
	char		source[NAMEDATALEN];
	int64		source_generation;	/* of the source read for conninfo */
	bool		statistics;		/* dump and restore the planner's statistics */
	char		conninfo[SBX_CONNINFO_MAX];
	bool		require_password;	/* source added by a non-superuser */
	bool		schema_only;
	bool		locale_fallback;	/* the sandbox may differ from the
									 * source's locale */
	char		notes[SBX_DETAIL_MAX];	/* for the 'ready' event: what was
										 * left out or changed */

	/*
	 * A copy of a snapshot: its database and the role owning its objects.
	 * copy_stage: the database is still to be copied (by a clone worker
	 * connected to pgsandbox.database), before a second one adopts it.
	 */
	int64		snapshot_id;	/* 0 for a dump of the source */
	Oid			snapshot_dboid;
	char		snapshot_name[NAMEDATALEN];
	char		snapshot_role[NAMEDATALEN];
	bool		copy_stage;
	char		copy_how[SBX_COPY_HOW_MAX]; /* the strategy the copy took, for
											 * its event */

	TimestampTz data_as_of;		/* when the data was read from the source */

	/*
	 * A data clone's masking rules, packed by sbx_read_rules (rules.c), and
	 * the source's rules_version they are; masked: rules apply to its rows
	 * (for a copy, they applied to its snapshot's).
	 */
	int			rules_version;
	bool		masked;
	int			rules_encoding; /* of their text: the admin database's */
	char		rules[SBX_RULES_MAX];

	/* written by the clone worker before it exits */
	bool		finished;
	bool		ok;
	int			sqlerrcode;
	char		message[SBX_MESSAGE_MAX];
	char		detail[SBX_DETAIL_MAX];
} SbxCloneJob;

/*
 * A clone job's progress, for the progress view: written by the lifecycle
 * worker as it creates the role and the database, then by the clone worker.
 */
typedef struct SbxProgress
{
	bool		active;
	SbxCopyKind kind;
	SbxPhase	phase;
	char		name[NAMEDATALEN];
	char		source[NAMEDATALEN];
	Oid			owner;			/* the role that asked, InvalidOid for the
								 * worker's own jobs */
	Oid			dboid;			/* the database being filled, once known */
	int64		base;			/* its size when it was created, empty */
	int64		total;			/* bytes to copy, -1 if not known */
	TimestampTz started;
} SbxProgress;

typedef struct SbxShared
{
	LWLock	   *lock;			/* protects everything below */
	pid_t		worker_pid;		/* lifecycle worker, 0 if not running */
	Latch	   *worker_latch;
	uint64		next_serial;
	int			nrequests;
	SbxCloneJob jobs[SBX_MAX_CLONE_JOBS];
	SbxProgress progress[SBX_MAX_CLONE_JOBS];
	SbxRequest	requests[FLEXIBLE_ARRAY_MEMBER];
} SbxShared;

extern SbxShared *sbx_shared;

/* the caller's half of the queue protocol */
extern void sbx_queue_request_shmem(void);
extern void sbx_queue_startup_shmem(void);
extern SbxShared *sbx_queue_attach(void);
extern int	sbx_queue_submit(const SbxRequest *req);
extern void sbx_queue_wait(int slot, SbxRequest *result);
extern void sbx_queue_wake_worker(void);

/* asking the lifecycle worker from a SQL function (requests.c) */
extern void sbx_init_request(SbxRequest *req, SbxRequestKind kind);
extern void sbx_run_request(SbxRequest *req, SbxRequest *result);
extern void sbx_probe_source(const char *source, SbxRequest *req);
extern void sbx_check_request_source(const SbxRequest *req, bool check_data);

/* the lifecycle worker's half */
extern List *sbx_queue_pending(void);
extern bool sbx_queue_take(int slot, bool clone_allowed, SbxRequest *copy);
extern void sbx_queue_untake(int slot, uint64 serial);
extern bool sbx_queue_answer(int slot, uint64 serial, const SbxRequest *outcome);
extern void sbx_queue_answer_error(int slot, uint64 serial, int sqlerrcode,
								   const char *message, const char *detail);
extern bool sbx_queue_abandoned(int slot, uint64 serial);
extern void sbx_queue_fail_running(const char *message);

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

/* lifecycle worker (worker.c) and clone worker (clone_worker.c) */
extern void sbx_register_lifecycle_worker(void);
extern PGDLLEXPORT void sbx_lifecycle_worker_main(Datum main_arg);
struct ErrorData;
extern struct ErrorData *sbx_catch_error(MemoryContext cxt);
extern PGDLLEXPORT void sbx_clone_worker_main(Datum main_arg);

/* rolling back a sandbox's prepared transactions (janitor.c) */
extern bool sbx_janitor_start(Oid dboid, const char *name);
extern void sbx_janitor_wait(Oid dboid);
extern bool sbx_janitors_running(void);
extern PGDLLEXPORT void sbx_janitor_main(Datum main_arg);

/*
 * Who a lifecycle operation acts for: the role (checked for ownership
 * unless it is an admin) and the name the event log records.
 */
typedef struct SbxActor
{
	Oid			role;
	bool		is_admin;
	const char *name;
} SbxActor;

/* the lifecycle worker acting on its own: an admin, on live sandboxes */
extern const SbxActor sbx_worker_actor;

/* a ready snapshot, as a copy of it needs to know it */
typedef struct SbxSnapshotRef
{
	int64		id;
	char		name[NAMEDATALEN];	/* its database */
	Oid			dboid;
	char		role[NAMEDATALEN];	/* the role that owns its objects */
	TimestampTz data_as_of;
	int64		size_bytes;
} SbxSnapshotRef;

/* what to clone, and for how long */
typedef struct SbxCloneSpec
{
	SbxCopyKind kind;
	const char *source;
	bool		schema_only;
	int64		ttl_secs;
	const char *labels;			/* text form of a jsonb object */
	const SbxLocale *locale;	/* the source's, or NULL if not known */
	const SbxSnapshotRef *snapshot; /* the snapshot to copy, NULL to dump */
	bool		statistics;		/* a dump with the planner's statistics */
	int64		idle_secs;		/* a sandbox's idle timeout, 0 for none */
	int64		source_bytes;	/* the source's size, -1 if not known */
} SbxCloneSpec;

/* what a drop did */
typedef enum SbxDropOutcome
{
	SBX_DROP_NOTHING,			/* not live and expired (only_if_expired) */
	SBX_DROP_DONE,
	SBX_DROP_DEFERRED			/* waits for a janitor; try again later */
} SbxDropOutcome;

/* the lifecycle worker's catalog work (worker_spi.c) */
extern MemoryContext sbx_outer_cxt;
extern char *sbx_keep(const char *s);
extern void sbx_xact_begin(const char *activity);
extern void sbx_xact_commit(void);
extern int	sbx_spi(const char *sql, int expect, int nargs, const char *const *args);
extern char *sbx_spi_text(int row, int col);
extern List *sbx_keep_column(int col);
extern void sbx_log_event(const char *sandbox, const char *action,
						  const char *actor, const char *detail);
extern void sbx_run_utility(const char *sql, const char *password_secret);
extern void sbx_run_utility_xact(const char *sql, const char *activity);
extern void sbx_random_string(char *out, int n, const char *alphabet);
#define SBX_PASSWORD_ALPHABET \
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

/* sandbox lifecycle operations, run by the lifecycle worker (lifecycle.c) */
extern void sbx_progress_set(int j, SbxPhase phase, const char *name, int64 total);
extern void sbx_check_clone_allowed(const SbxActor *by, const char *source,
									bool schema_only, SbxCloneJob *job);
extern void sbx_check_quotas(const SbxActor *by);
extern void sbx_clone_begin(int j, const SbxActor *by, const SbxCloneSpec *spec,
							SbxCloneJob *job);
extern void sbx_clone_secure(int j, SbxCloneJob *job);
extern TimestampTz sbx_clone_ready(const SbxCloneJob *job, const char *actor,
								   double seconds);
extern void sbx_clone_fail(int64 sandbox_id, const char *reason,
						   const char *action, const char *actor);
extern SbxDropOutcome sbx_drop(const char *name, const SbxActor *by,
							   bool only_if_expired, bool may_defer,
							   const char *action);
extern TimestampTz sbx_protect(const char *name, const SbxActor *by,
							   TimestampTz until);
extern TimestampTz sbx_extend(const char *name, const SbxActor *by,
							  int64 ttl_secs);
extern bool sbx_drop_first_of(List *ids, List *reasons);
extern List *sbx_expired_sandboxes(void);
extern List *sbx_reconcile_todo(void);
extern void sbx_reconcile_one(int64 sandbox_id);

/* snapshots of sources and their schedules (snapshot.c) */
extern bool sbx_snapshots_in_use(bool *pools);
extern const char *sbx_snapshot_rules_current(void);
extern bool sbx_current_snapshot(const char *source, bool schema_only,
								 SbxSnapshotRef *ref);
extern int64 sbx_snapshot_done(const SbxCloneJob *job, double seconds);
extern void sbx_plan_update(const SbxActor *by, const SbxRequest *req);
extern void sbx_plan_locale(const char *source, bool schema_only, SbxLocale *locale);
extern void sbx_retire_snapshots(const SbxActor *by, const char *source,
								 bool both_kinds, bool schema_only);
extern bool sbx_drop_one_retired(void);
extern bool sbx_next_scheduled_build(char *source, bool *schema_only);

/* pools of ready sandboxes (pool.c) */
extern bool sbx_pool_handout(const SbxActor *by, const SbxRequest *req,
							 SbxRequest *outcome);
extern bool sbx_pool_drop_one_stale(void);
extern bool sbx_pool_next_fill(char *source, bool *schema_only, bool *need_snapshot);

/* snapshot schedules (schedule.c) */
typedef struct SbxSchedule
{
	int64		interval_secs;	/* > 0 for 'N seconds' / 'N minutes'; 0 for cron */
	uint64		minutes;		/* bit i: minute i allowed */
	uint32		hours;
	uint32		days;			/* bit d: day of month d (1..31) */
	uint16		months;			/* bit m: month m (1..12) */
	uint8		weekdays;		/* bit w: 0 = Sunday .. 6 */
	bool		days_star;		/* day-of-month field began with '*' */
	bool		weekdays_star;
} SbxSchedule;

extern void sbx_schedule_parse(const char *text, SbxSchedule *schedule);
extern TimestampTz sbx_schedule_next(const SbxSchedule *schedule, TimestampTz after);

/* access control (access.c) */
extern Oid	sbx_caller(void);
extern bool sbx_is_admin(Oid role);
extern void sbx_require_admin(void);
extern bool sbx_may_clone(Oid role, bool is_admin, const char *source);
pg_noreturn extern void sbx_report_source_denied(const char *source, bool is_admin);
pg_noreturn extern void sbx_report_data_denied(const char *source);
extern void sbx_install_login_check(void);
extern void sbx_install_read_only_check(void);
extern void sbx_harden_session(void);

/* logging into sandboxes and sources from a backend (sandbox_conn.c) */
typedef struct pg_conn PGconn;
extern PGconn *sbx_sandbox_connect(const char *name, char **source);
extern PGconn *sbx_sandbox_login(const char *name, const char *password);
extern PGconn *sbx_source_connect(const char *source);
typedef struct pg_result PGresult;
extern char *sbx_remote_error(PGconn *conn, const PGresult *res);
extern char *sbx_remote_value(PGconn *conn, const char *query, const char *what);
extern int	sbx_remote_sqlstate(const PGresult *res);
extern char *sbx_remote_message(PGconn *conn, const PGresult *res);
extern PGresult *sbx_remote_exec(PGconn *conn, const char *sql, int nparams,
								 const char *const *params, int expect,
								 const char *failure);
extern char *sbx_remote_quote_ident(const char *name);
extern char *sbx_remote_quote_qualified(const char *schema, const char *name);

/* connecting to sources (source_conn.c) */
extern PGconn *sbx_source_try_connect(const char *name, const char *conninfo,
									  bool require_password, int connect_timeout,
									  int *sqlerrcode, char **message,
									  char **detail);
extern PGconn *sbx_source_open(const char *name, const char *conninfo,
							   bool require_password);

/* what a clone reads from its source's catalog (source_info.c) */
typedef struct SbxExtension
{
	Oid			oid;			/* in the source */
	char	   *name;
	char	   *schema;
	Oid			schema_oid;		/* in the source */
	bool		made_schema;	/* we created the schema for it */
} SbxExtension;

/* an extension's configuration table or sequence (pg_extension.extconfig) */
typedef struct SbxConfigRel
{
	Oid			oid;			/* in the source */
	char	   *schema;
	char	   *name;
	char		relkind;
	char	   *condition;		/* pg_extension.extcondition, "" if none */
	char	   *columns;		/* quoted, comma-separated; tables only */
} SbxConfigRel;

/* a setting of the source database for all roles */
typedef struct SbxSetting
{
	char	   *name;
	char	   *value;
} SbxSetting;

/* an event trigger of the source, which no sandbox role can own */
typedef struct SbxEventTrigger
{
	Oid			oid;			/* in the source */
	char	   *name;
} SbxEventTrigger;

typedef struct SbxSourceInfo
{
	List	   *extensions;		/* of SbxExtension, in creation order */
	List	   *config_rels;	/* of SbxConfigRel */
	List	   *settings;		/* of SbxSetting */
	List	   *event_triggers; /* of SbxEventTrigger */
	SbxLocale	locale;
	int64		size_bytes;		/* of the source database */
} SbxSourceInfo;

extern void sbx_read_source_locale(PGconn *conn, const char *source,
								   SbxLocale *locale);
extern SbxSourceInfo *sbx_read_source_info(PGconn *conn, const char *source);
extern void sbx_check_source_version(const char *source, int source_version);

/* which archive entries the sandbox role restores (restore_list.c) */
struct SbxMasking;
extern void sbx_filter_restore_list(const char *from, const char *to,
									const SbxSourceInfo *info,
									const struct SbxMasking *masking,
									StringInfo left_out);

/* column options of other builds left out of a restore (restore_compat.c) */
struct AlterTableStmt;
extern bool sbx_has_foreign_attoptions(struct AlterTableStmt *stmt);
extern bool sbx_strip_foreign_attoptions(struct AlterTableStmt *stmt);

/* what the sandbox role may do with its extensions (extension_access.c) */
extern void sbx_grant_extension_use(const char *rolename);

/* the source database's settings on the sandbox (db_settings.c) */
extern SbxSetting *sbx_parse_setting(const char *item);
extern void sbx_apply_database_settings(const char *dbname, const char *rolename,
										List *settings, StringInfo refused);

/* restoring configuration tables' rows as superuser (config_data.c) */
extern void sbx_copy_config_data(PGconn *conn, const char *source,
								 List *config_rels);

/* source connection strings (conninfo.c) */
typedef struct SbxConninfoParts
{
	char	   *host;
	char	   *port;
	char	   *dbname;
	char	   *user;
} SbxConninfoParts;

extern void sbx_conninfo_validate(const char *conninfo, bool trusted,
								  SbxConninfoParts *parts);
extern void sbx_conninfo_to_params(const char *conninfo, bool untrusted,
								   const char ***keywords,
								   const char ***values);
extern char **sbx_conninfo_to_env(const char *conninfo);
extern char *sbx_conninfo_password(const char *conninfo);
extern void sbx_append_conninfo_value(StringInfo buf, const char *keyword,
									  const char *value);

/* child processes (child.c) */
typedef struct SbxChild
{
	const char *label;			/* "pg_dump", "pg_restore" */
	pid_t		pid;
	int			stderr_fd;		/* read end, -1 once at EOF */
	StringInfoData err;			/* first bytes of its stderr */
	bool		exited;
	int			status;			/* wait status once exited */
} SbxChild;

extern char **sbx_child_environment(const char *conninfo, bool untrusted,
									const char *user, const char *password,
									const char *dbname);
extern void sbx_child_start(SbxChild *child, const char *label,
							char *const argv[], char *const envp[],
							int stdin_fd, int stdout_fd);
extern void sbx_children_wait(SbxChild *children, int nchildren);
extern void sbx_children_kill(SbxChild *children, int nchildren);
extern bool sbx_child_succeeded(const SbxChild *child);
extern char *sbx_child_output(const char *label, char *const argv[],
							  char *const envp[], int maxbytes);
extern bool sbx_child_broken_pipe(const SbxChild *child);
extern char *sbx_child_describe_failure(const SbxChild *child,
										const char *const *secrets);

/* masking rules (rules.c) and applying them to a data clone (masking.c) */
typedef struct SbxMaskRule
{
	char	   *target;			/* schema.table.column, quoted where needed */
	char	   *schema;
	char	   *table;
	char	   *column;
	char	   *expression;
	bool		trusted;		/* its author is a superuser: not checked */
} SbxMaskRule;

typedef struct SbxMasking SbxMasking;

extern bool sbx_catalog_has_rules(void);
extern const char *sbx_if_rules(const char *fragment, const char *otherwise);
extern bool sbx_read_rules(const char *source, SbxCloneJob *job);
extern void sbx_unpack_rules(const SbxCloneJob *job, List **masks, List **patterns);
extern void sbx_table_pattern_regex(const char *pattern, char **schema_re,
									char **table_re);
extern SbxMasking *sbx_masking_begin(PGconn *reader, const char *source,
									 List *masks, List *patterns,
									 int rules_encoding);
extern List *sbx_masking_dump_options(const SbxMasking *masking);
extern void sbx_masking_copy(SbxMasking *masking, PGconn *sandbox);
extern char *sbx_masking_summary(const SbxMasking *masking);
extern const char *sbx_masking_rules_of(const SbxMasking *masking, Oid relid);

/* the key masking expressions may hash with (mask_key.c) */
#define SBX_MASK_KEY_SETTING	"pgsandbox_mask.key"

/*
 * How a rule's expression is put into a statement, wherever it is parsed
 * or sent: parenthesized, a newline before the closing parenthesis so that
 * a line comment at its end cannot swallow what follows.
 */
#define SBX_MASK_EXPR_FORMAT	"(%s\n)"

/* what a rule of an admin who is not a superuser may use (mask_expr.c) */
extern char *sbx_mask_functions_setting;
extern const char *sbx_mask_expression_refused(const char *expression);
extern bool sbx_check_mask_functions(char **newval, void **extra, GucSource source);
extern char *sbx_mask_key(const char *source);
extern void sbx_set_mask_key(PGconn *conn, const char *source, const char *what);

/* when sandboxes were last logged into, for idle expiry (usage.c) */
extern void sbx_usage_request_shmem(void);
extern void sbx_usage_startup_shmem(void);
extern void sbx_note_login(Oid role);
extern TimestampTz sbx_pending_login(Oid role);
extern bool sbx_usage_flush_due(TimestampTz last_flush);
extern void sbx_usage_flush(void);

/* the disk budget and read-only sandboxes (disk_budget.c) */
extern int64 sbx_expected_size(const SbxCloneSpec *spec);
extern void sbx_check_budget(const SbxActor *by, SbxCopyKind kind,
							 int64 expected, bool adds_to_total);
extern bool sbx_budget_allows(int64 expected);
extern void sbx_measure_sizes(void);

/* the metrics' counters (metrics.c) */
extern void sbx_count_clone(const char *method, double seconds);
extern void sbx_count_clone_failure(const char *method, int sqlerrcode);

/* redaction (conninfo.c) */
extern char *sbx_redact(const char *text, const char *const *secrets);

#endif							/* PGSANDBOX_H */
