/*-------------------------------------------------------------------------
 *
 * copy_relay.c
 *	  The rows of a COPY ... TO STDOUT on one connection relayed into a
 *	  COPY ... FROM STDIN on another, by the backend between them: a clone
 *	  worker copying a source's masked, reduced or largest table into its
 *	  sandbox.
 *
 * A COPY sends one row a message; the rows go on in messages of 64 kB,
 * which the receiving backend takes in far fewer reads (a COPY stream may
 * be cut anywhere, in either format).  A row of 64 kB or more goes on
 * alone, as it came.  Both ends are waited for with the latch, so that a
 * cancel or a shutdown is seen while the receiver is slow to take rows (a
 * check that runs long) as well as while the sender is slow to give them:
 * the receiving connection is made non-blocking for the relay, and back to
 * blocking after.
 *
 * The receiver's session must have client_min_messages = error: during a
 * COPY FROM STDIN its server then sends nothing unless the COPY failed, so
 * anything to read on its socket ends the relay at once, rather than after
 * the whole table was sent to a backend that throws it away.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <poll.h>

#include "libpq-fe.h"
#include "miscadmin.h"
#include "sbx_conn.h"
#include "storage/latch.h"
#include "utils/wait_event.h"

/* the size of the messages the receiver is sent */
#define SBX_RELAY_MESSAGE	(64 * 1024)

/* Has the receiver's server said something (so the COPY failed)? */
static bool
sbx_relay_receiver_spoke(PGconn *to)
{
	struct pollfd pfd;

	pfd.fd = PQsocket(to);
	pfd.events = POLLIN;
	pfd.revents = 0;
	return poll(&pfd, 1, 0) > 0;
}

/*
 * Queue 'len' bytes for 'to' and send all it holds, waiting with the
 * latch while its socket is full.  False if it failed, or its server
 * spoke.
 */
static bool
sbx_relay_send(PGconn *to, const char *data, int len)
{
	bool		queued = (len == 0);

	for (;;)
	{
		int			events;

		if (!queued)
		{
			int			r = PQputCopyData(to, data, len);

			if (r < 0)
				return false;
			queued = (r == 1);
		}
		if (queued)
		{
			int			r = PQflush(to);

			if (r < 0)
				return false;
			if (r == 0)
				return !sbx_relay_receiver_spoke(to);
		}
		/* not queued, or not all sent: wait for room */
		events = WaitLatchOrSocket(MyLatch,
								   WL_LATCH_SET | WL_EXIT_ON_PM_DEATH |
								   WL_SOCKET_WRITEABLE | WL_SOCKET_READABLE,
								   PQsocket(to), -1L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (events & WL_SOCKET_READABLE)
			return false;
	}
}

/*
 * Relay every row 'from' sends into 'to', both in their COPY.  Returns
 * true when 'from' has sent its last (its result then tells how it
 * ended); false as soon as 'to' failed, when the caller ends its COPY as
 * failed (PQputCopyEnd with a message) and reads why from its result.
 */
bool
sbx_copy_relay(PGconn *from, PGconn *to)
{
	StringInfoData buf;
	bool		ok = true;

	if (PQsetnonblocking(to, 1) != 0)
		return false;
	initStringInfo(&buf);
	enlargeStringInfo(&buf, SBX_RELAY_MESSAGE);
	while (ok)
	{
		char	   *row = NULL;
		int			n = PQgetCopyData(from, &row, 1);

		if (n > 0)
		{
			/* what is held goes first if the row would pass the size */
			if (buf.len > 0 && buf.len + n > SBX_RELAY_MESSAGE)
			{
				CHECK_FOR_INTERRUPTS();
				ok = sbx_relay_send(to, buf.data, buf.len);
				resetStringInfo(&buf);
			}
			if (ok && n >= SBX_RELAY_MESSAGE)
				ok = sbx_relay_send(to, row, n);
			else if (ok)
				appendBinaryStringInfo(&buf, row, n);
			PQfreemem(row);
			continue;
		}
		if (n < 0)
			break;				/* the end, or an error PQgetResult tells */
		/* nothing more has come yet: what is held goes now */
		ok = sbx_relay_send(to, buf.data, buf.len);
		resetStringInfo(&buf);
		if (!ok)
			break;
		(void) WaitLatchOrSocket(MyLatch,
								 WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | WL_SOCKET_READABLE,
								 PQsocket(from), -1L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (PQconsumeInput(from) == 0)
			break;
		if (sbx_relay_receiver_spoke(to))
			ok = false;
	}
	if (ok)
		ok = sbx_relay_send(to, buf.data, buf.len);
	pfree(buf.data);
	/* blocking again, with what is queued sent: the caller ends the COPY */
	if (PQsetnonblocking(to, 0) != 0)
		ok = false;
	return ok;
}
