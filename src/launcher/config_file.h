/*
 * config_file.h -- hvdrun --config-file: horovodrun's YAML settings.
 *
 * The file is horovodrun's (Horovod's config_parser.py): a mapping of
 * sections to keys, each key the twin of one flag,
 *
 *   controller: gloo                  # or mpi: --gloo, --mpi
 *   params:
 *     fusion_threshold_mb: 32         # --fusion-threshold-mb 32
 *     hierarchical_allreduce: false   # --no-hierarchical-allreduce
 *   autotune: {enabled: true, log_file: tune.csv}
 *   ...
 *
 * (docs/hvdrun-flags.md lists every key).  Each key is applied as its
 * flag would be, with the same checks; a true/false key is its switch or
 * the switch's --no- twin.  The command line's flags are applied after,
 * so they win.  Unlike horovodrun, a key hvdrun does not know is an error
 * that names it (a misspelt key would otherwise do nothing, silently).
 */
#ifndef HVDRUN_CONFIG_FILE_H
#define HVDRUN_CONFIG_FILE_H

#include "options.h"

/* Reads path and applies its settings to o, printing what is wrong with
 * it ("hvdrun: FILE: line 3: ...").  OPTIONS_RUN, or OPTIONS_USAGE. */
options_result config_file_read(hvdrun_options *o, const char *path);

/* Frees the values o->config keeps. */
void config_file_free(struct config_value *values);

#endif /* HVDRUN_CONFIG_FILE_H */
