/* pagededup - the command-line tool of a pagededup store.
 *
 *   pagededup mkfs STORE [--expected-pages N] [--fpr RATE] [--filter-lines 1|2] [--near-distance K]
 *   pagededup stats STORE [--json]
 *   pagededup fsck STORE [--deep] [--repair]
 *
 * Exit status: 0 success; 1 usage or runtime error (fsck: 1 = repaired,
 * 2 = damage left), as each command's help says.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsck.h"
#include "stats.h"
#include "store.h"

static void usage(FILE *out)
{
	fputs("usage: pagededup COMMAND STORE [options]\n"
	      "\n"
	      "  mkfs STORE [--expected-pages N] [--fpr RATE] [--filter-lines 1|2] [--near-distance K]\n"
	      "        make a store in an empty or new directory. The counting filter is sized\n"
	      "        for N pages (default 1000000) at false-positive rate RATE (default 1e-4);\n"
	      "        --filter-lines 1 keeps each page's counters in one cache line (faster,\n"
	      "        larger), 2 (default) spreads them over two (smaller at the same rate).\n"
	      "  stats STORE [--json]\n"
	      "        pages, blobs, bytes saved, refcount histogram, filter fill and rate.\n"
	      "  fsck STORE [--deep] [--repair]\n"
	      "        check every invariant of an unmounted store; --deep also re-hashes every\n"
	      "        blob; --repair fixes what can be fixed. Exit 0 clean, 1 repaired,\n"
	      "        2 damage left.\n",
	      out);
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	double d = strtod(s, &end); /* accepts 1e6 */
	if (errno || *end || d < 1 || d > 1e15)
		return -1;
	*out = (uint64_t)d;
	return 0;
}

static int cmd_mkfs(int argc, char **argv)
{
	struct store_params p;
	store_params_default(&p);
	static const struct option opts[] = {
		{ "expected-pages", required_argument, 0, 'n' },
		{ "fpr", required_argument, 0, 'r' },
		{ "filter-lines", required_argument, 0, 'l' },
		{ "near-distance", required_argument, 0, 'k' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 } };
	int c;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		uint64_t v;
		switch (c) {
		case 'n':
			if (parse_u64(optarg, &p.expected_pages)) {
				fprintf(stderr, "pagededup mkfs: --expected-pages wants a number >= 1\n");
				return 1;
			}
			break;
		case 'r':
			p.filter_fpr = strtod(optarg, NULL);
			if (!(p.filter_fpr > 0 && p.filter_fpr < 0.5)) {
				fprintf(stderr, "pagededup mkfs: --fpr wants a rate between 0 and 0.5\n");
				return 1;
			}
			break;
		case 'l':
			if (parse_u64(optarg, &v) || v > 2) {
				fprintf(stderr, "pagededup mkfs: --filter-lines is 1 or 2\n");
				return 1;
			}
			p.filter_lines = (uint32_t)v;
			break;
		case 'k':
			p.near_distance = (uint32_t)strtoul(optarg, NULL, 10);
			if (p.near_distance > 16) {
				fprintf(stderr, "pagededup mkfs: --near-distance is 0 to 16\n");
				return 1;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 1;
		}
	}
	if (optind + 1 != argc) {
		usage(stderr);
		return 1;
	}
	char err[PD_ERRLEN] = "";
	if (store_mkfs(argv[optind], &p, err)) {
		fprintf(stderr, "pagededup mkfs: %s\n", err);
		return 1;
	}
	return 0;
}

static int cmd_stats(int argc, char **argv)
{
	bool json = false;
	static const struct option opts[] = { { "json", no_argument, 0, 'j' }, { 0, 0, 0, 0 } };
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c != 'j') {
			usage(stderr);
			return 1;
		}
		json = true;
	}
	if (optind + 1 != argc) {
		usage(stderr);
		return 1;
	}
	struct store *st;
	struct store_opts o = { .readonly = true };
	char err[PD_ERRLEN] = "";
	if (store_open(argv[optind], &o, &st, err)) {
		fprintf(stderr, "pagededup stats: %s\n", err);
		return 1;
	}
	struct pd_stats s;
	stats_collect(st, &s);
	char buf[8192];
	size_t n = json ? stats_json(&s, buf, sizeof buf) : stats_text(&s, buf, sizeof buf);
	fwrite(buf, 1, n < sizeof buf ? n : sizeof buf - 1, stdout);
	if (json)
		putchar('\n');
	store_close(st);
	return 0;
}

static void fsck_report(void *ctx, const char *line)
{
	(void)ctx;
	printf("%s\n", line);
}

static void fsck_progress(void *ctx, const char *phase, uint64_t done, uint64_t total)
{
	(void)ctx;
	if (!isatty(2))
		return;
	if (total)
		fprintf(stderr, "\r%-8s %3d%% [%-40.*s]", phase, (int)(100 * done / total),
			(int)(40 * done / total), "########################################");
	else
		fprintf(stderr, "\r%-8s %llu", phase, (unsigned long long)done);
	if (done == total)
		fputc('\n', stderr);
}

static int cmd_fsck(int argc, char **argv)
{
	struct fsck_opts o = { .report = fsck_report, .progress = fsck_progress };
	static const struct option opts[] = {
		{ "deep", no_argument, 0, 'd' }, { "repair", no_argument, 0, 'r' }, { 0, 0, 0, 0 } };
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'd')
			o.deep = true;
		else if (c == 'r')
			o.repair = true;
		else {
			usage(stderr);
			return 2;
		}
	}
	if (optind + 1 != argc) {
		usage(stderr);
		return 2;
	}
	struct fsck_result r;
	char err[512];
	int rc = fsck_run(argv[optind], &o, &r, err);
	if (rc) {
		fprintf(stderr, "pagededup fsck: %s\n", *err ? err : strerror(-rc));
		return 2;
	}
	if (r.problems && o.repair) {
		/* Check again: what is left after the repair decides the exit. */
		struct fsck_opts again = { .deep = o.deep, .report = fsck_report };
		struct fsck_result r2;
		if (fsck_run(argv[optind], &again, &r2, err))
			return 2;
		printf("fsck: %llu inodes, %llu blobs: %llu problems, %llu repaired, %llu left\n",
		       (unsigned long long)r.inodes, (unsigned long long)r.blobs,
		       (unsigned long long)r.problems, (unsigned long long)r.repaired,
		       (unsigned long long)r2.problems);
		return r2.problems ? 2 : 1;
	}
	printf("fsck: %llu inodes, %llu blobs, %llu blob files: %s\n", (unsigned long long)r.inodes,
	       (unsigned long long)r.blobs, (unsigned long long)r.blob_files,
	       r.problems ? "DAMAGED" : "clean");
	return r.problems ? 2 : 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 1;
	}
	const char *cmd = argv[1];
	argv++;
	argc--;
	if (!strcmp(cmd, "mkfs"))
		return cmd_mkfs(argc, argv);
	if (!strcmp(cmd, "stats"))
		return cmd_stats(argc, argv);
	if (!strcmp(cmd, "fsck"))
		return cmd_fsck(argc, argv);
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "pagededup: unknown command '%s'\n", cmd);
	usage(stderr);
	return 1;
}
