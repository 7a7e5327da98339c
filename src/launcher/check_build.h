/*
 * check_build.h -- hvdrun --check-build: what this build has, in
 * horovodrun --check-build's layout.
 */
#ifndef HVDRUN_CHECK_BUILD_H
#define HVDRUN_CHECK_BUILD_H

#include <stdio.h>

void check_build_print(FILE *out);

#endif /* HVDRUN_CHECK_BUILD_H */
