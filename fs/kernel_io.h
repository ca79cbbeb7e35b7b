/* kernel_io.h - /dev/fuse reads and writes that negotiate
 * FUSE_HANDLE_KILLPRIV_V2 and pass its per-request bits (kernel_io.c). */
#ifndef PD_KERNEL_IO_H
#define PD_KERNEL_IO_H

#include <fuse_lowlevel.h>
#include <stdbool.h>

/* Over the descriptor of a mounted session, before its loop starts. */
int kernel_io_install(struct fuse_session *se);
/* The request this thread processes asks for setuid/setgid to go
 * (WRITE, OPEN or CREATE with O_TRUNC, SETATTR of the size). */
bool kernel_io_kill_suidgid(void);

#endif
