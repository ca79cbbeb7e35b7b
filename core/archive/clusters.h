/* clusters.h - the archive's duplicate structure at once: groups of files
 * with the same bytes (dups) and groups of near-duplicate pages
 * (clusters), for `pagededup dups` and `pagededup clusters`.
 *
 * Clusters are joined by the rule of the answers (query.h): two pages are
 * in one cluster when a chain of pairs links them, each pair found by
 * either generator (simhash within K, an LSH band) and confirmed as
 * user.dedup.near confirms it (near_confirm_pair). Pages are the store's
 * blobs; each group lists the names of its blobs' files that cred may
 * reach (all of them for NULL), as the xattr answers do.
 *
 * Cost at N pages: one index query and its candidates' confirms per page
 * (a candidate already in the page's cluster is not confirmed again), in
 * one read transaction; memory: 24 bytes a page plus the largest group's
 * names.
 *
 * Errors are negative errno values; -ESTALE for a store whose signatures
 * are of another version (near.h).
 */
#ifndef PD_CLUSTERS_H
#define PD_CLUSTERS_H

#include <stddef.h>
#include <stdint.h>

#include "ns.h"
#include "store/store.h"

/* One group: its number (1, 2, ... in the order given), its pages
 * (blobs), and its files' paths (relative to the root, "/..."), with for
 * each path its page's index within the group. */
struct cluster_group {
	uint64_t id;
	size_t pages;
	size_t files;
	const char *const *path; /* files entries */
	const size_t *page;      /* files entries: 0 .. pages-1 */
};
typedef int (*cluster_fn)(void *ctx, const struct cluster_group *g);
/* Progress: pages done of total (called at most about 1,000 times). */
typedef void (*cluster_progress_fn)(void *ctx, uint64_t done, uint64_t total);

/* Groups of at least min_files reachable files with the same bytes; in
 * the fingerprints' key order. */
int clusters_dups(struct store *st, const struct pd_cred *cred, size_t min_files, cluster_fn cb,
		  cluster_progress_fn progress, void *ctx);
/* Near-duplicate clusters of at least min_files reachable files (pages
 * without a simhash are in none); ordered by their first page's key. */
int clusters_near(struct store *st, const struct pd_cred *cred, size_t min_files, cluster_fn cb,
		  cluster_progress_fn progress, void *ctx);

#endif
