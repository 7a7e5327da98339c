/*
 * config_file.h -- hvdrun --config-file: horovodrun's YAML settings, read
 * into the flags they stand for.
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
 * (docs/hvdrun-flags.md lists every key).  Reading it gives rows of
 * (flag, value, where); options.c applies them as the command line's
 * flags, with the same checks, before the command line's own, which
 * therefore win.  A true/false key is its switch or the switch's --no-
 * twin.  As horovodrun does, a key or section hvdrun does not know is
 * left alone, with a warning that names it (a misspelt key does
 * nothing, but not silently); a known key's value that is not what the
 * key takes is an error.
 */
#ifndef HVDRUN_CONFIG_FILE_H
#define HVDRUN_CONFIG_FILE_H

#include <stddef.h>

/* One setting: the flag's long name (as options.c's table has it),
 * its value (NULL for a switch) and where it stands in the file
 * ("FILE: line N: section.key"), for the messages. */
typedef struct {
  const char *flag;
  char *value;
  char *where;
} config_row;

typedef struct {
  config_row *rows; /* owned, and what they point to */
  size_t n, cap;
} config_rows;

/* Reads path into *out (zeroed first), printing what is wrong with the
 * file ("hvdrun: FILE: line 3: ...") and a warning for each key it
 * leaves alone.  0, or -1 after printing why.  Free *out either way. */
int config_file_read(const char *path, config_rows *out);

void config_rows_free(config_rows *rows);

#endif /* HVDRUN_CONFIG_FILE_H */
