/* cli.c - the shared habits of the `pagededup` commands. See cli.h. */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "archive/mounts.h"

const struct cli_cmd *cli_current;

static const char *cmd_name(void)
{
	return cli_current ? cli_current->name : "";
}

void cli_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "pagededup %s: ", cmd_name());
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

int cli_usage_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "pagededup %s: ", cmd_name());
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\nTry 'pagededup %s --help' for more information.\n", cmd_name());
	va_end(ap);
	return cli_current ? cli_current->usage_status : CLI_USAGE;
}

bool cli_parse_bytes(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return false;
	unsigned shift = 0;
	switch (*end) {
	case 'K': case 'k': shift = 10; end++; break;
	case 'M': case 'm': shift = 20; end++; break;
	case 'G': case 'g': shift = 30; end++; break;
	default: break;
	}
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return false;
	*out = (uint64_t)v << shift;
	return true;
}

int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts)
{
	opterr = 0;
	int c = getopt_long(argc, argv, shortopts, longopts, NULL);
	if (c != '?' && c != ':')
		return c;
	const char *arg = argv[optind - 1];
	bool missing = false;
	if (optopt) {
		for (const char *p = shortopts; *p; p++)
			if (*p == optopt && p[1] == ':')
				missing = true;
		for (const struct option *o = longopts; o && o->name; o++)
			if (o->val == optopt && o->has_arg == required_argument && !strncmp(arg, "--", 2))
				missing = true;
	}
	if (missing)
		cli_usage_error("option '%s' needs a value", arg);
	else if (optopt && strncmp(arg, "--", 2))
		cli_usage_error("unknown option '-%c'", optopt);
	else
		cli_usage_error("unknown option '%s'", arg);
	return '?';
}

/* A mounted store's daemon may hold closes whose seal waits for a batch
 * (core/archive/seal_later.h); a listing of the mount commits them, so
 * that the store's own files, which the command reads, show every close()
 * that returned. A mount the caller may not list stays as it is. */
static void settle_mount(const char *mnt)
{
	DIR *d = opendir(mnt);
	if (!d)
		return;
	(void)readdir(d);
	closedir(d);
}

void cli_store(const char *arg, struct cli_store *s)
{
	*s->mnt = *s->path = 0;
	snprintf(s->inner, sizeof s->inner, "/");
	if (!mounts_find_path(arg, s->dir, sizeof s->dir, s->mnt, sizeof s->mnt, s->inner, sizeof s->inner)) {
		snprintf(s->path, sizeof s->path, "%s%s", s->mnt, strcmp(s->inner, "/") ? s->inner : "");
		settle_mount(s->mnt);
		return;
	}
	snprintf(s->dir, sizeof s->dir, "%s", arg);
	if (!mounts_find_store(arg, s->mnt, sizeof s->mnt)) {
		snprintf(s->path, sizeof s->path, "%s", s->mnt);
		settle_mount(s->mnt);
	}
}

static void say_waiting(void *ctx, const char *pid)
{
	cli_error("%s is still being closed by pid %s (unmounted a moment ago); waiting for it",
		  (const char *)ctx, pid);
}

int cli_wait_unmounted(const struct cli_store *s)
{
	char mnt[PATH_MAX];
	if (*s->mnt) {
		cli_error("%s is mounted on %s; unmount it first (fusermount3 -u %s)", s->dir, s->mnt, s->mnt);
		return -EBUSY;
	}
	int rc = mounts_wait_closing(s->dir, 0, say_waiting, (void *)s->dir, mnt, sizeof mnt);
	if (rc == -EBUSY)
		cli_error("%s is mounted on %s; unmount it first (fusermount3 -u %s)", s->dir, mnt, mnt);
	return rc == -EBUSY ? rc : 0;
}
