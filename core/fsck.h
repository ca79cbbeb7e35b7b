/* fsck.h - the store checker: proves a store consistent, as SQLite's
 * integrity_check does for a database. The tests run it after every
 * mounted-filesystem case.
 *
 * Invariants checked:
 *  - every refcount equals the number of inodes on its blob, and
 *    blob_inodes lists exactly those inodes;
 *  - every referenced blob file exists with its size (--deep: and its MD5
 *    and XXH3-128);
 *  - every filter counter equals min(15, number of stored positions on it)
 *    and every counter at 15 has its exact count in `saturated`;
 *  - dirents and links mirror each other, every name's type matches its
 *    inode, link counts are right, the namespace is one tree from the root;
 *  - the running totals in meta match the tables;
 *  - no file in objects/ or staging/ is unknown to LMDB (orphans a crash
 *    may leave: harmless, collected by --repair).
 */
#ifndef PD_FSCK_H
#define PD_FSCK_H

#include <stdbool.h>
#include <stdint.h>

struct fsck_opts {
	bool deep;
	bool repair;
	/* one line per problem found or action taken */
	void (*report)(void *ctx, const char *line);
	/* progress: phase name, done, total (total 0 if unknown) */
	void (*progress)(void *ctx, const char *phase, uint64_t done, uint64_t total);
	void *ctx;
};

struct fsck_result {
	uint64_t problems;   /* inconsistencies found */
	uint64_t repaired;   /* of those, fixed */
	uint64_t notes;      /* things that are not damage (e.g. unclean store) */
	uint64_t inodes, blobs, blob_files;
};

/* Check the store in dir (which must not be mounted). Returns 0 when the
 * check ran (see result), a negative errno when it could not. */
int fsck_run(const char *dir, const struct fsck_opts *o, struct fsck_result *res, char err[512]);

#endif
