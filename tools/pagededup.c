/* pagededup - the command-line tool of a pagededup store.
 *
 * One table (commands[] below) names every command: its name, the function
 * that runs it, its synopsis, a one-line summary, its help text and the
 * exit status of a usage error. main() finds the command, answers
 * `pagededup COMMAND --help` from the table, and runs it; the habits every
 * command shares are in cli.h (one-line usage errors with "Try ... --help",
 * a mountpoint accepted wherever a store is, errors printed once, the
 * documented exit statuses). Exit status: see cli.h and pagededup(1).
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "archive/archive.h"
#include "archive/query.h"
#include "archive/stats.h"
#include "base/version.h"
#include "blobscmd.h"
#include "cli.h"
#include "clusters_cmd.h"
#include "compactcmd.h"
#include "fsck/fsck.h"
#include "near/near.h"
#include "nearcmd.h"
#include "store/store.h"
#include "urlseen.h"
#include "warccmd.h"

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
		{ 0, 0, 0, 0 } };
	int c;
	while ((c = cli_getopt(argc, argv, "", opts)) != -1) {
		uint64_t v;
		char *end;
		switch (c) {
		case 'n':
			if (parse_u64(optarg, &p.expected_pages))
				return cli_usage_error("--expected-pages wants a number >= 1");
			break;
		case 'r':
			p.filter_fpr = strtod(optarg, &end);
			if (*end || !(p.filter_fpr > 0 && p.filter_fpr < 0.5))
				return cli_usage_error("--fpr wants a rate between 0 and 0.5");
			break;
		case 'f':
			p.filter_fmax = strtod(optarg, &end);
			if (*end || !(p.filter_fmax > 0 && p.filter_fmax < 0.5))
				return cli_usage_error("--fmax wants a rate between 0 and 0.5");
			break;
		case 'm':
			if (parse_u64(optarg, &v) || v > (UINT64_C(1) << 30))
				return cli_usage_error("--max-leaf-kib wants a number of KiB, 1 to 2^30");
			p.filter_leaf_lines = v * 1024 / CBF_LINE_BYTES;
			break;
		case 'l':
			if (parse_u64(optarg, &v) || v > 2)
				return cli_usage_error("--filter-lines is 1 or 2");
			p.filter_lines = (uint32_t)v;
			break;
		case 'k':
			v = strtoul(optarg, &end, 10);
			if (*end || !*optarg || v > 16)
				return cli_usage_error("--near-distance is 0 to 16");
			p.near_distance = (uint32_t)v;
			break;
		default:
			return cli_current->usage_status;
		}
	}
	if (optind + 1 != argc)
		return cli_usage_error(optind == argc ? "no STORE given" : "one STORE only");
	if (p.filter_fmax > 0 && p.filter_fmax < p.filter_fpr)
		return cli_usage_error("--fmax must not be below --fpr");
	const char *dir = argv[optind];
	struct cli_store where;
	cli_store(dir, &where);
	if (*where.path && strcmp(where.dir, dir)) {
		cli_error("%s is inside the archive mounted on %s; a store goes outside any mount", dir, where.mnt);
		return CLI_FAIL;
	}
	char err[PD_ERRLEN] = "";
	if (archive_mkfs(dir, &p, err)) {
		cli_error("%s", err);
		return CLI_FAIL;
	}
	return CLI_OK;
}

/* The figures of a mounted store come from its daemon (the attribute
 * user.dedup.stats*: the live totals, not LMDB's last sync; of a subtree
 * when path is a directory below the mount point). */
static int stats_from_daemon(const char *path, enum stats_format fmt, bool quiet)
{
	const char *name = fmt == STATS_JSON ? QUERY_ATTR_STATS : fmt == STATS_HUMAN ? QUERY_ATTR_STATS_HUMAN
										   : QUERY_ATTR_STATS_TEXT;
	char *buf = malloc(QUERY_MAX);
	ssize_t n = buf ? getxattr(path, name, buf, QUERY_MAX) : -1;
	if (n < 0) {
		if (!quiet)
			cli_error("%s: cannot read %s: %s", path, name, strerror(buf ? errno : ENOMEM));
		free(buf);
		return CLI_FAIL;
	}
	fwrite(buf, 1, (size_t)n, stdout);
	free(buf);
	return CLI_OK;
}

static int cmd_stats(int argc, char **argv)
{
	enum stats_format fmt = STATS_TEXT;
	static const struct option opts[] = { { "json", no_argument, 0, 'j' },
					      { "human-readable", no_argument, 0, 'h' },
					      { 0, 0, 0, 0 } };
	int c;
	while ((c = cli_getopt(argc, argv, "h", opts)) != -1) {
		if (c == 'j')
			fmt = STATS_JSON;
		else if (c == 'h')
			fmt = fmt == STATS_JSON ? fmt : STATS_HUMAN;
		else
			return cli_current->usage_status;
	}
	if (optind + 1 != argc)
		return cli_usage_error(optind == argc ? "no STORE given" : "one STORE only");
	struct cli_store where;
	cli_store(argv[optind], &where);
	/* The store's own figures can also be read from the store itself
	 * (a daemon that does not answer this caller, or is gone); a
	 * subtree's only from the daemon. */
	bool whole = !strcmp(where.inner, "/");
	if (*where.path && stats_from_daemon(where.path, fmt, whole) == CLI_OK)
		return CLI_OK;
	if (*where.path && !whole)
		return CLI_FAIL;
	if (*where.path)
		cli_error("the daemon of %s did not answer (%s); figures from the store as last synced", where.mnt,
			  strerror(errno));
	struct store *st;
	struct store_opts o = { .readonly = true };
	char err[PD_ERRLEN] = "";
	if (archive_open(where.dir, &o, &st, err)) {
		cli_error("%s", err);
		return CLI_FAIL;
	}
	struct pd_stats s;
	int rc = stats_collect(st, &s);
	store_close(st);
	if (rc) {
		cli_error("%s: %s", where.dir, strerror(-rc));
		return CLI_FAIL;
	}
	char *buf = malloc(QUERY_MAX);
	if (!buf)
		return CLI_FAIL;
	size_t n = stats_format(&s, fmt, buf, QUERY_MAX);
	fwrite(buf, 1, n < QUERY_MAX ? n : QUERY_MAX - 1, stdout);
	free(buf);
	return CLI_OK;
}

/* pagededup attrs FILE...: every computed attribute of each file, as
 * "name: value" (a value of several lines is indented below its name).
 * They are computed, not stored, so listxattr leaves them out and cp -a
 * or tar --xattrs copy pages out without them; this lists them. */
static int cmd_attrs(int argc, char **argv)
{
	int c;
	static const struct option opts[] = { { 0, 0, 0, 0 } };
	while ((c = cli_getopt(argc, argv, "", opts)) != -1)
		return cli_current->usage_status;
	if (optind == argc)
		return cli_usage_error("no FILE given");
	char *buf = malloc(QUERY_MAX);
	if (!buf)
		return CLI_FAIL;
	int status = CLI_OK;
	for (int i = optind; i < argc; i++) {
		if (argc - optind > 1)
			printf("%s%s:\n", i > optind ? "\n" : "", argv[i]);
		bool any = false;
		for (const char *const *a = query_attr_names; *a; a++) {
			ssize_t n = getxattr(argv[i], *a, buf, QUERY_MAX);
			if (n < 0 && (errno == ENODATA || errno == EOPNOTSUPP || errno == ENOTSUP))
				continue;
			if (n < 0) {
				if (errno != ENOENT || !any) {
					cli_error("%s: %s", argv[i], strerror(errno));
					status = CLI_FAIL;
				}
				break;
			}
			any = true;
			while (n > 0 && buf[n - 1] == '\n')
				n--;
			bool lines = n > 0 && memchr(buf, '\n', (size_t)n) != NULL;
			printf("%s:%s", *a, lines ? "\n  " : " ");
			for (ssize_t j = 0; j < n; j++) {
				putchar(buf[j]);
				if (buf[j] == '\n')
					fputs("  ", stdout);
			}
			putchar('\n');
		}
		if (!any && status == CLI_OK) {
			cli_error("%s: no dedup attributes (not in a pagededupfs mount, or not sealed yet)", argv[i]);
			status = CLI_FAIL;
		}
	}
	free(buf);
	return status;
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

/* fsck's exit statuses (cli.h). */
enum { FSCK_CLEAN = 0, FSCK_REPAIRED = 1, FSCK_DAMAGED = 2, FSCK_LEFTOVERS = 3, FSCK_CANNOT = 4 };

static int cmd_fsck(int argc, char **argv)
{
	struct fsck_ui ui = { .tty = isatty(2) };
	struct fsck_opts o = { .report = fsck_report, .progress = fsck_progress, .ctx = &ui };
	static const struct option opts[] = { { "deep", no_argument, 0, 'd' },
					      { "repair", no_argument, 0, 'r' },
					      { "mem", required_argument, 0, 'm' },
					      { 0, 0, 0, 0 } };
	int c;
	uint64_t mem;
	while ((c = cli_getopt(argc, argv, "", opts)) != -1) {
		if (c == 'd')
			o.deep = true;
		else if (c == 'r')
			o.repair = o.convert = true;
		else if (c == 'm' && cli_parse_bytes(optarg, &mem) && mem <= SIZE_MAX)
			near_check_mem((size_t)mem);
		else if (c == 'm')
			return cli_usage_error("--mem takes a number of bytes (suffix K, M or G), not '%s'", optarg);
		else
			return FSCK_CANNOT;
	}
	if (optind + 1 != argc)
		return cli_usage_error(optind == argc ? "no STORE given" : "one STORE only");
	struct cli_store where;
	cli_store(argv[optind], &where);
	if (cli_wait_unmounted(&where))
		return FSCK_CANNOT;
	const char *store = where.dir;
	struct fsck_result r;
	char err[512];
	int rc = fsck_run(store, &o, &r, err);
	fsck_clear_bar(&ui);
	if (rc) {
		cli_error("%s", *err ? err : strerror(-rc));
		return FSCK_CANNOT;
	}
	if (!r.problems && !r.leftovers) {
		fsck_summary(store, &r, o.deep);
		printf("clean\n");
		return FSCK_CLEAN;
	}
	if (!o.repair && !r.problems) {
		fsck_summary(store, &r, o.deep);
		printf("clean but for %llu crash leftover%s (the next mount of a store not closed cleanly, or "
		       "'pagededup fsck --repair %s', removes what nothing refers to and seals what the journal holds)\n",
		       (unsigned long long)r.leftovers, r.leftovers == 1 ? "" : "s", store);
		return FSCK_LEFTOVERS;
	}
	if (!o.repair) {
		fsck_summary(store, &r, o.deep);
		printf("DAMAGED: %llu problem%s; 'pagededup fsck --repair %s' fixes what can be fixed\n",
		       (unsigned long long)r.problems, r.problems == 1 ? "" : "s", store);
		return FSCK_DAMAGED;
	}
	/* Check again: what is left after the repair decides the exit. */
	printf("-- checking again after %llu repair%s\n", (unsigned long long)r.repaired,
	       r.repaired == 1 ? "" : "s");
	struct fsck_opts again = o;
	again.repair = false;
	struct fsck_result r2;
	if ((rc = fsck_run(store, &again, &r2, err))) {
		fsck_clear_bar(&ui);
		cli_error("after the repair: %s", *err ? err : strerror(-rc));
		return FSCK_CANNOT;
	}
	fsck_clear_bar(&ui);
	fsck_summary(store, &r2, o.deep);
	printf("%llu problem%s and %llu crash leftover%s found, %llu repair%s made", (unsigned long long)r.problems,
	       r.problems == 1 ? "" : "s", (unsigned long long)r.leftovers, r.leftovers == 1 ? "" : "s",
	       (unsigned long long)r.repaired, r.repaired == 1 ? "" : "s");
	if (r.lost)
		printf("; %llu page%s whose bytes are lost now in /%s (empty, %s holds the MD5)",
		       (unsigned long long)r.lost, r.lost == 1 ? "" : "s", FSCK_LOST_FOUND, FSCK_XATTR_LOST_MD5);
	if (r.adopted)
		printf("; %llu nameless file%s or cut-off director%s put in /%s", (unsigned long long)r.adopted,
		       r.adopted == 1 ? "" : "s", r.adopted == 1 ? "y" : "ies", FSCK_LOST_FOUND);
	bool left = r2.problems || r2.leftovers;
	printf("\n%s\n", left ? "DAMAGE LEFT: the problems above could not all be repaired" : "repaired: clean now");
	return left ? FSCK_DAMAGED : FSCK_REPAIRED;
}

static int cmd_version(int argc, char **argv)
{
	(void)argv;
	if (argc > 1)
		return cli_usage_error("takes no arguments");
	printf("pagededup %s (store format %d)\n", pd_version(), PD_FORMAT_VERSION);
	return CLI_OK;
}

/* ---- the commands ----------------------------------------------------------
 *
 * To add a command: write `int cmd_NAME(int argc, char **argv)` (argv[0] is
 * the name; options with cli_getopt; a usage error returns
 * cli_usage_error(...); runtime errors through cli_error; STORE arguments
 * through cli_store, so that a mount point works too), declare it in a
 * header of its file, and add one line here. `pagededup NAME --help` prints
 * the line's synopsis and help without running the command (help NULL: the
 * command answers --help itself). usage_status is what a usage error exits
 * with: CLI_USAGE (2) unless the command's statuses give 2 another meaning.
 * The man page (docs/pagededup.1.md) and the bash completion
 * (tools/pagededup.bash) list the commands too.
 */
static const struct cli_cmd commands[] = {
	{ "mkfs", cmd_mkfs,
	  "STORE [--expected-pages N] [--fpr RATE] [--fmax RATE] [--max-leaf-kib K] [--filter-lines 1|2] [--near-distance K]",
	  "make a store in an empty or new directory",
	  "The counting filter is first sized for N pages (default 65536) at\n"
	  "false-positive rate RATE (default 1e-4), and grows with the store: a part of\n"
	  "it (a leaf) that passes its design load is rebuilt 1.25 times larger, in the\n"
	  "background, or split in two once it would pass K KiB (default 1024). --fmax\n"
	  "bounds every leaf's rate (default 2 x RATE). --filter-lines 1 keeps each\n"
	  "page's counters in one cache line (faster, larger), 2 (default) spreads them\n"
	  "over two (smaller at the same rate). --near-distance: the simhash distance of\n"
	  "near-duplicates (0 to 16, default 4). STORE may not be inside a mount.\n"
	  "Exit 0 made, 1 failed, 2 usage error.",
	  CLI_USAGE },
	{ "stats", cmd_stats, "STORE|MOUNTPOINT|DIR [--json] [-h|--human-readable]",
	  "what the store holds, what it takes on disk, how well it de-duplicates",
	  "Pages, blobs, logical and unique bytes, the bytes on disk by part (blob\n"
	  "files, LMDB, filter, staging) against a plain copy, refcounts, the filter.\n"
	  "Of a mounted store the daemon answers (its live totals; the store itself\n"
	  "when the daemon does not); DIR, a directory inside the mount, gives that\n"
	  "subtree's figures (a crawl's own). -h: sizes\n"
	  "in KiB, MiB, GiB. --json: one JSON object (sizes in bytes).\n"
	  "Exit 0, 1 failed, 2 usage error.",
	  CLI_USAGE },
	{ "fsck", cmd_fsck, "STORE [--deep] [--repair] [--mem BYTES]",
	  "check (and repair) an unmounted store",
	  "Checks every invariant: refcounts, blob files, filter counters and exact\n"
	  "counts, the namespace tree and link counts, totals, files unknown to the\n"
	  "store. --deep also re-hashes every blob (MD5, XXH3-128). --repair fixes what\n"
	  "can be fixed and never deletes a blob a page refers to; a page whose bytes\n"
	  "are lost moves to /lost+found (empty, its MD5 in user.pagededup.lost_md5).\n"
	  "Right after an unmount it waits for the daemon to finish closing the store.\n"
	  "--mem: what the check of the near-duplicate tables holds in memory (default\n"
	  "512M; suffixes K, M, G); past it a table is read in parts, or its rows are\n"
	  "sorted in a file beside the store; 0: every row probed, slowly.\n"
	  "Exit 0 clean, 1 repaired, 2 damage (a page lost or at risk), 3 only crash\n"
	  "leftovers (blob files no record names, staged bytes, a pack with nothing\n"
	  "live left by a compaction: the next mount of a store not closed cleanly,\n"
	  "or --repair, removes them), 4 could not check\n"
	  "(not a store, mounted, usage error).",
	  FSCK_CANNOT },
	{ "compact", cmd_compact, "STORE [--share S] [--min-dead BYTES] [--all] [--level N] [--no-cold-deltas] [--window N]",
	  "give back the dead bytes of an unmounted store's packs and LMDB's free pages now",
	  "Rewrites every pack whose live share is below S (default 0.5) and that has\n"
	  "at least BYTES (default 1M; suffixes K, M, G) allocated beyond its live\n"
	  "records: they are checked, copied to the current pack and synced, the\n"
	  "store points at the copies, then the old pack is removed. A page record\n"
	  "stored whole is encoded again at zstd level N (default 9; 0: copied as it\n"
	  "is) with the store's newest dictionary, and kept so only when that is\n"
	  "smaller. --all: every pack with a live record, deltas encoded again too\n"
	  "(unless --no-cold-deltas), at level 19 unless --level says otherwise, and\n"
	  "each page stored whole also tried as a delta on each of the N pages copied\n"
	  "before it in path order (default 8; 0: none), as git's pack window (the store made as small\n"
	  "as it can be now; it rewrites every pack, as git gc --aggressive does,\n"
	  "but one an earlier --all at that level and window wrote, which lost no page and\n"
	  "whose dictionary is still the newest; then the dictionaries no record\n"
	  "needs any more are removed).\n"
	  "A damaged record is not copied (it stays, marked bad: a\n"
	  "refetch heals it). Then LMDB's file is rewritten without its free pages\n"
	  "(a compact copy, synced, renamed over it). A mounted store's packs are\n"
	  "compacted by its daemon (-o compact); its LMDB file only by this command.\n"
	  "Exit 0 done, 1 failed (nothing lost), 2 usage error.",
	  CLI_USAGE },
	{ "simhash", cmd_simhash, "FILE...",
	  "the 64-bit simhash of each file's text",
	  "Hex, 'low-confidence' after it when the text is too short to judge, 'none'\n"
	  "for binary content. Exit 0, 1 when a file could not be read, 2 usage error.",
	  CLI_USAGE },
	{ "near", cmd_near, "STORE|MOUNTPOINT FILE",
	  "the stored pages like FILE (which need not be stored)",
	  "The stored pages whose simhash is within the store's distance (mkfs\n"
	  "--near-distance, default 4) of FILE's: 'D<TAB>/path' lines as getfattr -n\n"
	  "user.dedup.near gives them, D followed by '?' when a page has little text.\n"
	  "Works while the store is mounted. Exit (as grep) 0 some found, 1 none,\n"
	  "2 error or usage error.",
	  2 },
	{ "attrs", cmd_attrs, "FILE...",
	  "the dedup attributes of files in a mount, with their values",
	  "Every user.dedup.* attribute the file has (md5, refcount, twins, near,\n"
	  "simhash; stats on a directory), as 'name: value'. They are computed, not\n"
	  "stored, so listxattr does not list them and cp -a or tar --xattrs copy pages\n"
	  "out without them. Exit 0, 1 failed, 2 usage error.",
	  CLI_USAGE },
	{ "blobs", cmd_blobs, "STORE [--cat KEY]",
	  "where each distinct page is kept, or one page's stored bytes",
	  "Without --cat: one line per distinct page (its KEY, size, refcount, the\n"
	  "pack record or file that holds it, its encoding). --cat KEY: the stored\n"
	  "bytes of blob KEY, decoded and checked against its XXH3-128.\n"
	  "Exit 0, 1 failed (a damaged record: EIO), 2 usage error.",
	  CLI_USAGE },
	{ "urlseen", cmd_urlseen, "[--filter FILE] [--fpr RATE] [--check] [options] [INPUT...]",
	  "print the URLs not seen before and remember them",
	  NULL, /* `pagededup urlseen --help` prints its own */
	  CLI_USAGE },
	{ "dups", cmd_dups, "STORE|MOUNTPOINT [--json|--csv] [--min-size N]",
	  "every group of files with the same bytes",
	  "One group a block (text), an object (--json) or rows (--csv), largest first;\n"
	  "--min-size N: only groups of N files or more (default 2). Only paths the\n"
	  "caller may reach are listed; given the mount point, paths are absolute.\n"
	  "A progress bar on a terminal. Exit 0, 1 failed, 2 usage error.",
	  CLI_USAGE },
	{ "clusters", cmd_clusters, "STORE|MOUNTPOINT [--json|--csv] [--min-size N]",
	  "every group of near-duplicate pages, joined by the rule of user.dedup.near",
	  "Pages joined when user.dedup.near lists one beside the other (its confirm\n"
	  "and threshold), one group a block (text), an object (--json) or rows\n"
	  "(--csv); --min-size N: only groups of N pages or more (default 2). Only\n"
	  "paths the caller may reach are listed. A progress bar on a terminal.\n"
	  "Exit 0, 1 failed, 2 usage error.",
	  CLI_USAGE },
	{ "export", cmd_export, "STORE|MOUNTPOINT [PATH...] -o OUT.warc.gz [--max-size BYTES] [--cdxj]",
	  "the pages as WARC/1.1 files, later copies as revisit records",
	  NULL, /* `pagededup export --help` prints its own */
	  CLI_USAGE },
	{ "import", cmd_import, "WARC... -C DIR",
	  "the pages of WARC files into DIR (inside the mount), as a wget mirror",
	  NULL, /* `pagededup import --help` prints its own */
	  CLI_USAGE },
	{ "version", cmd_version, "", "the version of pagededup (also --version, -V)",
	  "Exit 0.", CLI_USAGE },
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out)
{
	fputs("usage: pagededup COMMAND [ARGS...]    (pagededup COMMAND --help for one)\n\n", out);
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
	fputs("\nA STORE may be given as the store's directory or as its mount point.\n"
	      "Exit status: 0 success, 1 failure, 2 usage error; near and fsck have their\n"
	      "own (pagededup near --help, pagededup fsck --help, pagededup(1)).\n",
	      out);
}

static void command_help(const struct cli_cmd *c)
{
	printf("usage: pagededup %s %s\n\n%s\n%s\n", c->name, c->synopsis, c->summary, c->help);
}

/* --help anywhere before "--" asks for help. */
static bool wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--help"))
			return true;
	return false;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fputs("pagededup: no COMMAND given\nTry 'pagededup --help' for more information.\n", stderr);
		return CLI_USAGE;
	}
	const char *name = argv[1];
	if (!strcmp(name, "-h") || !strcmp(name, "--help") || !strcmp(name, "help")) {
		if (argc > 2 && strcmp(name, "help") == 0) {
			for (size_t i = 0; i < NCOMMANDS; i++)
				if (!strcmp(argv[2], commands[i].name) && commands[i].help) {
					command_help(&commands[i]);
					return CLI_OK;
				}
		}
		usage(stdout);
		return CLI_OK;
	}
	if (!strcmp(name, "--version") || !strcmp(name, "-V"))
		name = "version";
	for (size_t i = 0; i < NCOMMANDS; i++) {
		const struct cli_cmd *c = &commands[i];
		if (strcmp(name, c->name))
			continue;
		cli_current = c;
		if (c->help && wants_help(argc - 1, argv + 1)) {
			command_help(c);
			return CLI_OK;
		}
		return c->run(argc - 1, argv + 1);
	}
	fprintf(stderr, "pagededup: unknown command '%s'\nTry 'pagededup --help' for more information.\n", name);
	return CLI_USAGE;
}
