/* pdfs.h - what the daemon's operations (pagededupfs.c) and its start-up
 * (main.c) share: the session's state and the operation table. */
#ifndef PD_PDFS_H
#define PD_PDFS_H

#define FUSE_USE_VERSION 314

#include <fuse_lowlevel.h>

#include "store/store.h"

struct pdfs {
	struct store *st;
	double entry_timeout, attr_timeout, negative_timeout;
	struct fuse_session *se;
	const char *mountpoint; /* absolute, for user.dedup.near.abs */
};

extern const struct fuse_lowlevel_ops pd_ops;

#endif
