/* archive.h - a store with every part the archive needs: opening, making
 * and closing it. This is the entry point of the filesystem, the command
 * and the tests; store_open alone (store.h) opens the engine without the
 * parts above it.
 *
 * The parts, in order (store.h, struct store_part):
 *   blob storage          blob files that outlive their record are swept
 *   live inodes           the table of inodes in use; open but unlinked
 *                         inodes a crash left are dropped
 *   near-duplicate index  its tables, the signature upgrade, the signer
 * A clean close stops them in reverse order: the signer drains, the live
 * table drops what only open handles kept, the blob sweep runs if a
 * removal failed.
 */
#ifndef PD_ARCHIVE_H
#define PD_ARCHIVE_H

#include "store/store.h"

/* store_mkfs / store_open with the archive's parts; close with store_close
 * (or store_abandon, a simulated crash). */
int archive_mkfs(const char *dir, const struct store_params *p, char err[PD_ERRLEN]);
int archive_open(const char *dir, const struct store_opts *o, struct store **out, char err[PD_ERRLEN]);

#endif
