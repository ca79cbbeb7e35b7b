/* compactcmd.c - `pagededup compact STORE`: the compactor's pass, now, on
 * an unmounted store (a mounted one is compacted by its daemon's thread,
 * -o compact=SHARE). What it does and why it is crash-safe: blob.h.
 *
 *   pagededup compact STORE [--share S] [--min-dead BYTES] [--all]
 *     --share S        compact packs whose live share is below S
 *                      (default BLOB_COMPACT_SHARE, 0.5)
 *     --min-dead BYTES ... and that have at least BYTES to give back
 *                      (default BLOB_COMPACT_MIN_DEAD, 1 MiB; suffixes K M G)
 *     --all            every pack with a live record, each page record
 *                      encoded again at BLOB_COLD_LEVEL with the store's
 *                      newest dictionary when that is smaller (blob.h);
 *                      as `git gc --aggressive`, it rewrites every pack
 *                      but those an earlier --all wrote that lost no
 *                      page and need no newer dictionary or higher level
 *                      (pack.h's cold mark: run again, it costs a read
 *                      of their record headers only);
 *                      then the dictionaries no record needs any more go
 *     --level N        the zstd level records are encoded again at (0:
 *                      copied as they are; default BLOB_COMPACT_COLD_LEVEL,
 *                      as the daemon's compactor, or BLOB_COLD_LEVEL with
 *                      --all)
 *     --no-cold-deltas with --all: deltas copied as they are (only whole
 *                      pages encoded again; without --all that is always so,
 *                      as in the daemon's compactor)
 *     --window N       with --all: each whole page also tried as a delta on
 *                      the N pages copied before it, as git's pack window
 *                      (default BLOB_COLD_WINDOW, 8; 0: none; at most
 *                      BLOB_COLD_WINDOW_MAX); a pack's pages are copied in
 *                      the order of their paths, so that the window holds a
 *                      directory's pages together
 *
 * Then rewrites LMDB's file without its free pages, every table first
 * written again in key order (store_lmdb_compact).
 *
 * Prints two lines: packs compacted and removed, records and bytes moved,
 * bytes given back, damaged records left (marked bad: a refetch heals
 * them; fsck --deep names them); then LMDB's file before and after.
 * Exit 0 done, 1 failed (nothing lost), 2 usage error.
 */
#include "compactcmd.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "archive/archive.h"
#include "archive/query.h"
#include "blob/blob.h"
#include "cli.h"
#include "store/store.h"

/* CPU seconds of this process (user and system): its cost whatever else
 * the machine runs. */
static double cpu_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A debugging stop (PD_COMPACT_STOP, blob_compact.c) waits until killed. */
static bool never(void *ctx)
{
	(void)ctx;
	return false;
}

/* A page's key for the window's order: its path (blob.h). */
static int page_path(void *ctx, const struct blobkey *k, char *buf, size_t size)
{
	return query_blob_path(ctx, k, buf, size);
}

int cmd_compact(int argc, char **argv)
{
	static const struct option opts[] = { { "share", required_argument, 0, 's' },
					      { "min-dead", required_argument, 0, 'm' },
					      { "all", no_argument, 0, 'a' },
					      { "level", required_argument, 0, 'l' },
					      { "no-cold-deltas", no_argument, 0, 'd' },
					      { "window", required_argument, 0, 'w' },
					      { 0, 0, 0, 0 } };
	double share = BLOB_COMPACT_SHARE;
	uint64_t min_dead = BLOB_COMPACT_MIN_DEAD;
	bool all = false, cold_deltas = true;
	int level = -1, window = BLOB_COLD_WINDOW, c;
	while ((c = cli_getopt(argc, argv, "", opts)) != -1) {
		char *end;
		if (c == 's') {
			share = strtod(optarg, &end);
			if (*end || end == optarg || !(share > 0 && share <= 1))
				return cli_usage_error("--share takes a share of live bytes in (0, 1], not '%s'", optarg);
		} else if (c == 'm') {
			if (!cli_parse_bytes(optarg, &min_dead))
				return cli_usage_error("--min-dead takes a number of bytes (suffix K, M or G), not '%s'", optarg);
		} else if (c == 'a') {
			share = 1.0; /* every pack with a block's worth of dead bytes */
			min_dead = 4096;
			all = true; /* ... and every other one with a live record */
		} else if (c == 'l') {
			level = (int)strtol(optarg, &end, 10);
			if (*end || end == optarg || level < 0 || level > 22)
				return cli_usage_error("--level takes a zstd level from 0 (copy as they are) to 22, not '%s'",
						       optarg);
		} else if (c == 'd') {
			cold_deltas = false;
		} else if (c == 'w') {
			window = (int)strtol(optarg, &end, 10);
			if (*end || end == optarg || window < 0 || window > BLOB_COLD_WINDOW_MAX)
				return cli_usage_error("--window takes a number of pages from 0 to %d, not '%s'",
						       BLOB_COLD_WINDOW_MAX, optarg);
		} else {
			return cli_current->usage_status;
		}
	}
	if (optind + 1 != argc)
		return cli_usage_error(optind == argc ? "no STORE given" : "one STORE only");
	struct cli_store where;
	cli_store(argv[optind], &where);
	if (cli_wait_unmounted(&where))
		return CLI_FAIL;
	struct store *st;
	/* no thread: this pass is the compaction (the open removes packs
	 * with nothing live first). Neither the signer nor the delta step
	 * runs beside it: their appends would land in the packs a cold pass
	 * marks as its own (pack.h); what they have to do is done at the
	 * close, after the pass, or by the next mount. */
	struct store_opts o = { .compact_share = -1, .no_sign_thread = true, .no_delta_thread = true };
	char err[PD_ERRLEN] = "";
	if (archive_open(where.dir, &o, &st, err)) {
		cli_error("%s", err);
		return CLI_FAIL;
	}
	struct blob_compact_cfg cfg = { .share = share, .min_dead = min_dead, .stop = never, .debug_stops = true };
	cfg.every_pack = all;
	cfg.cold.level = level >= 0 ? level : all ? BLOB_COLD_LEVEL : BLOB_COMPACT_COLD_LEVEL;
	cfg.cold.deltas = all && cold_deltas; /* without --all, the daemon's pass: whole pages only (blob.h) */
	cfg.cold.window = all && cfg.cold.level > 0 ? (unsigned)window : 0; /* a cold pass only */
	cfg.page_key = page_path; /* the window's order: by path */
	cfg.key_ctx = st;
	struct blob_compact_stats d;
	struct blob_pack_usage before, after;
	blob_pack_usage(st, &before);
	struct timespec t0, t1;
	double cpu0 = cpu_seconds();
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int rc = blob_compact_run(st, &cfg, &d);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	/* every record was encoded again with the newest dictionary: the
	 * older ones no record needs go (nothing is encoded meanwhile: the
	 * store is not mounted) */
	uint64_t dicts_dropped = 0, dict_bytes_dropped = 0;
	if (!rc && all && cfg.cold.level > 0)
		rc = blob_dict_drop_unused(st, &dicts_dropped, &dict_bytes_dropped);
	blob_pack_usage(st, &after);
	int crc = store_close(st);
	printf("compacted %llu pack%s (%llu removed): %llu records, %llu bytes moved in %.2f s (%.1f MB/s); "
	       "%llu bytes given back; %llu damaged record%s left; packs now %llu files, %llu bytes allocated "
	       "(were %llu, %llu)\n",
	       (unsigned long long)d.packs_compacted, d.packs_compacted == 1 ? "" : "s",
	       (unsigned long long)d.packs_removed, (unsigned long long)d.records_moved,
	       (unsigned long long)d.bytes_moved, secs, secs > 0 ? (double)d.bytes_moved / 1e6 / secs : 0.0,
	       (unsigned long long)d.bytes_freed, (unsigned long long)d.damaged,
	       d.damaged == 1 ? "" : "s", (unsigned long long)after.packs, (unsigned long long)after.allocated,
	       (unsigned long long)before.packs, (unsigned long long)before.allocated);
	printf("encoded again at level %d: %llu records (%llu of them whole pages made deltas by a window of %u), "
	       "%llu bytes smaller; %.2f s of CPU\n",
	       cfg.cold.level, (unsigned long long)d.records_cold, (unsigned long long)d.records_window,
	       cfg.cold.window, (unsigned long long)d.bytes_cold_saved, cpu_seconds() - cpu0);
	if (all)
		printf("left as they were: %llu pack%s a cold pass at level %d already wrote, every page "
		       "in them live\n",
		       (unsigned long long)d.packs_cold_kept, d.packs_cold_kept == 1 ? "" : "s", cfg.cold.level);
	if (dicts_dropped)
		printf("dictionaries no record needs any more: %llu removed (%llu bytes)\n",
		       (unsigned long long)dicts_dropped, (unsigned long long)dict_bytes_dropped);
	if (rc || crc) {
		cli_error("%s: %s (nothing is lost: what was not moved stays where it was)", where.dir,
			  strerror(-(rc ? rc : crc)));
		return CLI_FAIL;
	}
	/* LMDB's free pages too: nothing else gives them back to the disk. */
	uint64_t lmdb_before, lmdb_after;
	if (store_lmdb_compact(where.dir, &lmdb_before, &lmdb_after, err)) {
		cli_error("%s (nothing is lost: LMDB's rows are as they were)", err);
		return CLI_FAIL;
	}
	printf("LMDB's file rewritten without its free pages: %llu bytes allocated (were %llu)\n",
	       (unsigned long long)lmdb_after, (unsigned long long)lmdb_before);
	return CLI_OK;
}
