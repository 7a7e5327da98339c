/*
 * test_report.c -- hvd-report's reading and analyses, on timelines made
 * here with every number known in advance: steps of P us in which the
 * application waits 3000 us, 2000 of them while the collective runs;
 * rank ticks late by chosen amounts; fused or split collectives; and the
 * findings each situation must (and must not) produce.  The reader is
 * also fed escapes, a file cut by a crash and syntax errors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report.h"

static char tmpdir[64];

static const char *path_of(const char *name) {
  static char path[128];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  return path;
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

/* ---- A synthetic job ---- */

typedef struct {
  int rank, size, steps, tensors;
  double period;        /* us per step */
  double late[4];       /* us each rank's ticks come after rank 0's */
  double threshold;     /* HOROVOD_FUSION_THRESHOLD */
  double bytes;         /* per tensor */
  int split;            /* the step's tensors run as two collectives */
  int extras;           /* broadcasts in the first two steps only */
  /* As the cached fast path writes: every rank's ticks in the first
   * `full_rounds` rounds only (a full exchange), then this file's rank's
   * alone; 0 means every round has every rank's. */
  int full_rounds;
  double first_late[4]; /* more lateness in the first round only: start-up */
  double turn_late[2][4]; /* more lateness in even [0] and odd [1] rounds */
  double t0;            /* added to every time: each file has its own start */
  int cycles;           /* the negotiations' ends carry their cycle (10 k + 3) */
  double cycle_ms;      /* HOROVOD_CYCLE_TIME; 0: 1 */
} job;

/* Step k at t = k * period: tensor i (row i + 1) negotiates from
 * t + 1000 + i, every rank ticks at t + 1000 + i + late[q], the
 * negotiation ends at t + 6400; the collective(s) run [t + 7000,
 * t + 9000); the application waits [t + 6500, t + 9500). */
static void write_job(const char *path, const job *j) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "[\n{\"name\":\"hvd_job\",\"ph\":\"M\",\"pid\":0,\"args\":{\"rank\":%d,\"size\":%d,"
             "\"transport\":\"shm\",\"fusion_threshold\":%.0f,\"cycle_time_ms\":%g}},\n",
          j->rank, j->size, j->threshold, j->cycle_ms > 0 ? j->cycle_ms : 1);
  for (int i = 0; i < j->tensors; i++)
    fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"grad.%d\"}},\n",
            i + 1, i);
  for (int i = 0; i < j->extras; i++)
    fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"param.%d\"}},\n",
            100 + i, i);
  for (int k = 0; k < j->steps; k++) {
    double t = j->t0 + 100000 + k * j->period;
    for (int i = 0; k < 2 && i < j->extras; i++)
      fprintf(f, "{\"ph\":\"B\",\"name\":\"NEGOTIATE_BROADCAST\",\"ts\":%.0f,\"pid\":%d,\"tid\":%d},\n"
                 "{\"ph\":\"E\",\"ts\":%.0f,\"pid\":%d,\"tid\":%d},\n",
              t + 500, 100 + i, 100 + i, t + 600, 100 + i, 100 + i);
    for (int i = 0; i < j->tensors; i++) {
      fprintf(f, "{\"ph\":\"B\",\"name\":\"NEGOTIATE_ALLREDUCE\",\"ts\":%.0f,\"pid\":%d,\"tid\":%d},\n",
              t + 1000 + i, i + 1, i + 1);
      for (int q = 0; q < j->size; q++)
        if (q == j->rank || j->full_rounds == 0 || k < j->full_rounds)
          fprintf(f, "{\"ph\":\"i\",\"name\":\"rank %d ready\",\"ts\":%.0f,\"pid\":%d,\"tid\":%d,\"s\":\"p\"},\n",
                  q, t + 1000 + i + j->late[q] + (k == 0 ? j->first_late[q] : 0) + j->turn_late[k % 2][q],
                  i + 1, i + 1);
      fprintf(f, "{\"ph\":\"E\",\"ts\":%.0f,\"pid\":%d,\"tid\":%d", t + 6400, i + 1, i + 1);
      if (j->cycles) fprintf(f, ",\"args\":{\"cycle\":%d}", 10 * k + 3);
      fprintf(f, "},\n");
    }
    int groups = j->split ? 2 : 1, per = j->tensors / groups;
    for (int g = 0; g < groups; g++) {
      double b = t + 7000 + g * 2000.0 / groups, e = b + 2000.0 / groups;
      for (int i = g * per; i < (g + 1) * per; i++)
        fprintf(f, "{\"ph\":\"B\",\"name\":\"ALLREDUCE\",\"ts\":%.0f,\"pid\":%d,\"tid\":%d,\"args\":"
                   "{\"tensors\":%d,\"bytes\":%.0f,\"dtype\":\"float32\"}},\n",
                b, i + 1, i + 1, per, per * j->bytes);
      for (int i = g * per; i < (g + 1) * per; i++)
        fprintf(f, "{\"ph\":\"E\",\"ts\":%.0f,\"pid\":%d,\"tid\":%d},\n", e, i + 1, i + 1);
    }
    fprintf(f, "{\"ph\":\"X\",\"name\":\"WAIT\",\"ts\":%.0f,\"dur\":3000,\"pid\":99,\"tid\":99},\n",
            t + 6500);
  }
  fprintf(f, "{\"name\":\"hvd_end\",\"ph\":\"M\",\"pid\":0,\"args\":{\"ts\":1}}\n]\n");
  fclose(f);
}

static job default_job(void) {
  return (job){.rank = 0, .size = 2, .steps = 6, .tensors = 4, .period = 10000,
               .late = {0, 0, 0, 0}, .threshold = 64 << 20, .bytes = 256 * 1024, .split = 0};
}

/* Reads the job's timeline(s) into r and analyses them. */
static void analyze(rp_report *r, const job *jobs, int n, const char *bench_csv) {
  memset(r, 0, sizeof *r);
  r->tl = calloc((size_t)n, sizeof *r->tl);
  assert_non_null(r->tl);
  for (int i = 0; i < n; i++) {
    char name[32];
    snprintf(name, sizeof name, "rank.%d.json", i);
    write_job(path_of(name), &jobs[i]);
    assert_int_equal(rp_read(path_of(name), &r->tl[i]), 0);
    r->ntl++;
  }
  if (bench_csv) {
    write_text(path_of("bench.csv"), bench_csv);
    assert_int_equal(rp_bench_read(path_of("bench.csv"), &r->bench), 0);
    r->has_bench = 1;
  }
  assert_int_equal(rp_analyze(r), 0);
}

static const rp_finding *finding(const rp_report *r, const char *kind) {
  for (int i = 0; i < r->nfindings; i++)
    if (strcmp(r->findings[i].kind, kind) == 0) return &r->findings[i];
  return NULL;
}

/* ---- Tests ---- */

static void test_reads_records(void **state) {
  (void)state;
  job j = default_job();
  rp_report r;
  analyze(&r, &j, 1, NULL);
  const rp_timeline *t = &r.tl[0];
  assert_true(t->has_job && t->ended && !t->truncated && !t->cut_mid_event);
  assert_int_equal(t->job.size, 2);
  assert_string_equal(t->job.transport, "shm");
  assert_int_equal(t->nnames, 4);
  assert_string_equal(t->names[3], "grad.3");
  assert_int_equal(t->nocc, 6 * 4);
  assert_int_equal(t->ncolls, 6); /* 4 rows' B events, one fused collective per step */
  assert_int_equal(t->colls[0].tensors, 4);
  assert_true(t->colls[0].bytes == 4 * 256 * 1024);
  assert_string_equal(t->colls[0].dtype, "float32");
  assert_true(t->colls[0].begin == 107000 && t->colls[0].end == 109000);
  assert_true(t->colls[0].planned == 106400);
  assert_int_equal(t->occ[5].nticks, 2);
  assert_true(t->occ[5].own_ready == 110000 + 1000 + 1); /* step 1, tensor 1, rank 0 */
  assert_int_equal(t->occ[5].coll, 1);
  assert_int_equal(t->nwaits, 6);
  rp_report_free(&r);
}

/* 6 rounds: 5 whole steps of 10000 us: 3000 waited, 2000 of it in the
 * collective: 7000 / 1000 / 2000. */
static void test_steps_split(void **state) {
  (void)state;
  job j = default_job();
  rp_report r;
  analyze(&r, &j, 1, NULL);
  const rp_steps *s = &r.steps[0];
  assert_int_equal(s->n, 5);
  assert_int_equal(s->ntensors, 4);
  assert_true(s->median_len == 10000);
  for (int k = 0; k < s->n; k++) {
    assert_true(fabs(s->split[k].compute - 7000) < 1e-6);
    assert_true(fabs(s->split[k].negotiate - 1000) < 1e-6);
    assert_true(fabs(s->split[k].comm - 2000) < 1e-6);
  }
  rp_split x = rp_shares(&r, 0);
  assert_true(fabs(x.compute - 0.7) < 1e-9 && fabs(x.comm - 0.2) < 1e-9);
  assert_null(finding(&r, "straggler"));
  assert_non_null(finding(&r, "fp16")); /* 20% of each step on 1 MiB float32 allreduces */
  assert_null(finding(&r, "fusion-off"));
  assert_null(finding(&r, "threshold"));
  rp_report_free(&r);
}

/* Ten tensors seen twice are fewer operations than four seen six times:
 * the four mark the steps. */
static void test_steps_from_the_most_operations(void **state) {
  (void)state;
  job j = default_job();
  j.extras = 10;
  rp_report r;
  analyze(&r, &j, 1, NULL);
  assert_int_equal(r.tl[0].nnames, 14);
  assert_int_equal(r.steps[0].n, 5);
  assert_int_equal(r.steps[0].ntensors, 4);
  assert_true(r.steps[0].median_len == 10000);
  rp_report_free(&r);
}

/* Rank 1 ticks 5 ms after rank 0 on every tensor: it is the straggler,
 * 5000 us late on average, last every time; rank 0 is never late. */
static void test_straggler_named(void **state) {
  (void)state;
  job j[2] = {default_job(), default_job()};
  j[0].late[1] = j[1].late[1] = 5000;
  j[1].rank = 1;
  rp_report r;
  analyze(&r, j, 2, NULL);
  assert_int_equal(r.late.straggler, 1);
  assert_true(r.late.ranks[1].mean_late == 5000 && r.late.ranks[1].last_share == 1);
  assert_true(r.late.ranks[0].mean_late == 0 && r.late.ranks[0].last_share == 0);
  assert_true(r.late.nwaiters > 0 && r.late.waiters[0].last_rank == 1);
  assert_true(r.late.waiters[0].mean_wait == 5000);
  const rp_finding *f = finding(&r, "straggler");
  assert_non_null(f);
  assert_ptr_equal(f, &r.findings[0]); /* half of every step: the first finding */
  assert_non_null(strstr(f->text, "Rank 1 is slow"));
  assert_non_null(strstr(f->text, "5.00 ms after the first rank"));
  assert_null(finding(&r, "cycle")); /* waiting for a rank is not the cycle's fault */
  rp_report_free(&r);
}

/* A rank late on every tensor but not twice as late as another: the
 * ranks are slow together, no one of them is the straggler. */
static void test_straggler_must_stand_out(void **state) {
  (void)state;
  job j = default_job();
  j.size = 3;
  j.late[1] = 3000;
  j.late[2] = 5000;
  rp_report r;
  analyze(&r, &j, 1, NULL);
  assert_true(r.late.ranks[2].last_share == 1 && r.late.ranks[2].mean_late == 5000);
  assert_int_equal(r.late.straggler, -1);
  assert_null(finding(&r, "straggler"));
  rp_report_free(&r);
  j.late[1] = 2500; /* now it is twice as late as rank 1 */
  analyze(&r, &j, 1, NULL);
  assert_int_equal(r.late.straggler, 2);
  rp_report_free(&r);
}

/* Ticks within the margin of each other: nobody is last, nobody slow. */
static void test_close_ticks_are_nobodys(void **state) {
  (void)state;
  job j = default_job();
  j.late[1] = RP_LAST_MARGIN_US / 2;
  rp_report r;
  analyze(&r, &j, 1, NULL);
  assert_int_equal(r.late.straggler, -1);
  assert_true(r.late.ranks[1].last_share == 0);
  rp_report_free(&r);
}

/* Every rank's file as the cached fast path writes it: its own ticks
 * only after the first round, its own clock (the files start 1.2345 s
 * apart, rank 1's earliest), the cycle on each negotiation's end. */
static void fast_path_files(job *j, int size) {
  for (int q = 0; q < size; q++) {
    j[q] = default_job();
    j[q].rank = q;
    j[q].size = size;
    j[q].steps = 8;
    j[q].full_rounds = 1;
    j[q].cycles = 1;
    j[q].t0 = 1234500.0 * ((q + 1) % size);
  }
}

static int has_note(const rp_report *r, const char *text) {
  for (int i = 0; i < r->nnotes; i++)
    if (strstr(r->notes[i], text)) return 1;
  return 0;
}

/* Issue 30: a symmetric job whose first round had rank 0 2.69 ms late
 * (start-up), then the fast path.  Rank 0's file alone has the other
 * rank's ticks for that round only: nobody is judged on so little, and
 * the note says what to record instead. */
static void test_one_fast_path_file_judges_nobody(void **state) {
  (void)state;
  job j[2];
  fast_path_files(j, 2);
  j[0].first_late[0] = 2690;
  rp_report r;
  analyze(&r, j, 1, NULL);
  assert_int_equal(r.late.straggler, -1);
  assert_null(finding(&r, "straggler"));
  assert_int_equal(r.late.nstep_ops, 7 * 4);
  assert_true(r.late.nocc < r.late.nstep_ops / 2);
  assert_true(has_note(&r, "Who was late needs every rank's timeline"));
  rp_report_free(&r);
}

/* The same job with every rank's file: every operation pairs up across
 * the files (by cycle, whatever their clocks), and nobody stands out. */
static void test_symmetric_files_name_nobody(void **state) {
  (void)state;
  for (int size = 2; size <= 4; size += 2) {
    job j[4];
    fast_path_files(j, size);
    j[0].first_late[0] = 2690;
    rp_report r;
    analyze(&r, j, size, NULL);
    assert_int_equal(r.late.nocc, r.late.nstep_ops);
    assert_int_equal(r.late.straggler, -1);
    assert_null(finding(&r, "straggler"));
    assert_true(r.late.ranks[0].last_share == 4.0 / 28); /* the first round's 4 tensors */
    for (int q = 1; q < size; q++) assert_true(r.late.ranks[q].last_share == 0);
    assert_false(has_note(&r, "Who was late"));
    rp_report_free(&r);
  }
}

/* Rank 3 of 4 ready 4 ms after the others on every tensor, each file on
 * its own clock with only its own ticks: rank 3 is named, exactly 4 ms
 * late, last every time. */
static void test_slow_rank_named_across_files(void **state) {
  (void)state;
  job j[4];
  fast_path_files(j, 4);
  for (int q = 0; q < 4; q++) j[q].late[3] = 4000;
  rp_report r;
  analyze(&r, j, 4, NULL);
  assert_int_equal(r.late.nocc, 7 * 4);
  assert_int_equal(r.late.straggler, 3);
  assert_true(r.late.ranks[3].mean_late == 4000 && r.late.ranks[3].median_late == 4000);
  assert_true(r.late.ranks[3].last_share == 1);
  for (int q = 0; q < 3; q++) assert_true(r.late.ranks[q].mean_late == 0);
  const rp_finding *f = finding(&r, "straggler");
  assert_non_null(f);
  assert_non_null(strstr(f->text, "Rank 3 is slow: it was the last rank ready for 100% of the "
                                  "tensors, on average 4.00 ms after the first rank"));
  assert_non_null(strstr(f->text, "40% of a median step of 10.0 ms"));
  rp_report_free(&r);
}

/* Two ranks late by turns, one by much more (a loaded machine): each is
 * alone last about half the time, so neither stands out, however late
 * one was on average. */
static void test_late_by_turns_names_nobody(void **state) {
  (void)state;
  job j[2];
  fast_path_files(j, 2);
  for (int q = 0; q < 2; q++) j[q].turn_late[0][0] = 5000, j[q].turn_late[1][1] = 100;
  rp_report r;
  analyze(&r, j, 2, NULL);
  assert_true(r.late.ranks[0].last_share == 4.0 / 7 && r.late.ranks[1].last_share == 3.0 / 7);
  assert_true(fabs(r.late.ranks[0].mean_late - 4 * 5000.0 / 7) < 1e-6);
  assert_int_equal(r.late.straggler, -1);
  rp_report_free(&r);
}

/* Files without cycle numbers (an older hvd) pair by occurrence. */
static void test_files_pair_without_cycles(void **state) {
  (void)state;
  job j[2];
  fast_path_files(j, 2);
  for (int q = 0; q < 2; q++) j[q].cycles = 0, j[q].late[1] = 3000;
  rp_report r;
  analyze(&r, j, 2, NULL);
  assert_int_equal(r.late.nocc, 7 * 4);
  assert_int_equal(r.late.straggler, 1);
  assert_true(r.late.ranks[1].mean_late == 3000);
  rp_report_free(&r);
}

/* The others cannot have waited longer for a rank than a step lasts:
 * lateness over the median step means the files do not pair up, and
 * nobody is named. */
static void test_lateness_over_a_step_names_nobody(void **state) {
  (void)state;
  job j = default_job();
  j.period = 5000;
  j.late[1] = 5300; /* ticks before the negotiation ends at 6400, 0.3 ms over a step */
  rp_report r;
  analyze(&r, &j, 1, NULL);
  assert_true(r.late.ranks[1].mean_late == 5300 && r.late.ranks[1].last_share == 1);
  assert_int_equal(r.late.straggler, -1);
  assert_true(r.late.inconsistent);
  assert_null(finding(&r, "straggler"));
  assert_true(has_note(&r, "the files do not pair up"));
  rp_report_free(&r);
}

static void test_fusion_off_said(void **state) {
  (void)state;
  job j = default_job();
  j.threshold = 0;
  j.split = 1;
  rp_report r;
  analyze(&r, &j, 1, NULL);
  assert_int_equal(r.fusion.ncoll, 2 * 5);
  assert_true(r.fusion.per_step == 2);
  assert_int_equal(r.fusion.together, 5);
  const rp_finding *f = finding(&r, "fusion-off");
  assert_non_null(f);
  assert_non_null(strstr(f->text, "Tensor fusion is off (HOROVOD_FUSION_THRESHOLD=0)"));
  assert_null(finding(&r, "threshold"));
  rp_report_free(&r);
}

/* Two collectives per cycle whose bytes pass the threshold: raise it to
 * the next power of two over what one cycle carried (1 MiB). */
static void test_threshold_split(void **state) {
  (void)state;
  job j = default_job();
  j.threshold = 600 * 1024;
  j.split = 1;
  rp_report r;
  analyze(&r, &j, 1, NULL);
  assert_int_equal(r.fusion.cycles, 5);
  assert_int_equal(r.fusion.split, 5);
  assert_true(r.fusion.max_cycle_bytes == 1 << 20);
  const rp_finding *f = finding(&r, "threshold");
  assert_non_null(f);
  assert_non_null(strstr(f->text, "HOROVOD_FUSION_THRESHOLD=1048576"));
  assert_null(finding(&r, "cycle")); /* a 1 ms cycle is a tenth of a 10 ms step */
  rp_report_free(&r);
  /* The same bytes under a threshold they fit: nothing to raise. */
  j.threshold = 2 << 20;
  analyze(&r, &j, 1, NULL);
  assert_int_equal(r.fusion.split, 0);
  assert_null(finding(&r, "threshold"));
  rp_report_free(&r);
}

/* 10% of each 10 ms step negotiating and a 3 ms cycle (over a fifth of
 * a step): the cycle time is named, not the threshold (no cycle split). */
static void test_cycle_time_named(void **state) {
  (void)state;
  job j = default_job();
  j.cycle_ms = 3;
  rp_report r;
  analyze(&r, &j, 1, NULL);
  const rp_finding *f = finding(&r, "cycle");
  assert_non_null(f);
  assert_non_null(strstr(f->text, "The cycle time is too long for these steps: a step lasts "
                                  "10.0 ms (median) and a cycle HOROVOD_CYCLE_TIME=3 ms"));
  assert_null(finding(&r, "threshold"));
  rp_report_free(&r);
  j.cycle_ms = 1.5; /* under a fifth of a step */
  analyze(&r, &j, 1, NULL);
  assert_null(finding(&r, "cycle"));
  rp_report_free(&r);
}

static void test_compute_bound(void **state) {
  (void)state;
  job j = default_job();
  j.period = 40000; /* 3000 of 40000 waiting */
  rp_report r;
  analyze(&r, &j, 1, NULL);
  assert_non_null(finding(&r, "compute"));
  assert_null(finding(&r, "fp16")); /* 5% communicating */
  rp_report_free(&r);
}

/* 1 MiB in 2000 us over 2 ranks: busbw 1048576 / 2e-3 s * 2(2-1)/2 =
 * 0.524 GB/s, a quarter of hvd-bench's 2.0 at that size. */
static void test_bandwidth_against_bench(void **state) {
  (void)state;
  job j = default_job();
  rp_report r;
  analyze(&r, &j, 1,
          "[0]<stdout>:op,bytes,time_us,algbw_GBps,busbw_GBps\n"
          "[0]<stdout>:allreduce,524288,1.0,1.0,1.0\n"
          "[0]<stdout>:allreduce,2097152,1.0,3.0,3.0\n"
          "[0]<stdout>:broadcast,1048576,1.0,9.0,9.0\n");
  assert_int_equal(r.bw.nrows, 1);
  assert_true(r.bw.rows[0].lo == 1 << 20 && r.bw.rows[0].n == 6); /* every allreduce */
  assert_true(fabs(r.bw.rows[0].busbw - 1048576.0 / 2e-3 / 1e9) < 1e-9);
  assert_true(fabs(r.bw.rows[0].bench - 2.0) < 1e-9); /* halfway in log2(bytes) */
  assert_non_null(finding(&r, "bandwidth"));
  rp_report_free(&r);
}

static void test_bench_errors(void **state) {
  (void)state;
  rp_bench b;
  write_text(path_of("bad.csv"), "op,bytes,time_us,algbw_GBps,busbw_GBps\nallreduce,8,x\n");
  assert_int_equal(rp_bench_read(path_of("bad.csv"), &b), -1);
  assert_non_null(strstr(rp_error(), "bad.csv:2: not an hvd-bench --csv line"));
  write_text(path_of("none.csv"), "# hvd-bench broadcast\nbroadcast,8,1,1,1\n");
  assert_int_equal(rp_bench_read(path_of("none.csv"), &b), -1);
  assert_non_null(strstr(rp_error(), "no allreduce rows"));
  assert_int_equal(rp_bench_read(path_of("missing.csv"), &b), -1);
  assert_non_null(strstr(rp_error(), "missing.csv"));
}

/* Names escaped in every way JSON allows come back as their bytes. */
static void test_reader_decodes_names(void **state) {
  (void)state;
  write_text(path_of("esc.json"),
             "[{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":"
             "{\"name\":\"a\\\"b\\\\c\\n\\u00e9\\ud83d\\ude00/\"}},\n"
             "{\"ph\":\"B\",\"name\":\"NEGOTIATE_BROADCAST\",\"ts\":1.5e2,\"pid\":1,\"tid\":1,"
             "\"extra\":[1,{\"x\":null}],\"args\":{\"deep\":{\"y\":[true,false]}}}]\n");
  rp_timeline t;
  assert_int_equal(rp_read(path_of("esc.json"), &t), 0);
  assert_int_equal(t.nnames, 1);
  assert_string_equal(t.names[0], "a\"b\\c\n\xc3\xa9\xf0\x9f\x98\x80/");
  assert_int_equal(t.nocc, 1);
  assert_int_equal(t.occ[0].op, RP_BROADCAST);
  assert_true(t.occ[0].neg_begin == 150);
  assert_true(!t.ended && !t.cut_mid_event);
  rp_timeline_free(&t);
}

/* A crash leaves an unterminated array, perhaps half an event: read up
 * to the cut. */
static void test_reader_takes_a_cut_file(void **state) {
  (void)state;
  static const char *cuts[] = {
      "[\n{\"ph\":\"B\",\"name\":\"NEGOTIATE_ALLREDUCE\",\"ts\":1,\"pid\":1,\"tid\":1},\n",
      "[\n{\"ph\":\"B\",\"name\":\"NEGOTIATE_ALLREDUCE\",\"ts\":1,\"pid\":1,\"tid\":1},\n{\"ph\":\"E\",\"ts\":12",
      "[\n{\"ph\":\"B\",\"name\":\"NEGOTIATE_ALLREDUCE\",\"ts\":1,\"pid\":1,\"tid\":1},\n{\"ph\":\"i\",\"name\":\"rank 1 re",
  };
  for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
    write_text(path_of("cut.json"), cuts[i]);
    rp_timeline t;
    assert_int_equal(rp_read(path_of("cut.json"), &t), 0);
    assert_true(t.cut_mid_event);
    assert_int_equal(t.nocc, 1);
    assert_true(t.occ[0].neg_end < 0);
    rp_timeline_free(&t);
  }
}

static void test_reader_errors_name_the_line(void **state) {
  (void)state;
  static const struct {
    const char *text, *why;
  } bad[] = {
      {"[\n{\"ph\":\"B\"}\n{\"ph\":\"E\"}]", ":3: a missing ',' between events"},
      {"[\n{\"ts\":01}]", ":2:"},
      {"[\n\n{\"name\":\"a\\x\"}]", ":3: a bad escape"},
      {"{\"traceEvents\":[]}", ":1: not a JSON array"},
      {"[1,2]", ":1: an array item that is not an event object"},
      {"[] x", ":1: text after the array"},
      {"", "empty file"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    write_text(path_of("bad.json"), bad[i].text);
    rp_timeline t;
    assert_int_equal(rp_read(path_of("bad.json"), &t), -1);
    if (!strstr(rp_error(), "bad.json") || !strstr(rp_error(), bad[i].why))
      fail_msg("%s: got '%s', wanted '%s'", bad[i].text, rp_error(), bad[i].why);
    rp_timeline_free(&t);
  }
  char deep[256] = "[{\"x\":";
  for (int i = 0; i < 100; i++) strcat(deep, "[");
  write_text(path_of("deep.json"), deep);
  rp_timeline t;
  assert_int_equal(rp_read(path_of("deep.json"), &t), -1);
  assert_non_null(strstr(rp_error(), "deep.json:1: values nested too deep"));
  rp_timeline_free(&t);
  assert_int_equal(rp_read(path_of("no-such.json"), &t), -1);
  assert_non_null(strstr(rp_error(), "no-such.json"));
  rp_timeline_free(&t);
}

static void test_formats(void **state) {
  (void)state;
  char b[32];
  assert_string_equal(rp_fmt_time(850, b, sizeof b), "850 us");
  assert_string_equal(rp_fmt_time(12345, b, sizeof b), "12.3 ms");
  assert_string_equal(rp_fmt_time(2500, b, sizeof b), "2.50 ms");
  assert_string_equal(rp_fmt_time(1.2e6, b, sizeof b), "1.20 s");
  assert_string_equal(rp_fmt_bytes(34, b, sizeof b), "34 B");
  assert_string_equal(rp_fmt_bytes(512 * 1024, b, sizeof b), "512 KiB");
  assert_string_equal(rp_fmt_bytes(1.5 * (1 << 20), b, sizeof b), "1.5 MiB");
}

static int setup(void **state) {
  (void)state;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/hvd-report-XXXXXX");
  return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  return system(cmd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reads_records),
      cmocka_unit_test(test_steps_split),
      cmocka_unit_test(test_steps_from_the_most_operations),
      cmocka_unit_test(test_straggler_named),
      cmocka_unit_test(test_straggler_must_stand_out),
      cmocka_unit_test(test_close_ticks_are_nobodys),
      cmocka_unit_test(test_one_fast_path_file_judges_nobody),
      cmocka_unit_test(test_symmetric_files_name_nobody),
      cmocka_unit_test(test_slow_rank_named_across_files),
      cmocka_unit_test(test_late_by_turns_names_nobody),
      cmocka_unit_test(test_files_pair_without_cycles),
      cmocka_unit_test(test_lateness_over_a_step_names_nobody),
      cmocka_unit_test(test_fusion_off_said),
      cmocka_unit_test(test_threshold_split),
      cmocka_unit_test(test_cycle_time_named),
      cmocka_unit_test(test_compute_bound),
      cmocka_unit_test(test_bandwidth_against_bench),
      cmocka_unit_test(test_bench_errors),
      cmocka_unit_test(test_reader_decodes_names),
      cmocka_unit_test(test_reader_takes_a_cut_file),
      cmocka_unit_test(test_reader_errors_name_the_line),
      cmocka_unit_test(test_formats),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
