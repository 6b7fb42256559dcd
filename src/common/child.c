/*-------------------------------------------------------------------------
 *
 * child.c
 *	  Starting pg_dump and pg_restore as child processes of a clone worker,
 *	  capturing their stderr, waiting for them and killing them.
 *
 * Children are started with fork and execve, never through a shell.  In the
 * child, signal dispositions and the signal mask are reset, every inherited
 * descriptor beyond stdin, stdout and stderr is closed, and on Linux the
 * child asks to be killed if the clone worker dies.  Each child leads a
 * process group of its own, so that killing it kills the workers a parallel
 * pg_dump or pg_restore forks too.  Between fork and exec
 * the child calls no backend code; if exec fails it writes a short message
 * to its stderr pipe and leaves with _exit(127).
 *
 * Secrets reach children only through their environment: argv, which
 * anyone on the machine can read through ps, never carries them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "storage/ipc.h"
#include "storage/pmsignal.h"

extern char **environ;

/* how much of a child's stderr is kept */
#define SBX_STDERR_KEEP		8192

/* how long a killed child gets to leave before SIGKILL, in milliseconds */
#define SBX_KILL_GRACE_MS	2000

/*
 * Set NAME=VALUE in a NULL-terminated environment array, replacing an
 * earlier entry for the same name.  The array must have room for one more.
 */
static void
sbx_env_set(char **env, const char *name, const char *value)
{
	size_t		nlen = strlen(name);
	int			i;

	for (i = 0; env[i] != NULL; i++)
	{
		if (strncmp(env[i], name, nlen) == 0 && env[i][nlen] == '=')
		{
			env[i] = psprintf("%s=%s", name, value);
			return;
		}
	}
	env[i] = psprintf("%s=%s", name, value);
	env[i + 1] = NULL;
}

/*
 * The environment for a child: the server's own, less every PG* variable,
 * plus this server's socket and port as libpq defaults, then the source's
 * connection keywords (for pg_dump) or the sandbox role's login (for
 * pg_restore).  Allocated in the current memory context.
 */
char	  **
sbx_child_environment(const char *conninfo, bool untrusted, const char *user,
					  const char *password, const char *dbname)
{
	int			n = 0;
	char	  **env;
	char	  **src = conninfo ? sbx_conninfo_to_env(conninfo, untrusted) : NULL;
	char		portstr[16];

	while (environ[n] != NULL)
		n++;
	for (char **s = src; s && *s; s++)
		n++;
	/* the server's own, the source's, and our twelve at most */
	env = palloc0(sizeof(char *) * (n + 13));
	n = 0;
	for (char **e = environ; *e != NULL; e++)
	{
		if (strncmp(*e, "PG", 2) == 0)
			continue;
		env[n++] = *e;
	}
	env[n] = NULL;

	snprintf(portstr, sizeof(portstr), "%d", PostPortNumber);
	sbx_env_set(env, "PGHOST", sbx_local_socket_host());
	sbx_env_set(env, "PGPORT", portstr);
	if (src)
	{
		for (char **s = src; *s != NULL; s++)
		{
			char	   *eq = strchr(*s, '=');

			*eq = '\0';
			sbx_env_set(env, *s, eq + 1);
		}
	}
	if (conninfo && untrusted)
	{
		/* nothing of the server's own identity for an untrusted source */
		sbx_env_set(env, "PGPASSFILE", "/dev/null");
		sbx_env_set(env, "PGSSLCERT", "/nonexistent/pgsandbox.crt");
		sbx_env_set(env, "PGSSLKEY", "/nonexistent/pgsandbox.key");
		sbx_env_set(env, "PGGSSENCMODE", "disable");
	}
	if (user)
	{
		snprintf(portstr, sizeof(portstr), "%d", sbx_effective_port());
		sbx_env_set(env, "PGHOST", sbx_effective_host());
		sbx_env_set(env, "PGPORT", portstr);
		sbx_env_set(env, "PGUSER", user);
		sbx_env_set(env, "PGDATABASE", dbname);
		sbx_env_set(env, "PGPASSWORD", password);
		/* the password above is the only one to use */
		sbx_env_set(env, "PGPASSFILE", "/dev/null");
	}
	return env;
}

/*
 * In the child, between fork and exec: only async-signal-safe calls.
 */
static void
sbx_child_exec(char *const argv[], char *const envp[],
			   int stdin_fd, int stdout_fd, int stderr_fd, pid_t parent)
{
	sigset_t	none;
	int			devnull;

	for (int sig = 1; sig < NSIG; sig++)
	{
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	}
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);

	/* a group of its own, with the processes it forks (sbx_children_kill) */
	if (setpgid(0, 0) != 0)
		_exit(127);

#ifdef __linux__
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);
#endif

	devnull = open("/dev/null", O_RDWR);
	if (dup2(stdin_fd >= 0 ? stdin_fd : devnull, 0) < 0 ||
		dup2(stdout_fd >= 0 ? stdout_fd : devnull, 1) < 0 ||
		dup2(stderr_fd, 2) < 0)
		_exit(127);
#ifdef SYS_close_range
	if (syscall(SYS_close_range, 3, ~0U, 0) != 0)
#endif
	{
		long		maxfd = sysconf(_SC_OPEN_MAX);

		for (int fd = 3; fd < (maxfd > 0 ? maxfd : 65536); fd++)
			close(fd);
	}

	execve(argv[0], argv, envp);
	{
		static const char msg[] = "could not execute program\n";

		if (write(2, msg, sizeof(msg) - 1) < 0)
			_exit(127);
	}
	_exit(127);
}

/*
 * Start a child with the given argv (argv[0] a full path) and environment.
 * stdin_fd and stdout_fd are given to the child as its stdin and stdout
 * (-1: /dev/null); the caller closes its copies.  Its stderr is captured.
 */
void
sbx_child_start(SbxChild *child, const char *label, char *const argv[],
				char *const envp[], int stdin_fd, int stdout_fd)
{
	int			errpipe[2];
	pid_t		parent = getpid();
	pid_t		pid;
	sigset_t	all;
	sigset_t	saved;

	memset(child, 0, sizeof(*child));
	child->label = label;
	child->stderr_fd = -1;
	initStringInfo(&child->err);

	if (pipe2(errpipe, O_CLOEXEC) < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create pipe for %s: %m", label)));

	/*
	 * Signals stay blocked across fork, so that the child never runs the
	 * backend's handlers; it resets them and unblocks before exec.
	 */
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &saved);
	fflush(NULL);
	pid = fork();
	if (pid == 0)
		sbx_child_exec(argv, envp, stdin_fd, stdout_fd, errpipe[1], parent);
	/* as the child does: a kill that comes before it did finds its group */
	if (pid > 0)
		(void) setpgid(pid, pid);
	sigprocmask(SIG_SETMASK, &saved, NULL);
	if (pid < 0)
	{
		int			save_errno = errno;

		close(errpipe[0]);
		close(errpipe[1]);
		errno = save_errno;
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("could not start %s: %m", label)));
	}

	close(errpipe[1]);
	if (fcntl(errpipe[0], F_SETFL, O_NONBLOCK) < 0)
		elog(WARNING, "could not make pipe of %s non-blocking: %m", label);
	child->pid = pid;
	child->stderr_fd = errpipe[0];
}

/* Read what a child has written to stderr; close the pipe at EOF. */
static void
sbx_child_drain(SbxChild *child)
{
	char		buf[4096];

	for (;;)
	{
		ssize_t		n = read(child->stderr_fd, buf, sizeof(buf));

		if (n > 0)
		{
			int			room = SBX_STDERR_KEEP - child->err.len;

			if (room > 0)
				appendBinaryStringInfo(&child->err, buf, Min(room, n));
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		close(child->stderr_fd);
		child->stderr_fd = -1;
		return;
	}
}

static void
sbx_child_reap(SbxChild *child, int options)
{
	int			status;
	pid_t		rc;

	if (child->exited || child->pid <= 0)
		return;
	rc = waitpid(child->pid, &status, options);
	if (rc == child->pid)
	{
		child->exited = true;
		child->status = status;
	}
	else if (rc < 0 && errno == ECHILD)
	{
		child->exited = true;
		child->status = -1;
	}
}

/*
 * Wait until every child has exited and closed its stderr, collecting the
 * stderr.  Interrupts are served every 100ms, so a terminated clone worker
 * leaves promptly (its exit callback kills the children).
 */
void
sbx_children_wait(SbxChild *children, int nchildren)
{
	struct pollfd fds[8];

	Assert(nchildren <= lengthof(fds));
	for (;;)
	{
		int			nfds = 0;
		bool		all_exited = true;

		for (int i = 0; i < nchildren; i++)
		{
			if (children[i].stderr_fd >= 0)
			{
				fds[nfds].fd = children[i].stderr_fd;
				fds[nfds].events = POLLIN;
				fds[nfds].revents = 0;
				nfds++;
			}
			sbx_child_reap(&children[i], WNOHANG);
			if (!children[i].exited)
				all_exited = false;
		}
		if (nfds == 0 && all_exited)
			return;

		/*
		 * A child closes its stderr as it exits, a moment before it can be
		 * reaped: then wait a millisecond, not the 100 that a child still
		 * writing gets between checks for interrupts.
		 */
		if (poll(fds, nfds, nfds > 0 ? 100 : 1) < 0 && errno != EINTR)
			ereport(ERROR,
					(errcode_for_socket_access(),
					 errmsg("could not wait for child processes: %m")));
		for (int i = 0; i < nchildren; i++)
		{
			if (children[i].stderr_fd >= 0)
				sbx_child_drain(&children[i]);
		}

		CHECK_FOR_INTERRUPTS();
		if (!PostmasterIsAlive())
		{
			sbx_children_kill(children, nchildren);
			proc_exit(1);
		}
	}
}

/*
 * Terminate every child still running, with the processes it forked (its
 * process group): SIGTERM, then SIGKILL after a grace period.  Safe to call
 * from an exit callback.
 */
void
sbx_children_kill(SbxChild *children, int nchildren)
{
	bool		any = false;
	bool		signaled[8] = {false};

	Assert(nchildren <= lengthof(signaled));
	for (int i = 0; i < nchildren; i++)
	{
		sbx_child_reap(&children[i], WNOHANG);
		if (children[i].pid > 0 && !children[i].exited)
		{
			if (kill(-children[i].pid, SIGTERM) != 0)
				kill(children[i].pid, SIGTERM);
			signaled[i] = true;
			any = true;
		}
	}
	for (int waited = 0; any && waited < SBX_KILL_GRACE_MS; waited += 10)
	{
		any = false;
		for (int i = 0; i < nchildren; i++)
		{
			sbx_child_reap(&children[i], WNOHANG);
			if (children[i].pid > 0 && !children[i].exited)
				any = true;
		}
		if (any)
			pg_usleep(10000L);
	}
	for (int i = 0; i < nchildren; i++)
	{
		if (children[i].pid > 0 && !children[i].exited)
		{
			if (kill(-children[i].pid, SIGKILL) != 0)
				kill(children[i].pid, SIGKILL);
			sbx_child_reap(&children[i], 0);
		}

		/*
		 * A process a killed child forked may outlive it: end the rest of
		 * the group.  Its id cannot have been reused while any member
		 * lives; with none left, this finds nothing.
		 */
		else if (signaled[i])
			(void) kill(-children[i].pid, SIGKILL);
		if (children[i].stderr_fd >= 0)
		{
			close(children[i].stderr_fd);
			children[i].stderr_fd = -1;
		}
	}
}

bool
sbx_child_succeeded(const SbxChild *child)
{
	return child->exited && child->status >= 0 &&
		WIFEXITED(child->status) && WEXITSTATUS(child->status) == 0;
}

/* Did the child die of writing to a pipe no one reads any more? */
bool
sbx_child_broken_pipe(const SbxChild *child)
{
	return child->exited && child->status >= 0 &&
		WIFSIGNALED(child->status) && WTERMSIG(child->status) == SIGPIPE;
}

/*
 * One sentence on how a child ended, followed by the first lines of its
 * stderr with every secret replaced.
 */
char *
sbx_child_describe_failure(const SbxChild *child, const char *const *secrets)
{
	StringInfoData buf;
	const char *p;
	int			lines = 0;
	int			left_out = 0;

	initStringInfo(&buf);
	if (!child->exited || child->status < 0)
		appendStringInfo(&buf, "%s did not finish.", child->label);
	else if (WIFEXITED(child->status))
		appendStringInfo(&buf, "%s exited with code %d.", child->label,
						 WEXITSTATUS(child->status));
	else if (WIFSIGNALED(child->status))
		appendStringInfo(&buf, "%s was terminated by signal %d: %s.",
						 child->label, WTERMSIG(child->status),
						 pg_strsignal(WTERMSIG(child->status)));

	/*
	 * The first few lines of stderr, without blank ones or secrets, each cut
	 * at a character boundary if long; what is left out is counted.
	 */
	p = sbx_redact(child->err.data, secrets);
	while (p && *p)
	{
		size_t		len = strcspn(p, "\n");

		if (len > 0 && (lines >= 6 || buf.len >= SBX_DETAIL_MAX - 600))
			left_out++;
		else if (len > 0)
		{
			int			keep = len > 300 ? pg_mbcliplen(p, (int) len, 300) : (int) len;

			appendStringInfoChar(&buf, '\n');
			appendBinaryStringInfo(&buf, p, keep);
			if ((size_t) keep < len)
				appendStringInfo(&buf, " [and %zu bytes more, cut]", len - keep);
			lines++;
		}
		p += len;
		if (*p == '\n')
			p++;
	}
	if (left_out > 0)
		appendStringInfo(&buf, "\n(and %d more line%s of %s's output, left out)",
						 left_out, left_out == 1 ? "" : "s", child->label);
	return buf.data;
}

/*
 * Run a short-lived program and return what it writes to stdout (at most
 * maxbytes of it), or NULL if it fails.  Interrupts are served while it
 * runs; on an error the child is killed and the pipe closed.
 */
char *
sbx_child_output(const char *label, char *const argv[], char *const envp[],
				 int maxbytes)
{
	SbxChild	child;
	int			fds[2];
	volatile int rfd;
	volatile int wfd;
	StringInfoData out;
	volatile bool started = false;

	if (pipe(fds) < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create a pipe for %s: %m", label)));
	rfd = fds[0];
	wfd = fds[1];
	initStringInfo(&out);
	PG_TRY();
	{
		if (fcntl(rfd, F_SETFL, O_NONBLOCK) < 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not make the pipe of %s non-blocking: %m", label)));
		sbx_child_start(&child, label, argv, envp, -1, wfd);
		started = true;
		close(wfd);
		wfd = -1;
		for (;;)
		{
			struct pollfd pfd = {rfd, POLLIN, 0};
			char		buf[1024];
			ssize_t		n;

			if (poll(&pfd, 1, 100) < 0 && errno != EINTR)
				ereport(ERROR,
						(errcode_for_socket_access(),
						 errmsg("could not wait for %s: %m", label)));
			n = read(rfd, buf, sizeof(buf));
			if (n > 0)
				appendBinaryStringInfo(&out, buf, Min(n, Max(maxbytes - out.len, 0)));
			else if (n == 0)
				break;
			else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				ereport(ERROR,
						(errcode_for_file_access(),
						 errmsg("could not read the output of %s: %m", label)));
			CHECK_FOR_INTERRUPTS();
		}
		close(rfd);
		rfd = -1;
		sbx_children_wait(&child, 1);
	}
	PG_CATCH();
	{
		if (rfd >= 0)
			close(rfd);
		if (wfd >= 0)
			close(wfd);
		if (started)
			sbx_children_kill(&child, 1);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (!sbx_child_succeeded(&child))
		return NULL;
	return out.data;
}
