/*-------------------------------------------------------------------------
 *
 * sbx_conn.h
 *	  Connections to sources and sandboxes, what is read from a source's
 *	  catalog, source connection strings and their redaction, and the child
 *	  processes (pg_dump, pg_restore) a clone worker runs.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SBX_CONN_H
#define SBX_CONN_H

#include "sbx_common.h"
#include "storage/latch.h"

/* logging into sandboxes and sources from a backend (sandbox_conn.c) */
extern PGconn *sbx_sandbox_connect(const char *name, char **source);
extern PGconn *sbx_sandbox_login(const char *dbname, const char *name,
								  const char *password);
extern PGconn *sbx_source_connect(const char *source);
extern char *sbx_remote_error(PGconn *conn, const PGresult *res);
extern char *sbx_remote_value(PGconn *conn, const char *query, const char *what);
extern int	sbx_remote_sqlstate(const PGresult *res);
extern char *sbx_remote_message(PGconn *conn, const PGresult *res);
extern PGresult *sbx_remote_exec(PGconn *conn, const char *sql, int nparams,
								 const char *const *params, int expect,
								 const char *failure);
extern void sbx_source_session_setup(PGconn *conn, bool copies_rows,
									 const char *what);
extern void sbx_source_read_begin(PGconn *conn, const char *what);
extern char *sbx_remote_quote_ident(const char *name);
extern char *sbx_remote_quote_qualified(const char *schema, const char *name);

/* one COPY's rows relayed between two connections (copy_relay.c) */
extern bool sbx_copy_relay(PGconn *from, PGconn *to);

/* pgsandbox_reader, the login of a source of this cluster (source_reader.c) */
extern void sbx_reader_request_shmem(void);
extern void sbx_reader_startup_shmem(void);
extern bool sbx_reader_exists(void);
extern void sbx_reader_attach_worker(Latch *latch);
extern void sbx_reader_prepare(void);
extern bool sbx_reader_password(char *password);

/* how a source of this cluster that names no user is read */
typedef enum SbxReaderLogin
{
	SBX_READER_READY,			/* as pgsandbox_reader, with its password */
	SBX_READER_ABSENT,			/* as the server's user: before 0.12 */
	SBX_READER_WAITING			/* not yet: the worker has not given it one */
} SbxReaderLogin;
extern SbxReaderLogin sbx_reader_login(char *password);
extern void sbx_reader_waiting_error(const char *source, int *sqlerrcode,
									 char **message, char **detail);

/* connecting to sources (source_conn.c) */
extern const char *sbx_reader_hba_advice(void);
extern PGconn *sbx_source_try_connect(const char *name, const char *conninfo,
									  bool require_password, int connect_timeout,
									  int *sqlerrcode, char **message,
									  char **detail);
extern PGconn *sbx_source_try_connect_as(const char *name, const char *conninfo,
										 bool require_password, int connect_timeout,
										 bool replication, int *sqlerrcode,
										 char **message, char **detail);
extern bool sbx_source_look_begin(PGconn *conn, int timeout, char **why);
extern PGconn *sbx_source_open(const char *name, const char *conninfo,
							   bool require_password);

/* whose code a query on a source table may run (source_trust.c) */
extern void sbx_check_tables_trusted(PGconn *conn, const char *source,
									 const char *trusted_owners, List *relids,
									 const char *why);
extern void sbx_check_tables_trusted_ext(PGconn *conn, const char *source,
										 const char *trusted_owners, List *relids,
										 bool applied, const char *why);
extern List *sbx_untrusted_tables(PGconn *conn, const char *source,
								  const char *trusted_owners, List *relids);
extern char *sbx_source_trusted_owners(const char *name);

/* what a live source must offer (live_checks.c) */
extern void sbx_check_live_source(PGconn *conn, const char *source,
								  const char *publication, const char *trusted_owners);

/* what a clone reads from its source's catalog (source_info.c) */
typedef struct SbxExtension
{
	Oid			oid;			/* in the source */
	char	   *name;
	char	   *schema;
	Oid			schema_oid;		/* in the source */
	bool		made_schema;	/* we created the schema for it */
} SbxExtension;

/* an extension's configuration table or sequence (pg_extension.extconfig) */
typedef struct SbxConfigRel
{
	Oid			oid;			/* in the source */
	char	   *schema;
	char	   *name;
	char		relkind;
	char	   *condition;		/* pg_extension.extcondition, "" if none */
	char	   *columns;		/* quoted, comma-separated; tables only */
} SbxConfigRel;

/* an event trigger of the source, which no sandbox role can own */
typedef struct SbxEventTrigger
{
	Oid			oid;			/* in the source */
	char	   *name;
} SbxEventTrigger;

typedef struct SbxSourceInfo
{
	List	   *extensions;		/* of SbxExtension, in creation order */
	List	   *config_rels;	/* of SbxConfigRel */
	List	   *settings;		/* of SbxSetting */
	List	   *event_triggers; /* of SbxEventTrigger */
	SbxLocale	locale;
	int64		size_bytes;		/* of the source database */
	double		largest_share;	/* of the tables' pages, in its largest */
} SbxSourceInfo;

/*
 * How much of the source's table pages (with their TOAST) its largest table
 * holds, as last measured (relpages): one row, one float8.  Read by the
 * caller's probe and by the clone worker.
 */
#define SBX_LARGEST_SHARE_SQL \
	"SELECT CASE WHEN pg_catalog.sum(s.pages) OPERATOR(pg_catalog.>) 0" \
	"       THEN pg_catalog.max(s.pages)::pg_catalog.float8" \
	"            OPERATOR(pg_catalog./) pg_catalog.sum(s.pages) ELSE 1 END" \
	"  FROM (SELECT c.relpages::pg_catalog.int8 OPERATOR(pg_catalog.+)" \
	"               COALESCE(t.relpages, 0) AS pages" \
	"          FROM pg_catalog.pg_class c" \
	"          LEFT JOIN pg_catalog.pg_class t ON t.oid OPERATOR(pg_catalog.=) c.reltoastrelid" \
	"         WHERE c.relkind OPERATOR(pg_catalog.=) ANY ('{r,m}')" \
	"           AND c.oid OPERATOR(pg_catalog.>=) 16384) s"

extern void sbx_read_source_locale(PGconn *conn, const char *source,
								   SbxLocale *locale);
extern SbxSourceInfo *sbx_read_source_info(PGconn *conn, const char *source);
extern void sbx_check_source_version(const char *source, int source_version);
extern SbxSetting *sbx_parse_setting(const char *item);

/* source connection strings (conninfo.c) */
typedef struct SbxConninfoParts
{
	char	   *host;
	char	   *port;
	char	   *dbname;
	char	   *user;
} SbxConninfoParts;

extern void sbx_conninfo_validate(const char *conninfo, bool trusted,
								  SbxConninfoParts *parts);
extern void sbx_conninfo_to_params(const char *conninfo, bool untrusted,
								   const char ***keywords,
								   const char ***values);
extern char *sbx_conninfo_for_subscription(const char *conninfo);
extern char **sbx_conninfo_to_env(const char *conninfo, bool untrusted);
extern bool sbx_conninfo_local_default(const char *conninfo, bool untrusted);
extern bool sbx_conninfo_names_user(const char *conninfo);
extern char *sbx_conninfo_password(const char *conninfo);
extern void sbx_append_conninfo_value(StringInfo buf, const char *keyword,
									  const char *value);
extern char *sbx_redact(const char *text, const char *const *secrets);

/* child processes (child.c) */
typedef struct SbxChild
{
	const char *label;			/* "pg_dump", "pg_restore" */
	pid_t		pid;
	int			stderr_fd;		/* read end, -1 once at EOF */
	StringInfoData err;			/* first bytes of its stderr */
	bool		exited;
	int			status;			/* wait status once exited */
} SbxChild;

extern char **sbx_child_environment(const char *conninfo, bool untrusted,
									const char *user, const char *password,
									const char *dbname);
extern void sbx_child_start(SbxChild *child, const char *label,
							char *const argv[], char *const envp[],
							int stdin_fd, int stdout_fd);
extern void sbx_children_wait(SbxChild *children, int nchildren);
extern void sbx_children_kill(SbxChild *children, int nchildren);
extern bool sbx_child_succeeded(const SbxChild *child);
extern char *sbx_child_output(const char *label, char *const argv[],
							  char *const envp[], int maxbytes);
extern bool sbx_child_broken_pipe(const SbxChild *child);
extern char *sbx_child_describe_failure(const SbxChild *child,
										const char *const *secrets);

/* what a live snapshot needs of its source (live_slots.c) */
extern PGconn *sbx_live_slot_create(const char *name, const char *conninfo,
									bool require_password, const char *slot,
									char **snapshot);
extern bool sbx_live_slot_drop(const char *name, const char *conninfo,
							   bool require_password, const char *slot,
							   int timeout, char **why);
typedef struct SbxLiveProbe
{
	char	   *lsn;			/* the source's WAL position, as text */
	char	   *now;			/* its time, as text */
	int64		retained;		/* WAL bytes the slot keeps, -1: no slot */
	char	   *confirmed;		/* the slot's confirmed_flush_lsn, as text:
								 * its subscriber has applied every
								 * transaction the source committed before
								 * it; NULL: not known */
	char	   *tables;			/* tables published, counted and hashed; NULL:
								 * no publication */
	char	   *why;			/* why it could not be reached */
} SbxLiveProbe;
extern bool sbx_live_probe(const char *name, const char *conninfo,
						   bool require_password, const char *slot,
						   const char *publication, int timeout, SbxLiveProbe *probe);

/* commands on a live snapshot's subscription, in its database (live_command.c) */
typedef enum SbxLiveCommand
{
	SBX_LIVE_PAUSE,				/* DISABLE, and wait for the apply to go */
	SBX_LIVE_RESUME,			/* ENABLE */
	SBX_LIVE_DETACH				/* DISABLE, no slot, DROP SUBSCRIPTION */
} SbxLiveCommand;
extern void sbx_live_command(Oid dboid, const char *name, const char *subscription,
							 SbxLiveCommand command);
extern PGDLLEXPORT void sbx_live_worker_main(Datum main_arg);

#endif							/* SBX_CONN_H */
