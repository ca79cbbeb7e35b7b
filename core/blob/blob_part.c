/* blob_part.c - blob storage as a part of the store (store.h): the blob
 * files that outlive their record are removed at open after an unclean stop,
 * and at a close where a removal failed; packs with nothing live go at
 * open; the compactor's and the dictionary trainer's threads are stopped
 * at close. */
#include "blob.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

/* After an unclean stop, remove the blob files no record names: a page
 * whose blob was put in place but whose commit never happened, or a blob
 * whose removal after its last reference was lost with a power cut. Safe
 * because nothing writes the store yet, and a referenced blob always has
 * its record. One pass over objects/, in the order of the 4096 directories. */
static unsigned sweep_orphan_blobs(struct store *st)
{
	MDB_txn *txn;
	unsigned failed = 0;
	if (store_read_begin(st, &txn))
		return 1;
	for (unsigned d = 0; d < 4096; d++) {
		char dir[32];
		snprintf(dir, sizeof dir, "objects/%03x", d);
		int fd = openat(st->dirfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		DIR *dp = fd >= 0 ? fdopendir(fd) : NULL;
		if (!dp) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		struct dirent *e;
		while ((e = readdir(dp))) {
			struct blobkey k;
			if (!blobkey_parse(e->d_name, &k))
				continue;
			uint8_t kb[BLOBKEY_BYTES];
			blobkey_encode(&k, kb);
			MDB_val key = { BLOBKEY_BYTES, kb }, v;
			if (mdb_get(txn, st->db_fp, &key, &v) == MDB_NOTFOUND &&
			    unlinkat(dirfd(dp), e->d_name, 0) && errno != ENOENT)
				failed++;
		}
		closedir(dp);
	}
	store_read_end(st, txn);
	return failed;
}

/* Packs with nothing live in them (a compaction stopped between its last
 * commit and the removal, or records whose commits never came) go now,
 * and the compactor starts (blob_compactor.c). */
static int blob_part_start(struct store *st, bool clean, char err[PD_ERRLEN])
{
	(void)err;
	if (!clean)
		sweep_orphan_blobs(st);
	if (st->format >= 2) {
		blob_compact_empty_packs(st, true);
		return blob_compact_start(st);
	}
	return 0;
}

/* A blob whose file could not be removed after its last reference went
 * (objects/ read-only for a while): try again now; if it still cannot go,
 * the store stays unclean and the next open sweeps. */
static int blob_part_stop(struct store *st)
{
	blob_compact_stop(st); /* both commit: before the close's last writes */
	blob_dict_stop(st);
	if (st->format >= 2) {
		blob_compact_empty_packs(st, true);
	}
	if (!__atomic_load_n(&st->unlinks_failed, __ATOMIC_RELAXED))
		return 0;
	return sweep_orphan_blobs(st) > 0 ? 1 : 0;
}

static void blob_part_release(struct store *st)
{
	blob_compact_stop(st);
	blob_dict_release(st);
}

const struct store_part blob_part = {
	.name = "blob storage",
	.start = blob_part_start,
	.stop = blob_part_stop,
	.release = blob_part_release,
};
