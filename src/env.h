/*
 * env.h -- every environment variable hvd reads, in one table.
 *
 * The names, defaults and meanings are Horovod's wherever Horovod has the
 * knob, so existing job scripts keep working.  The table is the single
 * source: the code reads values through it, and a test checks that
 * docs/environment.md documents every entry with its default.
 *
 * Values are validated when read: a malformed or out-of-range value is an
 * HVD_E_ENV error that names the variable, its value and what was expected,
 * never a silent fallback to the default.
 */
#ifndef HVD_ENV_H
#define HVD_ENV_H

#include "common.h"

/* X(id, name, kind, default, min, max, meaning)
 * kind: INT (decimal integer within [min, max]), FLOAT (decimal number
 * within [min, max]), BOOL (0/1, true/false,
 * yes/no, on/off), LEVEL (a log level name), STR (any text), CORES
 * (decimal integers within [min, max] separated by commas), JOB (set by
 * the launcher to describe the job; read by the bootstrap). */
#define HVD_PARAMS(X) \
  X(GLOO_TIMEOUT_SECONDS, "HOROVOD_GLOO_TIMEOUT_SECONDS", INT, "30", 1, 86400, \
    "Seconds a collective waits for a peer that makes no progress before it fails " \
    "with HVD_E_TIMEOUT naming that peer") \
  X(START_TIMEOUT, "HOROVOD_START_TIMEOUT", INT, "30", 1, 86400, \
    "Seconds hvd_init() waits for the rendezvous and for every peer to connect") \
  X(AGENT_TIMEOUT_SECONDS, "HOROVOD_AGENT_TIMEOUT_SECONDS", INT, "4", 2, 86400, \
    "Seconds hvdrun and its agent on a host (which ping each other every second) may " \
    "hear nothing from each other before each gives the other up and the host's ranks " \
    "are ended; raise it where hundreds of ranks share few cores and starve ssh") \
  X(CYCLE_TIME, "HOROVOD_CYCLE_TIME", FLOAT, "1", 0, 10000, \
    "Milliseconds between negotiation cycles of the engine (fractions allowed)") \
  X(FUSION_THRESHOLD, "HOROVOD_FUSION_THRESHOLD", INT, "134217728", 0, 1L << 40, \
    "Bytes of allreduces fused into one collective; 0 disables fusion") \
  X(CACHE_CAPACITY, "HOROVOD_CACHE_CAPACITY", INT, "1024", 0, 1 << 20, \
    "Entries of the response cache (tensors negotiated with one bit); 0 disables it") \
  X(FAST_PATH_RIDER_BYTES, "HOROVOD_FAST_PATH_RIDER_BYTES", INT, "4096", 0, 1 << 20, \
    "Largest cached allreduce whose values travel with the fast path's cache bits " \
    "(one round instead of two for a small tensor called in a loop); 0 disables it") \
  X(AUTOTUNE, "HOROVOD_AUTOTUNE", BOOL, "0", 0, 1, \
    "Tune the fusion threshold, cycle time, response cache and hierarchical allreduce " \
    "while the job runs, by Bayesian optimisation of the bytes per second the engine " \
    "achieves (rank 0 decides; every rank applies its choice in the same cycle); the job's " \
    "own settings are where the search starts") \
  X(AUTOTUNE_LOG, "HOROVOD_AUTOTUNE_LOG", STR, "", 0, 0, \
    "Path of the CSV rank 0 writes with every autotune sample, its settings and its score") \
  X(AUTOTUNE_WARMUP_SAMPLES, "HOROVOD_AUTOTUNE_WARMUP_SAMPLES", INT, "3", 0, 10000, \
    "Autotune samples discarded at the start") \
  X(AUTOTUNE_STEPS_PER_SAMPLE, "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", INT, "10", 1, 1000, \
    "Training steps in one autotune sample (a step ends when its first tensor runs again)") \
  X(AUTOTUNE_BAYES_OPT_MAX_SAMPLES, "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", INT, "20", 1, 64, \
    "Samples of the Bayesian optimisation of fusion threshold and cycle time") \
  X(AUTOTUNE_GAUSSIAN_PROCESS_NOISE, "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", FLOAT, "0.8", 0, \
    100, \
    "Noise of the autotuner's Gaussian process (added to its kernel's diagonal, " \
    "scores standardised): larger trusts single samples less") \
  X(AUTOTUNE_RETUNE_DROP, "HOROVOD_AUTOTUNE_RETUNE_DROP", FLOAT, "0.25", 0, 1, \
    "After settling, three samples in a row this share below the settled throughput start " \
    "tuning again (the workload changed); 1: never") \
  X(ALLREDUCE_ALGORITHM, "HOROVOD_ALLREDUCE_ALGORITHM", STR, "auto", 0, 0, \
    "Allreduce algorithm: auto (on one host the shm-window allreduce; over TCP by a cost " \
    "model: recursive doubling for small tensors, Rabenseifner or the ring for large " \
    "ones), ring, recursive_doubling, rabenseifner or shm; rank 0's setting applies to " \
    "every rank") \
  X(HIERARCHICAL_ALLREDUCE, "HOROVOD_HIERARCHICAL_ALLREDUCE", BOOL, "0", 0, 1, \
    "Allreduce in three steps: reduce-scatter within each host, allreduce across hosts " \
    "among the ranks of one local rank, allgather within each host; used when the job " \
    "spans several hosts of the same size; rank 0's setting applies to every rank") \
  X(HIERARCHICAL_ALLGATHER, "HOROVOD_HIERARCHICAL_ALLGATHER", BOOL, "0", 0, 1, \
    "Allgather in three steps: within each host, across hosts among the first rank of " \
    "each, then a broadcast within each host, so that each host's data crosses the " \
    "network once; used when the job spans several hosts of the same size; rank 0's " \
    "setting applies to every rank") \
  X(THREAD_AFFINITY, "HOROVOD_THREAD_AFFINITY", CORES, "", 0, 1023, \
    "CPU numbers separated by commas, one per rank of a host: local rank i pins its " \
    "engine thread to the i-th (with fewer numbers than ranks on the host, a warning, " \
    "and no thread is pinned); unset: not pinned") \
  X(CPU_OPERATIONS, "HOROVOD_CPU_OPERATIONS", STR, "gloo", 0, 0, \
    "Who runs the collectives: gloo (hvd's own algorithms and transports) or mpi (MPI's " \
    "collectives, for a job formed through MPI; hvd's engine still negotiates and fuses)") \
  X(GPU_OPERATIONS, "HOROVOD_GPU_OPERATIONS", STR, "", 0, 0, \
    "How collectives on device (CUDA) memory run: MPI or GLOO (or unset): staged through " \
    "pinned host memory; NCCL: NCCL's collectives on the GPU (allreduce, broadcast, " \
    "reducescatter)") \
  X(GPU_ALLREDUCE, "HOROVOD_GPU_ALLREDUCE", STR, "", 0, 0, \
    "HOROVOD_GPU_OPERATIONS for allreduces alone, where set") \
  X(SHM_DISABLE, "HOROVOD_SHM_DISABLE", BOOL, "0", 0, 1, \
    "Use TCP between the ranks of a host too (by default they use shared memory among " \
    "themselves and TCP to other hosts); set on any rank of a host, it applies to that " \
    "host") \
  X(SHM_SINGLE_COPY, "HOROVOD_SHM_SINGLE_COPY", BOOL, "1", 0, 1, \
    "Let the ranks of a host read each other's memory (process_vm_readv) so that large " \
    "allreduces copy each byte once, where the kernel allows it (probed at start; when it " \
    "does not, said once at INFO level); 0 on any rank of a host: always copy through " \
    "shared windows") \
  X(SHM_SINGLE_COPY_MIN_BYTES, "HOROVOD_SHM_SINGLE_COPY_MIN_BYTES", INT, "0", 0, 1L << 50, \
    "Smallest allreduce that copies once when it can; 0: the measured default, which on " \
    "the machine it was measured on is never (docs/algorithms.md); the first rank of each " \
    "host decides for it") \
  X(STAGING_CHUNK_BYTES, "HOROVOD_STAGING_CHUNK_BYTES", INT, "4194304", 4096, 1L << 30, \
    "Chunk of the staged path for device (CUDA) tensors: each chunk is copied to pinned " \
    "host memory, reduced there while the next ones copy, and copied back (3 in flight)") \
  X(GLOO_IFACE, "HOROVOD_GLOO_IFACE", STR, "", 0, 0, \
    "Network interface the rank listens on for its peers (a comma-separated list: the " \
    "first that exists on the rank's host); unset: the one whose route reaches hvdrun's " \
    "rendezvous") \
  X(LIVENESS_TIMEOUT_SECONDS, "HOROVOD_LIVENESS_TIMEOUT_SECONDS", INT, "5", 0, 86400, \
    "Seconds a rank may show no sign of life (its engine's heartbeat, not the caller's " \
    "progress) before the ranks watching it give up on it, naming it and its host; 0: " \
    "only HOROVOD_GLOO_TIMEOUT_SECONDS") \
  X(DESYNC_TIMEOUT_SECONDS, "HOROVOD_DESYNC_TIMEOUT_SECONDS", INT, "5", 0, 86400, \
    "Seconds a certain deadlock (every rank concerned blocked in hvd on tensors that " \
    "blocked ranks never submitted) may last before every rank's waits fail with " \
    "HVD_E_DESYNC; 0: never") \
  X(STALL_CHECK_DISABLE, "HOROVOD_STALL_CHECK_DISABLE", BOOL, "0", 0, 1, \
    "Turn off the stall inspector (warnings and shutdown)") \
  X(STALL_CHECK_TIME_SECONDS, "HOROVOD_STALL_CHECK_TIME_SECONDS", INT, "60", 1, 86400, \
    "Seconds a tensor may wait for some ranks before rank 0 warns, naming them") \
  X(STALL_SHUTDOWN_TIME_SECONDS, "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", INT, "0", 0, 86400, \
    "Seconds of stall after which every rank fails with an error; 0: never") \
  X(TIMELINE, "HOROVOD_TIMELINE", STR, "", 0, 0, \
    "Path of the Chrome-trace timeline rank 0 writes; with %r in it, every rank writes " \
    "its own file (%r replaced by the rank); a directory (ending in / or existing): " \
    "every rank writes DIR/rank.N.json; unset: no timeline") \
  X(TIMELINE_MAX_MB, "HOROVOD_TIMELINE_MAX_MB", INT, "1024", 1, 1L << 20, \
    "Bound of each timeline file in MiB: at the bound the file ends (complete JSON, " \
    "the run's first part) and that rank stops tracing") \
  X(TIMELINE_MARK_CYCLES, "HOROVOD_TIMELINE_MARK_CYCLES", BOOL, "0", 0, 1, \
    "Mark every negotiation cycle in the timeline") \
  X(LOG_LEVEL, "HOROVOD_LOG_LEVEL", LEVEL, "WARNING", 0, 0, \
    "Least severe message printed: TRACE, DEBUG, INFO, WARNING, ERROR or FATAL") \
  X(LOG_HIDE_TIME, "HOROVOD_LOG_HIDE_TIME", BOOL, "0", 0, 1, \
    "Leave the timestamp out of log lines") \
  X(ELASTIC_TIMEOUT, "HOROVOD_ELASTIC_TIMEOUT", INT, "600", 0, 604800, \
    "Seconds hvdrun's elastic driver waits for --min-np workers before it ends the job " \
    "(hvdrun's --elastic-timeout)") \
  X(RANK, "HOROVOD_RANK", JOB, "0", 0, 0, "This process's rank in the job") \
  X(SIZE, "HOROVOD_SIZE", JOB, "1", 0, 0, "Number of processes in the job") \
  X(LOCAL_RANK, "HOROVOD_LOCAL_RANK", JOB, "0", 0, 0, "Rank among the processes on this host") \
  X(LOCAL_SIZE, "HOROVOD_LOCAL_SIZE", JOB, "1", 0, 0, "Number of processes on this host") \
  X(CROSS_RANK, "HOROVOD_CROSS_RANK", JOB, "0", 0, 0, \
    "Rank among the processes with this local rank (the host's index)") \
  X(CROSS_SIZE, "HOROVOD_CROSS_SIZE", JOB, "1", 0, 0, \
    "Number of processes with this local rank (hosts)") \
  X(HOSTNAME, "HOROVOD_HOSTNAME", JOB, "", 0, 0, "Name of this rank's host") \
  X(RDZV_ADDR, "HOROVOD_GLOO_RENDEZVOUS_ADDR", JOB, "", 0, 0, \
    "Address of hvdrun's rendezvous service; for a job rank 0 hosts (srun, mpirun " \
    "without MPI), rank 0's host") \
  X(RDZV_PORT, "HOROVOD_GLOO_RENDEZVOUS_PORT", JOB, "", 0, 0, \
    "Port of hvdrun's rendezvous service; for a job rank 0 hosts, its port (default: " \
    "derived from the SLURM job and step, or from the secret)") \
  X(SECRET_KEY, "_HOROVOD_SECRET_KEY", JOB, "", 0, 0, \
    "The job's secret (base64, 32 bytes) that authenticates every connection; for srun " \
    "without hvdrun, export one (hvdrun --make-secret)") \
  X(ELASTIC, "HOROVOD_ELASTIC", JOB, "0", 0, 0, \
    "1 in the workers of an elastic job: hvdrun places them in each job") \
  X(ELASTIC_WORKER_ID, "HOROVOD_ELASTIC_WORKER_ID", JOB, "", 0, 0, \
    "An elastic worker's id at hvdrun's rendezvous (its rank changes from job to job)")

typedef enum {
#define HVD__PARAM_ENUM(id, name, kind, def, min, max, doc) HVD_P_##id,
  HVD_PARAMS(HVD__PARAM_ENUM)
#undef HVD__PARAM_ENUM
      HVD_P__COUNT
} hvd_param_id;

typedef enum {
  HVD_PK_INT,
  HVD_PK_FLOAT,
  HVD_PK_BOOL,
  HVD_PK_LEVEL,
  HVD_PK_STR,
  HVD_PK_CORES,
  HVD_PK_JOB
} hvd_param_kind;

typedef struct {
  const char *name;
  hvd_param_kind kind;
  const char *def;
  long min, max;
  const char *doc;
} hvd_param;

extern const hvd_param hvd__params[HVD_P__COUNT];

/* The variable's text, or NULL when unset or empty. */
const char *hvd__param_raw(hvd_param_id id);

/* Typed reads: the value, or the default when unset; HVD_E_ENV when set
 * but invalid for its kind and range. */
int hvd__param_int(hvd_param_id id, long *out);
int hvd__param_double(hvd_param_id id, double *out);
int hvd__param_bool(hvd_param_id id, int *out);
int hvd__param_level(hvd_param_id id, int *out);

/* A CORES variable's list: *count its numbers and *core the one at
 * `index` (-1 when the list is shorter); *count 0 when unset.  HVD_E_ENV
 * naming the variable when the text is not such a list. */
int hvd__param_cores(hvd_param_id id, int index, int *core, int *count);

/* Checks `text` as a list of CORES variable `id` (its range): the same
 * outcomes as hvd__param_cores, for a value not (yet) in the environment. */
int hvd__parse_cores(hvd_param_id id, const char *text, int index, int *core, int *count);

/* "TRACE" .. "FATAL" for HVD_LOG_TRACE .. HVD_LOG_FATAL. */
const char *hvd__level_name(int level);

/* Parses a decimal integer in [min, max] for variable `name` (used by the
 * typed reads and by the bootstrap for the JOB variables). */
int hvd__parse_long(const char *name, const char *text, long min, long max, long *out);

#endif /* HVD_ENV_H */
