/* blobscmd.c - `pagededup blobs`: where the store keeps each distinct page.
 *
 *   pagededup blobs STORE            one line per stored blob:
 *        KEY<TAB>SIZE<TAB>REFCOUNT<TAB>PLACE
 *     KEY is the MD5 in hex, ".N" after it for variant N (rec.h); PLACE is
 *     "pack-NNNNNNNN:OFFSET+LENGTH:ENCODING" for a pack record (ENCODING:
 *     raw, zstd, zstd+dict:ID, delta:BASEKEY, delta+dict:BASEKEY:ID,
 *     then "/N chunks" for a record of N > 1 chunks, pack.h), or
 *     "objects/abc/KEY" for a file of a format 1 store; "!" ends the line
 *     of a record marked damaged.
 *   pagededup blobs STORE --cat KEY  the stored bytes of blob KEY, decoded
 *                                    and checked (exit 2: damaged, EIO)
 *
 * The store is opened read-only, so this also runs while it is mounted.
 * Exit status: 0, 1 usage or no such store or key, 2 damaged bytes.
 */
#include "blobscmd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blob/blob.h"
#include "base/fdio.h"
#include "archive/archive.h"
#include "store/store.h"
#include "cli.h"

static void place_of(struct store *st, const struct blobkey *k, const struct fprec *r, char *out, size_t n)
{
	if (!(r->flags & FPREC_PACKED)) {
		blobkey_path(k, out);
		return;
	}
	char name[PACK_NAME_MAX], enc[96] = "?";
	pack_name(r->pack, name);
	struct pack_loc loc;
	struct pack_rec_hdr h;
	blob_rec_loc(r, &loc);
	if (pack_read_hdr(st->packs, &loc, &h) == 0) {
		char base[BLOBKEY_NAME_MAX];
		struct blobkey bk = { .variant = h.base_variant };
		memcpy(bk.md5, h.base_md5, 16);
		blobkey_name(&bk, base);
		switch (h.encoding) {
		case PACK_ENC_RAW: snprintf(enc, sizeof enc, "raw"); break;
		case PACK_ENC_ZSTD: snprintf(enc, sizeof enc, "zstd"); break;
		case PACK_ENC_ZSTD_DICT: snprintf(enc, sizeof enc, "zstd+dict:%u", h.dict); break;
		case PACK_ENC_DELTA: snprintf(enc, sizeof enc, "delta:%s", base); break;
		default: snprintf(enc, sizeof enc, "delta+dict:%s:%u", base, h.dict); break;
		}
		if (h.nchunks > 1) {
			size_t l = strlen(enc);
			snprintf(enc + l, sizeof enc - l, "/%u chunks", h.nchunks);
		}
	}
	snprintf(out, n, "%s:%llu+%llu:%s", name, (unsigned long long)r->pack_off, (unsigned long long)r->pack_len,
		 enc);
}

static int list_all(struct store *st)
{
	MDB_txn *txn;
	MDB_cursor *c;
	int rc = store_read_begin(st, &txn);
	if (rc)
		return rc;
	if ((rc = pd_mdb_err(mdb_cursor_open(txn, st->db_fp, &c)))) {
		store_read_end(st, txn);
		return rc;
	}
	MDB_val key, v;
	int mrc;
	for (mrc = mdb_cursor_get(c, &key, &v, MDB_FIRST); mrc == 0; mrc = mdb_cursor_get(c, &key, &v, MDB_NEXT)) {
		struct blobkey k;
		struct fprec r;
		if (key.mv_size != BLOBKEY_BYTES || fprec_decode(v.mv_data, v.mv_size, &r))
			continue;
		blobkey_decode(key.mv_data, &k);
		char name[BLOBKEY_NAME_MAX], place[256];
		blobkey_name(&k, name);
		place_of(st, &k, &r, place, sizeof place);
		printf("%s\t%llu\t%llu\t%s%s\n", name, (unsigned long long)r.size, (unsigned long long)r.refcount, place,
		       (r.flags & FPREC_BAD) ? "\t!" : "");
	}
	mdb_cursor_close(c);
	store_read_end(st, txn);
	return 0;
}

static int cat_one(struct store *st, const char *keyname)
{
	struct blobkey k;
	if (!blobkey_parse(keyname, &k)) {
		fprintf(stderr, "pagededup blobs: '%s' is not a blob key (32 hex digits, then .N for a variant)\n", keyname);
		return 1;
	}
	struct fprec r;
	int rc = blob_read(st, &k, &r);
	if (rc) {
		fprintf(stderr, "pagededup blobs: %s: %s\n", keyname, rc == -ENOENT ? "no such blob" : strerror(-rc));
		return 1;
	}
	int fd = blob_open_rec(st, &k, &r);
	if (fd < 0 || (!(r.flags & FPREC_PACKED) && (rc = blob_verify(fd, &r)))) {
		fprintf(stderr, "pagededup blobs: %s: cannot be read intact: %s\n", keyname, strerror(fd < 0 ? -fd : -rc));
		if (fd >= 0)
			close(fd);
		return 2;
	}
	char buf[65536];
	for (uint64_t off = 0; off < r.size;) {
		ssize_t n = fd_pread_full(fd, buf, sizeof buf, off);
		if (n <= 0)
			break;
		fwrite(buf, 1, (size_t)n, stdout);
		off += (uint64_t)n;
	}
	close(fd);
	return 0;
}

int cmd_blobs(int argc, char **argv)
{
	const char *cat = NULL;
	if (argc == 4 && !strcmp(argv[2], "--cat"))
		cat = argv[3];
	else if (argc != 2) {
		fprintf(stderr, "usage: pagededup blobs STORE [--cat KEY]\n");
		return 1;
	}
	struct cli_store where;
	cli_store(argv[1], &where); /* a mounted store's waiting closes committed */
	struct store *st;
	struct store_opts o = { .readonly = true };
	char err[PD_ERRLEN] = "";
	if (archive_open(where.dir, &o, &st, err)) {
		fprintf(stderr, "pagededup blobs: %s\n", err);
		return 1;
	}
	int rc = cat ? cat_one(st, cat) : list_all(st) ? 1 : 0;
	store_close(st);
	return rc;
}
