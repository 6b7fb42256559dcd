/*-------------------------------------------------------------------------
 *
 * conninfo.c
 *	  Source connection strings: validation, the parts that may be shown,
 *	  and the two ways they are handed on without ever reaching argv: as
 *	  libpq parameters inside the server, and as PG* environment variables
 *	  for pg_dump.  Also the redaction of secrets from captured messages.
 *
 * Only keywords that libpq can take from the environment are accepted, so
 * that what pg_dump connects to is exactly what the source names.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/username.h"
#include "lib/stringinfo.h"
#include "libpq-fe.h"
#include "postmaster/postmaster.h"
#include "sbx_common.h"
#include "sbx_conn.h"

/* Keywords a source may not carry, whatever libpq thinks of them. */
static const char *const sbx_refused_keywords[] = {
	"replication",				/* a source is read with pg_dump, not streamed */
	NULL
};

/*
 * Keywords that make the server read one of its own files.  Only a
 * superuser may add a source that uses them.
 */
static const char *const sbx_file_keywords[] = {
	"service", "passfile", "sslcert", "sslkey", "sslrootcert", "sslcrl",
	"sslcrldir", NULL
};

static bool
sbx_keyword_in(const char *keyword, const char *const *list)
{
	for (const char *const *k = list; *k != NULL; k++)
	{
		if (strcmp(keyword, *k) == 0)
			return true;
	}
	return false;
}

static PQconninfoOption *
sbx_conninfo_parse(const char *conninfo)
{
	PQconninfoOption *opts;
	char	   *libpq_err = NULL;

	opts = PQconninfoParse(conninfo, &libpq_err);
	if (opts == NULL)
	{
		/*
		 * libpq's message may quote a piece of the string, which could be a
		 * password; only name a keyword it did not recognize.
		 */
		char	   *detail = NULL;

		if (libpq_err && strncmp(libpq_err, "invalid connection option", 25) == 0)
		{
			detail = pstrdup(libpq_err);
			detail[strcspn(detail, "\n")] = '\0';
		}
		if (libpq_err)
			PQfreemem(libpq_err);
		if (detail)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid source connection string"),
					 errdetail("libpq reports: %s.", detail)));
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid source connection string"),
				 errdetail("The string is neither keyword=value pairs nor a postgresql:// URI.")));
	}
	return opts;
}

/*
 * Check a source connection string and return the parts that may be shown.
 * Errors out on anything that cannot be used as a source.
 *
 * A source added by someone who is not a superuser ('trusted' false) must
 * name a password and no file of the server: otherwise it could borrow the
 * server's own identity (peer or trust authentication, the server's
 * certificates and password file) to read databases its author cannot.
 */
void
sbx_conninfo_validate(const char *conninfo, bool trusted, SbxConninfoParts *parts)
{
	PQconninfoOption *opts;
	bool		has_password = false;

	if (strlen(conninfo) >= SBX_CONNINFO_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
				 errmsg("source connection string is too long"),
				 errdetail("A source connection string may have at most %d bytes.",
						   SBX_CONNINFO_MAX - 1)));

	opts = sbx_conninfo_parse(conninfo);
	memset(parts, 0, sizeof(*parts));
	for (PQconninfoOption *o = opts; o->keyword != NULL; o++)
	{
		char	   *kw;

		if (o->val == NULL)
			continue;
		kw = pstrdup(o->keyword);
		if (sbx_keyword_in(kw, sbx_refused_keywords))
		{
			PQconninfoFree(opts);
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("connection option \"%s\" is not allowed in a source", kw)));
		}
		if (o->envvar == NULL)
		{
			PQconninfoFree(opts);
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("connection option \"%s\" is not supported in a source", kw),
					 errdetail("pg_dump receives the source through environment variables, and this option has none.")));
		}
		if (!trusted && sbx_keyword_in(kw, sbx_file_keywords))
		{
			PQconninfoFree(opts);
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("only a superuser may add a source with connection option \"%s\"", kw),
					 errdetail("The option makes the server read one of its own files.")));
		}
		if (strcmp(kw, "password") == 0 && o->val[0] != '\0')
			has_password = true;
		if (!trusted && strchr(o->val, ',') != NULL &&
			(strcmp(kw, "host") == 0 || strcmp(kw, "hostaddr") == 0 ||
			 strcmp(kw, "port") == 0))
		{
			PQconninfoFree(opts);
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("only a superuser may add a source with several hosts"),
					 errdetail("The password is checked on one connection; pg_dump could reach another host.")));
		}
		if (strcmp(o->keyword, "host") == 0)
			parts->host = pstrdup(o->val);
		else if (strcmp(o->keyword, "port") == 0)
			parts->port = pstrdup(o->val);
		else if (strcmp(o->keyword, "dbname") == 0)
			parts->dbname = pstrdup(o->val);
		else if (strcmp(o->keyword, "user") == 0)
			parts->user = pstrdup(o->val);
	}
	PQconninfoFree(opts);

	if (!trusted && !has_password)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("a source added by a non-superuser must carry a password"),
				 errdetail("Without one, the source would be read with the server's own identity."),
				 errhint("Give the connection string a user and password of a role that may read the source.")));
	if (!trusted && (parts->user == NULL || parts->user[0] == '\0'))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("a source added by a non-superuser must name its user"),
				 errdetail("Without one, the source would be read as one of the server's own identities."),
				 errhint("Give the connection string a user and password of a role that may read the source.")));
}

/*
 * Keywords that say where or as whom to connect: a connection string with
 * any of them is not one pgsandbox may complete with its reader's login.
 */
static const char *const sbx_where_or_whom_keywords[] = {
	"host", "hostaddr", "port", "service", "user", "password", "passfile",
	"sslcert", "sslkey", "sslpassword", "requirepeer", NULL
};

/*
 * Whether a source is read as pgsandbox_reader (source_reader.c): a
 * superuser added it ('untrusted' false), and its connection string names
 * a database and nothing that says where or as whom to connect, so it is a
 * database of this cluster and its login pgsandbox's to choose.  A source
 * of an administrator who is not a superuser never is: its connection
 * string names its own login (sbx_conninfo_validate), and one that names a
 * port or a password is not completed with the reader's, which would go to
 * whatever listens there.
 */
static bool
sbx_conninfo_reads_as_reader(const PQconninfoOption *opts, bool untrusted)
{
	if (untrusted)
		return false;
	for (const PQconninfoOption *o = opts; o->keyword != NULL; o++)
	{
		if (o->val != NULL && sbx_keyword_in(o->keyword, sbx_where_or_whom_keywords))
			return false;
	}
	return true;
}

/*
 * The OS user this server runs as: libpq's requirepeer for the reader's
 * connection, which then goes only to a socket of a server run by that
 * user, checked before any password is sent.  A socket directory anyone
 * may write to (/tmp) is no proof of whose server answers there.
 */
static const char *
sbx_server_os_user(void)
{
	static char name[NAMEDATALEN];

	if (name[0] == '\0')
	{
		char	   *errstr;
		const char *user_name = get_user_name(&errstr);

		if (user_name == NULL)
			ereport(ERROR,
					(errmsg("could not look up the operating system user of the server: %s",
							errstr)));
		strlcpy(name, user_name, sizeof(name));
	}
	return name;
}

/*
 * A source added by an administrator who is not a superuser, from before
 * such a source had to name its user: refused, not completed with any
 * login of the server's.
 */
static void
sbx_conninfo_check_untrusted(PQconninfoOption *opts, bool untrusted)
{
	if (!untrusted)
		return;
	for (const PQconninfoOption *o = opts; o->keyword != NULL; o++)
	{
		if (o->val != NULL && o->val[0] != '\0' && strcmp(o->keyword, "user") == 0)
			return;
	}
	PQconninfoFree(opts);
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("the connection string of a source added by a non-superuser names no user"),
			 errdetail("It is not read as any of the server's own identities."),
			 errhint("Add the source again with a user and password of a role that may read it.")));
}

/*
 * pgsandbox_reader's password into password, and true; false before the
 * catalog has the role (the server's identity then, as before 0.12); an
 * error while it waits for one (sbx_reader_login).
 */
static bool
sbx_reader_login_or_error(char *password)
{
	int			code;
	char	   *message;
	char	   *detail;

	switch (sbx_reader_login(password))
	{
		case SBX_READER_READY:
			return true;
		case SBX_READER_ABSENT:
			return false;
		case SBX_READER_WAITING:
			break;
	}
	sbx_reader_waiting_error(NULL, &code, &message, &detail);
	ereport(ERROR,
			(errcode(code),
			 errmsg_internal("%s", message),
			 errdetail_internal("%s", detail)));
	return false;				/* keep the compiler quiet */
}

/* Whether a connection string names a user. */
bool
sbx_conninfo_names_user(const char *conninfo)
{
	PQconninfoOption *opts = sbx_conninfo_parse(conninfo);
	bool		result = false;

	for (PQconninfoOption *o = opts; o->keyword != NULL; o++)
	{
		if (o->val != NULL && o->val[0] != '\0' && strcmp(o->keyword, "user") == 0)
			result = true;
	}
	PQconninfoFree(opts);
	return result;
}

/* Whether a connection string is read as pgsandbox_reader. */
bool
sbx_conninfo_local_default(const char *conninfo, bool untrusted)
{
	PQconninfoOption *opts = sbx_conninfo_parse(conninfo);
	bool		result = sbx_conninfo_reads_as_reader(opts, untrusted);

	PQconninfoFree(opts);
	return result;
}

/*
 * libpq parameters for a connection to the source from inside the server:
 * this server's socket and port first, then every keyword of the source.
 * NULL-terminated arrays in the current memory context.
 */
void
sbx_conninfo_to_params(const char *conninfo, bool untrusted,
					   const char ***keywords, const char ***values)
{
	PQconninfoOption *opts = sbx_conninfo_parse(conninfo);
	int			n = 0;
	int			i = 0;
	char		portstr[16];

	sbx_conninfo_check_untrusted(opts, untrusted);
	for (PQconninfoOption *o = opts; o->keyword != NULL; o++)
		n++;
	*keywords = palloc0(sizeof(char *) * (n + 12));
	*values = palloc0(sizeof(char *) * (n + 12));

	snprintf(portstr, sizeof(portstr), "%d", PostPortNumber);
	(*keywords)[i] = "host";
	(*values)[i++] = pstrdup(sbx_local_socket_host());
	(*keywords)[i] = "port";
	(*values)[i++] = pstrdup(portstr);
	(*keywords)[i] = "fallback_application_name";
	(*values)[i++] = "pgsandbox";
	for (PQconninfoOption *o = opts; o->keyword != NULL; o++)
	{
		if (o->val == NULL)
			continue;
		(*keywords)[i] = pstrdup(o->keyword);
		(*values)[i++] = pstrdup(o->val);
	}
	if (sbx_conninfo_reads_as_reader(opts, untrusted))
	{
		char	   *password = palloc(SBX_PASSWORD_LEN + 1);

		/*
		 * Not the server's superuser, but pgsandbox's reader, on this
		 * server's own socket and port (first above, which the source does
		 * not name), answered by a server of this one's OS user.
		 */
		if (sbx_reader_login_or_error(password))
		{
			(*keywords)[i] = "user";
			(*values)[i++] = SBX_READER_ROLE;
			(*keywords)[i] = "password";
			(*values)[i++] = password;
			(*keywords)[i] = "passfile";
			(*values)[i++] = "/dev/null";
			(*keywords)[i] = "requirepeer";
			(*values)[i++] = sbx_server_os_user();
		}
	}
	if (untrusted)
	{
		/* nothing of the server's own identity (see sbx_conninfo_validate) */
		(*keywords)[i] = "passfile";
		(*values)[i++] = "/dev/null";
		(*keywords)[i] = "sslcert";
		(*values)[i++] = "/nonexistent/pgsandbox.crt";
		(*keywords)[i] = "sslkey";
		(*values)[i++] = "/nonexistent/pgsandbox.key";
		(*keywords)[i] = "gssencmode";
		(*values)[i++] = "disable";
	}
	PQconninfoFree(opts);
}

/*
 * NAME=VALUE strings, one for every keyword of the source, as a
 * NULL-terminated array in the current memory context.
 */
char	  **
sbx_conninfo_to_env(const char *conninfo, bool untrusted)
{
	PQconninfoOption *opts = sbx_conninfo_parse(conninfo);
	int			n = 0;
	char	  **env;

	sbx_conninfo_check_untrusted(opts, untrusted);
	for (PQconninfoOption *o = opts; o->keyword != NULL; o++)
		n++;
	env = palloc0(sizeof(char *) * (n + 5));
	n = 0;
	for (PQconninfoOption *o = opts; o->keyword != NULL; o++)
	{
		if (o->val == NULL || o->envvar == NULL)
			continue;
		env[n++] = psprintf("%s=%s", o->envvar, o->val);
	}
	if (sbx_conninfo_reads_as_reader(opts, untrusted))
	{
		char		password[SBX_PASSWORD_LEN + 1];

		/* as sbx_conninfo_to_params: pgsandbox's reader, checked peer */
		if (sbx_reader_login_or_error(password))
		{
			env[n++] = pstrdup("PGUSER=" SBX_READER_ROLE);
			env[n++] = psprintf("PGPASSWORD=%s", password);
			env[n++] = pstrdup("PGPASSFILE=/dev/null");
			env[n++] = psprintf("PGREQUIREPEER=%s", sbx_server_os_user());
		}
		explicit_bzero(password, sizeof(password));
	}
	PQconninfoFree(opts);
	return env;
}

/* The password a source carries, or NULL. */
char *
sbx_conninfo_password(const char *conninfo)
{
	PQconninfoOption *opts;
	char	   *result = NULL;
	char	   *libpq_err = NULL;

	opts = PQconninfoParse(conninfo, &libpq_err);
	if (opts == NULL)
	{
		if (libpq_err)
			PQfreemem(libpq_err);
		return NULL;
	}
	for (PQconninfoOption *o = opts; o->keyword != NULL; o++)
	{
		if (strcmp(o->keyword, "password") == 0 && o->val && o->val[0])
			result = pstrdup(o->val);
	}
	PQconninfoFree(opts);
	return result;
}

/*
 * Append " keyword=value" to a connection string, quoting the value when
 * it is not a plain word.
 */
void
sbx_append_conninfo_value(StringInfo buf, const char *keyword, const char *value)
{
	bool		plain = (value[0] != '\0');

	for (const char *p = value; *p; p++)
	{
		if (!(isalnum((unsigned char) *p) || *p == '_' || *p == '.' ||
			  *p == '/' || *p == '-' || *p == ':'))
		{
			plain = false;
			break;
		}
	}
	if (buf->len > 0)
		appendStringInfoChar(buf, ' ');
	appendStringInfo(buf, "%s=", keyword);
	if (plain)
	{
		appendStringInfoString(buf, value);
		return;
	}
	appendStringInfoChar(buf, '\'');
	for (const char *p = value; *p; p++)
	{
		if (*p == '\'' || *p == '\\')
			appendStringInfoChar(buf, '\\');
		appendStringInfoChar(buf, *p);
	}
	appendStringInfoChar(buf, '\'');
}

/*
 * A copy of text with every occurrence of each secret replaced.  The list
 * of secrets is NULL-terminated; empty entries are skipped.
 */
char *
sbx_redact(const char *text, const char *const *secrets)
{
	char	   *result = pstrdup(text);

	for (const char *const *s = secrets; *s != NULL; s++)
	{
		StringInfoData out;
		const char *p;
		const char *hit;
		size_t		slen = strlen(*s);

		if (slen == 0)
			continue;
		initStringInfo(&out);
		p = result;
		while ((hit = strstr(p, *s)) != NULL)
		{
			appendBinaryStringInfo(&out, p, hit - p);
			appendStringInfoString(&out, "********");
			p = hit + slen;
		}
		appendStringInfoString(&out, p);
		pfree(result);
		result = out.data;
	}
	return result;
}

/*
 * The connection string a live snapshot's subscription connects to its
 * source with: the parameters of sbx_conninfo_to_params, as for a source
 * added by a non-superuser (nothing of the server's own identity: the apply
 * runs as the snapshot's role, and a live source gives its password),
 * written as keyword='value' pairs.  It holds the password: it is stored
 * only in pg_subscription, whose connection strings no one but superusers
 * reads.
 */
char *
sbx_conninfo_for_subscription(const char *conninfo)
{
	const char **keywords;
	const char **values;
	StringInfoData buf;

	sbx_conninfo_to_params(conninfo, true, &keywords, &values);
	initStringInfo(&buf);
	for (int i = 0; keywords[i] != NULL; i++)
	{
		appendStringInfo(&buf, "%s%s='", i > 0 ? " " : "", keywords[i]);
		for (const char *p = values[i]; *p; p++)
		{
			if (*p == '\'' || *p == '\\')
				appendStringInfoChar(&buf, '\\');
			appendStringInfoChar(&buf, *p);
		}
		appendStringInfoChar(&buf, '\'');
		if (strcmp(keywords[i], "password") == 0)
			explicit_bzero((char *) values[i], strlen(values[i]));
	}
	return buf.data;
}
