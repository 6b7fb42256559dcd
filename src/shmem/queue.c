/*-------------------------------------------------------------------------
 *
 * queue.c
 *	  The request queue in shared memory between SQL callers and the
 *	  lifecycle worker.
 *
 * There is one request slot per backend, so a caller never finds the queue
 * full.  A caller fills a free slot, marks it PENDING and sets the worker's
 * latch; the worker marks it RUNNING, later DONE, and sets the caller's
 * latch.  A caller that stops waiting (cancel, statement_timeout, exit)
 * marks its slot abandoned: the worker then undoes whatever the request had
 * started and frees the slot itself.
 *
 * A slot is reused as soon as it is free, so the worker names a request by
 * its slot and its serial together: an answer meant for a request that is
 * no longer in its slot is dropped rather than given to the next caller.
 *
 * The caller's half of the protocol comes first in this file, the
 * lifecycle worker's half after it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "sbx_common.h"
#include "sbx_shmem.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

/* how long a caller waits for a missing worker to come back */
#define SBX_WORKER_ABSENCE_MS	30000

SbxShared  *sbx_shared = NULL;

static Size
sbx_shmem_size(void)
{
	return add_size(offsetof(SbxShared, requests),
					mul_size(MaxBackends, sizeof(SbxRequest)));
}

void
sbx_queue_request_shmem(void)
{
	RequestAddinShmemSpace(sbx_shmem_size());
	RequestNamedLWLockTranche("pgsandbox", 1);
}

void
sbx_queue_startup_shmem(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	sbx_shared = ShmemInitStruct("pgsandbox", sbx_shmem_size(), &found);
	if (!found)
	{
		memset(sbx_shared, 0, sbx_shmem_size());
		sbx_shared->lock = &(GetNamedLWLockTranche("pgsandbox"))->lock;
		sbx_shared->nrequests = MaxBackends;
		sbx_shared->next_serial = 1;
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * The shared state, or an error if the module was not preloaded.
 */
SbxShared *
sbx_queue_attach(void)
{
	if (sbx_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pgsandbox is not loaded"),
				 errhint("Add pgsandbox to shared_preload_libraries and restart the server.")));
	return sbx_shared;
}

void
sbx_queue_wake_worker(void)
{
	Latch	   *latch;

	LWLockAcquire(sbx_shared->lock, LW_SHARED);
	latch = sbx_shared->worker_latch;
	LWLockRelease(sbx_shared->lock);
	if (latch)
		SetLatch(latch);
}

/*
 * Copy a request into a free slot and wake the worker.  Returns the slot.
 */
int
sbx_queue_submit(const SbxRequest *req)
{
	int			slot = -1;

	sbx_queue_attach();
	LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < sbx_shared->nrequests; i++)
	{
		if (sbx_shared->requests[i].state == SBX_SLOT_FREE)
		{
			slot = i;
			break;
		}
	}
	if (slot < 0)
	{
		LWLockRelease(sbx_shared->lock);
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many pgsandbox requests are waiting")));
	}
	memcpy(&sbx_shared->requests[slot], req, sizeof(SbxRequest));
	sbx_shared->requests[slot].state = SBX_SLOT_PENDING;
	sbx_shared->requests[slot].abandoned = false;
	sbx_shared->requests[slot].serial = sbx_shared->next_serial++;
	sbx_shared->requests[slot].caller_latch = MyLatch;
	sbx_shared->requests[slot].clone_job = -1;
	sbx_shared->requests[slot].sandbox_id = 0;
	sbx_shared->requests[slot].queued_at = GetCurrentTimestamp();
	LWLockRelease(sbx_shared->lock);

	sbx_queue_wake_worker();
	return slot;
}

/*
 * Give up a slot whose caller stops waiting: free it if the outcome is
 * already there, otherwise leave it to the worker to undo and free.
 */
static void
sbx_queue_abandon(int code, Datum arg)
{
	int			slot = DatumGetInt32(arg);
	SbxRequest *req;

	if (sbx_shared == NULL)
		return;
	LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
	req = &sbx_shared->requests[slot];
	if (req->state == SBX_SLOT_DONE)
	{
		explicit_bzero(req->password, sizeof(req->password));
		req->state = SBX_SLOT_FREE;
	}
	else if (req->state != SBX_SLOT_FREE)
		req->abandoned = true;
	LWLockRelease(sbx_shared->lock);
	sbx_queue_wake_worker();
}

/*
 * Wait until the worker has answered the request in 'slot', copy the answer
 * into *result and free the slot.  Interrupts (cancel, statement_timeout,
 * termination) are served while waiting; the slot is then abandoned.
 */
void
sbx_queue_wait(int slot, SbxRequest *result)
{
	TimestampTz worker_seen = GetCurrentTimestamp();

	PG_ENSURE_ERROR_CLEANUP(sbx_queue_abandon, Int32GetDatum(slot));
	{
		for (;;)
		{
			bool		done;
			bool		worker_running;

			LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
			done = (sbx_shared->requests[slot].state == SBX_SLOT_DONE);
			if (done)
			{
				memcpy(result, &sbx_shared->requests[slot], sizeof(SbxRequest));
				explicit_bzero(sbx_shared->requests[slot].password,
							   sizeof(sbx_shared->requests[slot].password));
				sbx_shared->requests[slot].state = SBX_SLOT_FREE;
			}
			worker_running = (sbx_shared->worker_pid != 0);
			LWLockRelease(sbx_shared->lock);
			if (done)
				break;

			/*
			 * The worker restarts within seconds after a crash; one that
			 * stays away is not coming (for one, pgsandbox.database may name
			 * a database that does not exist).
			 */
			if (worker_running)
				worker_seen = GetCurrentTimestamp();
			else if (TimestampDifferenceExceeds(worker_seen, GetCurrentTimestamp(),
												SBX_WORKER_ABSENCE_MS))
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("pgsandbox worker is not running"),
						 errhint("Check the server log for why it does not start.")));

			(void) WaitLatch(MyLatch,
							 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 1000L, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_END_ENSURE_ERROR_CLEANUP(sbx_queue_abandon, Int32GetDatum(slot));
}


/* ------------------------------------------------------------------------
 * The lifecycle worker's half
 * ------------------------------------------------------------------------
 */

static int
sbx_serial_cmp(const ListCell *a, const ListCell *b)
{
	uint64		sa = sbx_shared->requests[lfirst_int(a)].serial;
	uint64		sb = sbx_shared->requests[lfirst_int(b)].serial;

	return sa < sb ? -1 : (sa > sb ? 1 : 0);
}

/*
 * The slots of the pending requests, oldest first.
 */
List *
sbx_queue_pending(void)
{
	List	   *slots = NIL;

	LWLockAcquire(sbx_shared->lock, LW_SHARED);
	for (int i = 0; i < sbx_shared->nrequests; i++)
	{
		if (sbx_shared->requests[i].state == SBX_SLOT_PENDING)
			slots = lappend_int(slots, i);
	}
	/* serials do not change while we hold the lock */
	list_sort(slots, sbx_serial_cmp);
	LWLockRelease(sbx_shared->lock);
	return slots;
}

/*
 * Take the pending request in 'slot' for serving: mark it running and copy
 * it into *copy.  Returns false if there is nothing to take: the slot is no
 * longer pending, its caller left (the slot is freed), or it is a clone and
 * clone_allowed is false (it stays pending).
 */
bool
sbx_queue_take(int slot, bool clone_allowed, SbxRequest *copy)
{
	SbxRequest *req = &sbx_shared->requests[slot];
	bool		taken = false;

	LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
	if (req->state != SBX_SLOT_PENDING)
		;
	else if (req->abandoned)
		req->state = SBX_SLOT_FREE;
	else if (!SBX_REQ_NEEDS_JOB(req->kind) || clone_allowed)
	{
		req->state = SBX_SLOT_RUNNING;
		memcpy(copy, req, sizeof(SbxRequest));
		taken = true;
	}
	LWLockRelease(sbx_shared->lock);
	return taken;
}

/*
 * Put a request taken by sbx_queue_take back, pending, as if it had not
 * been taken: a clone that found no pool member waits for a clone job.
 */
void
sbx_queue_untake(int slot, uint64 serial)
{
	SbxRequest *req = &sbx_shared->requests[slot];

	LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
	if (req->serial == serial && req->state == SBX_SLOT_RUNNING)
		req->state = SBX_SLOT_PENDING;
	LWLockRelease(sbx_shared->lock);
}

/*
 * Write the outcome of the request (slot, serial) and wake its caller.  A
 * request whose caller left is freed instead, and one that is no longer in
 * its slot is not touched.  'outcome' carries the result fields.  Returns
 * whether the caller gets the outcome.
 */
bool
sbx_queue_answer(int slot, uint64 serial, const SbxRequest *outcome)
{
	SbxRequest *req;
	Latch	   *latch = NULL;

	if (slot < 0)
		return false;			/* no caller */
	req = &sbx_shared->requests[slot];
	LWLockAcquire(sbx_shared->lock, LW_EXCLUSIVE);
	if (req->serial != serial || req->state != SBX_SLOT_RUNNING)
		;						/* not ours any more */
	else if (req->abandoned)
	{
		explicit_bzero(req->password, sizeof(req->password));
		req->state = SBX_SLOT_FREE;
	}
	else
	{
		req->sqlerrcode = outcome->sqlerrcode;
		strlcpy(req->message, outcome->message, sizeof(req->message));
		strlcpy(req->detail, outcome->detail, sizeof(req->detail));
		strlcpy(req->hint, outcome->hint, sizeof(req->hint));
		req->dropped = outcome->dropped;
		strlcpy(req->result_name, outcome->result_name, sizeof(req->result_name));
		memcpy(req->password, outcome->password, sizeof(req->password));
		req->expires_at = outcome->expires_at;
		req->taken_at = outcome->taken_at;
		req->size_bytes = outcome->size_bytes;
		req->state = SBX_SLOT_DONE;
		latch = req->caller_latch;
	}
	LWLockRelease(sbx_shared->lock);
	if (latch)
		SetLatch(latch);
	return latch != NULL;
}

/* Answer the request (slot, serial) with an error. */
void
sbx_queue_answer_error(int slot, uint64 serial, int sqlerrcode,
					   const char *message, const char *detail, const char *hint)
{
	SbxRequest	outcome;

	memset(&outcome, 0, sizeof(outcome));
	outcome.sqlerrcode = sqlerrcode ? sqlerrcode : ERRCODE_INTERNAL_ERROR;
	sbx_copy_bounded(outcome.message, sizeof(outcome.message), message);
	sbx_copy_bounded(outcome.detail, sizeof(outcome.detail), detail);
	sbx_copy_bounded(outcome.hint, sizeof(outcome.hint), hint);
	(void) sbx_queue_answer(slot, serial, &outcome);
}

/* Has the caller of the request (slot, serial) stopped waiting? */
bool
sbx_queue_abandoned(int slot, uint64 serial)
{
	bool		abandoned;

	if (slot < 0)
		return false;
	LWLockAcquire(sbx_shared->lock, LW_SHARED);
	abandoned = (sbx_shared->requests[slot].serial != serial ||
				 sbx_shared->requests[slot].abandoned);
	LWLockRelease(sbx_shared->lock);
	return abandoned;
}

/*
 * Answer every running request with an error: a worker that starts finds
 * these left by its predecessor.
 */
void
sbx_queue_fail_running(const char *message)
{
	for (int i = 0; i < sbx_shared->nrequests; i++)
	{
		uint64		serial;
		bool		running;

		LWLockAcquire(sbx_shared->lock, LW_SHARED);
		running = (sbx_shared->requests[i].state == SBX_SLOT_RUNNING);
		serial = sbx_shared->requests[i].serial;
		LWLockRelease(sbx_shared->lock);
		if (running)
			sbx_queue_answer_error(i, serial, ERRCODE_OPERATOR_INTERVENTION,
								   message, NULL, NULL);
	}
}

/*
 * Lifecycle functions work only in the database the worker serves.
 */
void
sbx_check_database(void)
{
	char	   *dbname = get_database_name(MyDatabaseId);

	sbx_queue_attach();
	if (dbname == NULL || strcmp(dbname, sbx_database) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pgsandbox serves database \"%s\", not \"%s\"",
						sbx_database, dbname ? dbname : "?"),
				 errhint("Call pgsandbox functions in database \"%s\", or set pgsandbox.database.",
						 sbx_database)));
}
