/* clusters.c - `pagededup dups` and `pagededup clusters`: the archive's
 * duplicate structure at once (core/archive/clusters.h).
 *
 *   pagededup dups STORE|MOUNTPOINT [--json|--csv] [--min-size N]
 *   pagededup clusters STORE|MOUNTPOINT [--json|--csv] [--min-size N]
 *
 * dups: groups of files with the same bytes; clusters: groups of near-
 * duplicate pages, joined by the rule of user.dedup.near (a chain of
 * confirmed pairs), copies included. Only groups of at least N files
 * (default 2) that the caller may reach are listed, and in each only the
 * names the caller may reach. Given a mountpoint of pagededupfs, the store
 * behind it is read (read-only, beside the daemon) and the paths are
 * absolute (the mountpoint before them); given a store, they are relative
 * to its root ("/...").
 *
 * Output (format version 1):
 *   text  "group G: F files, P pages" then one "P<TAB>path" line per file
 *         (P: the page, 1.., within the group: files of one page have the
 *         same bytes), groups separated by an empty line;
 *   csv   a header "group,page,path", then one row per file (the path
 *         quoted as RFC 4180 says);
 *   json  an array of {"group":G,"pages":P,"files":[{"page":P,"path":"..."},
 *         ...]}; paths are written as their bytes, '"', '\' and control
 *         characters escaped.
 * A progress line is drawn on standard error when it is a terminal.
 * Exit status as grep's: 0 groups listed, 1 none, 2 error.
 */
#include "clusters_cmd.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive/archive.h"
#include "archive/clusters.h"
#include "store/store.h"
#include "cli.h"

enum format { F_TEXT, F_CSV, F_JSON };

struct out {
	enum format fmt;
	const char *prefix; /* the mountpoint, or "" */
	uint64_t groups;
	bool bar;
	const char *what;
	int last_permille;
};

static void put_json_string(const char *s)
{
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

static void put_csv_string(const char *prefix, const char *s)
{
	putchar('"');
	for (const char *parts[2] = { prefix, s }, **q = parts; q < parts + 2; q++)
		for (const char *p = *q; *p; p++) {
			if (*p == '"')
				putchar('"');
			putchar(*p);
		}
	putchar('"');
}

static int print_group(void *ctx, const struct cluster_group *g)
{
	struct out *o = ctx;
	if (o->bar)
		fputs("\r\033[K", stderr); /* the progress line goes */
	switch (o->fmt) {
	case F_TEXT:
		printf("%sgroup %llu: %zu files, %zu pages\n", o->groups ? "\n" : "", (unsigned long long)g->id,
		       g->files, g->pages);
		for (size_t i = 0; i < g->files; i++)
			printf("%zu\t%s%s\n", g->page[i] + 1, o->prefix, g->path[i]);
		break;
	case F_CSV:
		if (!o->groups)
			puts("group,page,path");
		for (size_t i = 0; i < g->files; i++) {
			printf("%llu,%zu,", (unsigned long long)g->id, g->page[i] + 1);
			put_csv_string(o->prefix, g->path[i]);
			putchar('\n');
		}
		break;
	case F_JSON:
		printf("%s{\"group\":%llu,\"pages\":%zu,\"files\":[", o->groups ? ",\n" : "[\n",
		       (unsigned long long)g->id, g->pages);
		for (size_t i = 0; i < g->files; i++) {
			char *full = malloc(strlen(o->prefix) + strlen(g->path[i]) + 1);
			if (!full)
				return -ENOMEM;
			strcpy(full, o->prefix);
			strcat(full, g->path[i]);
			printf("%s{\"page\":%zu,\"path\":", i ? "," : "", g->page[i] + 1);
			put_json_string(full);
			putchar('}');
			free(full);
		}
		fputs("]}", stdout);
		break;
	}
	o->groups++;
	return ferror(stdout) ? -EIO : 0;
}

static void progress(void *ctx, uint64_t done, uint64_t total)
{
	struct out *o = ctx;
	int permille = total ? (int)(1000 * done / total) : 1000;
	if (!o->bar || permille == o->last_permille)
		return;
	o->last_permille = permille;
	fprintf(stderr, "\r%s: %5.1f%% (%llu of %llu pages)", o->what, permille / 10.0, (unsigned long long)done,
		(unsigned long long)total);
	fflush(stderr);
}

static int usage(const char *cmd)
{
	fprintf(stderr, "usage: pagededup %s STORE|MOUNTPOINT [--json|--csv] [--min-size N]\n", cmd);
	return 2;
}

/* The caller's credentials, as the kernel would check a path. */
static struct pd_cred caller(uint32_t *groups, int max)
{
	gid_t g[64];
	int n = getgroups(64, g);
	if (n < 0)
		n = 0;
	for (int i = 0; i < n && i < max; i++)
		groups[i] = (uint32_t)g[i];
	return (struct pd_cred){ (uint32_t)geteuid(), (uint32_t)getegid(), (uint32_t)(n < max ? n : max), groups };
}

static int run(int argc, char **argv, bool near)
{
	const char *cmd = near ? "clusters" : "dups";
	struct out o = { .fmt = F_TEXT, .prefix = "", .what = cmd, .last_permille = -1 };
	size_t min_files = 2;
	const char *where = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			o.fmt = F_JSON;
		} else if (!strcmp(argv[i], "--csv")) {
			o.fmt = F_CSV;
		} else if (!strcmp(argv[i], "--min-size") && i + 1 < argc) {
			char *end;
			unsigned long long v = strtoull(argv[++i], &end, 10);
			if (*end || !*argv[i] || v < 1) {
				fprintf(stderr, "pagededup %s: --min-size wants a number of files, 1 or more\n", cmd);
				return 2;
			}
			min_files = (size_t)v;
		} else if (argv[i][0] == '-' || where) {
			return usage(cmd);
		} else {
			where = argv[i];
		}
	}
	if (!where)
		return usage(cmd);
	/* a mount point names its store, and the paths printed are the
	 * mount's; a store's directory prints paths from its root */
	struct cli_store found;
	cli_store(where, &found); /* a mounted store's waiting closes committed */
	char real[PATH_MAX];
	const char *dir = where;
	if (*found.mnt && realpath(where, real) && !strcmp(real, found.mnt)) {
		dir = found.dir;
		o.prefix = strcmp(found.mnt, "/") ? found.mnt : "";
	}
	struct store *st;
	struct store_opts so = { .readonly = true };
	char err[PD_ERRLEN] = "";
	if (archive_open(dir, &so, &st, err)) {
		fprintf(stderr, "pagededup %s: %s\n", cmd, err);
		return 2;
	}
	uint32_t groups[64];
	struct pd_cred cred = caller(groups, 64);
	o.bar = isatty(2);
	int rc = near ? clusters_near(st, &cred, min_files, print_group, progress, &o)
		      : clusters_dups(st, &cred, min_files, print_group, progress, &o);
	if (o.bar)
		fputs("\r\033[K", stderr);
	if (o.fmt == F_JSON)
		puts(o.groups ? "\n]" : "[]");
	store_close(st);
	if (fflush(stdout) && !rc)
		rc = -EIO;
	if (rc == -ESTALE)
		fprintf(stderr, "pagededup %s: %s holds signatures of an older version; mount it (or run 'pagededup fsck --repair %s') to compute them again\n",
			cmd, dir, dir);
	else if (rc)
		fprintf(stderr, "pagededup %s: %s: %s\n", cmd, dir, strerror(-rc));
	return rc ? 2 : o.groups ? 0 : 1;
}

int cmd_dups(int argc, char **argv)
{
	return run(argc, argv, false);
}

int cmd_clusters(int argc, char **argv)
{
	return run(argc, argv, true);
}
