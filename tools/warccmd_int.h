/* warccmd_int.h - what tools/warc_export.c and tools/warc_import.c share:
 * the attribute names, sizes and exit status of the WARC commands (the
 * design of both is at the top of warc_export.c and warc_import.c). */
#ifndef PD_WARCCMD_INT_H
#define PD_WARCCMD_INT_H

#include <time.h>

#include "warccmd.h"

#define XATTR_URL "user.xdg.origin.url"
#define XATTR_HTTP "user.warc.http"
#define XATTR_MD5 "user.dedup.md5"
#define XATTR_REFCOUNT "user.dedup.refcount"
#define HTTP_HEAD_MAX (64 * 1024)
#define IO_CHUNK (256 * 1024)
#define URI_MAX 8192
/* Exit status of a command that finished but left something out (pages
 * it could not read, records it could not import), each reported. */
#define WARC_CMD_PARTIAL 3

/* Seconds on the monotonic clock, for the commands' speed lines. */
static inline double warccmd_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#endif
