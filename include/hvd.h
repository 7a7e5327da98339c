/*
 * hvd.h -- the whole public contract of libhvd.
 *
 * hvd averages (or otherwise reduces) buffers across the processes of a
 * distributed training job, the way Horovod does for PyTorch and TensorFlow.
 * A job is started by `hvdrun -np N prog`, `mpirun -np N prog` or
 * `srun -n N prog`; a program started on its own is a job of size 1 and
 * every call still works.
 *
 * Conventions, for every function below:
 *   - Functions that return int return 0 (HVD_OK) on success and a negative
 *     HVD_E_* code on failure.  hvd_last_error() then returns a message for
 *     this thread that says what failed and where (tensor name, rank,
 *     expected vs got).  hvd never exits or aborts the calling process.
 *   - `count` is a number of elements of `dtype`, not bytes.
 *   - `name` labels the operation in error messages (and, with the engine,
 *     matches tensors across ranks).  It may be NULL; hvd then uses a
 *     generated name.
 *   - Every rank of the job must make the same collective calls in the same
 *     order with matching count, dtype, op and root.  A rank that dies or
 *     stops answering turns into an error on the others within the deadline
 *     set by HOROVOD_GLOO_TIMEOUT_SECONDS (default 30 s); after such an error
 *     the job's communicator is broken and later collectives return
 *     HVD_E_ABORTED.
 *   - Results are bitwise identical on every rank.
 */
#ifndef HVD_H
#define HVD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && __GNUC__ >= 4
#define HVD_EXTERN __attribute__((visibility("default")))
#else
#define HVD_EXTERN
#endif

/* The version of this header: CMake's project version (CMakeLists.txt
 * refuses to configure when they differ).  hvd_version() is the version of
 * the library a program runs with, which may be another. */
#define HVD_VERSION_MAJOR 0
#define HVD_VERSION_MINOR 1
#define HVD_VERSION_PATCH 0
#define HVD_VERSION_STRING "0.1.0"
#define HVD_VERSION_HEX ((HVD_VERSION_MAJOR << 16) | (HVD_VERSION_MINOR << 8) | HVD_VERSION_PATCH)

/* Element types.  HVD_FLOAT16 is IEEE 754 binary16, HVD_BFLOAT16 the upper
 * half of a binary32; both reduce in float32 and round to nearest even.
 * HVD_BOOL is one byte per element, 0 false and anything else true. */
typedef enum { HVD_UINT8, HVD_INT8, HVD_UINT16, HVD_INT16, HVD_INT32, HVD_INT64,
               HVD_FLOAT16, HVD_BFLOAT16, HVD_FLOAT32, HVD_FLOAT64, HVD_BOOL } hvd_dtype;

/* Reduction operations.
 *   HVD_SUM      integers wrap around on overflow (two's complement).
 *   HVD_AVERAGE  the sum divided by the number of ranks, after the sum.
 *                Integers: exact integer division rounded toward zero (as
 *                horovod.torch's integer scaling truncates).  Not defined
 *                for HVD_BOOL.
 *   HVD_MIN/MAX  a NaN in any rank's element makes that element NaN.
 *   HVD_PRODUCT  integers wrap around on overflow.
 *   HVD_ADASUM   Adasum (Maleki et al. 2020), as Horovod: pairs of ranks
 *                combine a + b - (a.b/2|a|^2) a - (a.b/2|b|^2) b,
 *                recursively.  float16, float32 and float64 only (dot
 *                products in double; float16 combined in float and
 *                rounded once), allreduce only,
 *                over a power-of-two number of ranks (else
 *                HVD_E_UNSUPPORTED).  Tensors are never fused.
 * On HVD_BOOL, SUM and MAX are logical or, MIN and PRODUCT logical and. */
typedef enum { HVD_AVERAGE, HVD_SUM, HVD_ADASUM, HVD_MIN, HVD_MAX, HVD_PRODUCT } hvd_op;

/* Error codes: every failing call returns one of these (all negative). */
typedef enum {
  HVD_OK = 0,
  HVD_E_INVALID = -1,          /* a bad argument: NULL buffer, unknown dtype, root out of range */
  HVD_E_NOT_INITIALIZED = -2,  /* a call that needs hvd_init() before it */
  HVD_E_ALREADY_INITIALIZED = -3, /* hvd_init() twice without hvd_shutdown() */
  HVD_E_UNSUPPORTED = -4,      /* a valid request hvd cannot do (yet) */
  HVD_E_NOMEM = -5,            /* out of memory */
  HVD_E_TIMEOUT = -6,          /* a peer did not answer before the deadline */
  HVD_E_PEER_LOST = -7,        /* a peer's connection closed or failed */
  HVD_E_PROTOCOL = -8,         /* malformed or unexpected data from the network */
  HVD_E_AUTH = -9,             /* a peer could not prove it knows the job's secret */
  HVD_E_MISMATCH = -10,        /* ranks disagree (count, dtype, op, root, call order) */
  HVD_E_ENV = -11,             /* a bad or inconsistent environment variable */
  HVD_E_SYSTEM = -12,          /* a system call failed (errno in the message) */
  HVD_E_ABORTED = -13,         /* the communicator broke on an earlier error */
  HVD_E_HOSTS_UPDATED = -14,   /* elastic: hosts were added or removed (Horovod's
                                  HostsUpdatedInterrupt); every rank gets it at the same commit */
  HVD_E_DESYNC = -15           /* a certain deadlock: every rank concerned waits on tensors
                                  that ranks also waiting will never submit (ranks that call
                                  different collectives, or in another order, each waiting);
                                  every rank's waits fail with it, naming per rank the tensors
                                  and the missing ranks (HOROVOD_DESYNC_TIMEOUT_SECONDS) */
} hvd_error;

/* The version of the library the program runs with, as HVD_VERSION_HEX:
 * (major << 16) | (minor << 8) | patch.  Callable at any time. */
HVD_EXTERN unsigned hvd_version(void);

/* ---- Life cycle ------------------------------------------------------ */

/* Joins the job described by the environment -- hvdrun's HOROVOD_RANK,
 * HOROVOD_SIZE, rendezvous address and secret; Open MPI's
 * OMPI_COMM_WORLD_*; SLURM's SLURM_PROCID, SLURM_NTASKS, ... under srun
 * (with _HOROVOD_SECRET_KEY); MPICH's PMI_RANK/PMI_SIZE; none of them: a
 * job of size 1 -- connects to every peer and authenticates each
 * connection.  Waits at most HOROVOD_START_TIMEOUT seconds (default 30)
 * for the others.  A bad or inconsistent variable is HVD_E_ENV naming it.
 * Fails with HVD_E_ALREADY_INITIALIZED when called twice. */
HVD_EXTERN int hvd_init(void);

/* hvd_init() for a job of the n listed ranks of the job the environment
 * describes (Horovod's init(comm=[ranks])): ranks[i] becomes rank i.
 * Under MPI the listed ranks form a sub-communicator of MPI_COMM_WORLD and
 * only they call it; otherwise every rank of the job calls it with the
 * same list (they meet as a whole first), and a rank the list leaves out
 * gets HVD_E_INVALID. */
HVD_EXTERN int hvd_init_ranks(const int *ranks, int n);

/* What MPI does here: 1 if this libhvd was built with MPI; 1 if the
 * current job was formed through MPI (mpirun, srun --mpi=pmix,
 * hvd_init_comm()); 1 if MPI runs at MPI_THREAD_MULTIPLE.  Each 0
 * otherwise. */
HVD_EXTERN int hvd_mpi_built(void);
HVD_EXTERN int hvd_mpi_enabled(void);
HVD_EXTERN int hvd_mpi_threads_supported(void);

/* Leaves the job and frees everything hvd_init() made.  hvd_init() may be
 * called again afterwards.  Safe to call when not initialized (returns 0). */
HVD_EXTERN int hvd_shutdown(void);

/* 1 between a successful hvd_init() and hvd_shutdown(), else 0. */
HVD_EXTERN int hvd_is_initialized(void);

/* ---- Who am I -------------------------------------------------------- */
/* Each returns a value >= 0, or HVD_E_NOT_INITIALIZED before hvd_init().
 * rank/size: over the whole job.  local_*: among the processes on this
 * host.  cross_*: among the processes with this local rank (one per host). */
HVD_EXTERN int hvd_rank(void);
HVD_EXTERN int hvd_size(void);
HVD_EXTERN int hvd_local_rank(void);
HVD_EXTERN int hvd_local_size(void);
HVD_EXTERN int hvd_cross_rank(void);
HVD_EXTERN int hvd_cross_size(void);

/* ---- Collectives (blocking) ----------------------------------------- */

/* Reduces `count` elements across all ranks with `op`; every rank gets the
 * result in recvbuf.  sendbuf == recvbuf reduces in place; otherwise the
 * buffers must not overlap and sendbuf is not modified. */
HVD_EXTERN int hvd_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                             hvd_dtype dtype, hvd_op op, const char *name);

/* Copies root_rank's `count` elements of buf into buf on every rank. */
HVD_EXTERN int hvd_broadcast(void *buf, size_t count, hvd_dtype dtype, int root_rank,
                             const char *name);

/* Concatenates every rank's elements in rank order.  Each rank may send a
 * different `count`.  On success *recvbuf points to a buffer from malloc()
 * holding the sum of all counts (the caller frees it with free(); NULL when
 * the sum is 0) and, when recvcounts is not NULL, recvcounts[r] holds rank
 * r's count (recvcounts must have hvd_size() entries). */
HVD_EXTERN int hvd_allgather(const void *sendbuf, size_t count, hvd_dtype dtype,
                             void **recvbuf, size_t *recvcounts, const char *name);

/* Sends sendcounts[r] consecutive elements of sendbuf to each rank r, in
 * rank order (sendcounts has hvd_size() entries), and receives from every
 * rank.  On success *recvbuf points to a malloc()ed buffer with the
 * received elements in rank order (NULL when nothing arrived) and, when
 * recvcounts is not NULL, recvcounts[r] holds how many came from rank r. */
HVD_EXTERN int hvd_alltoall(const void *sendbuf, const size_t *sendcounts, hvd_dtype dtype,
                            void **recvbuf, size_t *recvcounts, const char *name);

/* Reduces `count` elements across ranks with `op` and leaves rank r with
 * its share of the result: the elements are split in rank order, the
 * first (count % size) ranks getting one more than the others (as Horovod
 * splits the first dimension).  recvbuf holds
 * hvd_reducescatter_count(count, hvd_rank()) elements. */
HVD_EXTERN int hvd_reducescatter(const void *sendbuf, void *recvbuf, size_t count,
                                 hvd_dtype dtype, hvd_op op, const char *name);

/* How many of `count` elements hvd_reducescatter() leaves on `rank`
 * (0 before hvd_init() or for a rank out of range). */
HVD_EXTERN size_t hvd_reducescatter_count(size_t count, int rank);

/* Returns once every rank has called it. */
HVD_EXTERN int hvd_barrier(void);

/* ---- Asynchronous collectives (the engine) ---------------------------
 *
 * Every collective can be enqueued by name from any thread and completed
 * later.  A background thread per process negotiates which named tensors
 * every rank has enqueued, checks that they agree (dtype, count, op, root),
 * fuses small allreduces into one (HOROVOD_FUSION_THRESHOLD), and runs
 * them in the same order on every rank, whatever order each rank enqueued
 * them in.  The blocking calls above are enqueue + hvd_wait().
 *
 * Buffers belong to hvd from the enqueue until the handle completes: do
 * not touch them in between.  A name may not be enqueued again while its
 * previous operation is in flight (HVD_E_INVALID).  Names match tensors
 * across ranks, so give every tensor of a step a distinct, stable name
 * ("layer3.weight.grad"); NULL names are generated per call in order
 * ("allreduce.noname.7"), which matches only if all ranks make the same
 * unnamed calls in the same order. */

/* A handle to an enqueued operation; a negative value is an HVD_E_* code
 * (the enqueue failed, hvd_last_error() says why). */
typedef int64_t hvd_handle;

/* Called when an operation completes, on the thread running hvd's cycle:
 * its background thread, or a thread of yours that waits in hvd (hvd_wait,
 * a blocking collective) and drives the cycle itself while the engine is
 * otherwise idle.  status: 0 or the HVD_E_* code; when it is negative,
 * hvd_last_error() on the callback's thread says why.  Keep it short; do not
 * call hvd functions that wait from it.  After it returns the handle is
 * released: do not wait on it. */
typedef void (*hvd_callback)(hvd_handle handle, int status, void *arg);

/* Optional settings of an enqueued collective.  Start from HVD_OPTS_INIT;
 * passing NULL means the defaults.
 *
 * struct_size comes first and says how much of the struct the caller
 * knows (HVD_OPTS_INIT sets it to sizeof(hvd_opts) as this header has
 * it), so fields can be added at the end without breaking programs built
 * before: the library reads only the fields the caller's size covers and
 * gives the rest their defaults.  A size that does not end at a field, or
 * is larger than this library's hvd_opts (a program built against a newer
 * hvd.h), fails the call with HVD_E_INVALID saying so. */
typedef struct {
  size_t struct_size;      /* sizeof(hvd_opts) as the caller was built with */
  int process_set;         /* 0: the global set; else an id from hvd_add_process_set() */
  /* allreduce/reducescatter: inputs are multiplied by prescale_factor
   * first, the result by postscale_factor (after AVERAGE's division).  On
   * integer dtypes the product is taken in double precision and converted
   * back toward zero, saturating at the dtype's range (Horovod's rule,
   * without its overflow). */
  double prescale_factor;
  double postscale_factor;
  hvd_callback callback;   /* NULL: complete with hvd_poll()/hvd_wait() */
  void *callback_arg;
  /* The tensor's shape, ndims (<= HVD_MAX_DIMS) sizes whose product is the
   * count: allreduce, reducescatter and broadcast negotiate it, and ranks
   * that pass different shapes fail with HVD_E_MISMATCH naming the tensor
   * and the shapes.  NULL / 0: the shape is [count].  Allgather and
   * alltoall: the shape of what this rank sends (count, or the sum of
   * sendcounts, elements); the ranks' first dimensions may differ, and
   * ranks whose numbers of dimensions or dimensions after the first
   * differ fail with HVD_E_MISMATCH.  NULL / 0: nothing is checked (the
   * grouped calls take none). */
  const int64_t *shape;
  int ndims;
  /* Was the struct's tail padding: an older caller's struct_size covers
   * it, so it carries nothing and is never read. */
  int reserved_;
  /* Where the buffers are: HVD_DEVICE_CPU (host memory, the default), or
   * the ordinal of the CUDA device whose memory every buffer of the call
   * is in.  The ranks negotiate host against device memory (not the
   * ordinal: each rank has its own GPU): a rank with host memory against
   * one with device memory fails with HVD_E_MISMATCH naming the tensor.
   * Device tensors are staged through host memory (docs/gpu.md); an
   * allgather's or alltoall's *recvbuf is then device memory hvd
   * allocated with cudaMalloc on that device: free it with cudaFree.
   * Adasum on device memory fails with HVD_E_UNSUPPORTED (not yet), as
   * does HOROVOD_GPU_OPERATIONS=NCCL. */
  int device;
  /* With device memory: the CUDA stream (a cudaStream_t) whose work
   * queued so far produces the buffers; NULL is CUDA's legacy default
   * stream (where cudaMemcpy runs).  hvd records an event on it at the
   * call and its own copies wait for that event on the device: neither
   * the caller nor the stream is blocked.  Ignored for host memory. */
  void *stream;
} hvd_opts;
#define HVD_DEVICE_CPU (-1)
#define HVD_OPTS_INIT \
  {sizeof(hvd_opts), 0, 1.0, 1.0, NULL, NULL, NULL, 0, 0, HVD_DEVICE_CPU, NULL}
#define HVD_MAX_DIMS 32

HVD_EXTERN hvd_handle hvd_allreduce_async(const void *sendbuf, void *recvbuf, size_t count,
                                          hvd_dtype dtype, hvd_op op, const char *name);
HVD_EXTERN hvd_handle hvd_broadcast_async(void *buf, size_t count, hvd_dtype dtype,
                                          int root_rank, const char *name);

/* The same with options (process set, scale factors, callback). */
HVD_EXTERN hvd_handle hvd_allreduce_async_opts(const void *sendbuf, void *recvbuf, size_t count,
                                               hvd_dtype dtype, hvd_op op, const char *name,
                                               const hvd_opts *opts);
HVD_EXTERN hvd_handle hvd_broadcast_async_opts(void *buf, size_t count, hvd_dtype dtype,
                                               int root_rank, const char *name,
                                               const hvd_opts *opts);
/* *recvbuf and recvcounts are filled when the handle completes; an enqueue
 * that fails leaves them as they were. */
HVD_EXTERN hvd_handle hvd_allgather_async(const void *sendbuf, size_t count, hvd_dtype dtype,
                                          void **recvbuf, size_t *recvcounts, const char *name,
                                          const hvd_opts *opts);
HVD_EXTERN hvd_handle hvd_alltoall_async(const void *sendbuf, const size_t *sendcounts,
                                         hvd_dtype dtype, void **recvbuf, size_t *recvcounts,
                                         const char *name, const hvd_opts *opts);
HVD_EXTERN hvd_handle hvd_reducescatter_async(const void *sendbuf, void *recvbuf, size_t count,
                                              hvd_dtype dtype, hvd_op op, const char *name,
                                              const hvd_opts *opts);

/* Grouped allreduce: n tensors reduced as one unit (they are negotiated
 * together and fused into one collective, whatever the fusion threshold),
 * like Horovod's grouped_allreduce.  Tensor i is named "<name>.<i>".  One
 * handle completes when all are done. */
HVD_EXTERN hvd_handle hvd_grouped_allreduce_async(const void *const *sendbufs,
                                                  void *const *recvbufs, const size_t *counts,
                                                  int n, hvd_dtype dtype, hvd_op op,
                                                  const char *name, const hvd_opts *opts);
HVD_EXTERN int hvd_grouped_allreduce(const void *const *sendbufs, void *const *recvbufs,
                                     const size_t *counts, int n, hvd_dtype dtype, hvd_op op,
                                     const char *name);

/* Grouped allgather and reducescatter (Horovod's grouped_allgather and
 * grouped_reducescatter): n tensors negotiated as one unit and run
 * together, tensor i named "<name>.<i>".  Allgather: tensor i's result is
 * in recvbufs[i] (malloc()ed, NULL when empty) and, when recvcounts is not
 * NULL, rank r's count of it in recvcounts[i * hvd_size() + r] (of the
 * process set's size with opts->process_set).  Reducescatter: recvbufs[i]
 * holds hvd_reducescatter_count(counts[i], rank) elements.  opts->shape
 * does not apply to groups.  One handle completes when all are done. */
HVD_EXTERN hvd_handle hvd_grouped_allgather_async(const void *const *sendbufs,
                                                  const size_t *counts, int n, hvd_dtype dtype,
                                                  void **recvbufs, size_t *recvcounts,
                                                  const char *name, const hvd_opts *opts);
HVD_EXTERN hvd_handle hvd_grouped_reducescatter_async(const void *const *sendbufs,
                                                      void *const *recvbufs,
                                                      const size_t *counts, int n,
                                                      hvd_dtype dtype, hvd_op op,
                                                      const char *name, const hvd_opts *opts);

/* 1 done, 0 still running, negative: the operation failed (the handle is
 * then released, as by hvd_wait).  A done handle must still be waited. */
HVD_EXTERN int hvd_poll(hvd_handle h);

/* Blocks until the operation completes; returns 0 or its error code (the
 * message via hvd_last_error()) and releases the handle. */
HVD_EXTERN int hvd_wait(hvd_handle h);

/* Horovod's join: this rank has no more data.  Until every rank has
 * joined, the other ranks' allreduces (and barriers) go on with this rank
 * taking part: it contributes zeros.  A broadcast, allgather, alltoall or
 * reducescatter while a rank of its set has joined fails on every rank that
 * called it (HVD_E_INVALID naming the joined ranks, and Horovod's words:
 * "Broadcast is not supported with Join at this time"), as in Horovod; the
 * job goes on.  Returns, on every rank once all have joined, the rank that
 * joined last. */
HVD_EXTERN int hvd_join(void);

/* ---- Timeline ------------------------------------------------------------
 * Horovod's start_timeline/stop_timeline: record a Chrome-trace timeline
 * for part of a run.  Called on every rank; path has HOROVOD_TIMELINE's
 * forms: a plain path is rank 0's file, a path with "%r" or a directory
 * (DIR/rank.N.json) gives every rank its own, each bounded by
 * HOROVOD_TIMELINE_MAX_MB.  Starting replaces a timeline already being written
 * (which is closed, valid JSON); stopping without one is a no-op.  0 or an
 * HVD_E_* code (HVD_E_SYSTEM naming the path when it cannot be created). */
HVD_EXTERN int hvd_start_timeline(const char *path, int mark_cycles);
HVD_EXTERN int hvd_stop_timeline(void);

/* ---- Process sets ------------------------------------------------------
 * Collectives over a subset of ranks, as in Horovod.  Creating and removing
 * a set is collective: every rank calls it with the same ranks, in the same
 * order.  Collectives on disjoint sets run concurrently.  A rank outside a
 * set that calls a collective on it gets HVD_E_INVALID. */

/* Returns the new set's id (> 0), or an HVD_E_* code.  ranks: n distinct
 * ranks of the job, in any order (the set's ranks are them sorted). */
HVD_EXTERN int hvd_add_process_set(const int *ranks, int n);
HVD_EXTERN int hvd_remove_process_set(int process_set);
/* This rank's rank in the set, or HVD_E_INVALID if it is not a member. */
HVD_EXTERN int hvd_process_set_rank(int process_set);
HVD_EXTERN int hvd_process_set_size(int process_set);
/* 1 if this rank belongs to the set, 0 if not, or an HVD_E_* code. */
HVD_EXTERN int hvd_process_set_included(int process_set);

/* ---- Elastic training ----------------------------------------------------
 * Under `hvdrun --min-np MIN --max-np MAX --host-discovery-script S`,
 * workers may be lost or added while the job goes on, as in Horovod's
 * elastic mode.  The program keeps what it must not lose in an elastic
 * state: named buffers (and/or callbacks for state it keeps elsewhere).
 * It commits the state every few steps; when a worker is lost, every
 * survivor's collective fails (HVD_E_PEER_LOST and the like), the state
 * goes back to the last commit, the survivors and any new workers form a
 * new job (new ranks and sizes; the process sets the program added are
 * added again, over the ranks that still exist), rank 0's state is sent to
 * everyone, and training resumes.  When hosts are added, the workers learn
 * it at a commit (HVD_E_HOSTS_UPDATED, on every rank at the same commit)
 * and the new workers join there.  hvd_elastic_run() does all of that
 * around a training function:
 *
 *   static int train(hvd_elastic_state *st, void *arg) {
 *     for (; step < steps; step++) {
 *       int rc = one_step();                       // collectives: may fail
 *       if (rc == 0 && step % 10 == 0) rc = hvd_elastic_commit(st);
 *       if (rc != 0) return rc;                    // hvd_elastic_run recovers
 *     }
 *     return 0;
 *   }
 *   hvd_elastic_state *st = hvd_elastic_state_new();
 *   hvd_elastic_state_add(st, "params", params, nbytes);
 *   hvd_elastic_state_add(st, "step", &step, sizeof step);
 *   hvd_init();
 *   int rc = hvd_elastic_run(st, train, NULL);
 *
 * Outside an elastic job everything works the same, without changes of
 * membership.  Handles enqueued before a change of membership fail with
 * HVD_E_ABORTED saying so.  The state is not thread-safe: one thread uses
 * it. */
typedef struct hvd_elastic_state hvd_elastic_state;

/* Callbacks for state the program keeps itself (e.g. an optimizer's).
 * save: copy it aside (at commit); restore: put the copy back; sync: make
 * every rank's equal to rank 0's (collectives; return 0 or an HVD_E_*
 * code).  Any may be NULL. */
typedef struct {
  int (*save)(void *arg);
  int (*restore)(void *arg);
  int (*sync)(void *arg);
} hvd_elastic_hooks;

/* A new, empty state; NULL when out of memory. */
HVD_EXTERN hvd_elastic_state *hvd_elastic_state_new(void);
HVD_EXTERN void hvd_elastic_state_free(hvd_elastic_state *st);

/* Adds `bytes` bytes at buf, saved at every commit, restored after a
 * failure and sent from rank 0 to every rank by a sync.  The name
 * (distinct, at most 200 bytes) must be the same on every rank, and so
 * must bytes.  The buffer must stay valid while st is used. */
HVD_EXTERN int hvd_elastic_state_add(hvd_elastic_state *st, const char *name, void *buf,
                                     size_t bytes);
/* Adds callbacks for state kept elsewhere; called in the order added,
 * after the buffers. */
HVD_EXTERN int hvd_elastic_state_add_hooks(hvd_elastic_state *st, const hvd_elastic_hooks *hooks,
                                           void *arg);
/* fn(arg) runs after every change of membership, once the new job is
 * formed and before the state is synced (e.g. to scale the learning rate
 * by the new hvd_size()); return 0 or an HVD_E_* code. */
HVD_EXTERN int hvd_elastic_on_reset(hvd_elastic_state *st, int (*fn)(void *arg), void *arg);

/* Saves the state (the buffers and the save hooks), then checks for
 * host updates: HVD_E_HOSTS_UPDATED on every rank when hosts were added or
 * removed since the last check (the state was saved first).  Called by
 * every rank at the same step. */
HVD_EXTERN int hvd_elastic_commit(hvd_elastic_state *st);
/* Only the check of hvd_elastic_commit(). */
HVD_EXTERN int hvd_elastic_check_host_updates(hvd_elastic_state *st);
/* Puts back what the last commit saved (the state as added, before any
 * commit). */
HVD_EXTERN int hvd_elastic_restore(hvd_elastic_state *st);
/* Makes every rank's state rank 0's, and saves it.  When every rank
 * already holds the same commit (a lost worker, no new ones), nothing is
 * sent: recovery does not grow with the model. */
HVD_EXTERN int hvd_elastic_sync(hvd_elastic_state *st);

/* Runs train(st, arg) until it returns 0 (then 0) or fails with an error
 * that a new job cannot mend (then that error).  Before each call the
 * state is synced.  When train fails because a worker was lost (or the
 * job's communicator broke: HVD_E_PEER_LOST, HVD_E_TIMEOUT,
 * HVD_E_ABORTED, HVD_E_PROTOCOL), the state is restored to the last
 * commit; on HVD_E_HOSTS_UPDATED it is kept.  Then hvd leaves the job and
 * joins the next one (hvd_shutdown(), hvd_init()), runs the reset
 * callbacks and calls train again.  Needs hvd_init() first.  When hvdrun
 * ends the job instead (fewer than --min-np workers for longer than
 * --elastic-timeout, more than --reset-limit resets) the new hvd_init()
 * fails and so does this, with hvdrun's reason. */
HVD_EXTERN int hvd_elastic_run(hvd_elastic_state *st,
                               int (*train)(hvd_elastic_state *st, void *arg), void *arg);

/* The two steps of hvd_elastic_run that need the library, for bindings
 * that keep their state themselves (hvd.torch's elastic module).
 * hvd_elastic_reset: leaves the job and joins the next one (again while a
 * worker is lost in the middle of it), adding the program's process sets
 * again with their ids over those of their ranks that still exist; fails
 * when hvdrun ended the job.  hvd_elastic_host_updates: what hvdrun has
 * announced to this worker, without waiting: *stamp grows with every
 * announcement (0: none), *added / *removed say whether hosts were added
 * or removed since the job was formed.  Each rank sees announcements at
 * its own time: agree on them with a collective (as
 * hvd_elastic_check_host_updates does with an allreduce of the maximum). */
HVD_EXTERN int hvd_elastic_reset(void);
HVD_EXTERN int hvd_elastic_host_updates(uint64_t *stamp, int *added, int *removed);

/* ---- Errors and helpers ---------------------------------------------- */

/* The message of this thread's last failed call ("" if none). */
HVD_EXTERN const char *hvd_last_error(void);

/* A short description of an HVD_E_* code, and its name ("HVD_E_TIMEOUT"). */
HVD_EXTERN const char *hvd_strerror(int err);
HVD_EXTERN const char *hvd_err_name(int err);

/* Bytes per element of dtype, 0 for an unknown dtype. */
HVD_EXTERN size_t hvd_dtype_size(hvd_dtype dtype);

/* "float32", "bfloat16", ...; "unknown" for an unknown dtype. */
HVD_EXTERN const char *hvd_dtype_name(hvd_dtype dtype);

/* "sum", "average", ...; "unknown" for an unknown op. */
HVD_EXTERN const char *hvd_op_name(hvd_op op);

/* Converts count elements from float32 to float16 or bfloat16 or back,
 * with the rounding hvd's reductions use (to nearest even; NaN stays NaN),
 * or copies them when the dtypes are equal: what gradient compression
 * needs.  Other pairs give HVD_E_UNSUPPORTED; src and dst must not overlap. */
HVD_EXTERN int hvd_convert(const void *src, hvd_dtype src_dtype, void *dst,
                           hvd_dtype dst_dtype, size_t count);

#ifdef __cplusplus
}
#endif
#endif /* HVD_H */
