/* blobscmd.h - `pagededup blobs` (tools/blobscmd.c). */
#ifndef PD_BLOBSCMD_H
#define PD_BLOBSCMD_H

/* argv[0] is the command's name; returns the exit status. */
int cmd_blobs(int argc, char **argv);

#endif
