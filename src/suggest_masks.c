/*-------------------------------------------------------------------------
 *
 * suggest_masks.c
 *	  pgsandbox.suggest_masks(): the columns of a source that look like they
 *	  hold personal data, each with an SQL expression that could replace its
 *	  values in a sandbox.
 *
 * Over one connection to the source, in a read-only repeatable-read
 * transaction, one catalog query lists the columns of the ordinary and
 * partitioned tables the source's role may read, leaving out the system
 * schemas, whatever belongs to an extension, partitions (their partitioned
 * table stands for them), and the columns mask() refuses: generated ones
 * and those a foreign key uses.  A column is reported
 *
 *	- by its name, split into words (see sbx_name_terms): an email address,
 *	  a person's name, a phone number, a postal address, a date of birth, an
 *	  identity or tax number, a bank account, a card number, a password or
 *	  other secret, an IP address;
 *	- by its type: every inet column;
 *	- by its values: a text column whose name says nothing, or a json or
 *	  jsonb one, is sampled, one query each, and reported when at least half
 *	  the sampled values look like email addresses, IPv4 addresses, IBANs,
 *	  card numbers or phone numbers (documents: hold an email address).
 *
 * The sampled values are only looked at here, never shown: a message says
 * how many looked like what, not what they were.
 *
 * The suggested expression, for mask(), is computed from the column
 * itself, with pg_catalog.md5 of its value, so that the same value always
 * gets the same mask: it keeps the column's type (it is cast to it), NULL
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

#include "fmgr.h"
#include "funcapi.h"
#include "libpq-fe.h"
#include "libpq/libpq-be-fe-helpers.h"
#include "miscadmin.h"
#include "pgsandbox.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"
#include "utils/wait_event.h"

PG_FUNCTION_INFO_V1(pgsandbox_suggest_masks);

#define SBX_MASK_COLS		3

/* how much of a column is sampled */
#define SBX_SAMPLE_ROWS		200
#define SBX_SAMPLE_CHARS	256 /* of a text value: longer ones match no shape */
#define SBX_SAMPLE_DOC_CHARS 4096	/* of a json document */

/* a column name of more words than this is read as its first ones */
#define SBX_MAX_WORDS		16

/*
 * The columns of the source's tables, as the catalog query reads them:
 * name parts, the relation and column as the source quotes them (for the
 * sampling query), the column's type as format_type prints it there, and
 * the name, category and type modifier of its base type (the type itself,
 * or what a domain is over).
 */
static const char sbx_columns_query[] =
"SELECT n.nspname, c.relname, a.attname, c.relkind,"
"       pg_catalog.format('%I.%I', n.nspname, c.relname),"
"       pg_catalog.quote_ident(a.attname),"
"       pg_catalog.format_type(a.atttypid, a.atttypmod),"
"       b.typname, t.typcategory,"
"       CASE WHEN t.typtype OPERATOR(pg_catalog.=) 'd' THEN t.typtypmod ELSE a.atttypmod END,"
"       a.attnotnull,"
"       EXISTS (SELECT FROM pg_catalog.pg_index i"
"                WHERE i.indrelid OPERATOR(pg_catalog.=) c.oid AND i.indisunique"
"                  AND a.attnum OPERATOR(pg_catalog.=) ANY (i.indkey))"
"  FROM pg_catalog.pg_class c"
"  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
"  JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) c.oid"
"  JOIN pg_catalog.pg_type t ON t.oid OPERATOR(pg_catalog.=) a.atttypid"
"  JOIN pg_catalog.pg_type b ON b.oid OPERATOR(pg_catalog.=)"
"       CASE WHEN t.typtype OPERATOR(pg_catalog.=) 'd' THEN t.typbasetype ELSE t.oid END"
" WHERE c.relkind OPERATOR(pg_catalog.=) ANY ('{r,p}')"
"   AND NOT c.relispartition"
"   AND NOT pg_catalog.starts_with(n.nspname::pg_catalog.text, 'pg_')"
"   AND n.nspname OPERATOR(pg_catalog.<>) 'information_schema'"
"   AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped"
"   AND a.attgenerated OPERATOR(pg_catalog.=) ''"
"   AND NOT EXISTS (SELECT FROM pg_catalog.pg_constraint k"
"                    WHERE k.contype OPERATOR(pg_catalog.=) 'f'"
"                      AND ((k.conrelid OPERATOR(pg_catalog.=) c.oid"
"                            AND a.attnum OPERATOR(pg_catalog.=) ANY (k.conkey))"
"                        OR (k.confrelid OPERATOR(pg_catalog.=) c.oid"
"                            AND a.attnum OPERATOR(pg_catalog.=) ANY (k.confkey))))"
"   AND pg_catalog.has_table_privilege(c.oid, 'SELECT')"
"   AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend d"
"                    WHERE d.deptype OPERATOR(pg_catalog.=) 'e'"
"                      AND ((d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"
"                            AND d.objid OPERATOR(pg_catalog.=) c.oid)"
"                        OR (d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass"
"                            AND d.objid OPERATOR(pg_catalog.=) n.oid)))"
" ORDER BY n.nspname, c.relname, a.attnum";

#define SBX_COLUMNS_QUERY_COLS 12

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

static const SbxPiiInfo sbx_pii_info[] = {
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
 * The words of column names that say a column is personal.  A column's
 * name is split into words at anything but a letter or a digit, lower
 * case, the digits that end a word dropped ("Email2", "address_line_1").
 * A term matches one word or several adjacent words written together:
 * "first_name", "FirstName" and "firstname" all match "firstname", and
 * "e_mail" matches "email".  A GLUED term also matches a word it begins
 * or ends ("emailaddress", "billingemail", "cellphone", "birthdate"), a
 * WHOLE one only the whole name, and only in a table named after people
 * (sbx_people_words: users, customers, people, employees, members,
 * accounts, contacts, patients, staff, clients and the like).  Terms are
 * tried in this order, those that hold another term first (ipaddress
 * before address, cardholder before card, voicemail before email,
 * birthplace before birth), and the first that matches decides:
 *
 *	email		email*, *email, mail
 *	names		first/last/full/middle/given/family/maiden/fore/sur name, nickname,
 *				customer/client/contact/employee/member/patient/person/owner/
 *				holder/recipient/sender/guest/student/buyer name, cardholder,
 *				accountholder; in a people table only: name, displayname
 *	login		in a people table only: username, login, loginname
 *	phone		phone*, *phone, voicemail, mobile, tel, fax, msisdn
 *	address		address*, *address, street*, *street, city, birthplace,
 *				placeofbirth, zip, zipcode, postcode, postalcode, postal
 *	birth		birth*, *birth, dob
 *	identity	ssn, socialsecurity, nationalid, nationalinsurance, nin,
 *				passport, taxid, taxnumber, driverlicense, driverslicense
 *	bank		iban, bankaccount, accountnumber, routingnumber, sortcode, bic,
 *				swift
 *	card		creditcard, cardnumber, ccnumber, card, pan; cvv, cvc,
 *				securitycode
 *	secrets		password, passwd, passphrase, pwd, secret, token, apikey; in a
 *				people table only: hash
 *	IP			ipaddress, ip, ipv4, ipv6, remoteaddr
 *	MAC			macaddress
 *
 * A name whose last word qualifies the term rather than being part of it
 * (sbx_qualifier_words: email_verified, address_id, phone_type,
 * token_expires_at) is not personal.
 */
#define SBX_TERM_GLUED	0x01
#define SBX_TERM_WHOLE	0x02

typedef struct SbxNameTerm
{
	const char *term;
	SbxPii		kind;
	int			flags;
} SbxNameTerm;

static const SbxNameTerm sbx_name_terms[] = {
	/* terms that hold another term come first */
	{"ipaddress", SBX_PII_IP, SBX_TERM_GLUED},
	{"cardholder", SBX_PII_PERSON_NAME, SBX_TERM_GLUED},
	{"accountholder", SBX_PII_PERSON_NAME, SBX_TERM_GLUED},
	{"emailaddress", SBX_PII_EMAIL, SBX_TERM_GLUED},
	{"voicemail", SBX_PII_PHONE, SBX_TERM_GLUED},
	{"macaddress", SBX_PII_DEVICE, SBX_TERM_GLUED},
	{"birthplace", SBX_PII_CITY, SBX_TERM_GLUED},
	{"placeofbirth", SBX_PII_CITY, SBX_TERM_GLUED},

	{"email", SBX_PII_EMAIL, SBX_TERM_GLUED},
	{"mail", SBX_PII_EMAIL, 0},

	{"firstname", SBX_PII_PERSON_NAME, SBX_TERM_GLUED},
	{"lastname", SBX_PII_PERSON_NAME, SBX_TERM_GLUED},
	{"fullname", SBX_PII_PERSON_NAME, SBX_TERM_GLUED},
	{"middlename", SBX_PII_PERSON_NAME, SBX_TERM_GLUED},
	{"givenname", SBX_PII_PERSON_NAME, SBX_TERM_GLUED},
	{"familyname", SBX_PII_PERSON_NAME, SBX_TERM_GLUED},
	{"maidenname", SBX_PII_PERSON_NAME, SBX_TERM_GLUED},
	{"forename", SBX_PII_PERSON_NAME, SBX_TERM_GLUED},
	{"surname", SBX_PII_PERSON_NAME, SBX_TERM_GLUED},
	{"nickname", SBX_PII_PERSON_NAME, SBX_TERM_GLUED},
	{"customername", SBX_PII_PERSON_NAME, SBX_TERM_GLUED},
	{"clientname", SBX_PII_PERSON_NAME, SBX_TERM_GLUED},
	{"contactname", SBX_PII_PERSON_NAME, SBX_TERM_GLUED},
	{"employeename", SBX_PII_PERSON_NAME, SBX_TERM_GLUED},
	{"membername", SBX_PII_PERSON_NAME, SBX_TERM_GLUED},
	{"patientname", SBX_PII_PERSON_NAME, SBX_TERM_GLUED},
	{"personname", SBX_PII_PERSON_NAME, SBX_TERM_GLUED},
	{"ownername", SBX_PII_PERSON_NAME, SBX_TERM_GLUED},
	{"holdername", SBX_PII_PERSON_NAME, SBX_TERM_GLUED},
	{"recipientname", SBX_PII_PERSON_NAME, SBX_TERM_GLUED},
	{"sendername", SBX_PII_PERSON_NAME, SBX_TERM_GLUED},
	{"guestname", SBX_PII_PERSON_NAME, SBX_TERM_GLUED},
	{"studentname", SBX_PII_PERSON_NAME, SBX_TERM_GLUED},
	{"buyername", SBX_PII_PERSON_NAME, SBX_TERM_GLUED},
	{"name", SBX_PII_PERSON_NAME, SBX_TERM_WHOLE},
	{"displayname", SBX_PII_PERSON_NAME, SBX_TERM_WHOLE},

	{"username", SBX_PII_LOGIN, SBX_TERM_WHOLE},
	{"login", SBX_PII_LOGIN, SBX_TERM_WHOLE},
	{"loginname", SBX_PII_LOGIN, SBX_TERM_WHOLE},

	{"phone", SBX_PII_PHONE, SBX_TERM_GLUED},
	{"mobile", SBX_PII_PHONE, 0},
	{"tel", SBX_PII_PHONE, 0},
	{"fax", SBX_PII_PHONE, 0},
	{"msisdn", SBX_PII_PHONE, 0},

	{"address", SBX_PII_ADDRESS, SBX_TERM_GLUED},
	{"street", SBX_PII_ADDRESS, SBX_TERM_GLUED},
	{"city", SBX_PII_CITY, 0},
	{"zip", SBX_PII_POSTCODE, 0},
	{"zipcode", SBX_PII_POSTCODE, SBX_TERM_GLUED},
	{"postcode", SBX_PII_POSTCODE, SBX_TERM_GLUED},
	{"postalcode", SBX_PII_POSTCODE, SBX_TERM_GLUED},
	{"postal", SBX_PII_POSTCODE, 0},

	{"birth", SBX_PII_BIRTH, SBX_TERM_GLUED},
	{"dob", SBX_PII_BIRTH, 0},

	{"ssn", SBX_PII_NATIONAL_ID, 0},
	{"socialsecurity", SBX_PII_NATIONAL_ID, SBX_TERM_GLUED},
	{"nationalid", SBX_PII_NATIONAL_ID, SBX_TERM_GLUED},
	{"nationalinsurance", SBX_PII_NATIONAL_ID, SBX_TERM_GLUED},
	{"nin", SBX_PII_NATIONAL_ID, 0},
	{"passport", SBX_PII_NATIONAL_ID, SBX_TERM_GLUED},
	{"taxid", SBX_PII_NATIONAL_ID, SBX_TERM_GLUED},
	{"taxnumber", SBX_PII_NATIONAL_ID, SBX_TERM_GLUED},
	{"driverlicense", SBX_PII_NATIONAL_ID, SBX_TERM_GLUED},
	{"driverslicense", SBX_PII_NATIONAL_ID, SBX_TERM_GLUED},

	{"iban", SBX_PII_BANK, SBX_TERM_GLUED},
	{"bankaccount", SBX_PII_BANK, SBX_TERM_GLUED},
	{"accountnumber", SBX_PII_BANK, SBX_TERM_GLUED},
	{"routingnumber", SBX_PII_BANK, SBX_TERM_GLUED},
	{"sortcode", SBX_PII_BANK, SBX_TERM_GLUED},
	{"bic", SBX_PII_BANK, 0},
	{"swift", SBX_PII_BANK, 0},

	{"creditcard", SBX_PII_CARD, SBX_TERM_GLUED},
	{"cardnumber", SBX_PII_CARD, SBX_TERM_GLUED},
	{"ccnumber", SBX_PII_CARD, SBX_TERM_GLUED},
	{"card", SBX_PII_CARD, 0},
	{"pan", SBX_PII_CARD, 0},
	{"cvv", SBX_PII_CARD_CODE, 0},
	{"cvc", SBX_PII_CARD_CODE, 0},
	{"securitycode", SBX_PII_CARD_CODE, SBX_TERM_GLUED},

	{"password", SBX_PII_SECRET, SBX_TERM_GLUED},
	{"passwd", SBX_PII_SECRET, SBX_TERM_GLUED},
	{"passphrase", SBX_PII_SECRET, SBX_TERM_GLUED},
	{"pwd", SBX_PII_SECRET, 0},
	{"secret", SBX_PII_SECRET, SBX_TERM_GLUED},
	{"token", SBX_PII_SECRET, SBX_TERM_GLUED},
	{"apikey", SBX_PII_SECRET, SBX_TERM_GLUED},
	{"hash", SBX_PII_SECRET, SBX_TERM_WHOLE},

	{"ip", SBX_PII_IP, 0},
	{"ipv", SBX_PII_IP, 0},		/* ipv4, ipv6 without their digits */
	{"remoteaddr", SBX_PII_IP, SBX_TERM_GLUED},
};

/* last words that make a column about a personal value, not holding it */
static const char *const sbx_qualifier_words[] = {
	"algorithm", "at", "attempts", "brand", "changed", "cnt", "confirmed",
	"count", "country", "created", "disabled", "domain", "enabled",
	"expiration", "expires", "expiry", "flag", "format", "guid", "hint",
	"host", "id", "ids", "kind", "label", "len", "length", "mask", "masked",
	"on", "policy", "port", "prefix", "provider", "required", "salt",
	"sent", "server", "size", "status", "template", "type", "updated",
	"uuid", "valid", "validated", "verified", "version", "visibility",
	"visible",
	NULL
};

/* words of the names of tables of people (a word may also end with one) */
static const char *const sbx_people_words[] = {
	"account", "accounts", "applicant", "applicants", "candidate",
	"candidates", "client", "clients", "contact", "contacts", "customer",
	"customers", "employee", "employees", "guest", "guests", "member",
	"members", "patient", "patients", "people", "person", "persons",
	"profile", "profiles", "staff", "student", "students", "subscriber",
	"subscribers", "user", "users",
	NULL
};

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

static const struct
{
	const char *one;			/* "the one sampled value looks like ..." */
	const char *many;			/* "n of m sampled values look like ..." */
	SbxPii		kind;
}			sbx_shapes[SBX_NUM_SHAPES] = {
	[SBX_SHAPE_EMAIL] = {"an email address", "email addresses", SBX_PII_EMAIL},
	[SBX_SHAPE_IPV4] = {"an IPv4 address", "IPv4 addresses", SBX_PII_IP},
	[SBX_SHAPE_IBAN] = {"an IBAN", "IBANs", SBX_PII_BANK},
	[SBX_SHAPE_CARD] = {"a card number", "card numbers", SBX_PII_CARD},
	[SBX_SHAPE_PHONE] = {"a phone number", "phone numbers", SBX_PII_PHONE},
};

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

/* a row of the result */
typedef struct SbxFinding
{
	char	   *target;
	char	   *reason;
	char	   *expression;
} SbxFinding;

static SbxTypeClass
sbx_type_class(const SbxColumn *col)
{
	const char *t = col->basetype;

	if (strcmp(t, "inet") == 0 || strcmp(t, "cidr") == 0)
		return SBX_TYPE_INET;
	if (strcmp(t, "int2") == 0 || strcmp(t, "int4") == 0 || strcmp(t, "int8") == 0)
		return SBX_TYPE_INTEGER;
	if (strcmp(t, "numeric") == 0)
		return SBX_TYPE_NUMERIC;
	if (strcmp(t, "float4") == 0 || strcmp(t, "float8") == 0)
		return SBX_TYPE_FLOAT;
	if (strcmp(t, "date") == 0)
		return SBX_TYPE_DATE;
	if (strcmp(t, "timestamp") == 0 || strcmp(t, "timestamptz") == 0)
		return SBX_TYPE_TIMESTAMP;
	if (strcmp(t, "bytea") == 0)
		return SBX_TYPE_BYTEA;
	if (strcmp(t, "uuid") == 0)
		return SBX_TYPE_UUID;
	if (strcmp(t, "json") == 0 || strcmp(t, "jsonb") == 0)
		return SBX_TYPE_JSON;

	switch (col->category)
	{
		case 'S':
			return SBX_TYPE_TEXT;
		case 'A':
			return SBX_TYPE_ARRAY;
		case 'B':				/* boolean */
		case 'D':				/* date/time of other kinds */
		case 'N':				/* money, oid, reg* */
		case 'P':				/* pseudo-types */
		case 'T':				/* interval */
		case 'X':				/* unknown */
		case 'Z':				/* internal */
			return SBX_TYPE_NEVER;
		default:
			return SBX_TYPE_OTHER;
	}
}

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

/* Split a name into its words, as sbx_name_terms describes. */
static int
sbx_split_words(const char *name, char **words)
{
	char	   *copy = pstrdup(name);
	char	   *p = copy;
	int			n = 0;

	while (*p != '\0' && n < SBX_MAX_WORDS)
	{
		char	   *start;
		char	   *end;

		/* letters, digits and anything not ASCII make words */
		while (*p != '\0' && !IS_HIGHBIT_SET(*p) && !isalnum((unsigned char) *p))
			p++;
		if (*p == '\0')
			break;
		start = p;
		while (*p != '\0' && (IS_HIGHBIT_SET(*p) || isalnum((unsigned char) *p)))
		{
			*p = pg_ascii_tolower((unsigned char) *p);
			p++;
		}
		end = p;
		if (*p != '\0')
			*p++ = '\0';
		while (end > start && isdigit((unsigned char) end[-1]))
			*--end = '\0';
		if (end > start)
			words[n++] = start;
	}
	return n;
}

static bool
sbx_word_in(const char *word, const char *const *list)
{
	for (int i = 0; list[i] != NULL; i++)
	{
		if (strcmp(word, list[i]) == 0)
			return true;
	}
	return false;
}

/* Whether a word begins or ends with a term, and is longer than it. */
static bool
sbx_word_glues(const char *word, const char *term)
{
	size_t		wlen = strlen(word);
	size_t		tlen = strlen(term);

	return wlen > tlen &&
		(strncmp(word, term, tlen) == 0 || strcmp(word + wlen - tlen, term) == 0);
}

/* Whether a table's name says it holds people. */
static bool
sbx_is_people_table(const char *relname)
{
	char	   *words[SBX_MAX_WORDS];
	int			n = sbx_split_words(relname, words);

	for (int i = 0; i < n; i++)
	{
		size_t		wlen = strlen(words[i]);

		for (int k = 0; sbx_people_words[k] != NULL; k++)
		{
			size_t		plen = strlen(sbx_people_words[k]);

			if (wlen >= plen && strcmp(words[i] + wlen - plen, sbx_people_words[k]) == 0)
				return true;
		}
	}
	return false;
}

/*
 * Whether term matches words first..last of a name, written together, or,
 * for a GLUED term, is glued to word first alone.
 */
static bool
sbx_term_at(const SbxNameTerm *term, char **words, int first, int *last, int n)
{
	size_t		tlen = strlen(term->term);
	size_t		len = 0;

	for (int j = first; j < n; j++)
	{
		size_t		wlen = strlen(words[j]);

		if (len + wlen > tlen || strncmp(term->term + len, words[j], wlen) != 0)
			break;
		len += wlen;
		if (len == tlen)
		{
			*last = j;
			return true;
		}
	}
	if ((term->flags & SBX_TERM_GLUED) && sbx_word_glues(words[first], term->term))
	{
		*last = first;
		return true;
	}
	return false;
}

/*
 * What a column's name says it holds, or -1 if nothing personal.
 */
static int
sbx_match_name(const char *attname, bool people_table)
{
	char	   *words[SBX_MAX_WORDS];
	int			n = sbx_split_words(attname, words);

	if (n == 0)
		return -1;
	for (int t = 0; t < lengthof(sbx_name_terms); t++)
	{
		const SbxNameTerm *term = &sbx_name_terms[t];

		if (term->flags & SBX_TERM_WHOLE)
		{
			int			last;

			if (people_table && sbx_term_at(term, words, 0, &last, n) && last == n - 1)
				return term->kind;
			continue;
		}
		for (int i = 0; i < n; i++)
		{
			int			last;

			if (!sbx_term_at(term, words, i, &last, n))
				continue;
			/* "email_verified": about an email address, not one */
			if (last < n - 1 && sbx_word_in(words[n - 1], sbx_qualifier_words))
				continue;
			return term->kind;
		}
	}
	return -1;
}

/*
 * The shapes of sampled values.  They take the value as the source prints
 * it, and match what the comments say, no more: these are hints.
 */

static bool
sbx_is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* ^[^@\s]+@[^@\s]+\.[^@\s]+$ */
static bool
sbx_looks_like_email(const char *s)
{
	const char *at = strchr(s, '@');
	const char *p;
	bool		dot = false;

	if (at == NULL || at == s || strchr(at + 1, '@') != NULL)
		return false;
	for (p = s; *p != '\0'; p++)
	{
		if (sbx_is_space(*p))
			return false;
		/* a dot in the domain, with something either side */
		if (*p == '.' && p > at + 1 && p[1] != '\0')
			dot = true;
	}
	return dot;
}

/* four decimal numbers from 0 to 255, with dots between */
static bool
sbx_looks_like_ipv4(const char *s)
{
	for (int part = 0; part < 4; part++)
	{
		int			value = 0;
		int			ndigits = 0;

		while (isdigit((unsigned char) *s) && ndigits < 4)
		{
			value = value * 10 + (*s++ - '0');
			ndigits++;
		}
		if (ndigits == 0 || ndigits > 3 || value > 255)
			return false;
		if (part < 3 && *s++ != '.')
			return false;
	}
	return *s == '\0';
}

/*
 * ^[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}$ once spaces are taken out, and whose
 * check digits are right (ISO 13616: the number, its first four characters
 * moved to its end and letters read as 10 to 35, is 1 modulo 97).
 */
static bool
sbx_looks_like_iban(const char *s)
{
	char		iban[35];
	int			n = 0;
	int			remainder = 0;

	for (; *s != '\0'; s++)
	{
		if (*s == ' ')
			continue;
		if (n == 34 || !((*s >= 'A' && *s <= 'Z') || isdigit((unsigned char) *s)))
			return false;
		iban[n++] = *s;
	}
	if (n < 15 || !(iban[0] >= 'A' && iban[0] <= 'Z') || !(iban[1] >= 'A' && iban[1] <= 'Z') ||
		!isdigit((unsigned char) iban[2]) || !isdigit((unsigned char) iban[3]))
		return false;
	for (int i = 0; i < n; i++)
	{
		char		c = iban[(i + 4) % n];

		if (isdigit((unsigned char) c))
			remainder = (remainder * 10 + (c - '0')) % 97;
		else
			remainder = (remainder * 100 + (c - 'A' + 10)) % 97;
	}
	return remainder == 1;
}

/*
 * 13 to 19 digits, not all zero, single spaces or dashes allowed between
 * them, that pass the Luhn check.
 */
static bool
sbx_looks_like_card(const char *s)
{
	int			digits[19];
	int			n = 0;
	int			sum = 0;
	char		prev = '\0';

	for (; *s != '\0'; s++)
	{
		if (isdigit((unsigned char) *s))
		{
			if (n == lengthof(digits))
				return false;
			digits[n++] = *s - '0';
		}
		else if ((*s != ' ' && *s != '-') || !isdigit((unsigned char) prev))
			return false;
		prev = *s;
	}
	if (n < 13 || !isdigit((unsigned char) prev))
		return false;
	for (int i = 0; i < n; i++)
	{
		int			d = digits[n - 1 - i];

		if (i % 2 == 1)
		{
			d *= 2;
			if (d > 9)
				d -= 9;
		}
		sum += d;
	}
	/* 0000000000000 is a placeholder */
	return sum > 0 && sum % 10 == 0;
}

/*
 * ^\+?[0-9(][0-9 ()./-]{6,}[0-9]$ with 7 to 15 digits; digits alone only
 * with a plus sign or 10 digits and more (not a number of some other
 * kind), and neither a date (2024-01-31, 31.01.2024) nor a number with a
 * decimal point (1234567.89) or dots between thousands (12.345.678).
 */
static bool
sbx_looks_like_phone(const char *s)
{
	const char *p;
	int			ndigits = 0;
	int			nseparators = 0;
	int			ndots = 0;
	bool		plus = false;
	int			groups[4];
	int			ngroups = 0;
	int			run = 0;
	char		sep = '\0';
	bool		same_sep = true;
	bool		thousands = true;	/* every group after the first has 3 */

	if (*s == '+')
	{
		plus = true;
		s++;
	}
	if (!(isdigit((unsigned char) *s) || *s == '(') || strlen(s) < 8)
		return false;
	for (p = s; *p != '\0'; p++)
	{
		if (isdigit((unsigned char) *p))
		{
			ndigits++;
			run++;
			continue;
		}
		if (strchr(" ()./-", *p) == NULL)
			return false;
		nseparators++;
		if (*p == '.')
			ndots++;
		if (run > 0)
		{
			if (ngroups < lengthof(groups))
				groups[ngroups] = run;
			if (ngroups > 0 && run != 3)
				thousands = false;
			ngroups++;
			run = 0;
		}
		if (sep != '\0' && sep != *p)
			same_sep = false;
		sep = *p;
	}
	if (!isdigit((unsigned char) p[-1]) || ndigits < 7 || ndigits > 15)
		return false;
	if (ngroups < lengthof(groups))
		groups[ngroups] = run;
	if (ngroups > 0 && run != 3)
		thousands = false;
	ngroups++;

	if (nseparators == 0)
		return plus || ndigits >= 10;
	if (!plus && nseparators == 1 && ndots == 1)
		return false;			/* 1234567.89 */
	if (!plus && nseparators == ndots && thousands)
		return false;			/* 12.345.678 */
	if (!plus && ngroups == 3 && nseparators == 2 && same_sep && strchr("-./", sep) &&
		((groups[0] == 4 && groups[1] <= 2 && groups[2] <= 2) ||
		 (groups[0] <= 2 && groups[1] <= 2 && groups[2] == 4)))
		return false;			/* a date */
	return true;
}

/* Whether a text holds something shaped like an email address. */
static bool
sbx_holds_email(const char *s)
{
	for (const char *at = strchr(s, '@'); at != NULL; at = strchr(at + 1, '@'))
	{
		const char *p = at + 1;
		bool		dot = false;

		if (at == s || !(isalnum((unsigned char) at[-1]) || strchr("._%+-", at[-1])))
			continue;
		while (isalnum((unsigned char) *p) || *p == '-' || *p == '.')
		{
			if (*p == '.' && p > at + 1 && (isalnum((unsigned char) p[1]) || p[1] == '-'))
				dot = true;
			p++;
		}
		if (dot)
			return true;
	}
	return false;
}

static int
sbx_value_shape(const char *s)
{
	if (sbx_looks_like_email(s))
		return SBX_SHAPE_EMAIL;
	if (sbx_looks_like_ipv4(s))
		return SBX_SHAPE_IPV4;
	if (sbx_looks_like_iban(s))
		return SBX_SHAPE_IBAN;
	if (sbx_looks_like_card(s))
		return SBX_SHAPE_CARD;
	if (sbx_looks_like_phone(s))
		return SBX_SHAPE_PHONE;
	return -1;
}

/*
 * Building the expressions.  A column's value goes into md5 as text, and
 * hex digits of md5 make the mask, or a number read from them.
 */

/* The column as md5's argument. */
static const char *
sbx_md5_arg(const SbxColumn *col, const char *qcol, SbxTypeClass class)
{
	switch (class)
	{
		case SBX_TYPE_TEXT:
			if (strcmp(col->basetype, "text") == 0 ||
				strcmp(col->basetype, "varchar") == 0 ||
				strcmp(col->basetype, "bpchar") == 0)
				return qcol;
			break;
		case SBX_TYPE_BYTEA:
			return qcol;
		case SBX_TYPE_DATE:
			/* not the text of the value, which the session's settings change */
			return psprintf("EXTRACT(epoch FROM %s::timestamp)::pg_catalog.text", qcol);
		case SBX_TYPE_TIMESTAMP:
			return psprintf("EXTRACT(epoch FROM %s)::pg_catalog.text", qcol);
		default:
			break;
	}
	return psprintf("%s::pg_catalog.text", qcol);
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
static bool
sbx_build_mask(StringInfo buf, const SbxColumn *col, SbxPii kind,
			   const char **natural)
{
	SbxTypeClass class = sbx_type_class(col);
	const SbxPiiInfo *info = &sbx_pii_info[kind];
	const char *qcol = quote_identifier(col->attname);
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

/*
 * A finding for a column holding kind, allocated in result_cxt, or NULL if
 * there is no mask for it.  reason says why the column is reported.
 */
static SbxFinding *
sbx_make_finding(const SbxColumn *col, SbxPii kind, const char *reason,
				 MemoryContext result_cxt)
{
	SbxFinding *finding;
	StringInfoData expr;
	const char *natural;
	char	   *target;
	char	   *expression;

	initStringInfo(&expr);
	if (!sbx_build_mask(&expr, col, kind, &natural))
		return NULL;

	target = psprintf("%s.%s.%s", quote_identifier(col->nspname),
					  quote_identifier(col->relname),
					  quote_identifier(col->attname));
	if (natural != NULL && strcmp(natural, col->type) == 0)
		expression = expr.data;
	else if (strcmp(expr.data, "NULL") == 0 || strcmp(expr.data, "'{}'") == 0)
		expression = psprintf("%s::%s", expr.data, col->type);
	else
		expression = psprintf("(%s)::%s", expr.data, col->type);

	finding = MemoryContextAlloc(result_cxt, sizeof(SbxFinding));
	finding->target = MemoryContextStrdup(result_cxt, target);
	finding->reason = MemoryContextStrdup(result_cxt, reason);
	finding->expression = MemoryContextStrdup(result_cxt, expression);
	return finding;
}

/* Run a command on the source that must succeed. */
static void
sbx_source_command(PGconn *conn, const char *source, const char *sql)
{
	PGresult   *res = libpqsrv_exec(conn, sql, PG_WAIT_EXTENSION);

	if (PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		char	   *msg = sbx_remote_error(conn, res);

		PQclear(res);
		ereport(ERROR,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
				 errmsg("could not prepare the session on source \"%s\"", source),
				 errdetail_internal("%s", msg)));
	}
	PQclear(res);
}

/* The columns of the source's tables, from sbx_columns_query. */
static SbxColumn *
sbx_read_columns(PGconn *conn, const char *source, int *ncolumns)
{
	PGresult   *res = libpqsrv_exec(conn, sbx_columns_query, PG_WAIT_EXTENSION);
	SbxColumn  *columns;
	int			n;

	if (PQresultStatus(res) != PGRES_TUPLES_OK ||
		PQnfields(res) != SBX_COLUMNS_QUERY_COLS)
	{
		char	   *msg = sbx_remote_error(conn, res);

		PQclear(res);
		ereport(ERROR,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
				 errmsg("could not read the columns of source \"%s\"", source),
				 errdetail_internal("%s", msg)));
	}
	n = PQntuples(res);
	columns = palloc0(sizeof(SbxColumn) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		SbxColumn  *col = &columns[i];

		col->nspname = pstrdup(PQgetvalue(res, i, 0));
		col->relname = pstrdup(PQgetvalue(res, i, 1));
		col->attname = pstrdup(PQgetvalue(res, i, 2));
		col->relkind = PQgetvalue(res, i, 3)[0];
		col->remote_rel = pstrdup(PQgetvalue(res, i, 4));
		col->remote_att = pstrdup(PQgetvalue(res, i, 5));
		col->type = pstrdup(PQgetvalue(res, i, 6));
		col->basetype = pstrdup(PQgetvalue(res, i, 7));
		col->category = PQgetvalue(res, i, 8)[0];
		col->typmod = atoi(PQgetvalue(res, i, 9));
		col->notnull = PQgetvalue(res, i, 10)[0] == 't';
		col->unique = PQgetvalue(res, i, 11)[0] == 't';
	}
	PQclear(res);
	*ncolumns = n;
	return columns;
}

/*
 * Sample a column's values: the shape most of them have, if at least half
 * of them have it, or -1.  For a document (json), whether at least half of
 * them hold an email address.  *nsampled and *nshaped say how many values
 * were read and how many had the shape.
 */
static int
sbx_sample_column(PGconn *conn, const char *source, const SbxColumn *col,
				  bool document, int *nsampled, int *nshaped)
{
	char	   *sql;
	PGresult   *res;
	int			counts[SBX_NUM_SHAPES] = {0};
	int			n;
	int			best = -1;

	/* a partitioned table's own rows are its partitions' */
	sql = psprintf("SELECT pg_catalog.left(%s::pg_catalog.text, %d) FROM %s%s"
				   " WHERE %s IS NOT NULL LIMIT %d",
				   col->remote_att,
				   document ? SBX_SAMPLE_DOC_CHARS : SBX_SAMPLE_CHARS + 1,
				   col->relkind == 'p' ? "" : "ONLY ", col->remote_rel,
				   col->remote_att, SBX_SAMPLE_ROWS);
	res = libpqsrv_exec(conn, sql, PG_WAIT_EXTENSION);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQnfields(res) != 1)
	{
		char	   *msg = sbx_remote_error(conn, res);

		PQclear(res);
		ereport(ERROR,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
				 errmsg("could not sample column %s.%s of source \"%s\"",
						col->remote_rel, col->remote_att, source),
				 errdetail_internal("%s", msg)));
	}

	/* the values stay in the result, and go with it */
	n = PQntuples(res);
	for (int i = 0; i < n; i++)
	{
		const char *value = PQgetvalue(res, i, 0);

		if (document)
		{
			if (sbx_holds_email(value))
				counts[SBX_SHAPE_EMAIL]++;
		}
		else if (PQgetlength(res, i, 0) <= SBX_SAMPLE_CHARS)
		{
			int			shape = sbx_value_shape(value);

			if (shape >= 0)
				counts[shape]++;
		}
	}
	PQclear(res);

	for (int s = 0; s < SBX_NUM_SHAPES; s++)
	{
		if (counts[s] > 0 && counts[s] * 2 >= n && (best < 0 || counts[s] > counts[best]))
			best = s;
	}
	*nsampled = n;
	*nshaped = best >= 0 ? counts[best] : 0;
	return best;
}

/*
 * Look at one column; append what is found to *findings, in result_cxt.
 */
static void
sbx_check_column(PGconn *conn, const char *source, const SbxColumn *col,
				 bool people_table, MemoryContext result_cxt, List **findings)
{
	SbxTypeClass class = sbx_type_class(col);
	int			kind = sbx_match_name(col->attname, people_table);
	const char *reason = NULL;
	SbxFinding *finding;
	MemoryContext old;

	if (class == SBX_TYPE_NEVER)
		return;

	if (strcmp(col->basetype, "inet") == 0 && kind != SBX_PII_IP)
	{
		kind = SBX_PII_IP;
		reason = "type inet holds IP addresses";
	}
	else if (kind >= 0)
		reason = psprintf("name looks like %s", sbx_pii_info[kind].noun);
	else if (class == SBX_TYPE_TEXT || class == SBX_TYPE_JSON)
	{
		bool		document = (class == SBX_TYPE_JSON);
		int			nsampled;
		int			nshaped;
		int			shape = sbx_sample_column(conn, source, col, document,
											  &nsampled, &nshaped);

		if (shape < 0)
			return;
		kind = document ? SBX_PII_DOCUMENT : sbx_shapes[shape].kind;
		if (document && nsampled == 1)
			reason = "the one sampled document holds an email address";
		else if (document)
			reason = psprintf("%d of %d sampled documents hold email addresses",
							  nshaped, nsampled);
		else if (nsampled == 1)
			reason = psprintf("the one sampled value looks like %s",
							  sbx_shapes[shape].one);
		else
			reason = psprintf("%d of %d sampled values look like %s",
							  nshaped, nsampled, sbx_shapes[shape].many);
	}
	else
		return;

	finding = sbx_make_finding(col, (SbxPii) kind, reason, result_cxt);
	if (finding != NULL)
	{
		old = MemoryContextSwitchTo(result_cxt);
		*findings = lappend(*findings, finding);
		MemoryContextSwitchTo(old);
	}
}

/*
 * The findings of a source, over its connection.
 */
static List *
sbx_find_personal_columns(PGconn *conn, const char *source)
{
	MemoryContext result_cxt = CurrentMemoryContext;
	MemoryContext column_cxt;
	SbxColumn  *columns;
	int			ncolumns;
	List	   *findings = NIL;
	bool		people_table = false;

	/* the system's operators and functions only, whatever the source says */
	(void) sbx_remote_value(conn,
							"SELECT pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', false)",
							psprintf("the settings of source \"%s\"", source));
	sbx_source_command(conn, source, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");

	columns = sbx_read_columns(conn, source, &ncolumns);

	column_cxt = AllocSetContextCreate(CurrentMemoryContext,
									   "pgsandbox suggest_masks column",
									   ALLOCSET_SMALL_SIZES);
	for (int i = 0; i < ncolumns; i++)
	{
		const SbxColumn *col = &columns[i];
		MemoryContext old;

		CHECK_FOR_INTERRUPTS();
		MemoryContextReset(column_cxt);
		old = MemoryContextSwitchTo(column_cxt);

		/* the columns of a table come together */
		if (i == 0 || strcmp(columns[i - 1].remote_rel, col->remote_rel) != 0)
			people_table = sbx_is_people_table(col->relname);
		sbx_check_column(conn, source, col, people_table, result_cxt, &findings);
		MemoryContextSwitchTo(old);
	}
	MemoryContextDelete(column_cxt);

	/* the transaction only read; closing the connection ends it */
	return findings;
}

static int
sbx_finding_cmp(const ListCell *a, const ListCell *b)
{
	const SbxFinding *fa = lfirst(a);
	const SbxFinding *fb = lfirst(b);

	return strcmp(fa->target, fb->target);
}

/*
 * suggest_masks(source text)
 *	 RETURNS TABLE(target text, reason text, expression text)
 */
Datum
pgsandbox_suggest_masks(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *source;
	PGconn	   *conn;
	List	   *findings = NIL;
	ListCell   *lc;

	sbx_require_arg(fcinfo, 0, "source name");
	sbx_check_database();
	sbx_require_admin();
	source = text_to_cstring(PG_GETARG_TEXT_PP(0));

	InitMaterializedSRF(fcinfo, 0);

	conn = sbx_source_connect(source);
	PG_TRY();
	{
		findings = sbx_find_personal_columns(conn, source);
	}
	PG_FINALLY();
	{
		libpqsrv_disconnect(conn);
	}
	PG_END_TRY();

	list_sort(findings, sbx_finding_cmp);
	foreach(lc, findings)
	{
		SbxFinding *finding = lfirst(lc);
		Datum		values[SBX_MASK_COLS];
		bool		nulls[SBX_MASK_COLS] = {false, false, false};

		values[0] = CStringGetTextDatum(finding->target);
		values[1] = CStringGetTextDatum(finding->reason);
		values[2] = CStringGetTextDatum(finding->expression);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
