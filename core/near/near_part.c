/* near_part.c - the near-duplicate index and its signer as a part of the
 * store (store.h): their tables at mkfs and open, the signature upgrade and
 * the signing thread at a writable open, the drain at a clean close, and
 * the blob listener through which they hear of added and released blobs
 * (blob.h), in the transaction that adds or releases them. */
#include "near.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "blob/blob.h"
#include "sigq.h"
#include "simhash.h"

/* A blob with a signature is in the index; one waiting for it has its
 * signer row. */
static int near_blob_added(struct wtx *w, const struct blobkey *k, const struct fprec *r)
{
	int rc = 0;
	if (r->flags & FPREC_HAS_SIMHASH)
		rc = near_add(w->txn, w->st, k, r->simhash);
	if (!rc && (r->flags & FPREC_SIG_PENDING))
		rc = sigq_row_put(w->txn, w->st, k);
	return rc;
}

static int near_blob_released(struct wtx *w, const struct blobkey *k, const struct fprec *r)
{
	int rc = 0;
	if (r->flags & FPREC_HAS_SIMHASH)
		rc = near_remove(w->txn, w->st, k, r->simhash);
	if (!rc && (r->flags & FPREC_SIG_PENDING))
		rc = sigq_row_del(w->txn, w->st, k);
	return rc;
}

/* A set kept as a difference from base's stops being one once its page's
 * record no longer hangs on base (near.h). */
static int near_blob_unlinked(struct wtx *w, const struct blobkey *base, const struct blobkey *dep)
{
	return near_set_unlinked(w->txn, w->st, base, dep);
}

/* A page the compactor's window made a delta on base keeps its set as the
 * difference from base's, as the delta step's deltas do (near.h). */
static int near_blob_linked(struct wtx *w, const struct blobkey *base, const struct blobkey *dep)
{
	return near_set_diff(w->txn, w->st, NULL, dep, base);
}

static const struct blob_listener near_listener = {
	.added = near_blob_added,
	.released = near_blob_released,
	.unlinked = near_blob_unlinked,
	.linked = near_blob_linked,
};

static int near_part_create(MDB_txn *txn, struct store *st)
{
	if (st->params.near_distance == STORE_PARAM_UNSET)
		st->params.near_distance = SIMHASH_NEAR_DISTANCE;
	int rc = near_open_tables(txn, st, MDB_CREATE);
	if (!rc)
		rc = near_layout_put(txn, st);
	if (!rc)
		rc = near0_layout_put(txn, st, NEAR0_LAYOUT_VERSION);
	return rc ? rc : near_version_put(txn, st);
}

static int near_part_open(MDB_txn *txn, struct store *st, char err[PD_ERRLEN])
{
	/* A writable open makes the tables a store from before them lacks;
	 * its pages join the index as they are sealed again (or at once with
	 * fsck --repair). */
	unsigned create = st->readonly ? 0 : MDB_CREATE;
	int rc = near_open_tables(txn, st, create);
	uint32_t sigv = NEAR_SIG_VERSION, layout = NEAR_LAYOUT_VERSION, layout0 = NEAR0_LAYOUT_VERSION;
	if (!rc && ((rc = near_version_get(txn, st, &sigv)) || (rc = near_layout_get(txn, st, &layout)) ||
		    (rc = near0_layout_get(txn, st, &layout0))))
		snprintf(err, PD_ERRLEN, "store %s: cannot read the signature version: %s", st->dir,
			 strerror(-rc));
	/* Read-only: no answers from hashes of another version or tables of
	 * a layout this build does not read; writable: upgraded at start. */
	st->near_stale = st->readonly && (sigv != NEAR_SIG_VERSION || layout < NEAR_LAYOUT_READABLE ||
					  layout > NEAR_LAYOUT_VERSION || layout0 == 0 ||
					  layout0 > NEAR0_LAYOUT_VERSION);
	/* (a writable open converts them at start: near_layout_convert) */
	st->near_sets_full = layout < 4;
	st->near0_keys = layout0 == 1;
	if (!rc)
		rc = sigq_open_table(txn, st, create);
	if (!rc)
		rc = blob_listen(st, &near_listener);
	return rc;
}

static int near_part_start(struct store *st, bool clean, char err[PD_ERRLEN])
{
	(void)clean;
	int rc = near_layout_upgrade(st);
	if (rc) {
		snprintf(err, PD_ERRLEN, "cannot convert the near-duplicate tables of %s to layout %u: %s; run 'pagededup fsck --repair %s'",
			 st->dir, NEAR_LAYOUT_VERSION, strerror(-rc), st->dir);
		return rc;
	}
	if ((rc = near0_layout_upgrade(st))) {
		snprintf(err, PD_ERRLEN, "cannot convert near0 of %s to its layout %u: %s; run 'pagededup fsck --repair %s'",
			 st->dir, NEAR0_LAYOUT_VERSION, strerror(-rc), st->dir);
		return rc;
	}
	rc = near_upgrade(st);
	if (rc) {
		snprintf(err, PD_ERRLEN, "cannot compute the near-duplicate signatures of %s again for this version: %s; run 'pagededup fsck --repair %s'",
			 st->dir, strerror(-rc), st->dir);
		return rc;
	}
	/* Pages a crash left without their signature are signed first. */
	if ((rc = sigq_start(st)))
		snprintf(err, PD_ERRLEN, "cannot start the signer of %s: %s", st->dir, strerror(-rc));
	return rc;
}

/* Every page signed, so that the store answers near queries fully once
 * unmounted; what fails keeps its row for the next open. */
static int near_part_stop(struct store *st)
{
	sigq_drain(st);
	sigq_drain_deltas(st);
	sigq_stop(st);
	return 0;
}

const struct store_part near_part = {
	.name = "near-duplicate index",
	.create = near_part_create,
	.open = near_part_open,
	.start = near_part_start,
	.stop = near_part_stop,
	.release = sigq_stop,
};
