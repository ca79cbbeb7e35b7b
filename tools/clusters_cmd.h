/* clusters_cmd.h - `pagededup dups` and `pagededup clusters` (clusters.c). */
#ifndef PD_CLUSTERS_CMD_H
#define PD_CLUSTERS_CMD_H

int cmd_dups(int argc, char **argv);
int cmd_clusters(int argc, char **argv);

#endif
