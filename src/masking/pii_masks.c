/*-------------------------------------------------------------------------
 *
 * pii_masks.c
 *	  The mask suggest_masks() suggests for a column holding a kind of
 *	  personal data: an SQL expression that could replace its values.
 *
 * The suggested expression, for mask(), is computed from the column
 * itself, with pg_catalog.md5 of the source's masking key and its value, so
 * that the same value always gets the same mask, which cannot be reversed
 * without the key: it keeps the column's type (it is cast to it), NULL
 * stays NULL and a value that is not NULL gets a mask that is not either.
 * Masks keep the shape of what they replace where they can (an address of
 * example.invalid, a phone number of +1555, digits for card and identity
 * numbers, an IP address of 10.0.0.0/8, a day of the same year for a date
 * of birth), as far as the column's length allows.  The mask of a unique
 * column takes 16 hex digits of md5 where its type leaves room for them,
 * 12 at least with a prefix or suffix, so that it stays unique for any
 * realistic number of rows.  A column whose type no such mask keeps (json,
 * arrays, composite types) gets NULL if it is nullable and not unique, an
 * empty document or array if it is NOT NULL and not unique; a column for
 * which there is no mask at all, such as a unique date of birth, is not
 * reported, as mask() would not take it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "pii.h"
#include "sbx_masking.h"
#include "utils/builtins.h"

const SbxPiiInfo sbx_pii_info[] = {
	[SBX_PII_EMAIL] = {"an email address", SBX_STYLE_HEX, "user_", "@example.invalid", 12, "user_", 16, 0},
	[SBX_PII_PERSON_NAME] = {"a person's name", SBX_STYLE_HEX, "name_", "", 8, "name_", 16, 0},
	[SBX_PII_LOGIN] = {"a login name", SBX_STYLE_HEX, "user_", "", 12, "user_", 16, 0},
	[SBX_PII_PHONE] = {"a phone number", SBX_STYLE_DIGITS, "+1555", "", 7, "+", 15, 10},
	[SBX_PII_ADDRESS] = {"a postal address", SBX_STYLE_HEX, "addr_", "", 8, "addr_", 16, 0},
	[SBX_PII_CITY] = {"a city", SBX_STYLE_HEX, "city_", "", 8, "city_", 16, 0},
	[SBX_PII_POSTCODE] = {"a postal code", SBX_STYLE_DIGITS, "", "", 5, "", 16, 5},
	[SBX_PII_BIRTH] = {"a date of birth", SBX_STYLE_DATE, "", "", 0, "", 0, 0},
	[SBX_PII_NATIONAL_ID] = {"an identity or tax number", SBX_STYLE_DIGITS, "", "", 9, "", 16, 9},
	[SBX_PII_BANK] = {"a bank account", SBX_STYLE_UPPER, "XX00", "", 18, "XX00", 18, 12},
	[SBX_PII_CARD] = {"a card number", SBX_STYLE_DIGITS, "", "", 16, "", 16, 16},
	[SBX_PII_CARD_CODE] = {"a card security code", SBX_STYLE_DIGITS, "", "", 3, "", 16, 3},
	[SBX_PII_SECRET] = {"a password or secret", SBX_STYLE_HEX, "", "", 32, "", 32, 9},
	[SBX_PII_IP] = {"an IP address", SBX_STYLE_IP, "", "", 0, "", 0, 9},
	[SBX_PII_DEVICE] = {"a device's MAC address", SBX_STYLE_HEX, "", "", 12, "", 16, 0},
	[SBX_PII_DOCUMENT] = {"a document", SBX_STYLE_NONE, "", "", 0, "", 0, 0},
};

/*
 * Fewest md5 characters a text mask with a prefix or suffix is made of
 * (of a unique column: 48 bits, for a million rows about one chance in
 * five hundred of two the same).
 */
#define SBX_MIN_MASK_CHARS		8
#define SBX_MIN_UNIQUE_CHARS	12

/*
 * Fewest characters of a unique column's mask made of digits: fewer, and
 * hex digits are used instead (a digit made of a hex digit is one of ten,
 * unevenly, where a hex digit is one of sixteen).
 */
#define SBX_MIN_UNIQUE_DIGITS	16

/*
 * The largest number of characters a value of a text column may have, or
 * -1 if it has no limit.
 */
static int
sbx_max_chars(const SbxColumn *col)
{
	if ((strcmp(col->basetype, "varchar") == 0 || strcmp(col->basetype, "bpchar") == 0) &&
		col->typmod >= VARHDRSZ)
		return col->typmod - VARHDRSZ;
	return -1;
}

/*
 * The largest number of digits a number mask of a numeric column may have
 * before the decimal point.
 */
static int
sbx_max_digits(const SbxColumn *col, SbxTypeClass class)
{
	if (class == SBX_TYPE_INTEGER)
	{
		if (strcmp(col->basetype, "int2") == 0)
			return 4;
		if (strcmp(col->basetype, "int4") == 0)
			return 9;
		return 18;
	}
	if (class == SBX_TYPE_NUMERIC && col->typmod >= VARHDRSZ)
	{
		int32		tmod = col->typmod - VARHDRSZ;
		int			precision = (tmod >> 16) & 0xffff;
		int			scale = (((tmod & 0x7ff) ^ 1024) - 1024);

		return Min(precision - scale, 18);
	}
	if (strcmp(col->basetype, "float4") == 0)
		return 6;
	return 15;
}

/*
 * Building the expressions.  A column's value goes into md5 as text, after
 * the source's masking key (mask_key.c), and hex digits of md5 make the
 * mask, or a number read from them.  Without the key, which the sandbox
 * never sees, the masks of a column with few possible values (a security
 * code, a phone or identity number) cannot be looked up among the hashes
 * of all of them.
 */
#define SBX_KEY_PREFIX	"pg_catalog.current_setting('" SBX_MASK_KEY_SETTING "') || "

/* The column as md5's argument, after the key. */
static const char *
sbx_md5_arg(const SbxColumn *col, const char *qcol, SbxTypeClass class)
{
	switch (class)
	{
		case SBX_TYPE_TEXT:
			if (strcmp(col->basetype, "text") == 0 ||
				strcmp(col->basetype, "varchar") == 0 ||
				strcmp(col->basetype, "bpchar") == 0)
				return psprintf(SBX_KEY_PREFIX "%s", qcol);
			break;
		case SBX_TYPE_BYTEA:
			/* its text form, \x and hex digits */
			return psprintf(SBX_KEY_PREFIX "%s", qcol);
		case SBX_TYPE_DATE:
			/* not the text of the value, which the session's settings change */
			return psprintf(SBX_KEY_PREFIX "EXTRACT(epoch FROM %s::timestamp)::pg_catalog.text", qcol);
		case SBX_TYPE_TIMESTAMP:
			return psprintf(SBX_KEY_PREFIX "EXTRACT(epoch FROM %s)::pg_catalog.text", qcol);
		default:
			break;
	}
	return psprintf(SBX_KEY_PREFIX "%s::pg_catalog.text", qcol);
}

/* the first n hex digits of md5 of arg */
static void
sbx_append_md5(StringInfo buf, const char *arg, int n)
{
	if (n >= 32)
		appendStringInfo(buf, "pg_catalog.md5(%s)", arg);
	else
		appendStringInfo(buf, "pg_catalog.left(pg_catalog.md5(%s), %d)", arg, n);
}

/* a number made of the first n hex digits of md5 of arg: 4n bits */
static void
sbx_append_md5_number(StringInfo buf, const char *arg, int n)
{
	appendStringInfoString(buf, "('x' || ");
	sbx_append_md5(buf, arg, n);
	appendStringInfo(buf, ")::bit(%d)::%s", 4 * n, 4 * n < 32 ? "integer" : "bigint");
}

/* an IP address: one of 10.0.0.0/8, or for a unique column of 2001:db8::/32 */
static void
sbx_append_ip(StringInfo buf, const char *arg, bool unique)
{
	appendStringInfoString(buf, unique ? "'2001:db8::'::pg_catalog.inet + " :
						   "'10.0.0.0'::pg_catalog.inet + ");
	sbx_append_md5_number(buf, arg, unique ? 15 : 6);
}

/*
 * A text mask of a column: the kind's prefix and suffix, and as many
 * characters made of md5 as it takes, or as fit the column.
 */
static void
sbx_append_text_mask(StringInfo buf, const SbxColumn *col, SbxPii kind,
					 const char *arg)
{
	const SbxPiiInfo *info = &sbx_pii_info[kind];
	SbxTextStyle style = info->style;
	const char *prefix = col->unique ? info->unique_prefix : info->prefix;
	const char *suffix = info->suffix;
	int			chars = col->unique ? info->unique_chars : info->chars;
	int			max = sbx_max_chars(col);

	if (style == SBX_STYLE_DATE)
	{
		/* a date would not keep a unique column unique */
		if (!col->unique && (max < 0 || max >= 10))
		{
			/* a date of 1950 to 1999, as text that no setting changes */
			appendStringInfoString(buf, "pg_catalog.to_char((DATE '1950-01-01' + ");
			sbx_append_md5_number(buf, arg, 7);
			appendStringInfoString(buf, " % 18262)::timestamp, 'YYYY-MM-DD')");
			return;
		}
		style = SBX_STYLE_HEX;
		chars = 32;
	}
	else if (style == SBX_STYLE_IP)
	{
		/* the longest of 10.0.0.0/8 has 14 characters, of 2001:db8::/32 29 */
		if (max < 0 || max >= (col->unique ? 29 : 14))
		{
			appendStringInfoString(buf, "pg_catalog.host(");
			sbx_append_ip(buf, arg, col->unique);
			appendStringInfoChar(buf, ')');
			return;
		}
		style = SBX_STYLE_HEX;
		chars = 32;
	}

	if (max >= 0)
	{
		/* the first form that leaves room enough, or md5's digits alone */
		const char *forms[3][2] = {{prefix, suffix}, {"", suffix}, {"", "@x.invalid"}};
		int			nforms = (kind == SBX_PII_EMAIL) ? 3 : 1;
		int			least = Min(chars, col->unique ? SBX_MIN_UNIQUE_CHARS : SBX_MIN_MASK_CHARS);
		int			f;

		for (f = 0; f < nforms; f++)
		{
			int			room = max - (int) strlen(forms[f][0]) - (int) strlen(forms[f][1]);

			if (room >= least)
			{
				prefix = forms[f][0];
				suffix = forms[f][1];
				chars = Min(chars, room);
				break;
			}
		}
		if (f == nforms)
		{
			prefix = suffix = "";
			chars = Min(max, 32);
		}
	}
	if (col->unique && style == SBX_STYLE_DIGITS && chars < SBX_MIN_UNIQUE_DIGITS)
		style = SBX_STYLE_HEX;

	if (prefix[0] != '\0')
		appendStringInfo(buf, "'%s' || ", prefix);
	switch (style)
	{
		case SBX_STYLE_DIGITS:
			appendStringInfoString(buf, "pg_catalog.translate(");
			sbx_append_md5(buf, arg, chars);
			appendStringInfoString(buf, ", 'abcdef', '012345')");
			break;
		case SBX_STYLE_UPPER:
			appendStringInfoString(buf, "pg_catalog.upper(");
			sbx_append_md5(buf, arg, chars);
			appendStringInfoChar(buf, ')');
			break;
		default:
			sbx_append_md5(buf, arg, chars);
			break;
	}
	if (suffix[0] != '\0')
		appendStringInfo(buf, " || '%s'", suffix);
}

/*
 * The mask of a column holding kind, made for its type, into buf; false if
 * there is none, or such a column is not personal.  The expression's own
 * type (as format_type prints it, or NULL if not known) is returned in
 * *natural; the caller casts to the column's type unless it is that.
 */
bool
sbx_build_mask(StringInfo buf, const SbxColumn *col, SbxPii kind,
			   const char **natural)
{
	SbxTypeClass class = sbx_type_class(col);
	const SbxPiiInfo *info = &sbx_pii_info[kind];
	/* quoted by the source, whose keywords may not be this server's */
	const char *qcol = col->remote_att;
	const char *arg = sbx_md5_arg(col, qcol, class);

	*natural = NULL;
	switch (class)
	{
		case SBX_TYPE_TEXT:
			if (kind == SBX_PII_DOCUMENT)
				break;
			sbx_append_text_mask(buf, col, kind, arg);
			*natural = "text";
			return true;

		case SBX_TYPE_INTEGER:
		case SBX_TYPE_NUMERIC:
		case SBX_TYPE_FLOAT:
			if (kind == SBX_PII_BIRTH && class != SBX_TYPE_FLOAT)
			{
				/* a year of birth: its decade */
				if (col->unique)
					return false;
				appendStringInfo(buf, "%s - %s %% 10", qcol, qcol);
				return true;
			}
			if (info->number_digits == 0)
				return false;
			else
			{
				int			max = sbx_max_digits(col, class);
				int			digits = col->unique ? max : Min(info->number_digits, max);
				char		modulus[32];

				if (digits < 1)
					return false;
				snprintf(modulus, sizeof(modulus), "1%0*d", digits, 0);
				sbx_append_md5_number(buf, arg, 15);
				appendStringInfo(buf, " %% %s", modulus);
				*natural = "bigint";
				return true;
			}

		case SBX_TYPE_DATE:
		case SBX_TYPE_TIMESTAMP:
			if (kind != SBX_PII_BIRTH)
				return false;
			/* a day of the same year: more than one birthday on it */
			if (col->unique)
				return false;
			appendStringInfo(buf, "pg_catalog.date_trunc('year', %s%s) + ",
							 qcol, class == SBX_TYPE_DATE ? "::timestamp" : "");
			sbx_append_md5_number(buf, arg, 7);
			appendStringInfoString(buf, " % 365 * interval '1 day'");
			*natural = strcmp(col->basetype, "timestamptz") == 0 ?
				"timestamp with time zone" : "timestamp without time zone";
			return true;

		case SBX_TYPE_INET:
			sbx_append_ip(buf, arg, col->unique);
			*natural = "inet";
			return true;

		case SBX_TYPE_BYTEA:
			appendStringInfo(buf, "pg_catalog.decode(pg_catalog.md5(%s), 'hex')", arg);
			*natural = "bytea";
			return true;

		case SBX_TYPE_UUID:
			sbx_append_md5(buf, arg, 32);
			*natural = "text";
			return true;

		case SBX_TYPE_JSON:
		case SBX_TYPE_ARRAY:
		case SBX_TYPE_OTHER:
			break;

		case SBX_TYPE_NEVER:
			return false;
	}

	/*
	 * No mask of the value: NULL, or an empty document or array where the
	 * column may not be NULL.  Neither keeps a unique column unique.
	 */
	if (col->unique)
		return false;
	if (!col->notnull)
		appendStringInfoString(buf, "NULL");
	else if (class == SBX_TYPE_JSON || class == SBX_TYPE_ARRAY)
		appendStringInfoString(buf, "'{}'");
	else
		return false;
	return true;
}
