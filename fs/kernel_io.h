/* kernel_io.h - /dev/fuse reads and writes that negotiate
 * FUSE_HANDLE_KILLPRIV_V2 and pass its per-request bits (kernel_io.c). */
#ifndef PD_KERNEL_IO_H
#define PD_KERNEL_IO_H

#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <sys/types.h>

/* Over the descriptor of a mounted session, before its loop starts. */
int kernel_io_install(struct fuse_session *se);
/* Serve the session until it ends, with the loop cl asks for: one thread,
 * or libfuse's threads each with a /dev/fuse descriptor of its own
 * (clone_fd) and cl's thread limits. Returns the loop's result. */
int kernel_io_serve(struct fuse_session *se, const struct fuse_cmdline_opts *cl);
/* The request this thread processes asks for setuid/setgid to go
 * (WRITE, OPEN or CREATE with O_TRUNC, SETATTR of the size). */
bool kernel_io_kill_suidgid(void);
/* Notes the per-request bits of a request about to be processed by this
 * thread (buf: the request as /dev/fuse delivers it). */
void kernel_io_note_request(const void *buf, ssize_t len);

#endif
