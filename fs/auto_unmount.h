/* auto_unmount.h - a killed daemon's mount goes away under -o auto_unmount
 * even when its watcher is quick (auto_unmount.c). */
#ifndef PD_AUTO_UNMOUNT_H
#define PD_AUTO_UNMOUNT_H

/* Right after the mount: keeps a copy of the session's /dev/fuse
 * descriptor numbered above every descriptor open now. 0 or -errno. */
int auto_unmount_order_fds(int fuse_fd);
/* Before the unmount: closes that copy, so that the unmount, as libfuse
 * means it to, finds the connection closed by the daemon's end. */
void auto_unmount_release(void);

#endif
