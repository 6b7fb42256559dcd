/*-------------------------------------------------------------------------
 *
 * schedule.c
 *	  Snapshot schedules: parse one, and find its next run.
 *
 * A schedule is either an interval, "N seconds" or "N minutes" (1 to 86400
 * seconds), run N seconds after the previous run, or a cron expression of
 * five fields, read in UTC as pg_cron reads them:
 *
 *		minute (0-59)  hour (0-23)  day of month (1-31)  month (1-12)
 *		day of week (0-7, 0 and 7 being Sunday)
 *
 * Each field is a comma-separated list of items; an item is '*', a number
 * or a range "a-b", optionally followed by a step "/n" ("a/n" meaning from a
 * to the field's maximum).  Months and days of the week may be named by
 * their first three letters (jan, mon).  As in cron, when both the day of
 * the month and the day of the week are restricted (neither begins with
 * '*'), a day matches if either does.  @yearly (@annually), @monthly,
 * @weekly, @daily (@midnight) and @hourly stand for their usual expressions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>

#include "fmgr.h"
#include "pgsandbox.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(pgsandbox_next_run);

/* one of the five fields of a cron expression */
typedef struct SbxCronField
{
	const char *name;
	int			min;
	int			max;
	const char *const *names;	/* names of min, min + 1, ..., or NULL */
} SbxCronField;

static const char *const sbx_month_names[] = {"jan", "feb", "mar", "apr", "may", "jun",
"jul", "aug", "sep", "oct", "nov", "dec", NULL};
static const char *const sbx_day_names[] = {"sun", "mon", "tue", "wed", "thu", "fri",
"sat", NULL};

static const SbxCronField sbx_cron_fields[5] = {
	{"minute", 0, 59, NULL},
	{"hour", 0, 23, NULL},
	{"day of month", 1, 31, NULL},
	{"month", 1, 12, sbx_month_names},
	{"day of week", 0, 7, sbx_day_names},
};

static const char *const sbx_cron_shorthands[][2] = {
	{"@yearly", "0 0 1 1 *"},
	{"@annually", "0 0 1 1 *"},
	{"@monthly", "0 0 1 * *"},
	{"@weekly", "0 0 * * 0"},
	{"@daily", "0 0 * * *"},
	{"@midnight", "0 0 * * *"},
	{"@hourly", "0 * * * *"},
};

static void pg_attribute_noreturn()
sbx_schedule_error(const char *text, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid schedule \"%s\"", text),
			 errdetail_internal("%s", detail),
			 errhint("Use a cron expression of five fields in UTC, such as '0 3 * * *', or 'N seconds' or 'N minutes'.")));
}

/*
 * Read a number or a name of the field at *p, advancing *p.  Returns the
 * value; reports an error naming what is there otherwise.
 */
static int
sbx_cron_value(const char *text, const SbxCronField *field, const char **p)
{
	const char *start = *p;
	int			value = 0;

	if (isdigit((unsigned char) **p))
	{
		while (isdigit((unsigned char) **p))
		{
			value = value * 10 + (**p - '0');
			if (value > 1000)
				break;
			(*p)++;
		}
		if (value < field->min || value > field->max)
			sbx_schedule_error(text,
							   psprintf("%c%s %d is out of range %d to %d.",
										toupper((unsigned char) field->name[0]),
										field->name + 1, value, field->min, field->max));
		return value;
	}
	while (isalpha((unsigned char) **p))
		(*p)++;
	if (field->names != NULL && *p - start == 3)
	{
		for (int i = 0; field->names[i] != NULL; i++)
		{
			if (pg_strncasecmp(start, field->names[i], 3) == 0)
				return field->min + i;
		}
	}
	while (**p && **p != ',' && **p != '-' && **p != '/')
		(*p)++;
	sbx_schedule_error(text,
					   psprintf("\"%s\" is not a number%s in the %s field.",
								pnstrdup(start, Max(*p - start, 1)),
								field->names ? " or a name" : "", field->name));
}

/*
 * Parse one field (a NUL-terminated word) into a bit set of allowed values.
 * *star is set if it begins with '*'.
 */
static uint64
sbx_cron_field(const char *text, const SbxCronField *field, const char *word,
			   bool *star)
{
	uint64		bits = 0;
	const char *p = word;

	*star = (*p == '*');
	for (;;)
	{
		int			lo;
		int			hi;
		int			step = 1;

		if (*p == '*')
		{
			lo = field->min;
			hi = field->max;
			p++;
		}
		else
		{
			lo = hi = sbx_cron_value(text, field, &p);
			if (*p == '-')
			{
				p++;
				hi = sbx_cron_value(text, field, &p);
				if (hi < lo)
					sbx_schedule_error(text,
									   psprintf("Range %d-%d of the %s field is backwards.",
												lo, hi, field->name));
			}
		}
		if (*p == '/')
		{
			const char *digits = ++p;

			step = 0;
			while (isdigit((unsigned char) *p) && step <= 1000)
				step = step * 10 + (*p++ - '0');
			if (p == digits)
				sbx_schedule_error(text,
								   psprintf("A step in the %s field needs a number after \"/\".",
											field->name));
			if (step == 0)
				sbx_schedule_error(text,
								   psprintf("Step 0 in the %s field must be positive.", field->name));
			if (lo == hi)		/* "a/n": from a to the end */
				hi = field->max;
		}
		for (int v = lo; v <= hi; v += step)
			bits |= UINT64CONST(1) << v;
		if (*p == '\0')
			break;
		if (*p != ',' || p[1] == '\0')
			sbx_schedule_error(text,
							   psprintf("Unexpected \"%c\" in the %s field.", *p, field->name));
		p++;
	}
	return bits;
}

/* days in a month of a year */
static int
sbx_month_days(int year, int month)
{
	static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

	if (month == 2 && isleap(year))
		return 29;
	return days[month - 1];
}

/* Parse "N seconds" or "N minutes"; returns false if it is not that form. */
static bool
sbx_parse_interval(const char *text, SbxSchedule *schedule)
{
	const char *p = text;
	int64		n = 0;
	const char *unit;
	size_t		len;

	while (isspace((unsigned char) *p))
		p++;
	if (!isdigit((unsigned char) *p))
		return false;
	while (isdigit((unsigned char) *p) && n <= 1000000)
		n = n * 10 + (*p++ - '0');
	if (!isspace((unsigned char) *p))
		return false;
	while (isspace((unsigned char) *p))
		p++;
	unit = p;
	while (isalpha((unsigned char) *p))
		p++;
	len = p - unit;
	while (isspace((unsigned char) *p))
		p++;
	if (*p != '\0' || len == 0)
		return false;
	if ((len == 6 || len == 7) && pg_strncasecmp(unit, "seconds", len) == 0)
		;
	else if ((len == 6 || len == 7) && pg_strncasecmp(unit, "minutes", len) == 0)
		n *= 60;
	else
		sbx_schedule_error(text,
						   psprintf("\"%s\" is not a unit of an interval schedule; it counts seconds or minutes.",
									pnstrdup(unit, len)));
	if (n < 1 || n > SECS_PER_DAY)
		sbx_schedule_error(text, "An interval schedule counts 1 to 86400 seconds (1440 minutes).");
	schedule->interval_secs = n;
	return true;
}

/*
 * Parse a schedule; an invalid one is an error (22023) that says what is
 * wrong.
 */
void
sbx_schedule_parse(const char *text, SbxSchedule *schedule)
{
	char	   *copy;
	char	   *words[6];
	int			nwords = 0;
	char	   *p;
	uint64		bits[5];
	bool		star[5];
	bool		any_day = false;

	memset(schedule, 0, sizeof(*schedule));
	if (sbx_parse_interval(text, schedule))
		return;

	copy = pstrdup(text);
	for (p = copy; *p;)
	{
		while (isspace((unsigned char) *p))
			*p++ = '\0';
		if (*p == '\0')
			break;
		if (nwords < lengthof(words))
			words[nwords] = p;
		nwords++;
		while (*p && !isspace((unsigned char) *p))
			p++;
	}
	if (nwords == 1 && words[0][0] == '@')
	{
		for (int i = 0; i < lengthof(sbx_cron_shorthands); i++)
		{
			if (pg_strcasecmp(words[0], sbx_cron_shorthands[i][0]) == 0)
			{
				sbx_schedule_parse(sbx_cron_shorthands[i][1], schedule);
				return;
			}
		}
		sbx_schedule_error(text,
						   psprintf("\"%s\" is not one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly.",
									words[0]));
	}
	if (nwords != 5)
		sbx_schedule_error(text,
						   psprintf("A cron schedule has 5 fields (minute, hour, day of month, month, day of week); this one has %d.",
									nwords));

	for (int i = 0; i < 5; i++)
		bits[i] = sbx_cron_field(text, &sbx_cron_fields[i], words[i], &star[i]);
	/* day of week 7 is Sunday */
	if (bits[4] & (UINT64CONST(1) << 7))
		bits[4] = (bits[4] | 1) & ~(UINT64CONST(1) << 7);

	schedule->minutes = bits[0];
	schedule->hours = (uint32) bits[1];
	schedule->days = (uint32) bits[2];
	schedule->months = (uint16) bits[3];
	schedule->weekdays = (uint8) bits[4];
	schedule->days_star = star[2];
	schedule->weekdays_star = star[4];

	/*
	 * With the day of the week not restricted, the days of the month must
	 * exist in some allowed month (February 29 does, in leap years).
	 */
	if (!schedule->days_star && !schedule->weekdays_star)
		return;
	for (int m = 1; m <= 12 && !any_day; m++)
	{
		if (!(schedule->months & (1 << m)))
			continue;
		for (int d = 1; d <= sbx_month_days(2024, m); d++)
		{
			if (schedule->days & (UINT64CONST(1) << d))
			{
				any_day = true;
				break;
			}
		}
	}
	if (!any_day)
		sbx_schedule_error(text, "It names no day that exists in the months it allows.");
}

/* Does a day match the schedule's day fields? */
static bool
sbx_day_matches(const SbxSchedule *s, int year, int month, int day)
{
	bool		dom = (s->days & (UINT64CONST(1) << day)) != 0;
	int			dow = j2day(date2j(year, month, day));
	bool		wd = (s->weekdays & (1 << dow)) != 0;

	if (!s->days_star && !s->weekdays_star)
		return dom || wd;
	return dom && wd;
}

/*
 * The first run of the schedule strictly after 'after': for a cron
 * schedule, at the start of a matching minute, in UTC.
 */
TimestampTz
sbx_schedule_next(const SbxSchedule *s, TimestampTz after)
{
	struct pg_tm tm;
	fsec_t		fsec;
	TimestampTz result;
	int			year_limit;

	if (s->interval_secs > 0)
		return after + s->interval_secs * USECS_PER_SEC;

	if (timestamp2tm(after, NULL, &tm, &fsec, NULL, NULL) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range")));
	/* the next whole minute */
	tm.tm_sec = 0;
	tm.tm_min++;
	year_limit = tm.tm_year + 10;	/* every valid schedule matches within 8 */

	for (;;)
	{
		/* carry over minutes, hours, days and months */
		if (tm.tm_min > 59)
		{
			tm.tm_min = 0;
			tm.tm_hour++;
		}
		if (tm.tm_hour > 23)
		{
			tm.tm_hour = 0;
			tm.tm_mday++;
		}
		if (tm.tm_mday > sbx_month_days(tm.tm_year, tm.tm_mon))
		{
			tm.tm_mday = 1;
			tm.tm_mon++;
		}
		if (tm.tm_mon > 12)
		{
			tm.tm_mon = 1;
			tm.tm_year++;
		}
		if (tm.tm_year > year_limit)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("schedule has no run in the next ten years")));

		if (!(s->months & (1 << tm.tm_mon)))
		{
			tm.tm_mon++;
			tm.tm_mday = 1;
			tm.tm_hour = 0;
			tm.tm_min = 0;
			continue;
		}
		if (!sbx_day_matches(s, tm.tm_year, tm.tm_mon, tm.tm_mday))
		{
			tm.tm_mday++;
			tm.tm_hour = 0;
			tm.tm_min = 0;
			continue;
		}
		if (!(s->hours & ((uint32) 1 << tm.tm_hour)))
		{
			tm.tm_hour++;
			tm.tm_min = 0;
			continue;
		}
		if (!(s->minutes & (UINT64CONST(1) << tm.tm_min)))
		{
			tm.tm_min++;
			continue;
		}
		break;
	}
	if (tm2timestamp(&tm, 0, NULL, &result) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range")));
	return result;
}

/*
 * _next_run(schedule text, after timestamptz) RETURNS timestamptz
 */
Datum
pgsandbox_next_run(PG_FUNCTION_ARGS)
{
	SbxSchedule schedule;

	sbx_schedule_parse(text_to_cstring(PG_GETARG_TEXT_PP(0)), &schedule);
	PG_RETURN_TIMESTAMPTZ(sbx_schedule_next(&schedule, PG_GETARG_TIMESTAMPTZ(1)));
}
