/*
 * check_build.c -- hvdrun --check-build.
 *
 * horovodrun --check-build lists the frameworks, controllers and tensor
 * operations a Horovod build has, each "[X]" or "[ ]"; scripts and people
 * read that layout, so hvdrun prints the same lines in the same order.
 * Where hvd has no counterpart the answer is a plain no: DDL and CCL.
 * Keras (hvd.keras over Keras 3) and JAX (hvd.jax), which horovodrun does
 * not list, follow the frameworks it has.  Gloo is marked: hvd's own controller (the
 * rendezvous and the coordinator-free negotiation) and its TCP and
 * shared-memory collectives stand where Gloo stands, configured by the
 * same HOROVOD_GLOO_* variables.  TensorFlow, PyTorch, MXNet, Keras, MPI,
 * NCCL and CUDA come from the build's generated hvd_build_config.h: such a build
 * runs collectives on device tensors (the engine's staged and NCCL paths,
 * docs/gpu.md).  CUDA has no line in
 * horovodrun's layout: it gets a section of its own after horovodrun's, so
 * that readers of those lines find them unchanged; so does what the MPI
 * line means for a job under plain mpirun (with MPI, the job forms
 * through it; without, its ranks need a shared _HOROVOD_SECRET_KEY).
 */
#include "check_build.h"

#include "hvd.h"
#include "hvd_build_config.h"

static void line(FILE *out, int have, const char *what) {
  fprintf(out, "    [%c] %s\n", have ? 'X' : ' ', what);
}

void check_build_print(FILE *out) {
  fprintf(out, "hvd v%s:\n\nAvailable Frameworks:\n", HVD_VERSION_STRING);
  line(out, HVD_BUILT_TENSORFLOW, "TensorFlow");
  line(out, HVD_BUILT_TORCH, "PyTorch");
  line(out, HVD_BUILT_MXNET, "MXNet");
  line(out, HVD_BUILT_KERAS, "Keras");
  line(out, HVD_BUILT_JAX, "JAX");
  fprintf(out, "\nAvailable Controllers:\n");
  line(out, HVD_BUILT_MPI, "MPI");
  line(out, 1, "Gloo");
  fprintf(out, "\nAvailable Tensor Operations:\n");
  line(out, HVD_BUILT_NCCL, "NCCL");
  line(out, 0, "DDL");
  line(out, 0, "CCL");
  line(out, HVD_BUILT_MPI, "MPI");
  line(out, 1, "Gloo");
  fprintf(out, "\nAvailable Devices:\n");
  line(out, HVD_BUILT_CUDA, "CUDA");
  fprintf(out, "\nUnder mpirun:\n");
  line(out, HVD_BUILT_MPI,
       HVD_BUILT_MPI ? "the job forms through MPI: no _HOROVOD_SECRET_KEY needed"
                     : "the job forms through MPI (this build has no MPI: the binary wheel never "
                       "has, a source build has with libopenmpi-dev): pass a _HOROVOD_SECRET_KEY "
                       "with mpirun -x");
}
