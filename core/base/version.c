/* version.c - the version string, given by the build (Makefile: PD_VERSION
 * from the file VERSION). */
#include "version.h"

#ifndef PD_VERSION
#error "PD_VERSION is set by the Makefile from the file VERSION"
#endif

const char *pd_version(void)
{
	return PD_VERSION;
}
