/* fsck.h - the store checker: proves a store consistent, as SQLite's
 * integrity_check does for a database, and repairs what can be repaired.
 * The tests run it after every mounted-filesystem case.
 *
 * Invariants checked:
 *  - every refcount equals the number of inodes on its blob, and
 *    blob_inodes with the inode a fingerprint row holds (format 7,
 *    store_blob_inodes) lists exactly those inodes, each once; a row
 *    holding an inode beside table rows is reported (a blob of one file
 *    listed in the table is a note: the form before format 7);
 *  - every referenced blob file exists with its size (deep: and its MD5
 *    and XXH3-128); every fingerprint record is referenced;
 *  - every filter counter equals min(15, number of stored positions on it)
 *    and every counter at 15 has its exact count in `saturated`, and only
 *    those do (not checked after an unclean stop: the filter is rebuilt at
 *    the next open then);
 *  - dirents and the way back from inodes to their names (link records,
 *    and the one name an inode row may hold instead: ns.h) mirror each
 *    other (compared by name hash), every name's type matches its
 *    inode and is filed under its hash, every parent is a directory, link
 *    counts are right, every inode with nlink > 0 has a name, every inode
 *    with none is an orphan (and none is left in a cleanly closed store),
 *    the directories form one tree from the root (one name each, no cycle);
 *  - the running totals in meta match the tables;
 *  - no file in objects/ or staging/ is unknown to LMDB. A blob file no
 *    record names, staged bytes of a store not closed cleanly, and a pack
 *    (not the last) with no live record and no dictionary (a compaction
 *    stopped before its removal: blob.h) are crash leftovers (counted apart, never damage: nothing refers to
 *    them; repair removes them, and so does the next mount of a store not
 *    closed cleanly); any other file there is a problem;
 *  - the near-duplicate tables hold exactly one row per blob with a simhash
 *    (near0) and one per distinct simhash (the others), each under the
 *    right block (near.h: near_check); repair rebuilds them;
 *  - a record waiting for its signature (FPREC_SIG_PENDING: no simhash and
 *    no near rows yet, which is valid) has its row in `sigq`, and every
 *    sigq row names such a record (sigq.h: sigq_check); repair rebuilds
 *    the table from the records, and the open that follows a repair signs
 *    what is pending (a note counts pending pages).
 *
 * Repair (opts.repair) fixes everything above that it can without guessing,
 * in one LMDB transaction, and never deletes a blob file that an inode
 * refers to:
 *  - names (names held by inode rows become link records for the repair,
 *    and every inode of one name holds it in its row again at the end,
 *    which also converts a store of format 4; a row whose dirent is gone
 *    has lost that name, the bytes of the name being in the dirent only:
 *    the inode goes to lost+found, unless it has other names): a dirent
 *    whose inode does not exist is removed; a dirent without
 *    its link record gets one, a link record without its dirent gets it back
 *    (or goes, if its name is taken or its parent is gone); wrong types and
 *    hashes are rewritten; a name in a parent that is not a directory, or
 *    with a bad name, moves to lost+found;
 *  - an inode with nlink > 0 but no name (not an orphan) is given one in
 *    lost+found, named "<ino>"; a directory outside the tree (in a cycle, or
 *    below a directory that is) moves to lost+found with its subtree; a
 *    directory with several names keeps its first;
 *  - link counts are recounted, orphan marks set where nlink is 0 and
 *    removed elsewhere (orphans are deleted at the next open, as after a
 *    crash);
 *  - refcounts and blob_inodes (and the rows' inodes) are set to the
 *    inodes that really refer to each blob, then put in format 7's form by
 *    the writable open that ends the repair; a record no inode refers to goes with its file; a record
 *    that is missing (or undecodable) while its file is there is rebuilt
 *    from the file, whose MD5 must match its name;
 *  - a page whose bytes are gone (blob file missing; no record and no file;
 *    file damaged: wrong size, or with deep, wrong MD5 or XXH3-128) is moved
 *    to lost+found (below).
 *  - the totals are recounted; a filter or `saturated` table that disagrees
 *    with the stored positions is rebuilt from them (through store_open of
 *    a store marked unclean);
 *  - orphan files in objects/ and staging/ are removed.
 *
 * lost+found. A directory "lost+found" at the root of the namespace (mode
 * 0700, made when first needed; "lost+found.N" if that name is taken by
 * something that is not a directory). Every name of a lost page moves there
 * as "<ino>-<original name>" (cut to 255 bytes; "<ino>.<n>-<name>" should
 * that exist). A lost page keeps its inode, attributes and client xattrs
 * (wget's user.xdg.origin.url tells where to fetch it again), but since its
 * bytes are gone it refers to no blob: it is an empty regular file, and
 * these xattrs say what it held:
 *   user.pagededup.lost_md5   the MD5 of its bytes (32 hex digits)
 *   user.pagededup.lost_size  their size in bytes (decimal)
 *   user.pagededup.lost_path  the path(s) it had, one per line
 * Writing the page again (a refetch) makes it an ordinary page; the xattrs
 * are the user's to remove. The bytes of a damaged blob file are not thrown
 * away: the file moves to STORE/damaged/<md5>[.N] (outside objects/, never
 * served, never checked), for whoever wants to look at them.
 */
#ifndef PD_FSCK_H
#define PD_FSCK_H

#include <stdbool.h>
#include <stdint.h>

#define FSCK_LOST_FOUND "lost+found"
#define FSCK_XATTR_LOST_MD5 "user.pagededup.lost_md5"
#define FSCK_XATTR_LOST_SIZE "user.pagededup.lost_size"
#define FSCK_XATTR_LOST_PATH "user.pagededup.lost_path"
#define FSCK_DAMAGED_DIR "damaged"

struct fsck_opts {
	bool deep;      /* re-hash every blob file (MD5 and XXH3-128) */
	bool repair;    /* fix what can be fixed (see above) */
	bool convert;   /* with repair: move the blob files of a format 1 store
			 * into packs (blob_convert_files); `pagededup fsck
			 * --repair` asks for it */
	unsigned threads; /* threads that hash blob files with deep; 0 = one per CPU */
	/* One line per problem found or repair made (the first 50 of each
	 * kind; then one line with how many more). */
	void (*report)(void *ctx, const char *line);
	/* Progress: a phase's name, items done, its total (0 if unknown).
	 * Called with done 0 when a phase starts, every few thousand items,
	 * and with done == total when it ends. */
	void (*progress)(void *ctx, const char *phase, uint64_t done, uint64_t total);
	void *ctx;
};

struct fsck_result {
	uint64_t problems;   /* inconsistencies found */
	uint64_t repaired;   /* repairs made (one per fix reported) */
	uint64_t notes;      /* things that are not damage (e.g. unclean store) */
	uint64_t leftovers;  /* crash leftovers (not damage): blob files no record
			      * names, staged bytes of an uncleanly closed
			      * store, packs with nothing live; --repair
			      * removes them, and so does the next mount of an
			      * uncleanly closed store */
	uint64_t inodes, dirs, pages, blobs, blob_files;
	uint64_t packed_blobs; /* blobs whose bytes are pack records */
	uint64_t packs, pack_bytes, pack_live_bytes; /* pack files, their bytes, the live ones */
	uint64_t delta_blobs, kept_bases; /* records stored as deltas; bases kept for them (blob.h) */
	uint64_t lost;       /* pages moved to lost+found without their bytes */
	uint64_t adopted;    /* nameless inodes or directories put in lost+found */
	uint64_t bytes_hashed; /* deep: bytes of blob files read */
	double seconds;      /* wall time of the check (and repair) */
};

/* Check the store in dir (which must not be mounted: the store's lock is
 * taken, -EBUSY if it is held). Returns 0 when the check ran (see result),
 * a negative errno with a message in err when it could not (not a store,
 * a repair that failed to commit). A repair is followed by nothing else:
 * run fsck_run again to see what is left. */
int fsck_run(const char *dir, const struct fsck_opts *o, struct fsck_result *res, char err[512]);

#endif
