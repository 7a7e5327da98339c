/*
 * wait.c -- blocking in hvd without making Ctrl-C wait for it.
 *
 * hvd_wait(), hvd_barrier() and hvd_join() block in a condition variable
 * that signals do not break, so a Python program blocked in synchronize()
 * would see Ctrl-C only once the operation completed: never, when a peer
 * never calls it.  Python runs signal handlers in the main thread only, so
 * the main thread hands the blocking call to a helper thread and waits for
 * the helper in short slices, running the handlers between them
 * (PyErr_CheckSignals): KeyboardInterrupt comes within a slice.
 *
 * The hand-off costs a thread wake-up (~10 us here), so an operation is
 * first polled: one already complete (often, when synchronizing
 * gradients) or completing within a brief spin (a small allreduce) never
 * reaches a helper.
 *
 * An interrupted call goes on in its helper; the caller keeps the job and
 * may wait on it again, or abandon it (the helper then frees it, and what
 * the caller hands over with it, when the call ends: at the latest when
 * hvd_shutdown() fails it).  Other threads never run signal handlers: they
 * block in hvd directly.
 *
 * Helpers are few: one serves the main thread's waits one after another; a
 * second starts only while the first is held by an interrupted call.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/waits.h"
#include "pyhvd.h"

/* How long Ctrl-C may go unseen while the main thread waits. */
#define SLICE_NS (20L * 1000 * 1000)
/* How long the main thread polls an operation before a helper waits. */
#define SPIN_NS (50L * 1000)

struct pyhvd_job {
  pyhvd_call *call;
  hvd_handle h;
  int done;      /* the fields below are under pool.lock */
  int abandoned; /* nobody will collect it: the helper frees it */
  int rc;
  char *msg; /* hvd's message when rc < 0 */
  void (*release)(void *);
  void *release_arg;
  pyhvd_job *next; /* in the pool's queue */
};

static struct {
  pthread_mutex_t lock;
  pthread_cond_t work; /* a job was queued */
  pthread_cond_t done; /* a job ended */
  pyhvd_job *queue, **tail;
  int idle; /* helpers free to take a job */
} pool;

static unsigned long main_thread;

static void job_free(pyhvd_job *job) {
  if (job->release) job->release(job->release_arg);
  free(job->msg);
  free(job);
}

/* Takes the next job; pool.lock held. */
static pyhvd_job *dequeue(void) {
  pyhvd_job *job = pool.queue;
  pool.queue = job->next;
  if (!pool.queue) pool.tail = &pool.queue;
  return job;
}

/* A helper: runs queued calls one at a time, forever (an idle helper costs
 * a sleeping thread). */
static void *helper(void *unused) {
  (void)unused;
  int claimed = 1; /* started for a job already queued */
  pthread_mutex_lock(&pool.lock);
  for (;;) {
    if (!claimed) pool.idle++;
    claimed = 0;
    while (!pool.queue) pthread_cond_wait(&pool.work, &pool.lock);
    pyhvd_job *job = dequeue();
    pthread_mutex_unlock(&pool.lock);
    int rc = job->call(job->h);
    char *msg = rc < 0 ? strdup(hvd_last_error()) : NULL;
    pthread_mutex_lock(&pool.lock);
    job->rc = rc;
    job->msg = msg;
    job->done = 1;
    if (job->abandoned)
      job_free(job);
    else
      pthread_cond_broadcast(&pool.done);
  }
  return NULL;
}

/* Starts a helper with every signal blocked, so that signals go to the
 * threads that handle them; pool.lock held. */
static int spawn(void) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t t;
  int rc = pthread_create(&t, &attr, helper, NULL);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return rc;
}

/* Queues job for a free helper, or a new one; pool.lock held.  0 or -1. */
static int submit(pyhvd_job *job) {
  if (pool.idle == 0 && spawn() != 0) return -1;
  if (pool.idle > 0) pool.idle--;
  job->next = NULL;
  *pool.tail = job;
  pool.tail = &job->next;
  pthread_cond_signal(&pool.work);
  return 0;
}

static void pool_init(void) {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_mutex_init(&pool.lock, NULL);
  pthread_cond_init(&pool.work, NULL);
  pthread_cond_init(&pool.done, &attr);
  pthread_condattr_destroy(&attr);
  pool.queue = NULL;
  pool.tail = &pool.queue;
  pool.idle = 0;
}

/* A forked child has none of the parent's helpers (a DataLoader worker,
 * say): it starts afresh, its parent's jobs forgotten. */
static void pool_after_fork(void) { pool_init(); }

int pyhvd_wait_init(void) {
  pool_init();
  if (pthread_atfork(NULL, NULL, pool_after_fork) != 0) {
    PyErr_SetString(PyExc_RuntimeError, "pthread_atfork failed");
    return -1;
  }
  /* The module may be imported outside the main thread: ask threading. */
  PyObject *threading = PyImport_ImportModule("threading");
  PyObject *t = threading ? PyObject_CallMethod(threading, "main_thread", NULL) : NULL;
  PyObject *ident = t ? PyObject_GetAttrString(t, "ident") : NULL;
  if (ident) main_thread = PyLong_AsUnsignedLong(ident);
  Py_XDECREF(ident);
  Py_XDECREF(t);
  Py_XDECREF(threading);
  return PyErr_Occurred() ? -1 : 0;
}

/* call(h) with the GIL released, from a thread that handles no signals. */
static int call_directly(pyhvd_call *call, hvd_handle h, char **msg) {
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = call(h);
  Py_END_ALLOW_THREADS
  *msg = rc < 0 ? strdup(hvd_last_error()) : NULL;
  return rc;
}

/* Waits up to one slice for job; 1 when it has ended.  GIL released. */
static int wait_slice(pyhvd_job *job) {
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_nsec += SLICE_NS;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&pool.lock);
  while (!job->done && pthread_cond_timedwait(&pool.done, &pool.lock, &until) == 0) {
  }
  int done = job->done;
  pthread_mutex_unlock(&pool.lock);
  return done;
}

static int in_main_thread(void) { return PyThread_get_thread_ident() == main_thread; }

/* Hands call(h) to a helper and waits for it in slices; see
 * pyhvd_blocking(). */
static int wait_in_slices(pyhvd_call *call, hvd_handle h, pyhvd_job **pending, char **msg) {
  pyhvd_job *job = *pending;
  if (!job) {
    job = calloc(1, sizeof *job);
    if (!job) {
      PyErr_NoMemory();
      return PYHVD_INTERRUPTED;
    }
    job->call = call;
    job->h = h;
    pthread_mutex_lock(&pool.lock);
    int rc = submit(job);
    pthread_mutex_unlock(&pool.lock);
    if (rc < 0) {
      free(job);
      return call_directly(call, h, msg); /* no thread to spare: block as before */
    }
    *pending = job;
  }
  /* The helper waits in hvd, but this thread is the one that submitted:
   * it counts as waiting too (engine/waits.h), or its rank would never be
   * blocked and a certain deadlock would never end. */
  hvd__waits_enter();
  for (;;) {
    int done;
    Py_BEGIN_ALLOW_THREADS
    done = wait_slice(job);
    Py_END_ALLOW_THREADS
    if (done) break;
    if (PyErr_CheckSignals() < 0) {
      hvd__waits_leave();
      return PYHVD_INTERRUPTED;
    }
  }
  hvd__waits_leave();
  *pending = NULL;
  int rc = job->rc;
  *msg = job->msg;
  job->msg = NULL;
  job_free(job);
  return rc;
}

int pyhvd_blocking(pyhvd_call *call, hvd_handle h, pyhvd_job **pending, char **msg) {
  *msg = NULL;
  if (!*pending && !in_main_thread()) return call_directly(call, h, msg);
  return wait_in_slices(call, h, pending, msg);
}

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Polls h for up to spin_ns, yielding the CPU between polls (to the
 * engine's thread, often); hvd_poll's result. */
static int spin(hvd_handle h, int64_t spin_ns) {
  int rc;
  Py_BEGIN_ALLOW_THREADS
  int64_t until = now_ns() + spin_ns;
  while ((rc = hvd_poll(h)) == 0 && now_ns() < until) sched_yield();
  Py_END_ALLOW_THREADS
  return rc;
}

int pyhvd_wait(hvd_handle h, pyhvd_job **pending, char **msg) {
  *msg = NULL;
  /* A job of one rank waits for nobody: hvd_wait drives the operation's
   * cycle on this thread (a few us), where the polls below wait for the
   * engine's thread to be scheduled and run it (tens of us on a loaded
   * machine: issue 46).  It blocks a cycle period at most, so Ctrl-C
   * waits no longer than that. */
  if (!*pending && hvd_size() == 1) return call_directly(hvd_wait, h, msg);
  if (!*pending) {
    int rc = spin(h, in_main_thread() ? SPIN_NS : 0);
    if (rc != 0) {
      if (rc == 1) rc = hvd_wait(h); /* complete: returns at once */
      if (rc < 0) *msg = strdup(hvd_last_error());
      return rc;
    }
  }
  return pyhvd_blocking(hvd_wait, h, pending, msg);
}

int pyhvd_job_done(pyhvd_job *job) {
  pthread_mutex_lock(&pool.lock);
  int done = job->done;
  pthread_mutex_unlock(&pool.lock);
  return done;
}

void pyhvd_job_abandon(pyhvd_job *job, void (*release)(void *), void *arg) {
  pthread_mutex_lock(&pool.lock);
  job->release = release;
  job->release_arg = arg;
  if (job->done) {
    pthread_mutex_unlock(&pool.lock);
    job_free(job);
    return;
  }
  job->abandoned = 1;
  pthread_mutex_unlock(&pool.lock);
}

int pyhvd_abandon_call(pyhvd_call *call, hvd_handle h, void (*release)(void *), void *arg) {
  pyhvd_job *job = calloc(1, sizeof *job);
  if (!job) return -1;
  job->call = call;
  job->h = h;
  job->abandoned = 1;
  job->release = release;
  job->release_arg = arg;
  pthread_mutex_lock(&pool.lock);
  int rc = submit(job);
  pthread_mutex_unlock(&pool.lock);
  if (rc < 0) free(job);
  return rc;
}
