/*-------------------------------------------------------------------------
 *
 * bounded_text.c
 *	  Copies of text into the fixed buffers that carry errors through
 *	  shared memory, which say so when they had to cut.
 *
 * An error travels from a clone worker, or from the lifecycle worker, to
 * the caller who waits for it, to sandboxes.error and to the events, in
 * buffers of a fixed size (SBX_MESSAGE_MAX, SBX_DETAIL_MAX, SBX_HINT_MAX).
 * A text that fits is copied whole.  One that does not is cut at a
 * character boundary (never inside a multibyte character, which would
 * leave the text invalid in the server's encoding) and ends with how much
 * was left out, so that nobody reads less than happened without being
 * told.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "sbx_common.h"

/* the room kept for the marker: " [and 123456789 bytes more, cut]" */
#define SBX_CUT_MARKER_ROOM		48

/*
 * Copy 'src' into 'dst', a buffer of 'size' bytes, whole or cut with a
 * marker.  A NULL 'src' is an empty text.
 */
void
sbx_copy_bounded(char *dst, size_t size, const char *src)
{
	size_t		len;
	int			keep;

	Assert(size > SBX_CUT_MARKER_ROOM);
	if (src == NULL)
		src = "";
	len = strlen(src);
	if (len < size)
	{
		memcpy(dst, src, len + 1);
		return;
	}
	keep = pg_mbcliplen(src, (int) Min(len, size), (int) (size - SBX_CUT_MARKER_ROOM));
	memcpy(dst, src, keep);
	snprintf(dst + keep, size - keep, " [and %zu bytes more, cut]", len - keep);
}
