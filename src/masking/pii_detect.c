/*-------------------------------------------------------------------------
 *
 * pii_detect.c
 *	  What a column's name, type and sampled values say it holds, for
 *	  suggest_masks().
 *
 * A column is reported
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
 * Here are the words of names and the shapes of values; suggest_masks.c
 * reads the columns, samples the values and weighs what they say.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "pii.h"

/* a column name of more words than this is read as its first ones */
#define SBX_MAX_WORDS		16

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

SbxTypeClass
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
bool
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
int
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
bool
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

int
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
