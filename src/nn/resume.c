/*
 * resume.c -- checkpoints in a distributed job, Horovod's way: only rank 0
 * writes (the ranks hold the same parameters, and many writers to one file
 * would tear it), and on restart rank 0 reads and broadcasts, so the other
 * ranks need no access to the file (no shared file system assumed).
 *
 * Rank 0's outcome is broadcast too, so every rank returns the same code
 * and a job never half-continues after a failed save or a bad file.
 */
#include <unistd.h>

#include "nn_int.h"

/* Shares rank 0's status with every rank; a rank that gets a failure it
 * did not see itself says so. */
static int share_status(int status, const char *what, const char *path) {
  int32_t s = status;
  int rc = hvd_broadcast(&s, 1, HVD_INT32, 0, NULL);
  if (rc < 0) return hvd_nn__err_hvd(rc, "%s %s: sharing rank 0's outcome", what, path);
  if (s < 0 && status >= 0)
    return hvd_nn__err(s, "%s %s failed on rank 0 (%s)", what, path, hvd_err_name(s));
  return s;
}

int hvd_nn_checkpoint_save_rank0(const char *path, hvd_nn_model *m, hvd_nn_optimizer *opt,
                                 const hvd_nn_ckpt_meta *meta) {
  int status = 0;
  if (hvd_rank() == 0) status = hvd_nn_checkpoint_save(path, m, opt, meta);
  return share_status(status, "checkpoint save", path);
}

static int broadcast_meta(hvd_nn_ckpt_meta *meta) {
  int64_t v[3] = {meta->epoch, meta->step, (int64_t)meta->seed};
  int rc = hvd_broadcast(v, 3, HVD_INT64, 0, NULL);
  if (rc < 0) return hvd_nn__err_hvd(rc, "checkpoint resume: broadcast of the loop state");
  meta->epoch = v[0];
  meta->step = v[1];
  meta->seed = (uint64_t)v[2];
  return 0;
}

int hvd_nn_checkpoint_resume(const char *path, hvd_nn_model *m, hvd_nn_optimizer *opt,
                             hvd_nn_ckpt_meta *meta) {
  if (!path || !m || !meta)
    return hvd_nn__err(HVD_E_INVALID, "checkpoint resume: NULL path, model or meta");
  /* 1: resumed, 0: no checkpoint yet, < 0: rank 0 could not read it
   * (rank 0 keeps the loader's message, the others get share_status's). */
  int status = 0;
  if (hvd_rank() == 0 && access(path, F_OK) == 0) {
    int rc = hvd_nn_checkpoint_load(path, m, opt, meta);
    status = rc < 0 ? rc : 1;
  }
  int shared = share_status(status, "checkpoint resume from", path);
  if (shared <= 0) return shared;
  HVD_NN__CHECK(hvd_nn_broadcast_parameters(m, 0));
  if (opt) HVD_NN__CHECK(hvd_nn_broadcast_optimizer_state(opt, 0));
  HVD_NN__CHECK(broadcast_meta(meta));
  return 1;
}
