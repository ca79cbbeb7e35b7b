/* pagededup - the command-line tool of a pagededup store.
 *
 *   pagededup mkfs STORE [--expected-pages N] [--fpr RATE] [--fmax RATE] [--max-leaf-kib K]
 *                        [--filter-lines 1|2] [--near-distance K]
 *   pagededup stats STORE [--json]
 *   pagededup fsck STORE [--deep] [--repair]
 *   pagededup simhash FILE...
 *   pagededup near STORE FILE
 *
 * Exit status: 0 success; 1 usage or runtime error (fsck: 0 clean, 1 repaired,
 * 2 damage left or the check could not run), as each command's help says.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "archive/archive.h"
#include "blobscmd.h"
#include "fsck/fsck.h"
#include "nearcmd.h"
#include "archive/stats.h"
#include "store/store.h"
#include "urlseen.h"

static void usage(FILE *out)
{
	fputs("usage: pagededup COMMAND STORE [options]\n"
	      "\n"
	      "  mkfs STORE [--expected-pages N] [--fpr RATE] [--fmax RATE] [--max-leaf-kib K]\n"
	      "             [--filter-lines 1|2] [--near-distance K]\n"
	      "        make a store in an empty or new directory. The counting filter is first\n"
	      "        sized for N pages (default 1000000) at false-positive rate RATE (default\n"
	      "        1e-4), and grows with the store: a part of it (a leaf) that passes its\n"
	      "        design load is rebuilt 1.25 times larger, in the background, or split in\n"
	      "        two once it would pass K KiB (default 1024). --fmax bounds every leaf's\n"
	      "        rate (default 2 x RATE). --filter-lines 1 keeps each page's counters in\n"
	      "        one cache line (faster, larger), 2 (default) spreads them over two\n"
	      "        (smaller at the same rate).\n"
	      "  stats STORE [--json]\n"
	      "        pages, blobs, bytes saved, refcount histogram, filter leaves, depth,\n"
	      "        bytes, fill and rate.\n"
	      "  fsck STORE [--deep] [--repair]\n"
	      "        check every invariant of an unmounted store: refcounts, blob files,\n"
	      "        filter counters and exact counts, the namespace tree and link counts,\n"
	      "        totals, orphan files. --deep also re-hashes every blob (MD5, XXH3-128).\n"
	      "        --repair fixes what can be fixed and never deletes a blob a page refers\n"
	      "        to; a page whose bytes are lost moves to /lost+found (empty, with its\n"
	      "        MD5 in the xattr user.pagededup.lost_md5). Exit 0 clean, 1 repaired,\n"
	      "        2 damage left (or the check could not run). --repair also moves the\n"
	      "        blob files of a store made by format 1 (objects/) into packs.\n"
	      "  simhash FILE...\n"
	      "        the 64-bit simhash of each file's text (hex), 'low-confidence' after it\n"
	      "        when the text is too short to judge, 'none' for binary content.\n"
	      "  near STORE FILE\n"
	      "        the stored pages whose simhash is within the store's distance (mkfs\n"
	      "        --near-distance, default 4) of FILE's, which need not be stored:\n"
	      "        'D<TAB>/path' lines as getfattr -n user.dedup.near gives them, D followed\n"
	      "        by '?' when a page has little text. Exit 0 some found, 1 none, 2 error.\n"
	      "  blobs STORE [--cat KEY]\n"
	      "        where each distinct page is kept (KEY, size, refcount, pack record or\n"
	      "        file, encoding), or the stored bytes of blob KEY, decoded and checked.\n"
	      "  urlseen [--filter FILE] [--fpr RATE] [--check] [options] [INPUT...]\n"
	      "        print the URLs (one a line, from INPUT or stdin) not seen before, in\n"
	      "        normal form, and record them in FILE, a filter that keeps between runs\n"
	      "        and grows with them (default rate 1e-4). --check tests only. Several\n"
	      "        processes may share FILE (flock per batch). `urlseen --help` for more.\n",
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
		{ "fmax", required_argument, 0, 'f' },
		{ "max-leaf-kib", required_argument, 0, 'm' },
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
		case 'f':
			p.filter_fmax = strtod(optarg, NULL);
			if (!(p.filter_fmax > 0 && p.filter_fmax < 0.5)) {
				fprintf(stderr, "pagededup mkfs: --fmax wants a rate between 0 and 0.5\n");
				return 1;
			}
			break;
		case 'm':
			if (parse_u64(optarg, &v) || v > (UINT64_C(1) << 30)) {
				fprintf(stderr, "pagededup mkfs: --max-leaf-kib wants a number of KiB, 1 to 2^30\n");
				return 1;
			}
			p.filter_leaf_lines = v * 1024 / CBF_LINE_BYTES;
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
	if (p.filter_fmax > 0 && p.filter_fmax < p.filter_fpr) {
		fprintf(stderr, "pagededup mkfs: --fmax must not be below --fpr\n");
		return 1;
	}
	char err[PD_ERRLEN] = "";
	if (archive_mkfs(argv[optind], &p, err)) {
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
	if (archive_open(argv[optind], &o, &st, err)) {
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

/* fsck's output: problems and repairs on stdout, progress on stderr. On a
 * terminal the progress is one bar redrawn in place (at most ten times a
 * second) and cleared before a report line; otherwise it is a plain line
 * when a phase starts, every few seconds, and when it ends. */
#define FSCK_PROGRESS_SECONDS 5.0

struct fsck_ui {
	bool tty;
	bool drawn;           /* a bar is on the screen */
	char phase[48];
	double phase_start, last;
	bool phase_done;
};

static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fsck_clear_bar(struct fsck_ui *ui)
{
	if (ui->drawn) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
		ui->drawn = false;
	}
}

static void fsck_report(void *ctx, const char *line)
{
	fsck_clear_bar(ctx);
	printf("%s\n", line);
	fflush(stdout);
}

static void fsck_progress(void *ctx, const char *phase, uint64_t done, uint64_t total)
{
	struct fsck_ui *ui = ctx;
	double t = mono_s();
	bool start = strcmp(phase, ui->phase) != 0;
	bool end = !start && done == total && !ui->phase_done;
	if (start) {
		snprintf(ui->phase, sizeof ui->phase, "%s", phase);
		ui->phase_start = t;
		ui->phase_done = false;
	}
	if (end)
		ui->phase_done = true;
	unsigned long long d = done, n = total;
	if (ui->tty) {
		if (!start && !end && t - ui->last < 0.1)
			return;
		ui->last = t;
		if (total) {
			int pct = (int)(100 * done / total), w = (int)(30 * done / total);
			fprintf(stderr, "\r\033[Kfsck %-22s [%.*s%*s] %3d%%  %llu/%llu", phase, w,
				"##############################", 30 - w, "", pct, d, n);
		} else {
			fprintf(stderr, "\r\033[Kfsck %-22s %llu", phase, d);
		}
		fflush(stderr);
		ui->drawn = true;
		return;
	}
	if (start) {
		ui->last = t;
		if (total)
			fprintf(stderr, "fsck: %s: %llu to check\n", phase, n);
		else
			fprintf(stderr, "fsck: %s\n", phase);
	} else if (end) {
		fprintf(stderr, "fsck: %s: done (%llu in %.1f s)\n", phase, d, t - ui->phase_start);
	} else if (t - ui->last >= FSCK_PROGRESS_SECONDS) {
		ui->last = t;
		if (total)
			fprintf(stderr, "fsck: %s: %d%% (%llu of %llu)\n", phase, (int)(100 * done / total), d, n);
		else
			fprintf(stderr, "fsck: %s: %llu\n", phase, d);
	}
}

static void fsck_summary(const char *store, const struct fsck_result *r, bool deep)
{
	printf("fsck %s: %llu inodes (%llu pages, %llu directories), %llu blobs, %llu blob files", store,
	       (unsigned long long)r->inodes, (unsigned long long)r->pages, (unsigned long long)r->dirs,
	       (unsigned long long)r->blobs, (unsigned long long)r->blob_files);
	if (deep)
		printf(", %.1f MB hashed", (double)r->bytes_hashed / 1e6);
	printf(" in %.1f s\n", r->seconds);
}

static int cmd_fsck(int argc, char **argv)
{
	struct fsck_ui ui = { .tty = isatty(2) };
	struct fsck_opts o = { .report = fsck_report, .progress = fsck_progress, .ctx = &ui };
	static const struct option opts[] = { { "deep", no_argument, 0, 'd' },
					      { "repair", no_argument, 0, 'r' },
					      { "help", no_argument, 0, 'h' },
					      { 0, 0, 0, 0 } };
	int c;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'd')
			o.deep = true;
		else if (c == 'r')
			o.repair = o.convert = true;
		else if (c == 'h') {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (optind + 1 != argc) {
		usage(stderr);
		return 2;
	}
	const char *store = argv[optind];
	struct fsck_result r;
	char err[512];
	int rc = fsck_run(store, &o, &r, err);
	fsck_clear_bar(&ui);
	if (rc) {
		fprintf(stderr, "pagededup fsck: %s\n", *err ? err : strerror(-rc));
		return 2;
	}
	if (!r.problems) {
		fsck_summary(store, &r, o.deep);
		printf("clean\n");
		return 0;
	}
	if (!o.repair) {
		fsck_summary(store, &r, o.deep);
		printf("DAMAGED: %llu problem%s; 'pagededup fsck --repair %s' fixes what can be fixed\n",
		       (unsigned long long)r.problems, r.problems == 1 ? "" : "s", store);
		return 2;
	}
	/* Check again: what is left after the repair decides the exit. */
	printf("-- checking again after %llu repair%s\n", (unsigned long long)r.repaired,
	       r.repaired == 1 ? "" : "s");
	struct fsck_opts again = o;
	again.repair = false;
	struct fsck_result r2;
	if ((rc = fsck_run(store, &again, &r2, err))) {
		fsck_clear_bar(&ui);
		fprintf(stderr, "pagededup fsck: after the repair: %s\n", *err ? err : strerror(-rc));
		return 2;
	}
	fsck_clear_bar(&ui);
	fsck_summary(store, &r2, o.deep);
	printf("%llu problem%s found, %llu repair%s made", (unsigned long long)r.problems,
	       r.problems == 1 ? "" : "s", (unsigned long long)r.repaired, r.repaired == 1 ? "" : "s");
	if (r.lost)
		printf("; %llu page%s whose bytes are lost now in /%s (empty, %s holds the MD5)",
		       (unsigned long long)r.lost, r.lost == 1 ? "" : "s", FSCK_LOST_FOUND, FSCK_XATTR_LOST_MD5);
	if (r.adopted)
		printf("; %llu nameless file%s or cut-off director%s put in /%s", (unsigned long long)r.adopted,
		       r.adopted == 1 ? "" : "s", r.adopted == 1 ? "y" : "ies", FSCK_LOST_FOUND);
	printf("\n%s\n", r2.problems ? "DAMAGE LEFT: the problems above could not all be repaired" : "repaired: clean now");
	return r2.problems ? 2 : 1;
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
	if (!strcmp(cmd, "urlseen"))
		return cmd_urlseen(argc, argv);
	if (!strcmp(cmd, "simhash"))
		return cmd_simhash(argc, argv);
	if (!strcmp(cmd, "near"))
		return cmd_near(argc, argv);
	if (!strcmp(cmd, "blobs"))
		return cmd_blobs(argc, argv);
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "pagededup: unknown command '%s'\n", cmd);
	usage(stderr);
	return 1;
}
