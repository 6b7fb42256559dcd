/*-------------------------------------------------------------------------
 *
 * sbx_shmem.h
 *	  The request queue and the rest of pgsandbox's shared memory: the
 *	  requests SQL functions hand the lifecycle worker, the clone jobs it
 *	  hands clone workers, their progress, and the logins noted for idle
 *	  expiry.
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
#ifndef SBX_SHMEM_H
#define SBX_SHMEM_H

#include "storage/latch.h"
#include "storage/lwlock.h"

#include "sbx_common.h"

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
	SBX_REQ_PROTECT,			/* protect, or unprotect */
	SBX_REQ_RESET,				/* put a sandbox back in place */
	SBX_REQ_SAVE,				/* keep a sandbox's state as a save */
	SBX_REQ_DROP_SAVE
} SbxRequestKind;

/* requests that need a clone job */
#define SBX_REQ_NEEDS_JOB(kind) \
	((kind) == SBX_REQ_CLONE || (kind) == SBX_REQ_SNAPSHOT || \
	 (kind) == SBX_REQ_RESET || (kind) == SBX_REQ_SAVE)

/*
 * What a row of the sandbox table is (its kind column), and so what a clone
 * job makes: a sandbox for a caller, a snapshot of a source that later
 * clones copy, or a pool member waiting to be handed out.
 */
typedef enum SbxCopyKind
{
	SBX_KIND_SANDBOX,
	SBX_KIND_SNAPSHOT,
	SBX_KIND_POOL,
	SBX_KIND_SAVE				/* a sandbox's state, kept to reset to or
								 * clone from */
} SbxCopyKind;

extern const char *const sbx_kind_names[];	/* "sandbox", ..., "save" */

/* How far a clone job has come, for the progress view. */
typedef enum SbxPhase
{
	SBX_PHASE_QUEUED,
	SBX_PHASE_CREATING,			/* role and database */
	SBX_PHASE_COPYING,			/* CREATE DATABASE ... TEMPLATE snapshot */
	SBX_PHASE_EXTENSIONS,
	SBX_PHASE_DUMPING,			/* pg_dump to an archive */
	SBX_PHASE_RESTORING,		/* pg_restore (with pg_dump, when streaming) */
	SBX_PHASE_FINISHING,		/* configuration rows, settings, ownership */
	SBX_PHASE_CATCHING_UP		/* a copy of a live snapshot waits for its
								 * apply: total is the source's WAL it had
								 * left to apply */
} SbxPhase;

extern const char *const sbx_phase_names[];

/*
 * The moments of a clone, for its 'ready' event (clone_jobs.c): set by the
 * caller (queued), the lifecycle worker and the clone workers; 0 for a step
 * the clone did not take.
 */
typedef enum SbxStep
{
	SBX_STEP_QUEUED,			/* the request entered the queue */
	SBX_STEP_TAKEN,				/* the lifecycle worker took it */
	SBX_STEP_CREATED,			/* role and database made */
	SBX_STEP_WORKER,			/* the clone worker began */
	SBX_STEP_SOURCE_READ,		/* the source's catalog read, extensions made */
	SBX_STEP_DUMP_STARTED,		/* pg_dump started */
	SBX_STEP_DUMPED,			/* pg_dump done (through an archive) */
	SBX_STEP_RESTORED,			/* pg_restore done */
	SBX_STEP_COPIED,			/* a snapshot's CREATE DATABASE done */
	SBX_STEP_OWNED,				/* a copy's objects its role's, settings made */
	SBX_STEP_VERIFIED,			/* checked against its source or template */
	SBX_STEP_FINISHED,			/* configuration rows, settings, ownership */
	SBX_STEP_COLLECTED,			/* the lifecycle worker saw the worker report */
	SBX_STEP_MEASURED,			/* the catalog row marked ready, size measured */
	SBX_STEP_COUNT
} SbxStep;

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
	Oid			caller;			/* the role asking (roles.c) */
	bool		caller_is_admin;
	char		actor[NAMEDATALEN]; /* its name */

	/* arguments */
	char		name[NAMEDATALEN];	/* DROP, EXTEND, RESET, SAVE */
	char		target[NAMEDATALEN];	/* RESET: 'start', 'latest' or a save;
										 * SAVE: its label; CLONE: a save */
	char		source[NAMEDATALEN];	/* CLONE, SNAPSHOT, DROP_SNAPSHOT */
	bool		schema_only;	/* CLONE, SNAPSHOT, DROP_SNAPSHOT */
	bool		only_if_expired;	/* DROP on behalf of gc() */
	bool		fresh;			/* CLONE: dump the live source */
	bool		statistics;		/* CLONE: with the planner's statistics */
	bool		both_kinds;		/* DROP_SNAPSHOT: schema-only and data */
	char		schedule[SBX_SCHEDULE_MAX]; /* SCHEDULE; "" unschedules */
	int			pool_size;		/* SET_POOL */
	int64		ttl_secs;		/* CLONE, EXTEND; RESET: 0 keeps the expiry */
	TimestampTz protect_until;	/* PROTECT; 0 unprotects */
	int64		idle_secs;		/* CLONE: idle timeout, 0 for none */
	int			connection_limit;	/* CLONE: a sandbox's cap of sessions, 0
									 * for the setting's */
	int64		source_bytes;	/* CLONE, SNAPSHOT: the source database's
								 * size as probed, -1 if not known */
	int			source_plain;	/* CLONE: 1 if the probe found no extension
								 * or event trigger in the source, 0 if it
								 * found one, -1 if not known */
	double		source_share;	/* CLONE: of the tables' pages, in the
								 * largest, as probed; 1 if not known */
	char		labels[SBX_LABELS_MAX]; /* CLONE */
	SbxLocale	locale;			/* CLONE: the source's, if known */

	/* outcome */
	int			sqlerrcode;		/* 0 on success */
	char		message[SBX_MESSAGE_MAX];
	char		detail[SBX_DETAIL_MAX];
	char		hint[SBX_HINT_MAX];
	bool		dropped;		/* DROP: something was dropped */
	char		result_name[NAMEDATALEN];	/* CLONE, SAVE */
	char		password[SBX_PASSWORD_LEN + 1]; /* CLONE */
	TimestampTz expires_at;		/* CLONE, EXTEND; PROTECT: its end */
	TimestampTz taken_at;		/* SNAPSHOT; RESET: the new data_as_of */
	int64		size_bytes;		/* SNAPSHOT */
	TimestampTz queued_at;		/* when the caller queued it */
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
	char		name[NAMEDATALEN];	/* the role that fills the database */
	char		dbname[NAMEDATALEN];	/* the database filled: name, but for
										 * a reset's copy */
	char		password[SBX_PASSWORD_LEN + 1];
	char		source[NAMEDATALEN];
	int64		source_generation;	/* of the source read for conninfo */
	bool		statistics;		/* dump and restore the planner's statistics */
	char		conninfo[SBX_CONNINFO_MAX];
	bool		require_password;	/* source added by a non-superuser */
	char		trusted_owners[SBX_TRUSTED_MAX];	/* the source's, as text[] */
	bool		schema_only;
	bool		locale_fallback;	/* the sandbox may differ from the
									 * source's locale */
	bool		stream_early;	/* a dump may start before the source's
								 * catalog is read: the caller's probe found
								 * no extension or event trigger */
	int64		source_bytes;	/* the source's size as probed, -1 if not
								 * known */
	char		notes[SBX_NOTES_MAX];	/* for the 'ready' event: what was
										 * left out or changed (job_notes.c) */
	int			notes_len;		/* of the notes kept, before the count of
								 * those that did not fit */
	int			notes_left_out; /* notes that did not fit */

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
	Oid			planned_dboid;	/* the OID its database is made with, recorded
								 * first (orphans.c); InvalidOid: any */
	char		copy_how[SBX_COPY_HOW_MAX]; /* the strategy the copy took, for
											 * its event */
	bool		snapshot_live;	/* the snapshot copied follows its source:
								 * its apply is paused for the copy */

	/*
	 * A live snapshot's build: the publication it follows, and the slot it
	 * makes on the source (recorded in its row first, live_slots.c).
	 */
	char		live_publication[NAMEDATALEN];
	char		live_slot[NAMEDATALEN];
	char		live_tables[SBX_DIGEST_MAX];	/* what it publishes, counted and
												 * hashed by name */
	bool		live_slot_dropped;	/* a failed build dropped its slot */

	TimestampTz data_as_of;		/* when the data was read from the source */
	char		objects_digest[SBX_DIGEST_MAX]; /* what it holds, counted and
												 * hashed (verify.c) */
	char		expected_digest[SBX_DIGEST_MAX];	/* a copy: what its
													 * template holds */

	/*
	 * The moments of the clone (SbxStep), and the clone slots it takes
	 * beyond its own: those of a parallel dump and restore, which
	 * max_concurrent_clones bounds with the jobs themselves.
	 */
	TimestampTz steps[SBX_STEP_COUNT];
	int			extra_slots;

	/*
	 * A reset of sandbox reset_of fills a new database beside the
	 * sandbox's (dbname) and swaps the names once it is ready: a copy as the
	 * sandbox's role (name = reset_of), a dump as a temporary role of the
	 * database's name, whose password no one else knows.  A save copies a
	 * sandbox (as a snapshot is copied: its database and role are
	 * snapshot_*) into a save of it.  from_save: the "snapshot" copied is a
	 * save.  origin: what a reset copies, for its event and its caller.
	 */
	bool		reset;
	char		reset_of[NAMEDATALEN];
	int64		reset_ttl_secs; /* 0 keeps the sandbox's expiry */
	int64		parent_id;		/* a save's sandbox */
	bool		from_save;
	char		origin[SBX_DETAIL_MAX / 2];

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
	char		hint[SBX_HINT_MAX];
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

/*
 * A live snapshot's apply, paused for copies of its database (live_pauses.c):
 * the first copy pauses it, the last one resumes it, and those in between
 * share the pause and its data_as_of.
 */
typedef struct SbxLivePause
{
	int64		snapshot_id;	/* 0: a free entry */
	int			copies;			/* copies that hold the pause */
	bool		paused;			/* the apply is stopped: copies may go */
	bool		resuming;		/* the last copy is resuming it: wait */
	TimestampTz as_of;			/* every change of the source before it is in */
	TimestampTz since;			/* when the apply was paused */
} SbxLivePause;

typedef struct SbxShared
{
	LWLock	   *lock;			/* protects everything below */
	pid_t		worker_pid;		/* lifecycle worker, 0 if not running */
	Latch	   *worker_latch;
	uint64		next_serial;
	int			nrequests;
	SbxCloneJob jobs[SBX_MAX_CLONE_JOBS];
	SbxProgress progress[SBX_MAX_CLONE_JOBS];
	SbxLivePause live_pauses[SBX_MAX_CLONE_JOBS];
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

/* the lifecycle worker's half */
extern List *sbx_queue_pending(void);
extern bool sbx_queue_take(int slot, bool clone_allowed, SbxRequest *copy);
extern void sbx_queue_untake(int slot, uint64 serial);
extern bool sbx_queue_answer(int slot, uint64 serial, const SbxRequest *outcome);
extern void sbx_queue_answer_error(int slot, uint64 serial, int sqlerrcode,
								   const char *message, const char *detail,
								   const char *hint);
extern bool sbx_queue_abandoned(int slot, uint64 serial);
extern void sbx_queue_fail_running(const char *message);

/*
 * when sandboxes were last logged into, for idle expiry, and what a
 * sandbox was refused, for its events (login_times.c)
 */
typedef enum SbxRefusal
{
	SBX_REFUSED_SANDBOX_SESSIONS,	/* its cap of sessions */
	SBX_REFUSED_RESERVED_SLOTS,	/* the slots reserved for the others */
	SBX_REFUSED_PREPARED,		/* its share of prepared transactions */
	SBX_NUM_REFUSALS
} SbxRefusal;

extern void sbx_usage_request_shmem(void);
extern void sbx_usage_startup_shmem(void);
extern void sbx_note_login(Oid role);
extern void sbx_note_refusal(Oid role, SbxRefusal why);

/* what the lifecycle worker does with the noted logins (login_times.c) */
extern TimestampTz sbx_pending_login(Oid role);
extern bool sbx_usage_full(void);
extern void sbx_usage_flush(void);

/* live snapshots' apply, paused for copies (live_pauses.c) */
typedef enum SbxPauseTurn
{
	SBX_PAUSE_MINE,				/* this copy pauses the apply */
	SBX_PAUSE_SHARED,			/* the apply is paused: copy now */
	SBX_PAUSE_WAIT				/* another copy is pausing or resuming it: ask again */
} SbxPauseTurn;
extern SbxPauseTurn sbx_live_pause_join(int64 snapshot_id, TimestampTz *as_of);
extern void sbx_live_pause_ready(int64 snapshot_id, TimestampTz as_of);
extern bool sbx_live_pause_leave(int64 snapshot_id, double *paused_secs);
extern void sbx_live_pause_resumed(int64 snapshot_id);

/* the metrics' counters (metrics.c) */
extern void sbx_count_clone(const char *method, double seconds);
extern void sbx_count_clone_failure(const char *method, int sqlerrcode);

/* the backend is in the database pgsandbox serves (queue.c) */
extern void sbx_check_database(void);

/* how far a clone job has come (progress.c) */
extern void sbx_progress_set(int j, SbxPhase phase, const char *name, int64 total);
extern int64 sbx_progress_total(int j);

/* clone slots and the moments of a clone (clone_jobs.c) */
extern void sbx_release_clone_slots(int j, int64 sandbox_id);
extern bool sbx_clone_under_way(const char *name);
extern char *sbx_describe_steps(const TimestampTz *steps);
extern void sbx_progress_database(int j, Oid dboid, int64 base);

/* the notes of a clone job's ready event (job_notes.c) */
extern void sbx_job_note(SbxCloneJob *job, const char *fmt,...) pg_attribute_printf(2, 3);

#endif							/* SBX_SHMEM_H */
