/*-------------------------------------------------------------------------
 *
 * sbx_schedule.h
 *	  Snapshot schedules: 'N minutes' or a cron line, parsed and stepped.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SBX_SCHEDULE_H
#define SBX_SCHEDULE_H

#include "sbx_common.h"

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

#endif							/* SBX_SCHEDULE_H */
