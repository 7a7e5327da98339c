/*
 * device.c -- tensors in device memory (device.h): which kinds run there
 * and which path each takes (negotiation's side), and the path a
 * response runs on, chosen by the path every rank negotiated with its
 * requests: staged through pinned host memory (device_staged.c) or NCCL
 * (device_nccl.c), each a small table of functions ({check, execute,
 * close}), as a transport is.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "env.h"
#include "device.h"
#include "engine_int.h"

/* ---- which device tensors run (negotiation) ---- */

/* The knob that chooses the path for this kind, Horovod's: the allreduce
 * one first, then the one for every operation. */
static const char *path_knob(int type, const char **value) {
  const char *ar = hvd__param_raw(HVD_P_GPU_ALLREDUCE);
  if (type == HVD_REQ_ALLREDUCE && ar) return *value = ar, "HOROVOD_GPU_ALLREDUCE";
  *value = hvd__param_raw(HVD_P_GPU_OPERATIONS);
  return "HOROVOD_GPU_OPERATIONS";
}

int hvd__device_check(int type, int reduce_op, int all_submitted, const char *name, char *why,
                      size_t cap) {
  const char *kind = hvd__req_type_name(type), *value;
  const char *knob = path_knob(type, &value);
  if (value && value[0] && strcasecmp(value, "NCCL") && strcasecmp(value, "MPI") &&
      strcasecmp(value, "GLOO")) {
    snprintf(why, cap, "%s '%s': %s='%s' is not NCCL, MPI or GLOO", kind, name, knob, value);
    return HVD_E_ENV;
  }
  const char *missing = NULL;
  if (!hvd__request_moves_tensors(type)) missing = kind;
  else if (reduce_op == HVD_ADASUM && type == HVD_REQ_ALLREDUCE) missing = "Adasum";
  else if (!all_submitted) missing = "joined ranks standing in";
  if (!missing) return 0;
  snprintf(why, cap, "%s '%s': device memory (hvd_opts.device) is not supported yet for %s "
           "(docs/gpu.md)", kind, name, missing);
  return HVD_E_UNSUPPORTED;
}

/* HOROVOD_GPU_OPERATIONS / HOROVOD_GPU_ALLREDUCE=NCCL: device_nccl.c. */
int hvd__device_path(int type) {
  const char *value;
  path_knob(type, &value);
  return value && strcasecmp(value, "NCCL") == 0 ? HVD_MEM_NCCL : HVD_MEM_STAGED;
}


/* ---- running ---- */

/* The table of the path a response's requests negotiated (request.h's
 * HVD_MEM_*, checked on decoding), or NULL. */
static const hvd__device_ops *path_of(int on_device) {
  switch (on_device) {
    case HVD_MEM_STAGED: return &hvd__device_staged;
    case HVD_MEM_NCCL: return &hvd__device_nccl;
    default: return NULL;
  }
}

int hvd__device_execute(hvd__device *d, response *r, hvd_comm *c, hvd_timeline *tl,
                        int *fatal) {
  const hvd__device_ops *path = path_of(r->items[0]->req.on_device);
  *fatal = 0;
  if (!path)
    return hvd__err(HVD_E_PROTOCOL, "device tensor '%s' on path %d", r->items[0]->req.name,
                    r->items[0]->req.on_device);
  if (path->check) HVD__CHECK(path->check(r, c->size));
  return path->execute(d, r, c, tl, fatal);
}

void hvd__device_close(hvd__device *d, int broken) {
  hvd__device_staged.close(d, broken);
  hvd__device_nccl.close(d, broken);
}
