/* blob_cold.c - records encoded again, smaller, when the compactor copies
 * them.
 *
 * Pages are packed fast: at close() or by the delta step, at a level the
 * write path can afford (BLOB_FINAL_LEVEL), with the dictionary current
 * then (none for a store's first pages). By the time the compactor copies
 * a record, the store may have a dictionary that fits the archive better,
 * and a copy is the moment to spend more CPU on it, as `git gc
 * --aggressive` packs objects again harder than the commit wrote them.
 *
 * A record is decoded whole (which checks its XXH3-128: a damaged record
 * is -EIO, and the compactor leaves it where it is) and encoded again at
 * the cold level: a whole page with the store's newest dictionary, a delta
 * against the same base (its base is named by blob, and a base re-encoded
 * is still decoded to the same bytes, so deltas stay valid whatever
 * happens to their base's encoding). The new record is kept only when it
 * is smaller; its identity, size and XXH3-128 are those of the page, not
 * of its encoding, so they do not change.
 *
 * This runs outside any transaction (the compactor's copy step); the
 * commit that points the page at its copy moves the page from its old
 * dictionary's count to the new one's (blob_compact.c).
 */
#include "blob.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static bool is_delta(uint8_t encoding)
{
	return encoding == PACK_ENC_DELTA || encoding == PACK_ENC_DELTA_DICT;
}

/* The raw bytes of the base delta header h names (*out malloc'd). */
static int base_bytes(struct store *st, const struct pack_rec_hdr *h, void **out, uint64_t *len)
{
	struct blobkey b = { .variant = h->base_variant };
	memcpy(b.md5, h->base_md5, 16);
	struct fprec r;
	MDB_txn *txn;
	int rc = store_read_begin(st, &txn);
	if (rc)
		return rc;
	rc = blob_delta_base_rec(txn, st, &b, &r);
	store_read_end(st, txn);
	if (rc)
		return rc == -ENOENT ? -EIO : rc;
	*len = r.size;
	return blob_read_packed_alloc(st, &b, &r, out);
}

/* How raw page bytes are encoded again for the record in: at level, a
 * delta on the same base (*base: its bytes, to free), or whole with the
 * newest dictionary. */
static int cold_opts(struct store *st, const struct pack_rec *in, int level, struct pack_encode_opts *o,
		     void **base)
{
	*o = (struct pack_encode_opts){ .level = level };
	*base = NULL;
	if (!is_delta(in->hdr.encoding)) {
		o->dict = blob_dict_hold(st); /* unheld by the caller */
		return 0;
	}
	uint64_t len;
	int rc = base_bytes(st, &in->hdr, base, &len);
	if (rc)
		return rc;
	o->base = *base;
	o->base_len = (size_t)len;
	memcpy(o->base_md5, in->hdr.base_md5, 16);
	o->base_variant = in->hdr.base_variant;
	return 0;
}

int blob_cold_reencode(struct store *st, const struct pack_rec *in, const struct blob_cold_cfg *c,
		       struct pack_rec *out)
{
	memset(out, 0, sizeof *out);
	if (in->hdr.kind != PACK_KIND_PAGE || c->level <= 0 || (is_delta(in->hdr.encoding) && !c->deltas))
		return -EOPNOTSUPP; /* nothing decoded: not checked either */
	void *raw, *base = NULL;
	int rc = blob_rec_decode(st, in, &raw);
	if (rc)
		return rc;
	struct pack_encode_opts o;
	rc = cold_opts(st, in, c->level, &o, &base);
	if (!rc)
		rc = pack_encode_page(in->hdr.md5, in->hdr.variant, in->hdr.xxh128, raw, -1, in->hdr.size, &o, out);
	blob_dict_unhold(st, o.dict);
	free(raw);
	free(base);
	if (rc)
		return rc == -ENOMEM ? rc : -EIO;
	if (out->len >= in->len) { /* nothing gained: the old bytes stay */
		pack_rec_free(out);
		return 0;
	}
	return 1;
}
