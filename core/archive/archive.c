/* archive.c - the archive's parts and the open that names them. See
 * archive.h. */
#include "archive.h"

#include <errno.h>

#include "blob/blob.h"
#include "near/near.h"
#include "ns_later.h"
#include "openfile.h"

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

static const struct store_part live_part = {
	.name = "live-inode table",
	.start = live_part_start,
	.stop = live_part_stop,
	.release = live_part_release,
};

/* The waiting creates first, so that they are released last: a batch that
 * commits one may run in any part's thread until that part is released. */
static const struct store_part *const archive_parts[] = { &ns_later_part, &blob_part, &live_part, &near_part, NULL };

int archive_mkfs(const char *dir, const struct store_params *p, char err[PD_ERRLEN])
{
	return store_mkfs(dir, p, archive_parts, err);
}

int archive_open(const char *dir, const struct store_opts *o, struct store **out, char err[PD_ERRLEN])
{
	return store_open(dir, o, archive_parts, out, err);
}
