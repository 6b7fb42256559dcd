/*-------------------------------------------------------------------------
 *
 * sbx_worker.h
 *	  The lifecycle worker's internals: the lifecycle operations, drops and
 *	  what blocks them, snapshots, pools, resets and saves, the disk budget,
 *	  and the dynamic workers it starts.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SBX_WORKER_H
#define SBX_WORKER_H

#include "sbx_shmem.h"
#include "sbx_spi.h"

struct ErrorData;

/* the lifecycle worker (worker.c) */
extern void sbx_register_lifecycle_worker(void);
extern PGDLLEXPORT void sbx_lifecycle_worker_main(Datum main_arg);
extern PGDLLIMPORT MemoryContext sbx_worker_cxt;	/* lives as long as the worker */
extern PGDLLIMPORT bool sbx_catalog_current;	/* the catalog has snapshots (0.3) */

/* clearing what a database holds of a sandbox (janitor.c) */
extern bool sbx_janitor_start(Oid dboid, const char *name, Oid role, Oid db,
							  bool drop_grants);
extern bool sbx_janitor_start_aged(Oid dboid, const char *name,
								   TimestampTz prepared_before);
extern void sbx_janitor_wait(Oid dboid);
extern char *sbx_role_to_revoke(Oid role);
extern const char *sbx_holders_sql(void);
extern bool sbx_janitors_running(void);
extern PGDLLEXPORT void sbx_janitor_main(Datum main_arg);

/* what holds a sandbox's role or database, and clearing it (lock_holders.c) */
extern char *sbx_describe_holders(Oid role, Oid db);
extern bool sbx_clear_way(const char *name, Oid role, Oid db, bool may_defer);
extern char *sbx_record_blocked(struct ErrorData *edata, const char *name,
								const char *step, Oid role, Oid db);
pg_noreturn extern void sbx_rethrow_blocked(struct ErrorData *edata, const char *name,
								const char *step, Oid role, Oid db,
								const char *hint);
extern bool sbx_try_with_backoff(const char *key, void (*step) (void *arg), void *arg,
								 const char *what);
extern bool sbx_backoff_due(const char *what);
extern void sbx_backoff_failed(const char *what);
extern void sbx_backoff_done(const char *what);

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
	bool		live;			/* it follows its source (live.c) */
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
	int			source_plain;	/* as SbxRequest's */
	double		source_share;	/* as SbxRequest's; 0 when not probed is
								 * read as 1 */
	bool		from_save;		/* the snapshot copied is a save */
	int			connection_limit;	/* a sandbox's cap of sessions, 0 for
									 * the setting's */
} SbxCloneSpec;

/* what a drop did */
typedef enum SbxDropOutcome
{
	SBX_DROP_NOTHING,			/* not live and expired (only_if_expired) */
	SBX_DROP_DONE,
	SBX_DROP_DEFERRED			/* waits for a janitor; try again later */
} SbxDropOutcome;

/* how a clone job's sandbox gets its contents, as the catalog and metrics say */
static inline const char *
sbx_clone_method(const SbxCloneJob *job)
{
	return job->from_save ? "save" : job->snapshot_id ? "snapshot" : "dump";
}

/* sandbox lifecycle operations, run by the lifecycle worker (lifecycle.c) */
extern void sbx_check_clone_allowed(const SbxActor *by, const char *source,
									bool schema_only, SbxCloneJob *job);
extern void sbx_check_quotas(const SbxActor *by);
extern void sbx_clone_create(int j, const SbxActor *by, const SbxCloneSpec *spec,
							SbxCloneJob *job);
extern void sbx_clone_secure(int j, SbxCloneJob *job);
extern TimestampTz sbx_clone_ready(SbxCloneJob *job, const char *actor,
								   double seconds);
extern void sbx_clone_fail(int64 sandbox_id, const char *reason,
						   const char *action, const char *actor);
extern void sbx_pick_name(char *name);
extern void sbx_record_reduced(int64 id, int64 copied, bool reduced);
extern void sbx_create_role(SbxCloneJob *job);
extern void sbx_secure_database(SbxCloneJob *job, int64 *size);
extern char *sbx_locale_options(const SbxCloneSpec *spec, SbxCloneJob *job);
/* drops, and finishing those that were blocked (drop.c) */
extern bool sbx_drop_resources(const char *name, const char *role_oid,
							   const char *db_oid, bool may_defer);
extern bool sbx_drop_role(const char *name, const char *role_oid);
extern bool sbx_drop_one_leftover_role(void);
extern void sbx_drop_side_database(const char *name, const char *role_oid,
								   const char *reset_role, const char *keep);
extern void sbx_drop_reset_leftovers(const char *name, const char *role_oid,
									 const char *db_oid);
extern SbxDropOutcome sbx_drop(const char *name, const SbxActor *by,
							   bool only_if_expired, bool may_defer,
							   const char *action);
extern bool sbx_reap_one(const char *name);
extern TimestampTz sbx_protect(const char *name, const SbxActor *by,
							   TimestampTz until);
extern TimestampTz sbx_extend(const char *name, const SbxActor *by,
							  int64 ttl_secs);
extern bool sbx_drop_first_found(const char *sql);
extern List *sbx_expired_sandboxes(void);

/* reconciliation at start, and of what failed since (reconcile.c) */
extern void sbx_end_orphan_clone_workers(void);
extern List *sbx_reconcile_todo(void);
extern void sbx_reconcile_one(int64 sandbox_id);
extern void sbx_reconcile_later(int64 sandbox_id);
extern bool sbx_reconcile_pending(void);
extern void sbx_reconcile_round(void);

/* resets of sandboxes in place (reset.c) */
extern int	sbx_end_sessions(const char *name, Oid role, Oid dboid,
							 bool rollback_prepared, const char *step);
/* a live sandbox, as reset() and save() read it (reset.c) */
typedef struct SbxSandboxRow
{
	int64		id;
	char		source[NAMEDATALEN];
	bool		schema_only;
	Oid			dboid;
	Oid			owner;
	int64		size_bytes;		/* last measured, 0 if never */
	int64		origin_id;		/* the snapshot or save it was made from, 0 */
	bool		expired;
	bool		read_only;
	bool		masked;
} SbxSandboxRow;
extern void sbx_sandbox_to_change(const SbxActor *by, const char *name, const char *what,
								  SbxSandboxRow *row);
extern void sbx_reset_begin(int j, const SbxActor *by, const SbxRequest *req,
							SbxCloneJob *job);
extern TimestampTz sbx_reset_swap(const SbxCloneJob *job, const char *actor,
								  double seconds, TimestampTz *expires_at);
extern void sbx_reset_cleanup(int64 sandbox_id, bool interrupted);
extern void sbx_reset_fail(const SbxCloneJob *job, const char *reason,
						   const char *actor);

/* finding a save to copy (save_lookup.c) */
extern void sbx_ref_from_row(SbxSnapshotRef *ref);
extern bool sbx_find_save(int64 parent_id, const char *target, SbxSnapshotRef *ref);
extern void sbx_save_to_clone(const SbxActor *by, const char *name, SbxSnapshotRef *ref,
							  char *source, bool *schema_only);

/* saves of sandboxes (save.c) */
extern void sbx_drop_save(const SbxActor *by, const char *name);
extern void sbx_save_begin(int j, const SbxActor *by, const SbxRequest *req,
						   SbxCloneJob *job);
extern void sbx_save_done(const SbxCloneJob *job, const char *actor, double seconds);
extern void sbx_save_fail(const SbxCloneJob *job, const char *reason,
						  const char *actor);

/* snapshots of sources and their schedules (snapshot.c) */
extern bool sbx_snapshots_in_use(bool *pools);
extern bool sbx_current_snapshot(const char *source, bool schema_only,
								 SbxSnapshotRef *ref);
extern int64 sbx_snapshot_done(const SbxCloneJob *job, double seconds);
extern void sbx_lock_copy_source(const char *name);
extern void sbx_plan_update(const SbxActor *by, const SbxRequest *req);
extern void sbx_plan_locale(const char *source, bool schema_only, SbxLocale *locale);
extern void sbx_retire_snapshots(const SbxActor *by, const char *source,
								 bool both_kinds, bool schema_only);
extern bool sbx_drop_one_retired(void);
extern bool sbx_scheduled_build_due(void);
extern bool sbx_next_scheduled_build(char *source, bool *schema_only);

/* pools of ready sandboxes (pool.c) */
extern bool sbx_pool_handout(const SbxActor *by, const SbxRequest *req,
							 SbxRequest *outcome);
extern bool sbx_pool_drop_one_stale(void);
extern bool sbx_pool_next_fill(char *source, bool *schema_only, bool *need_snapshot);

/* the disk budget and read-only sandboxes (disk_budget.c) */
extern int64 sbx_expected_size(const SbxCloneSpec *spec);
extern void sbx_check_budget(const SbxActor *by, SbxCopyKind kind,
							 int64 expected, bool adds_to_total);
extern bool sbx_budget_allows(int64 expected);
extern void sbx_measure_sizes(void);

/* the OIDs of the databases it makes, and what a crash left of them (orphans.c) */
extern Oid	sbx_plan_database_oid(int64 id);
extern char *sbx_database_oid_clause(Oid oid);
extern int64 sbx_directory_bytes(const char *path);
extern void sbx_remove_orphan_directories(void);
extern const char *sbx_orphan_bytes_sql(void);

/* what a finished clone holds, for the catalog (lifecycle.c) */
extern void sbx_record_clone_digest(void *job);

/* a sandbox's share of the server (tenants.c) */
extern char *sbx_give_tenant_limits(int64 id);
extern void sbx_tenants_check(void);
extern long sbx_tenants_interval(void);

/* the clone jobs the lifecycle worker runs (jobs.c) */
extern void sbx_answer_with(int slot, uint64 serial, struct ErrorData *edata);
extern void sbx_undo_job_quietly(const SbxCloneJob *job, const char *reason,
								 const char *actor);
extern void sbx_progress_start(int j, const SbxActor *by, const SbxCloneSpec *spec);
extern void sbx_launch_job(int j, SbxCloneJob *job, int slot, uint64 serial,
						   const SbxActor *by);
extern void sbx_forget_job(int j, int64 sandbox_id);
extern int	sbx_job_slots(int j);
extern bool sbx_job_running(int j);
extern int	sbx_running_jobs(int *background);
extern int	sbx_free_clone_job(void);
extern bool sbx_clone_start(int j, int slot, uint64 serial, const SbxActor *by,
							const SbxCloneSpec *spec);
extern bool sbx_start_snapshot(int j, int slot, uint64 serial, const SbxActor *by,
							   const char *source, bool schema_only,
							   const SbxLocale *probed, int64 source_bytes,
							   double source_share);
extern int	sbx_check_jobs(void);

/* serving the request queue (requests.c) */
extern void sbx_serve_requests(bool ready, int running);
extern void sbx_serve_parked(void);
extern bool sbx_drop_parked(const char *name);
extern bool sbx_drops_parked(void);
extern void sbx_answer_serving(struct ErrorData *edata);

/* live snapshots, as the worker keeps them (live.c) */
extern void sbx_lock_live_snapshot(const char *name, int64 id, const char *tables);
extern bool sbx_live_next_build(char *source);
extern bool sbx_live_step(void);
extern void sbx_live_detach_database(Oid dboid, const char *name);
extern void sbx_live_forget_slot(int64 sandbox_id);

/* the lifecycle worker's timers (timers.c) */
extern PGDLLIMPORT bool sbx_background_waits;	/* upkeep waits for a job */
extern PGDLLIMPORT bool sbx_snapshots_may_exist;
extern PGDLLIMPORT bool sbx_pools_may_exist;
extern long sbx_run_timers(void);
extern void sbx_timers_reconciled_now(void);

#endif							/* SBX_WORKER_H */
