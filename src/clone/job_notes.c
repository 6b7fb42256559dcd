/*-------------------------------------------------------------------------
 *
 * job_notes.c
 *	  The notes a clone job writes for its ready event: what the clone
 *	  left out, fell back to, or did beyond the plain restore.
 *
 * Notes are joined with "; " into the job's fixed buffer and cut at its
 * size; they are written for people reading the event log, so they never
 * hold a conninfo or a password.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "sbx_clone.h"

/* Append one note to the job's notes. */
void
sbx_job_note(SbxCloneJob *job, const char *fmt,...)
{
	char		buf[SBX_DETAIL_MAX];
	va_list		args;
	size_t		len = strlen(job->notes);

	va_start(args, fmt);
	vsnprintf(buf, sizeof(buf), fmt, args);
	va_end(args);
	snprintf(job->notes + len, sizeof(job->notes) - len, "%s%s",
			 len > 0 ? "; " : "", buf);
}
