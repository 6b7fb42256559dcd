/*-------------------------------------------------------------------------
 *
 * mask_key.c
 *	  The secret key that masking expressions may mix into a hash, so that
 *	  a sandbox's masked values cannot be reversed by hashing guesses.
 *
 * md5 of a phone number, a card's security code or an identity number
 * alone is no mask: there are few enough such values to hash them all and
 * look the masked ones up.  So a masking expression may read a key the
 * sandbox never sees: the setting pgsandbox_mask.key, which pgsandbox
 * gives the source session that evaluates the expressions (the clone's
 * reader, and the session mask() checks a rule in).  Its value is derived
 * from the source's name and a random server key, so that each source
 * masks the same value differently, and a source masks it the same way in
 * every clone, snapshot and pool member made on this server.
 *
 * The server key is 32 random bytes, kept in the data directory in the
 * file pgsandbox_mask.key (mode 0600), made the first time it is needed.
 * It is made in a file of its own and linked into place, so that two
 * processes making it at once agree on one, and a reader never sees part
 * of it.  A copy of the data directory (a base backup, a replica) keeps it;
 * a new cluster, or a restore of the admin database's dump elsewhere,
 * makes another, and masks made there differ.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/md5.h"
#include "libpq-fe.h"
#include "miscadmin.h"
#include "sbx_common.h"
#include "sbx_conn.h"
#include "sbx_masking.h"
#include "storage/fd.h"
#include "utils/resowner.h"

#define SBX_MASK_KEY_FILE		"pgsandbox_mask.key"
#define SBX_MASK_KEY_BYTES		32
#define SBX_MASK_KEY_HEX		(2 * SBX_MASK_KEY_BYTES)

/* Read the server key from its file into key; false if there is none. */
static bool
sbx_read_server_key(const char *path, char *key)
{
	int			fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	int			n;

	if (fd < 0)
	{
		if (errno == ENOENT)
			return false;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open file \"%s\": %m", path)));
	}
	n = read(fd, key, SBX_MASK_KEY_HEX);
	if (n < 0)
	{
		int			save_errno = errno;

		CloseTransientFile(fd);
		errno = save_errno;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read file \"%s\": %m", path)));
	}
	CloseTransientFile(fd);
	key[n] = '\0';
	if (n != SBX_MASK_KEY_HEX || strspn(key, "0123456789abcdef") != SBX_MASK_KEY_HEX)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("file \"%s\" does not hold a masking key", path),
				 errhint("Remove it, and a new key is made; masks made with the old one will differ.")));
	return true;
}

/* Make the server key: written in a file of our own, then linked in. */
static void
sbx_make_server_key(const char *path)
{
	unsigned char bytes[SBX_MASK_KEY_BYTES];
	char		hex[SBX_MASK_KEY_HEX + 1];
	char		tmp[MAXPGPATH];
	int			fd;

	if (!pg_strong_random(bytes, sizeof(bytes)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a masking key")));
	for (int i = 0; i < SBX_MASK_KEY_BYTES; i++)
		snprintf(hex + 2 * i, 3, "%02x", bytes[i]);
	explicit_bzero(bytes, sizeof(bytes));

	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, MyProcPid);
	fd = OpenTransientFilePerm(tmp, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY, S_IRUSR | S_IWUSR);
	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create file \"%s\": %m", tmp)));
	if (write(fd, hex, SBX_MASK_KEY_HEX) != SBX_MASK_KEY_HEX || pg_fsync(fd) != 0)
	{
		int			save_errno = errno ? errno : ENOSPC;

		CloseTransientFile(fd);
		unlink(tmp);
		errno = save_errno;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", tmp)));
	}
	explicit_bzero(hex, sizeof(hex));
	CloseTransientFile(fd);

	/* link() does not replace: whoever links first made the key */
	if (link(tmp, path) != 0 && errno != EEXIST)
	{
		int			save_errno = errno;

		unlink(tmp);
		errno = save_errno;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not link file \"%s\" to \"%s\": %m", tmp, path)));
	}
	unlink(tmp);
	fsync_fname(".", true);
}

/*
 * The key of source 'source' for masking expressions, as 32 hex digits in
 * a palloc'd string: md5 of the server key and the source's name.
 */
char *
sbx_mask_key(const char *source)
{
	const char *path = SBX_MASK_KEY_FILE;	/* in the data directory */
	char		server_key[SBX_MASK_KEY_HEX + 1];
	char	   *input;
	char	   *key = palloc(32 + 1);	/* md5 in hex */
	const char *errstr = NULL;
	bool		own_owner = false;
	bool		hashed;

	if (!sbx_read_server_key(path, server_key))
	{
		sbx_make_server_key(path);
		if (!sbx_read_server_key(path, server_key))
			elog(ERROR, "masking key file \"%s\" vanished", path);
	}
	input = psprintf("%s/%s", server_key, source);
	explicit_bzero(server_key, sizeof(server_key));

	/*
	 * The hash registers with a resource owner: a worker between
	 * transactions has none, and gets one for the hash alone.
	 */
	if (CurrentResourceOwner == NULL)
	{
		CurrentResourceOwner = ResourceOwnerCreate(NULL, "pgsandbox masking key");
		own_owner = true;
	}
	hashed = pg_md5_hash(input, strlen(input), key, &errstr);
	explicit_bzero(input, strlen(input));
	if (own_owner)
	{
		ResourceOwner owner = CurrentResourceOwner;

		ResourceOwnerRelease(owner, RESOURCE_RELEASE_BEFORE_LOCKS, true, true);
		ResourceOwnerRelease(owner, RESOURCE_RELEASE_LOCKS, true, true);
		ResourceOwnerRelease(owner, RESOURCE_RELEASE_AFTER_LOCKS, true, true);
		CurrentResourceOwner = NULL;
		ResourceOwnerDelete(owner);
	}
	if (!hashed)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not derive the masking key of source \"%s\": %s",
						source, errstr)));
	pfree(input);
	return key;
}

/*
 * Give a source session the key of its source's masking expressions, as
 * the setting SBX_MASK_KEY_SETTING.  'what' says what failed, should it.
 */
void
sbx_set_mask_key(PGconn *conn, const char *source, const char *what)
{
	char	   *key = sbx_mask_key(source);
	const char *params[1] = {key};

	PQclear(sbx_remote_exec(conn,
							"SELECT pg_catalog.set_config('" SBX_MASK_KEY_SETTING "', $1, false) IS NULL",
							1, params, PGRES_TUPLES_OK, what));
	explicit_bzero(key, strlen(key));
	pfree(key);
}
