/*-------------------------------------------------------------------------
 *
 * pii.h
 *	  Declarations shared by suggest_masks.c, pii_detect.c and pii_masks.c:
 *	  a source's columns, the kinds of personal data they may hold, and
 *	  what each file offers the others.
 *
 * suggest_masks.c reads the columns of a source and samples their values,
 * pii_detect.c says what a column's name, type and values say it holds,
 * and pii_masks.c makes the suggested mask of a column of a kind.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PGSANDBOX_PII_H
#define PGSANDBOX_PII_H

#include "lib/stringinfo.h"

/* a column of a source's tables, as suggest_masks.c's catalog query reads it */
typedef struct SbxColumn
{
	char	   *nspname;
	char	   *relname;
	char	   *attname;
	char		relkind;
	char	   *remote_rel;		/* schema.table, quoted by the source */
	char	   *remote_att;
	char	   *type;			/* format_type(atttypid, atttypmod) */
	char	   *basetype;		/* pg_type.typname of the base type */
	char		category;		/* pg_type.typcategory */
	int32		typmod;			/* of the base type, -1 if none */
	bool		notnull;
	bool		unique;			/* a column of a unique index */
	Oid			relid;			/* its table, in the source */
	bool		sampled;		/* its values may be read (source_trust.c) */
} SbxColumn;

/* what a personal column holds */
typedef enum SbxPii
{
	SBX_PII_EMAIL,
	SBX_PII_PERSON_NAME,
	SBX_PII_LOGIN,
	SBX_PII_PHONE,
	SBX_PII_ADDRESS,
	SBX_PII_CITY,
	SBX_PII_POSTCODE,
	SBX_PII_BIRTH,
	SBX_PII_NATIONAL_ID,
	SBX_PII_BANK,
	SBX_PII_CARD,
	SBX_PII_CARD_CODE,
	SBX_PII_SECRET,
	SBX_PII_IP,
	SBX_PII_DEVICE,
	SBX_PII_DOCUMENT			/* json holding personal values */
} SbxPii;

/* how a text mask is made of md5's hex digits */
typedef enum SbxTextStyle
{
	SBX_STYLE_HEX,				/* prefix, hex digits, suffix */
	SBX_STYLE_DIGITS,			/* prefix, hex digits a-f made 0-5 */
	SBX_STYLE_UPPER,			/* prefix, upper-case hex digits */
	SBX_STYLE_DATE,				/* a date, YYYY-MM-DD */
	SBX_STYLE_IP,				/* an address of 10.0.0.0/8 or 2001:db8::/32 */
	SBX_STYLE_NONE				/* no text mask */
} SbxTextStyle;

/*
 * For each kind of personal column: what a reason calls it, and its masks.
 * A text mask is prefix, chars characters made of md5, suffix; a unique
 * column gets unique_prefix and unique_chars instead, 15 or more, to keep
 * it unique.  A number mask is a number of number_digits digits at most (0:
 * a number column of that name is not personal: address_no, city_count).
 */
typedef struct SbxPiiInfo
{
	const char *noun;
	SbxTextStyle style;
	const char *prefix;
	const char *suffix;
	int			chars;
	const char *unique_prefix;
	int			unique_chars;
	int			number_digits;
} SbxPiiInfo;

/* indexed by SbxPii (pii_masks.c) */
extern const SbxPiiInfo sbx_pii_info[];

/* what sampled values may look like */
typedef enum SbxShape
{
	SBX_SHAPE_EMAIL,
	SBX_SHAPE_IPV4,
	SBX_SHAPE_IBAN,
	SBX_SHAPE_CARD,
	SBX_SHAPE_PHONE,
	SBX_NUM_SHAPES
} SbxShape;

/* how a column's type is masked */
typedef enum SbxTypeClass
{
	SBX_TYPE_TEXT,				/* string category: text, varchar, citext */
	SBX_TYPE_INTEGER,			/* smallint, integer, bigint */
	SBX_TYPE_NUMERIC,
	SBX_TYPE_FLOAT,
	SBX_TYPE_DATE,
	SBX_TYPE_TIMESTAMP,			/* with or without time zone */
	SBX_TYPE_INET,				/* inet, cidr */
	SBX_TYPE_BYTEA,
	SBX_TYPE_UUID,
	SBX_TYPE_JSON,				/* json, jsonb */
	SBX_TYPE_ARRAY,
	SBX_TYPE_OTHER,				/* composite, enum, geometric, ... */
	SBX_TYPE_NEVER				/* boolean, numbers of other kinds, times,
								 * intervals, internal types */
} SbxTypeClass;

/* pii_detect.c */
extern SbxTypeClass sbx_type_class(const SbxColumn *col);
extern bool sbx_is_people_table(const char *relname);
extern int	sbx_match_name(const char *attname, bool people_table);
extern bool sbx_holds_email(const char *s);
extern int	sbx_value_shape(const char *s);

/* pii_masks.c */
extern bool sbx_build_mask(StringInfo buf, const SbxColumn *col, SbxPii kind,
						   const char **natural);

#endif							/* PGSANDBOX_PII_H */
