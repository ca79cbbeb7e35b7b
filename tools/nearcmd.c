/* nearcmd.c - the near-duplicate commands of the `pagededup` tool.
 *
 *   pagededup simhash FILE...     the simhash of each file, as
 *                                 user.dedup.simhash gives it
 *   pagededup near STORE FILE     the stored pages within the store's
 *                                 distance K of FILE's simhash, as
 *                                 user.dedup.near gives them
 *
 * FILE is any file: a page about to be saved need not be in the store
 * ("have I stored something like this already?"). `near` opens the store
 * read-only, so it also runs while the store is mounted.
 * STORE may be the mount point. Exit status of near, as grep's: 0
 * neighbours found, 1 none, 2 error.
 */
#include "archive/archive.h"
#include "nearcmd.h"

#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fp.h"
#include "near/near.h"
#include "archive/query.h"
#include "store/store.h"

static int file_sig(const char *path, struct near_sig *sig, struct near_self *self)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat sb;
	int rc = fstat(fd, &sb) ? -errno : 0;
	if (!rc && !S_ISREG(sb.st_mode))
		rc = -EINVAL;
	if (!rc)
		rc = near_sig_of_fd(fd, (uint64_t)sb.st_size, sig);
	struct fp fp;
	if (!rc && self && !(rc = fp_of_fd(fd, &fp))) {
		*self = (struct near_self){ .has = true, .size = fp.size, .path = path };
		memcpy(self->md5, fp.md5, 16);
		memcpy(self->xxh128, fp.xxh128, 16);
	}
	close(fd);
	return rc;
}

static void say_file_error(const char *cmd, const char *path, int rc)
{
	fprintf(stderr, "pagededup %s: %s: %s\n", cmd, path, rc == -EINVAL ? "not a regular file" : strerror(-rc));
}

int cmd_simhash(int argc, char **argv)
{
	if (argc < 2)
		return cli_usage_error("no FILE given");
	int status = 0;
	for (int i = 1; i < argc; i++) {
		struct near_sig sig;
		char text[64];
		int rc = file_sig(argv[i], &sig, NULL);
		if (rc) {
			say_file_error("simhash", argv[i], rc);
			status = 1;
			continue;
		}
		query_format_simhash(&sig, text);
		printf("%s\t%s\n", text, argv[i]);
	}
	return status;
}

int cmd_near(int argc, char **argv)
{
	if (argc != 3)
		return cli_usage_error(argc < 3 ? "STORE and FILE wanted" : "one STORE and one FILE only");
	struct cli_store where;
	cli_store(argv[1], &where);
	struct near_sig sig;
	struct near_self self;
	int rc = file_sig(argv[2], &sig, &self);
	if (rc) {
		say_file_error("near", argv[2], rc);
		return 2;
	}
	if (!sig.has) {
		fprintf(stderr, "pagededup near: %s: binary or without text: no simhash to compare\n", argv[2]);
		return 2;
	}
	struct store *st;
	struct store_opts o = { .readonly = true };
	char err[PD_ERRLEN] = "";
	if (archive_open(where.dir, &o, &st, err)) {
		fprintf(stderr, "pagededup near: %s\n", err);
		return 2;
	}
	char *buf = malloc(QUERY_MAX);
	size_t len = 0;
	rc = buf ? query_near_sig(st, &sig, &self, 0, NULL, buf, &len) : -ENOMEM;
	store_close(st);
	if (rc == -ESTALE) {
		fprintf(stderr, "pagededup near: %s holds near-duplicate signatures of an older version; "
				"run 'pagededup fsck --repair %s' (or mount it once) to compute them again\n",
			argv[1], argv[1]);
		free(buf);
		return 2;
	}
	if (rc) {
		fprintf(stderr, "pagededup near: %s\n", strerror(-rc));
		free(buf);
		return 2;
	}
	fwrite(buf, 1, len, stdout);
	free(buf);
	return len ? 0 : 1;
}
