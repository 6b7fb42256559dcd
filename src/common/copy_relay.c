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
 * be cut anywhere, in either format).  Both ends are waited for with the
 * latch, so that a cancel or a shutdown is seen while the receiver is slow
 * to take rows (a check that runs long, a full disk) as well as while the
 * sender is slow to give them: the receiving connection is made
 * non-blocking for the relay, and back to blocking after.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "libpq-fe.h"
#include "miscadmin.h"
#include "sbx_conn.h"
#include "storage/latch.h"
#include "utils/wait_event.h"

/* the size of the messages the receiver is sent */
#define SBX_RELAY_MESSAGE	(64 * 1024)

/*
 * Wait until 'conn' can be written to or has something to read (an error
 * the server sent ends the COPY), or the latch is set; then see to
 * interrupts.  False if the connection broke.
 */
static bool
sbx_relay_wait(PGconn *conn, int events)
{
	(void) WaitLatchOrSocket(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | events,
							 PQsocket(conn), -1L, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	return PQconsumeInput(conn) != 0;
}

/* Queue 'len' bytes for 'to' and send all it holds.  False if it failed. */
static bool
sbx_relay_send(PGconn *to, const char *data, int len)
{
	int			r;

	if (len > 0)
	{
		while ((r = PQputCopyData(to, data, len)) == 0)
			if (!sbx_relay_wait(to, WL_SOCKET_WRITEABLE | WL_SOCKET_READABLE))
				return false;
		if (r < 0)
			return false;
	}
	while ((r = PQflush(to)) == 1)
		if (!sbx_relay_wait(to, WL_SOCKET_WRITEABLE | WL_SOCKET_READABLE))
			return false;
	return r == 0;
}

/*
 * Relay every row 'from' sends into 'to', both in their COPY; return when
 * 'from' has sent its last (its result then tells how it ended), or false
 * at once if 'to' failed (its connection tells why).  The caller ends both
 * COPYs.
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
	for (;;)
	{
		char	   *row = NULL;
		int			n = PQgetCopyData(from, &row, 1);

		if (n > 0)
		{
			appendBinaryStringInfo(&buf, row, n);
			PQfreemem(row);
			if (buf.len >= SBX_RELAY_MESSAGE)
			{
				CHECK_FOR_INTERRUPTS();
				if (!(ok = sbx_relay_send(to, buf.data, buf.len)))
					break;
				resetStringInfo(&buf);
			}
			continue;
		}
		if (n < 0)
			break;				/* the end, or an error PQgetResult tells */
		/* nothing more has come yet: what is held goes now */
		if (!(ok = sbx_relay_send(to, buf.data, buf.len)))
			break;
		resetStringInfo(&buf);
		if (!sbx_relay_wait(from, WL_SOCKET_READABLE))
			break;
	}
	if (ok)
		ok = sbx_relay_send(to, buf.data, buf.len);
	pfree(buf.data);
	if (PQsetnonblocking(to, 0) != 0)
		ok = false;
	return ok;
}
