/*-------------------------------------------------------------------------
 *
 * schedule.c
 *	  Snapshot schedules: reading one, and finding when it next runs.
 *
 * A schedule is either an interval or a cron expression.  An interval is
 * "N seconds" or "N minutes" (singular "second" and "minute" too, in any
 * case), of 1 to 86400 seconds (1440 minutes); it next runs that long after
 * the moment it is asked about.
 *
 * A cron expression has five fields, separated by spaces or tabs, read as
 * pg_cron and vixie cron read them, in UTC:
 *
 *		minute (0-59)  hour (0-23)  day of month (1-31)  month (1-12)
 *		day of week (0-7, 0 and 7 both being Sunday)
 *
 * A field is a comma-separated list of items.  An item is '*', a number or
 * a range "a-b", and may end in a step "/n": after '*' the step takes every
 * n-th value of the field, after a range every n-th value from a to b, and
 * after a single number a every n-th value from a to the field's maximum.
 * Months and days of the week may also be named by their first three
 * letters (jan, mon; case does not matter), in ranges too ("mon-fri").  As
 * in cron, when both the day of the month and the day of the week are
 * restricted (neither field begins with '*'), a day matches if either of
 * them does; otherwise it must match both.
 *
 * The shorthands @yearly (or @annually), @monthly, @weekly, @daily (or
 * @midnight) and @hourly stand for "0 0 1 1 *", "0 0 1 * *", "0 0 * * 0",
 * "0 0 * * *" and "0 * * * *".
 *
 * A bad schedule, including a cron expression that names no day that
 * exists (such as February 30), is an error that says what is wrong.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/int.h"
#include "datatype/timestamp.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "port/pg_bitutils.h"
#include "sbx_schedule.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(pgsandbox_next_run);

/*
 * How many years ahead a cron schedule's next run is looked for.  A
 * schedule that passes sbx_schedule_parse() always runs again, but not
 * always soon: one for January 1 whose day of week begins with '*' but is
 * stepped to Sundays only waits up to 12 years, and one for a February 29
 * that must be a Sunday up to 40.
 */
#define SCHEDULE_SEARCH_YEARS	50

/* the largest interval, in seconds */
#define SCHEDULE_MAX_INTERVAL	SECS_PER_DAY

/* one of the five fields of a cron expression */
typedef struct CronField
{
	const char *name;			/* for messages: "day of month" */
	const char *label;			/* the same, capitalized */
	int			min;
	int			max;
	const char *const *names;	/* names of min, min + 1, ..., or NULL */
} CronField;

static const char *const month_names[] = {
	"jan", "feb", "mar", "apr", "may", "jun",
	"jul", "aug", "sep", "oct", "nov", "dec", NULL
};

static const char *const weekday_names[] = {
	"sun", "mon", "tue", "wed", "thu", "fri", "sat", NULL
};

#define CRON_FIELDS		5

static const CronField cron_fields[CRON_FIELDS] = {
	{"minute", "Minute", 0, 59, NULL},
	{"hour", "Hour", 0, 23, NULL},
	{"day of month", "Day of month", 1, 31, NULL},
	{"month", "Month", 1, 12, month_names},
	{"day of week", "Day of week", 0, 7, weekday_names},
};

/* the shorthands, and the expressions they stand for */
static const struct
{
	const char *name;
	const char *expression;
}			cron_shorthands[] = {
	{"@yearly", "0 0 1 1 *"},
	{"@annually", "0 0 1 1 *"},
	{"@monthly", "0 0 1 * *"},
	{"@weekly", "0 0 * * 0"},
	{"@daily", "0 0 * * *"},
	{"@midnight", "0 0 * * *"},
	{"@hourly", "0 * * * *"},
};

pg_noreturn static void schedule_error(const char *text, const char *fmt,...)
			pg_attribute_printf(2, 3);
static bool parse_interval(const char *text, SbxSchedule *schedule);
static void parse_cron(const char *text, const char *expression,
					   SbxSchedule *schedule);
static uint64 parse_cron_field(const char *text, const CronField *field,
							   char *word);
static uint64 parse_cron_item(const char *text, const CronField *field,
							  const char *item);
static int	parse_cron_value(const char *text, const CronField *field,
							 const char *item, const char **p);
static bool cron_has_day(const SbxSchedule *schedule);
static bool cron_day_matches(const SbxSchedule *schedule,
							 int year, int month, int day);
static int	first_bit_from(uint64 bits, int from);

/*
 * Characters are told apart by hand rather than with <ctype.h>, whose
 * answers for bytes beyond ASCII depend on the database's locale.
 */
static inline bool
is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' ||
		c == '\f' || c == '\v';
}

static inline bool
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static inline bool
is_letter(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/*
 * Report a bad schedule: the message names the schedule, the detail (a
 * format string and its arguments) says what is wrong with it.
 */
static void
schedule_error(const char *text, const char *fmt,...)
{
	StringInfoData detail;

	initStringInfo(&detail);
	for (;;)
	{
		va_list		args;
		int			needed;

		va_start(args, fmt);
		needed = appendStringInfoVA(&detail, _(fmt), args);
		va_end(args);
		if (needed == 0)
			break;
		enlargeStringInfo(&detail, needed);
	}

	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid schedule \"%s\"", text),
			 errdetail_internal("%s", detail.data),
			 errhint("Use a cron expression of five fields in UTC, such as '0 3 * * *', or 'N seconds' or 'N minutes'.")));
	pg_unreachable();
}

/*
 * Parse a schedule into *schedule.  A bad one is an error (22023) whose
 * detail says what is wrong.
 */
void
sbx_schedule_parse(const char *text, SbxSchedule *schedule)
{
	const char *start = text;

	memset(schedule, 0, sizeof(SbxSchedule));

	if (parse_interval(text, schedule))
		return;

	/* a shorthand stands alone, spaces around it aside */
	while (is_space(*start))
		start++;
	if (*start == '@')
	{
		const char *end = start;
		const char *rest;

		while (*end != '\0' && !is_space(*end))
			end++;
		rest = end;
		while (is_space(*rest))
			rest++;
		if (*rest == '\0')
		{
			for (int i = 0; i < lengthof(cron_shorthands); i++)
			{
				const char *name = cron_shorthands[i].name;

				if (strlen(name) == end - start &&
					pg_strncasecmp(start, name, end - start) == 0)
				{
					parse_cron(text, cron_shorthands[i].expression, schedule);
					return;
				}
			}
			schedule_error(text,
						   "\"%s\" is not one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly.",
						   pnstrdup(start, end - start));
		}
	}

	parse_cron(text, text, schedule);
}

/*
 * If the text is an interval, "N seconds" or "N minutes", put it in
 * *schedule and return true; an interval of a wrong unit or size is an
 * error.  Return false for anything else: it may be a cron expression.
 */
static bool
parse_interval(const char *text, SbxSchedule *schedule)
{
	const char *p = text;
	int64		count = 0;
	const char *unit;
	int			unit_len;

	while (is_space(*p))
		p++;
	if (!is_digit(*p))
		return false;
	for (; is_digit(*p); p++)
	{
		/* no need to count beyond what is too many already */
		if (count <= SCHEDULE_MAX_INTERVAL)
			count = count * 10 + (*p - '0');
	}
	while (is_space(*p))
		p++;
	unit = p;
	while (is_letter(*p))
		p++;
	unit_len = p - unit;
	while (is_space(*p))
		p++;
	if (unit_len == 0 || *p != '\0')
		return false;

	if ((unit_len == 6 || unit_len == 7) &&
		pg_strncasecmp(unit, "seconds", unit_len) == 0)
		;
	else if ((unit_len == 6 || unit_len == 7) &&
			 pg_strncasecmp(unit, "minutes", unit_len) == 0)
		count *= SECS_PER_MINUTE;
	else
		schedule_error(text,
					   "\"%s\" is not a unit of an interval schedule; it counts seconds or minutes.",
					   pnstrdup(unit, unit_len));

	if (count < 1 || count > SCHEDULE_MAX_INTERVAL)
		schedule_error(text,
					   "An interval schedule counts 1 to %d seconds (%d minutes).",
					   SCHEDULE_MAX_INTERVAL, SCHEDULE_MAX_INTERVAL / SECS_PER_MINUTE);

	schedule->interval_secs = count;
	return true;
}

/*
 * Parse a cron expression into *schedule.  'text' is the schedule as
 * written, for messages; 'expression' is what it stands for.
 */
static void
parse_cron(const char *text, const char *expression, SbxSchedule *schedule)
{
	char	   *copy = pstrdup(expression);
	char	   *words[CRON_FIELDS];
	int			nwords = 0;
	uint64		bits[CRON_FIELDS];
	char	   *p = copy;

	/* split into words, ending each with a NUL */
	for (;;)
	{
		while (is_space(*p))
			*p++ = '\0';
		if (*p == '\0')
			break;
		if (nwords < CRON_FIELDS)
			words[nwords] = p;
		nwords++;
		while (*p != '\0' && !is_space(*p))
			p++;
	}
	if (nwords != CRON_FIELDS)
		schedule_error(text,
					   "A cron schedule has 5 fields (minute, hour, day of month, month, day of week); this one has %d.",
					   nwords);

	for (int i = 0; i < CRON_FIELDS; i++)
		bits[i] = parse_cron_field(text, &cron_fields[i], words[i]);

	/* day of week 7 is Sunday, as 0 is */
	if (bits[4] & (UINT64CONST(1) << 7))
		bits[4] = (bits[4] | 1) & ~(UINT64CONST(1) << 7);

	schedule->interval_secs = 0;
	schedule->minutes = bits[0];
	schedule->hours = (uint32) bits[1];
	schedule->days = (uint32) bits[2];
	schedule->months = (uint16) bits[3];
	schedule->weekdays = (uint8) bits[4];
	schedule->days_star = (words[2][0] == '*');
	schedule->weekdays_star = (words[4][0] == '*');

	if (!cron_has_day(schedule))
		schedule_error(text, "It names no day that exists in the months it allows.");

	pfree(copy);
}

/*
 * Parse one field, a comma-separated list of items, into the set of the
 * values it allows: bit v for value v.  The list is split in place.
 */
static uint64
parse_cron_field(const char *text, const CronField *field, char *word)
{
	uint64		bits = 0;
	char	   *item = word;

	for (;;)
	{
		char	   *comma = strchr(item, ',');

		if (comma != NULL)
			*comma = '\0';
		if (*item == '\0')
			schedule_error(text, "An item of the %s field is empty.", field->name);
		bits |= parse_cron_item(text, field, item);
		if (comma == NULL)
			break;
		item = comma + 1;
	}
	return bits;
}

/*
 * Parse one item of a field: '*', a value or a range "a-b", then maybe a
 * step "/n".
 */
static uint64
parse_cron_item(const char *text, const CronField *field, const char *item)
{
	const char *p = item;
	int			lo;
	int			hi;
	int			step = 1;
	bool		single = false;
	uint64		bits = 0;

	if (*p == '*')
	{
		lo = field->min;
		hi = field->max;
		p++;
	}
	else
	{
		lo = hi = parse_cron_value(text, field, item, &p);
		single = true;
		if (*p == '-')
		{
			const char *first = item;

			p++;
			hi = parse_cron_value(text, field, item, &p);
			single = false;
			if (hi < lo)
				schedule_error(text, "Range %s of the %s field is backwards.",
							   pnstrdup(first, p - first), field->name);
		}
	}

	if (*p == '/')
	{
		const char *digits = ++p;

		step = 0;
		for (; is_digit(*p); p++)
		{
			/* a step beyond the field's span keeps only the first value */
			if (step <= field->max)
				step = step * 10 + (*p - '0');
		}
		if (p == digits)
			schedule_error(text, "A step in the %s field needs a number after \"/\".",
						   field->name);
		if (step == 0)
			schedule_error(text, "Step 0 in the %s field must be positive.",
						   field->name);
		/* "a/n" runs from a to the end of the field */
		if (single)
			hi = field->max;
	}

	if (*p != '\0')
		schedule_error(text, "Unexpected \"%s\" in item \"%s\" of the %s field.",
					   p, item, field->name);

	for (int v = lo; v <= hi; v += step)
		bits |= UINT64CONST(1) << v;
	return bits;
}

/*
 * Read a number, or a name if the field has names, at *p in an item,
 * advancing *p past it; return its value.
 */
static int
parse_cron_value(const char *text, const CronField *field, const char *item,
				 const char **p)
{
	const char *start = *p;
	const char *end = start;
	bool		digits = true;
	char	   *word;

	while (is_digit(*end) || is_letter(*end))
	{
		if (!is_digit(*end))
			digits = false;
		end++;
	}
	*p = end;
	if (end == start)
	{
		if (*start == '\0')
			schedule_error(text, "Item \"%s\" of the %s field ends too soon.",
						   item, field->name);
		schedule_error(text, "Unexpected \"%s\" in item \"%s\" of the %s field.",
					   start, item, field->name);
	}
	word = pnstrdup(start, end - start);

	if (digits)
	{
		int			value = 0;

		for (const char *d = start; d < end && value <= field->max; d++)
			value = value * 10 + (*d - '0');
		if (value < field->min || value > field->max)
			schedule_error(text, "%s %s is out of range %d to %d.",
						   field->label, word, field->min, field->max);
		pfree(word);
		return value;
	}

	if (field->names == NULL)
		schedule_error(text, "\"%s\" is not a number in the %s field.",
					   word, field->name);
	for (int i = 0; field->names[i] != NULL; i++)
	{
		if (pg_strcasecmp(word, field->names[i]) == 0)
		{
			pfree(word);
			return field->min + i;
		}
	}
	schedule_error(text, "\"%s\" is not a number or a name in the %s field.",
				   word, field->name);
}

/*
 * Can the schedule's day fields ever match?  When either begins with '*',
 * a day must match both, so some day of the month that it allows must exist
 * in some month that it allows (February 29 exists, in leap years).  Such
 * a date falls on every day of the week in the course of the years, so the
 * day of week cannot keep it from running.  When both fields are
 * restricted, any day of the week that they allow comes in every month.
 */
static bool
cron_has_day(const SbxSchedule *schedule)
{
	if (!schedule->days_star && !schedule->weekdays_star)
		return true;

	for (int month = 1; month <= 12; month++)
	{
		/* bits 1 to the last day of the month, in a leap year */
		uint64		days_of_month = (UINT64CONST(1) << (day_tab[1][month - 1] + 1)) - 2;

		if ((schedule->months & (1 << month)) != 0 &&
			(schedule->days & days_of_month) != 0)
			return true;
	}
	return false;
}

/* Does a day match the schedule's day of month and day of week? */
static bool
cron_day_matches(const SbxSchedule *schedule, int year, int month, int day)
{
	bool		in_month = (schedule->days & ((uint32) 1 << day)) != 0;
	int			weekday = j2day(date2j(year, month, day));	/* 0 is Sunday */
	bool		in_week = (schedule->weekdays & (1 << weekday)) != 0;

	if (schedule->days_star || schedule->weekdays_star)
		return in_month && in_week;
	return in_month || in_week;
}

/* The lowest bit set in 'bits' at or above 'from', or -1 if there is none. */
static int
first_bit_from(uint64 bits, int from)
{
	bits >>= from;
	if (bits == 0)
		return -1;
	return from + pg_rightmost_one_pos64(bits);
}

/* A minute of the calendar, in UTC, as the search below walks it. */
typedef struct CronMinute
{
	int			year;
	int			month;
	int			day;
	int			hour;
	int			minute;
} CronMinute;

/* Carry what ran over into the next larger unit. */
static void
cron_carry(CronMinute *t)
{
	if (t->minute > 59)
	{
		t->minute = 0;
		t->hour++;
	}
	if (t->hour > 23)
	{
		t->hour = 0;
		t->day++;
	}
	if (t->day > day_tab[isleap(t->year)][t->month - 1])
	{
		t->day = 1;
		t->month++;
	}
	if (t->month > 12)
	{
		t->month = 1;
		t->year++;
	}
}

/*
 * One step of the search: true if minute *t matches the schedule, or the
 * first match within its hour is found; otherwise *t moves to the start of
 * the next month, day or hour that may match, skipping all of the month,
 * day or hour that cannot.
 */
static bool
cron_step(const SbxSchedule *schedule, CronMinute *t)
{
	int			next;

	if ((schedule->months & (1 << t->month)) == 0)
	{
		t->month++;
		t->day = 1;
		t->hour = t->minute = 0;
		return false;
	}
	if (!cron_day_matches(schedule, t->year, t->month, t->day))
	{
		t->day++;
		t->hour = t->minute = 0;
		return false;
	}
	next = first_bit_from(schedule->hours, t->hour);
	if (next < 0)
	{
		t->day++;
		t->hour = t->minute = 0;
		return false;
	}
	if (next > t->hour)
	{
		t->hour = next;
		t->minute = 0;
	}
	next = first_bit_from(schedule->minutes, t->minute);
	if (next < 0)
	{
		t->hour++;
		t->minute = 0;
		return false;
	}
	t->minute = next;
	return true;
}

/*
 * The first run of a schedule strictly after 'after'.  An interval runs
 * its length after 'after'; a cron schedule at the start of the first
 * minute after 'after' that it allows, in UTC.  An infinite 'after' is
 * returned as it is.
 */
TimestampTz
sbx_schedule_next(const SbxSchedule *schedule, TimestampTz after)
{
	struct pg_tm tt,
			   *tm = &tt;
	fsec_t		fsec;
	CronMinute	t;
	int			last_year;
	TimestampTz result;

	if (TIMESTAMP_NOT_FINITE(after))
		return after;

	if (schedule->interval_secs > 0)
	{
		if (pg_add_s64_overflow(after, schedule->interval_secs * USECS_PER_SEC,
								&result) ||
			!IS_VALID_TIMESTAMP(result))
			ereport(ERROR,
					(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
					 errmsg("timestamp out of range")));
		return result;
	}

	/* a NULL time zone gives the fields in UTC */
	if (timestamp2tm(after, NULL, tm, &fsec, NULL, NULL) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range")));

	/* start at the next whole minute */
	t.year = tm->tm_year;
	t.month = tm->tm_mon;
	t.day = tm->tm_mday;
	t.hour = tm->tm_hour;
	t.minute = tm->tm_min + 1;
	last_year = t.year + SCHEDULE_SEARCH_YEARS;

	for (;;)
	{
		cron_carry(&t);
		if (t.year > last_year)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("schedule does not run in the %d years after %s",
							SCHEDULE_SEARCH_YEARS, timestamptz_to_str(after))));
		if (cron_step(schedule, &t))
			break;
	}

	memset(tm, 0, sizeof(*tm));
	tm->tm_year = t.year;
	tm->tm_mon = t.month;
	tm->tm_mday = t.day;
	tm->tm_hour = t.hour;
	tm->tm_min = t.minute;
	tm->tm_sec = 0;
	if (tm2timestamp(tm, 0, NULL, &result) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range")));
	return result;
}

/*
 * _next_run(schedule text, after timestamptz) RETURNS timestamptz, STRICT
 *
 * The first run of a schedule after a moment.
 */
Datum
pgsandbox_next_run(PG_FUNCTION_ARGS)
{
	char	   *spec = text_to_cstring(PG_GETARG_TEXT_PP(0));
	TimestampTz after = PG_GETARG_TIMESTAMPTZ(1);
	SbxSchedule schedule;

	sbx_schedule_parse(spec, &schedule);
	pfree(spec);

	PG_RETURN_TIMESTAMPTZ(sbx_schedule_next(&schedule, after));
}
