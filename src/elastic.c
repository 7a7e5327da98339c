/*
 * elastic.c -- the elastic state and the loop that recovers training
 * across changes of membership (hvd.h, "Elastic training").
 *
 * A state is a list of named buffers, each with a snapshot taken at
 * commit, and of hooks for state kept elsewhere.  Everything here goes
 * through the public collectives; what only the library can do -- learn
 * of host updates from hvdrun, leave one job and join the next keeping
 * the program's process sets -- comes from api.c (elastic_int.h).
 *
 * Commits are counted: every rank commits at the same steps and a sync
 * hands rank 0's count to everyone, so equal counts on every rank mean
 * equal committed states.  A sync whose ranks all hold the same non-zero
 * count sends nothing -- after a lost worker every survivor restored the
 * same commit -- so recovery costs no more with a 100 MB model than with
 * a small one; only new workers (count 0) make rank 0 send the state.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "elastic_int.h"

#define NAME_MAX_BYTES 200

typedef struct {
  char name[NAME_MAX_BYTES + 1];
  void *buf;
  void *saved;
  size_t bytes;
} entry;

typedef struct {
  hvd_elastic_hooks hooks;
  void *arg;
} hook;

typedef struct {
  int (*fn)(void *arg);
  void *arg;
} reset_cb;

struct hvd_elastic_state {
  entry *entries;
  int nentries;
  hook *hooks;
  int nhooks;
  reset_cb *resets;
  int nresets;
  int64_t commits;     /* commits of the state, as rank 0 counts them */
  uint64_t host_stamp; /* the last host update every rank agreed on */
  int removed_only;    /* that update only removed hosts: no new worker needs a sync */
};

/* Appends one zeroed element to *arr (of *n). */
static void *grow(void *arr, int *n, size_t size) {
  char *a = realloc(arr, (size_t)(*n + 1) * size);
  if (!a) return NULL;
  memset(a + (size_t)*n * size, 0, size);
  (*n)++;
  return a;
}

hvd_elastic_state *hvd_elastic_state_new(void) { return calloc(1, sizeof(hvd_elastic_state)); }

void hvd_elastic_state_free(hvd_elastic_state *st) {
  if (!st) return;
  for (int i = 0; i < st->nentries; i++) free(st->entries[i].saved);
  free(st->entries);
  free(st->hooks);
  free(st->resets);
  free(st);
}

int hvd_elastic_state_add(hvd_elastic_state *st, const char *name, void *buf, size_t bytes) {
  if (!st || !name || (!buf && bytes))
    return hvd__err(HVD_E_INVALID, "hvd_elastic_state_add: NULL %s", !st ? "state" : !name ? "name" : "buffer");
  size_t len = strlen(name);
  if (len == 0 || len > NAME_MAX_BYTES)
    return hvd__err(HVD_E_INVALID, "hvd_elastic_state_add: name '%.40s' is empty or longer than %d bytes", name, NAME_MAX_BYTES);
  for (int i = 0; i < st->nentries; i++)
    if (strcmp(st->entries[i].name, name) == 0)
      return hvd__err(HVD_E_INVALID, "hvd_elastic_state_add: '%s' was added before", name);
  void *saved = malloc(bytes ? bytes : 1);
  entry *e = saved ? grow(st->entries, &st->nentries, sizeof *e) : NULL;
  if (!e) {
    free(saved);
    return hvd__err(HVD_E_NOMEM, "hvd_elastic_state_add: %zu bytes for '%s'", bytes, name);
  }
  st->entries = e;
  e = &st->entries[st->nentries - 1];
  memcpy(e->name, name, len + 1);
  e->buf = buf;
  e->saved = saved;
  e->bytes = bytes;
  if (bytes) memcpy(saved, buf, bytes); /* restore before any commit: the state as added */
  return 0;
}

int hvd_elastic_state_add_hooks(hvd_elastic_state *st, const hvd_elastic_hooks *hooks, void *arg) {
  if (!st || !hooks) return hvd__err(HVD_E_INVALID, "hvd_elastic_state_add_hooks: NULL %s", st ? "hooks" : "state");
  hook *h = grow(st->hooks, &st->nhooks, sizeof *h);
  if (!h) return hvd__err(HVD_E_NOMEM, "hvd_elastic_state_add_hooks");
  st->hooks = h;
  st->hooks[st->nhooks - 1] = (hook){*hooks, arg};
  return 0;
}

int hvd_elastic_on_reset(hvd_elastic_state *st, int (*fn)(void *arg), void *arg) {
  if (!st || !fn) return hvd__err(HVD_E_INVALID, "hvd_elastic_on_reset: NULL %s", st ? "callback" : "state");
  reset_cb *r = grow(st->resets, &st->nresets, sizeof *r);
  if (!r) return hvd__err(HVD_E_NOMEM, "hvd_elastic_on_reset");
  st->resets = r;
  st->resets[st->nresets - 1] = (reset_cb){fn, arg};
  return 0;
}

/* ---- save, restore, sync ---- */

/* Calls one hook of every hook set that has it; the first failure wins. */
static int call_hooks(hvd_elastic_state *st, size_t offset, const char *what) {
  for (int i = 0; i < st->nhooks; i++) {
    int (*fn)(void *) = *(int (**)(void *))((char *)&st->hooks[i].hooks + offset);
    if (!fn) continue;
    int rc = fn(st->hooks[i].arg);
    if (rc < 0) return hvd__err_prefix(rc, "elastic state: %s hook %d", what, i);
  }
  return 0;
}
#define CALL_HOOKS(st, field) call_hooks(st, offsetof(hvd_elastic_hooks, field), #field)

static int save(hvd_elastic_state *st) {
  for (int i = 0; i < st->nentries; i++)
    if (st->entries[i].bytes) memcpy(st->entries[i].saved, st->entries[i].buf, st->entries[i].bytes);
  return CALL_HOOKS(st, save);
}

int hvd_elastic_restore(hvd_elastic_state *st) {
  if (!st) return hvd__err(HVD_E_INVALID, "hvd_elastic_restore: NULL state");
  for (int i = 0; i < st->nentries; i++)
    if (st->entries[i].bytes) memcpy(st->entries[i].buf, st->entries[i].saved, st->entries[i].bytes);
  return CALL_HOOKS(st, restore);
}

/* 1 when every rank holds the same non-zero number of commits. */
static int same_commit_everywhere(hvd_elastic_state *st, int *same) {
  int64_t v[2] = {st->commits, -st->commits}; /* max and -min in one allreduce */
  HVD__CHECK(hvd_allreduce(v, v, 2, HVD_INT64, HVD_MAX, "hvd.elastic.commits"));
  *same = v[0] == -v[1] && v[0] > 0;
  return 0;
}

int hvd_elastic_sync(hvd_elastic_state *st) {
  if (!st) return hvd__err(HVD_E_INVALID, "hvd_elastic_sync: NULL state");
  int same = 0;
  HVD__CHECK(same_commit_everywhere(st, &same));
  if (same) return 0;
  for (int i = 0; i < st->nentries; i++) {
    char name[NAME_MAX_BYTES + 32];
    snprintf(name, sizeof name, "hvd.elastic.sync.%s", st->entries[i].name);
    HVD__CHECK(hvd_broadcast(st->entries[i].buf, st->entries[i].bytes, HVD_UINT8, 0, name));
  }
  HVD__CHECK(CALL_HOOKS(st, sync));
  HVD__CHECK(hvd_broadcast(&st->commits, 1, HVD_INT64, 0, "hvd.elastic.sync.commits"));
  return save(st);
}

/* ---- commit and host updates ---- */

int hvd_elastic_check_host_updates(hvd_elastic_state *st) {
  if (!st) return hvd__err(HVD_E_INVALID, "hvd_elastic_check_host_updates: NULL state");
  hvd__elastic_update seen;
  HVD__CHECK(hvd__elastic_poll_updates(&seen));
  /* Every rank must raise at the same commit: agree on the newest update
   * any rank has seen (stamps only grow; kinds as 0/1 under MAX). */
  int64_t v[3] = {(int64_t)seen.stamp, seen.added, seen.removed};
  HVD__CHECK(hvd_allreduce(v, v, 3, HVD_INT64, HVD_MAX, "hvd.elastic.host_updates"));
  if ((uint64_t)v[0] <= st->host_stamp) return 0;
  st->host_stamp = (uint64_t)v[0];
  st->removed_only = v[1] == 0;
  return hvd__err(HVD_E_HOSTS_UPDATED, "hosts were %s (update %llu); the job is re-formed",
                  v[1] && v[2] ? "added and removed" : v[1] ? "added" : "removed",
                  (unsigned long long)v[0]);
}

int hvd_elastic_commit(hvd_elastic_state *st) {
  if (!st) return hvd__err(HVD_E_INVALID, "hvd_elastic_commit: NULL state");
  HVD__CHECK(save(st));
  st->commits++;
  return hvd_elastic_check_host_updates(st);
}

/* ---- the loop ---- */

static int run_resets(hvd_elastic_state *st) {
  for (int i = 0; i < st->nresets; i++) {
    int rc = st->resets[i].fn(st->resets[i].arg);
    if (rc < 0) return hvd__err_prefix(rc, "elastic reset callback %d", i);
  }
  return 0;
}

/* Leaves the job and joins the next one; then the reset callbacks, before
 * the state is synced (as Horovod). */
static int reform(hvd_elastic_state *st) {
  HVD__CHECK(hvd__elastic_reform());
  return run_resets(st);
}

int hvd_elastic_run(hvd_elastic_state *st, int (*train)(hvd_elastic_state *st, void *arg),
                    void *arg) {
  if (!st || !train) return hvd__err(HVD_E_INVALID, "hvd_elastic_run: NULL %s", st ? "function" : "state");
  int skip_sync = 0;
  for (;;) {
    int rc = skip_sync ? 0 : hvd_elastic_sync(st);
    if (rc == 0) rc = train(st, arg);
    if (rc == 0) return 0;
    if (rc == HVD_E_HOSTS_UPDATED) {
      skip_sync = st->removed_only;
    } else if (hvd__elastic_recoverable(rc)) {
      hvd__log(HVD_LOG_INFO, "elastic: %s; back to commit %lld and re-forming the job",
               hvd_last_error(), (long long)st->commits);
      int restored = hvd_elastic_restore(st);
      if (restored < 0) return restored;
      skip_sync = 0;
    } else {
      return rc;
    }
    HVD__CHECK(reform(st));
  }
}
