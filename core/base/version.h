/* version.h - the version of this build of pagededup.
 *
 * The number lives in the file VERSION at the top of the tree (read by the
 * Makefile into this one object, so that a new number rebuilds one file);
 * a release is tagged vX.Y.Z in git with the same number. X.Y.Z: X changes
 * when a store made by this version cannot be opened by the previous one
 * (the store's format, PD_FORMAT_VERSION), Y with new features, Z with
 * fixes. The store records which version made it and which last opened it
 * for writing (meta keys "made_by" and "written_by", store.h).
 */
#ifndef PD_VERSION_H
#define PD_VERSION_H

/* "X.Y.Z", as in VERSION. */
const char *pd_version(void);

#endif
