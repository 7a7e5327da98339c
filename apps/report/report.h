/*
 * report.h -- hvd-report: what its parts share.
 *
 *   hvd-report TIMELINE... [-o DIR] [--bench CSV] [--no-charts]
 *
 * reads hvd timelines (rank 0's, or every rank's: HOROVOD_TIMELINE with
 * %r or a directory) and answers "why doesn't my job scale?":
 *
 *   read.c       a timeline file into the records below
 *   steps.c      where the training steps are, and how each splits into
 *                computing, negotiating and communicating
 *   ranks.c      which ranks the others waited for, and for which tensors
 *   fusion.c     how many tensors and bytes each allreduce carried,
 *                against the fusion threshold
 *   bandwidth.c  bus bandwidth per allreduce against hvd-bench's (bench.c)
 *   findings.c   the suggestions those numbers justify
 *   charts.c, html.c, main.c   the PNG charts, the page, the command
 *
 * A "step" is one round of the gradients: the tensors that recur the same
 * number of times and make the most operations are reduced once per step,
 * and step k starts when this rank hands hvd the first of them for the
 * k-th time (its "ready" tick).  Within a
 * step, the time the training thread was blocked in hvd_wait (the
 * timeline's WAIT events) is "communicating" while a collective ran and
 * "negotiating" otherwise (waiting for a cycle, for the other ranks, for
 * the plan); the rest of the step is "computing".
 *
 * Times are microseconds from the start of the file they come from (each
 * rank's file has its own start).
 */
#ifndef HVD_REPORT_H
#define HVD_REPORT_H

#include <stddef.h>
#include <stdio.h>

/* ---- Errors: one message, for main to print ---- */

/* Sets the message; returns -1. */
int rp_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *rp_error(void);

/* ---- Numbers for people (format.c): into buf, which is returned ---- */

char *rp_fmt_time(double us, char *buf, size_t cap);    /* "850 us", "12.3 ms", "1.20 s" */
char *rp_fmt_bytes(double bytes, char *buf, size_t cap); /* "34 B", "512 KiB", "1.5 MiB" */

/* ---- One timeline (read.c) ---- */

enum { RP_ALLREDUCE, RP_BROADCAST, RP_ALLGATHER, RP_ALLTOALL, RP_REDUCESCATTER, RP_OTHER_OP,
       RP__NOPS };

const char *rp_op_name(int op);

/* The hvd_job event: the settings the ranks agreed on; -1 where unknown. */
typedef struct {
  int rank, size, local_size, cross_size;
  double fusion_threshold; /* bytes */
  double cycle_ms;
  char transport[32];      /* "" when unknown */
} rp_job;

/* A rank's "ready" tick on one tensor. */
typedef struct {
  int rank;
  double ts;
} rp_tick;

/* One operation on one tensor: negotiated, then run as part of one
 * collective. */
typedef struct {
  int tensor;          /* index into rp_timeline.names */
  int op;              /* RP_* */
  double neg_begin;    /* NEGOTIATE_<OP> began: some rank asked */
  double neg_end;      /* every rank was ready and it was planned; -1 if never */
  long cycle;          /* the cycle that planned it, the same on every rank; -1 if
                        * not written (an older hvd) */
  double own_ready;    /* this file's rank was ready; -1 if not seen */
  size_t tick0;        /* its ticks: rp_timeline.ticks[tick0 .. tick0 + nticks) */
  int nticks;
  long coll;           /* index into colls; -1 if it never ran */
} rp_occ;

/* One collective: the same B/E on the rows of every tensor it carried. */
typedef struct {
  int op;
  int tensors;
  double bytes;
  char dtype[16];
  double begin, end;   /* end -1 if never ended */
  double planned;      /* when its tensors' negotiation ended: its cycle */
} rp_coll;

typedef struct {
  double begin, end;
} rp_span;

typedef struct {
  char *path;
  size_t file_bytes;
  rp_job job;
  int has_job;
  int ended;           /* hvd_end: closed on purpose */
  int truncated;       /* hvd_truncated: cut at HOROVOD_TIMELINE_MAX_MB */
  double max_bytes;    /* the bound that cut it */
  int cut_mid_event;   /* the file stops inside an event (a crash) */
  double last_ts;
  char **names;        /* tensors, in order of their rows */
  int nnames;
  rp_occ *occ;
  size_t nocc;
  rp_tick *ticks;
  size_t nticks;
  rp_coll *colls;
  size_t ncolls;
  rp_span *waits;      /* sorted by begin */
  size_t nwaits;
  long cycles;         /* CYCLE_START marks */
} rp_timeline;

/* Reads path.  0, or -1 with a message naming the file, the line and
 * what was wrong.  A file a crash cut mid-event is read up to the cut. */
int rp_read(const char *path, rp_timeline *t);
void rp_timeline_free(rp_timeline *t);

/* ---- Steps (steps.c) ---- */

typedef struct {
  double compute, negotiate, comm;
} rp_split;

typedef struct {
  int n;                  /* complete steps */
  double *begin;          /* [n + 1]: step k is [begin[k], begin[k + 1]) */
  rp_split *split;        /* [n] */
  unsigned char *outlier; /* [n]: an occasional step over 3x the median: not in total */
  rp_split total;         /* over the steps that are not outliers */
  double total_len;
  int nkept;
  double median_len;
  int ntensors;           /* tensors reduced once per step */
  unsigned char *is_step; /* [nnames]: such a tensor */
} rp_steps;

/* Finds the steps of t and splits each.  Without a recurring tensor
 * there are none (n == 0).  -1 only when out of memory. */
int rp_find_steps(const rp_timeline *t, rp_steps *s);
void rp_steps_free(rp_steps *s);

/* Whether occurrence o falls within s's steps; which step, or -1. */
int rp_in_steps(const rp_steps *s, const rp_occ *o);
int rp_step_of(const rp_steps *s, const rp_occ *o);

/* Length of [lo, hi) covered by the sorted, disjoint spans; *at is a
 * cursor into them that only moves forward, for calls with growing lo. */
double rp_covered(const rp_span *spans, size_t n, size_t *at, double lo, double hi);

/* Sorted, disjoint union of the collectives' [begin, end); caller frees. */
rp_span *rp_coll_union(const rp_timeline *t, size_t *n);

double rp_median(double *v, size_t n); /* sorts v; 0 when n == 0 */

/* ---- Ranks: who was late (ranks.c) ---- */

typedef struct {
  double mean_late, median_late; /* after the first rank ready, us */
  double last_share;             /* of the tensors, the share it was alone last for */
} rp_rank_late;

typedef struct {
  int tensor;
  long n;
  double mean_wait;     /* first rank ready to last, us */
  double max_wait;
  int last_rank;        /* the rank most often last, -1 if none */
  double last_share;
} rp_waiter;

typedef struct {
  int size;
  long nstep_ops;       /* operations within the steps, outliers' not */
  long nocc;            /* of them, those with every rank's wait known */
  rp_rank_late *ranks;  /* [size] */
  int straggler;        /* -1 if none */
  int inconsistent;     /* a rank stood out by more than a step: not named */
  rp_waiter *waiters;   /* longest mean wait first */
  int nwaiters;
} rp_lateness;

/* A wait this much shorter than every other rank's makes a rank "last";
 * closer ones came in the same cycle. */
#define RP_LAST_MARGIN_US 50.0

/* Who was late, on the operations of tl[ref] within its steps s, from
 * every rank's file among tl[0..ntl) (ranks.c says how). */
int rp_lateness_of(const rp_timeline *tl, int ntl, int ref, const rp_steps *s,
                   rp_lateness *out);
void rp_lateness_free(rp_lateness *l);

/* ---- Fusion (fusion.c) ---- */

typedef struct {
  long ncoll;            /* allreduce collectives within the steps */
  long single;           /* of them, carrying one tensor */
  double mean_tensors, mean_bytes, max_bytes;
  double per_step;       /* collectives per step */
  double threshold;      /* bytes; -1 if unknown */
  long cycles;           /* cycles that ran allreduces */
  long together;         /* of them, running several allreduces of one dtype */
  long split;            /* of those, whose bytes passed the threshold */
  double max_cycle_bytes;/* the most bytes one cycle's allreduces carried */
  double cycles_per_step;/* cycles that ran anything, per step */
  long hist[8];          /* tensors per collective: 1, 2, 3-4, 5-8, ..., >64 */
} rp_fusion;

void rp_fusion_of(const rp_timeline *t, const rp_steps *s, rp_fusion *out);
const char *rp_fusion_bin_label(int bin);

/* ---- Bandwidth (bench.c, bandwidth.c) ---- */

typedef struct {
  double bytes, busbw; /* GB/s */
} rp_point;

typedef struct {
  rp_point *p; /* allreduce rows, by size */
  int n;
} rp_bench;

/* Reads hvd-bench --csv output (as hvdrun prints it, "[0]<stdout>:"
 * prefixes and all).  -1 with a message naming the file and line. */
int rp_bench_read(const char *path, rp_bench *b);
/* Bus bandwidth at `bytes`, interpolated between the sizes measured
 * (log-linear), the nearest end outside them; -1 without rows. */
double rp_bench_at(const rp_bench *b, double bytes);
void rp_bench_free(rp_bench *b);

/* busbw = bytes / time * 2(n-1)/n: nccl-tests' and hvd-bench's. */
double rp_busbw(double bytes, double us, int size);

typedef struct {
  double lo;      /* sizes [lo, 2 lo) */
  long n;
  double bytes, us, busbw; /* medians */
  double bench;   /* hvd-bench's busbw at `bytes`; -1 without */
} rp_bw_row;

typedef struct {
  rp_bw_row rows[64];
  int nrows;
  int size;
} rp_bandwidth;

void rp_bandwidth_of(const rp_timeline *t, const rp_bench *b, rp_bandwidth *out);

/* ---- The whole report (findings.c) ---- */

typedef struct {
  double weight;  /* share of the step time it concerns: the order */
  char kind[16];  /* "straggler", "fusion-off", "threshold", "fp16", "cycle", ... */
  char text[768];
} rp_finding;

typedef struct {
  rp_timeline *tl;   /* by rank */
  int ntl;
  rp_steps *steps;   /* [ntl] */
  int ref;           /* the timeline job-wide numbers come from: the lowest rank's */
  rp_lateness late;
  rp_fusion fusion;
  rp_bench bench;
  int has_bench;
  rp_bandwidth bw;
  rp_finding *findings;
  int nfindings;
  char notes[6][384]; /* what the reader should know (truncated files, ...) */
  int nnotes;
} rp_report;

/* Runs every analysis over r->tl (read and sorted by main) and collects
 * the findings.  -1 only when out of memory. */
int rp_analyze(rp_report *r);

/* The findings from r's analyses (analyze.c calls it), by weight. */
int rp_collect_findings(rp_report *r);
void rp_report_free(rp_report *r);

/* Shares of the non-outlier step time of timeline i, in [0, 1]. */
rp_split rp_shares(const rp_report *r, int i);

/* ---- Output (charts.c, html.c) ---- */

/* The charts' file names in dir, NULL-terminated. */
extern const char *const rp_chart_names[];

/* Writes every chart into dir with gnuplot.  0, or -1 with a message
 * (gnuplot missing or failing). */
int rp_charts(const rp_report *r, const char *dir);

/* Writes dir/report.html, with the charts (if with_charts) embedded. */
int rp_html(const rp_report *r, const char *dir, int with_charts);

/* The summary and the top findings, for the terminal (terminal.c). */
void rp_print(const rp_report *r, FILE *out, int top);

#endif /* HVD_REPORT_H */
