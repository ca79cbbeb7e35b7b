/* archive.c - the archive's parts and the open that names them. See
 * archive.h. */
#include "archive.h"

#include <errno.h>

#include "blob/blob.h"
#include "near/near.h"
#include "ns_later.h"
#include "openfile.h"
#include "seal_later.h"
#include "query.h"

/* The live-inode table exists only in a writable store: inodes unlinked
 * while open are dropped at open (what a crash left) and at a clean close. */
static int live_part_start(struct store *st, bool clean, char err[PD_ERRLEN])
{
	(void)clean;
	(void)err;
	if (!(st->live = live_table_new()))
		return -ENOMEM;
	return live_drop_orphans(st);
}

static int live_part_stop(struct store *st)
{
	return live_drop_orphans(st);
}

static void live_part_release(struct store *st)
{
	live_table_free(st->live);
	st->live = NULL;
}

/* A page's key for the idle pass's window (store.h page_key): its path, so
 * that a directory's pages, which share their templates, meet however a
 * crawl of many hosts interleaved them. */
static int page_path(void *ctx, const struct blobkey *k, char *buf, size_t size)
{
	return query_blob_path(ctx, k, buf, size);
}

/* Every open: the archive's names for the parts below it. */
static int live_part_open(MDB_txn *txn, struct store *st, char err[PD_ERRLEN])
{
	(void)txn;
	(void)err;
	st->page_key = page_path;
	return 0;
}

static const struct store_part live_part = {
	.name = "live-inode table",
	.open = live_part_open,
	.start = live_part_start,
	.stop = live_part_stop,
	.release = live_part_release,
};

/* The waiting creates first, so that they are released last: a batch that
 * commits one may run in any part's thread until that part is released.
 * The waiting seals last: the journal's pages are sealed again once the
 * others run, as a close() seals them. */
static const struct store_part *const archive_parts[] = { &ns_later_part, &blob_part, &live_part, &near_part,
							   &seal_later_part, NULL };

int archive_mkfs(const char *dir, const struct store_params *p, char err[PD_ERRLEN])
{
	return store_mkfs(dir, p, archive_parts, err);
}

int archive_open(const char *dir, const struct store_opts *o, struct store **out, char err[PD_ERRLEN])
{
	return store_open(dir, o, archive_parts, out, err);
}
