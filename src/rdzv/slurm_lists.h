/*
 * slurm_lists.h -- SLURM's compressed lists, expanded: the host lists of
 * SLURM_JOB_NODELIST / SLURM_STEP_NODELIST ("h[0-3,7]", "a[01-03]b,c",
 * "rack[1-2]n[0-1]") and the counts of SLURM_TASKS_PER_NODE /
 * SLURM_STEP_TASKS_PER_NODE / SLURM_JOB_CPUS_PER_NODE ("2(x3),1").
 *
 * SLURM gives no local-size variable: a task finds how many tasks share
 * its node from the counts and SLURM_NODEID, and hvdrun finds the hosts
 * and slots of an allocation from the node list and the counts.  The
 * text comes from the environment, so every form is checked: brackets
 * that balance, ranges whose numbers are digits with low <= high, counts
 * in range, no empty item, a bounded total.  Errors are HVD_E_ENV naming
 * the variable and the bad text.
 */
#ifndef HVD_SLURM_LISTS_H
#define HVD_SLURM_LISTS_H

#define HVD_SLURM_LIST_MAX 65536 /* names or counts in one list */
#define HVD_SLURM_COUNT_MAX (1 << 20)

typedef struct {
  char **names; /* n host names, in SLURM's order */
  int n;
} hvd_hostlist;

/* Expands `text` (the value of variable `var`, for messages).  A range
 * keeps the width of its low number ("01-10": 01 .. 10).  Several bracket
 * groups in one name expand left to right: "a[1-2]b[1-2]" is a1b1, a1b2,
 * a2b1, a2b2. */
int hvd__slurm_hostlist(const char *var, const char *text, hvd_hostlist *out);
void hvd__slurm_hostlist_free(hvd_hostlist *l);

/* "2(x3),1" -> {2, 2, 2, 1}: *counts malloc()ed, *n entries, each in
 * 1..HVD_SLURM_COUNT_MAX. */
int hvd__slurm_counts(const char *var, const char *text, int **counts, int *n);

#endif /* HVD_SLURM_LISTS_H */
