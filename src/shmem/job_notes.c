/*-------------------------------------------------------------------------
 *
 * job_notes.c
 *	  The notes a clone job writes for its ready event: what the clone
 *	  left out, fell back to, or did beyond the plain restore.
 *
 * Notes are joined with "; " in the job's buffer, which lives in shared
 * memory (SBX_NOTES_MAX bytes, room for hundreds of notes).  A note is
 * kept whole or not at all: one that does not fit is counted, and the
 * notes end with that count ("and 3 more notes, past the 16 kB kept"), so
 * that the event never ends mid-word or says less than happened without
 * saying so.  Notes are written for people reading the event log, so they
 * never hold a conninfo or a password.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "sbx_shmem.h"

/* the room kept at the end of the buffer for the count of notes left out */
#define SBX_NOTES_TAIL	96

/* Append one note to the job's notes. */
void
sbx_job_note(SbxCloneJob *job, const char *fmt,...)
{
	StringInfoData note;
	int			len = job->notes_len;
	int			sep = len > 0 ? 2 : 0;

	initStringInfo(&note);
	for (;;)
	{
		va_list		args;
		int			needed;

		va_start(args, fmt);
		needed = appendStringInfoVA(&note, fmt, args);
		va_end(args);
		if (needed == 0)
			break;
		enlargeStringInfo(&note, needed);
	}
	if (len + sep + note.len < SBX_NOTES_MAX - SBX_NOTES_TAIL)
	{
		snprintf(job->notes + len, SBX_NOTES_MAX - len, "%s%s", sep ? "; " : "", note.data);
		job->notes_len = len + sep + note.len;
	}
	else
		job->notes_left_out++;
	if (job->notes_left_out > 0)
		snprintf(job->notes + job->notes_len, SBX_NOTES_MAX - job->notes_len,
				 "%sand %d more note%s, past the %d kB kept",
				 job->notes_len > 0 ? "; " : "", job->notes_left_out,
				 job->notes_left_out == 1 ? "" : "s", SBX_NOTES_MAX / 1024);
	pfree(note.data);
}
