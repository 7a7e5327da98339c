/* hvd_nn.h -- a small float32 training toolkit, and Horovod's training
 * recipes over hvd.
 *
 * Not a framework: the substrate a C program needs to train a small network
 * on one process, and the pieces that make that program distributed the way
 * Horovod's tutorials do it for PyTorch:
 *
 *     hvd_init();
 *     model = ...; hvd_nn_model_init(model, seed);
 *     opt = hvd_nn_sgd_new(model, lr * hvd_size(), 0.9f, 0.0f);
 *     hvd_nn_broadcast_parameters(model, 0);          // same start everywhere
 *     hvd_nn_broadcast_optimizer_state(opt, 0);
 *     dist = hvd_nn_dist_new(opt, &dist_opts);        // wrap the optimizer
 *     hvd_nn_sampler_init(&sampler, n, hvd_size(), hvd_rank(), seed);
 *     for each batch of this rank's shard:
 *         hvd_nn_model_zero_grad(model);
 *         logits = hvd_nn_forward(model, x, b);
 *         loss = hvd_nn_softmax_xent(logits, labels, b, classes, dlogits, NULL);
 *         hvd_nn_dist_backward(dist, dlogits);        // grads leave as they are ready
 *         hvd_nn_dist_step(dist);                     // wait, then update
 *     hvd_nn_metric_average(...); if rank 0: hvd_nn_checkpoint_save(...)
 *
 * Conventions: functions that return int return 0 on success and a negative
 * HVD_E_* code (from hvd.h) on failure, with the message in
 * hvd_nn_last_error().  Constructors return NULL on failure, with the
 * message there too.  Tensors are float32, row-major, batch first; images
 * are NCHW.  Nothing here exits or aborts the process. */
#ifndef HVD_NN_H
#define HVD_NN_H

#include <stddef.h>
#include <stdint.h>

#include "hvd.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Errors ------------------------------------------------------------ */

/* The message of this thread's last failed hvd_nn call ("" if none). */
HVD_EXTERN const char *hvd_nn_last_error(void);

/* ---- Models: a sequence of layers --------------------------------------
 *
 * A model takes a batch of samples of shape (c, h, w) (use c = h = 1 for
 * flat vectors) through its layers in order.  A dense layer flattens its
 * input.  Parameters are named "<layer index>.<kind>.weight" and ".bias"
 * ("0.conv2d.weight", "3.dense.bias"): the names the engine and the
 * checkpoints use, stable for a given architecture. */

typedef struct hvd_nn_model hvd_nn_model;

/* One trainable tensor and its gradient, owned by the model. */
typedef struct {
  const char *name;
  float *value;
  float *grad;
  size_t count;
} hvd_nn_param;

HVD_EXTERN hvd_nn_model *hvd_nn_model_new(int in_c, int in_h, int in_w);
HVD_EXTERN void hvd_nn_model_free(hvd_nn_model *m);

/* Layers, appended in order.  Shapes are checked as layers are added (a
 * kernel larger than its input fails here, not during training). */
HVD_EXTERN int hvd_nn_add_dense(hvd_nn_model *m, int out_features);
HVD_EXTERN int hvd_nn_add_conv2d(hvd_nn_model *m, int out_channels, int kernel, int stride,
                                 int padding);
HVD_EXTERN int hvd_nn_add_relu(hvd_nn_model *m);
HVD_EXTERN int hvd_nn_add_maxpool(hvd_nn_model *m, int kernel, int stride);

/* Number of output values per sample (the classes of a classifier). */
HVD_EXTERN int hvd_nn_model_outputs(const hvd_nn_model *m);

/* Deterministic initialisation from seed: He-uniform weights (bound
 * sqrt(6 / fan_in)), zero biases.  Same seed, same architecture: same bits
 * on every machine. */
HVD_EXTERN int hvd_nn_model_init(hvd_nn_model *m, uint64_t seed);

/* The registry of parameters, in layer order. */
HVD_EXTERN int hvd_nn_num_params(const hvd_nn_model *m);
HVD_EXTERN hvd_nn_param *hvd_nn_param_at(hvd_nn_model *m, int i);
HVD_EXTERN hvd_nn_param *hvd_nn_param_find(hvd_nn_model *m, const char *name);

/* Forward pass over batch samples at x (batch * c * h * w floats).  Returns
 * the model's output (batch * outputs floats), valid until the next
 * forward, or NULL on error.  Keeps what backward needs. */
HVD_EXTERN const float *hvd_nn_forward(hvd_nn_model *m, const float *x, int batch);

/* Called by backward as soon as a layer's gradients are complete (last
 * layer first): the moment a distributed optimizer hands them to the
 * engine.  A non-zero return stops backward with that code. */
typedef int (*hvd_nn_grad_hook)(hvd_nn_param *p, void *arg);

/* Backward pass of the last forward, from dout (batch * outputs floats,
 * the loss's gradient).  Gradients are ADDED to each parameter's grad, as
 * PyTorch accumulates them: zero them before a step's first backward. */
HVD_EXTERN int hvd_nn_backward(hvd_nn_model *m, const float *dout, hvd_nn_grad_hook hook,
                               void *arg);
HVD_EXTERN void hvd_nn_model_zero_grad(hvd_nn_model *m);

/* Softmax cross-entropy averaged over the batch.  labels in [0, classes).
 * Writes d(loss)/d(logits) to dlogits when it is not NULL and the number of
 * samples whose largest logit is the label to *correct when it is not NULL.
 * Returns the loss, or a negative value (and sets the error) on bad input. */
HVD_EXTERN float hvd_nn_softmax_xent(const float *logits, const int *labels, int batch,
                                     int classes, float *dlogits, int *correct);

/* ---- Optimizers ---------------------------------------------------------
 *
 *   SGD:  v = momentum * v + (g + weight_decay * w);  w -= lr * v
 *         (PyTorch's torch.optim.SGD, dampening 0, no Nesterov)
 *   Adam: m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  t += 1
 *         w -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
 *         (PyTorch's torch.optim.Adam)
 *
 * An optimizer's state is a list of named float buffers (one or two per
 * parameter: "<param>.momentum", "<param>.exp_avg", "<param>.exp_avg_sq")
 * plus its step count and hyper-parameters, which is what
 * broadcast_optimizer_state and checkpoints carry. */

typedef struct hvd_nn_optimizer hvd_nn_optimizer;

HVD_EXTERN hvd_nn_optimizer *hvd_nn_sgd_new(hvd_nn_model *m, float lr, float momentum,
                                            float weight_decay);
HVD_EXTERN hvd_nn_optimizer *hvd_nn_adam_new(hvd_nn_model *m, float lr, float beta1, float beta2,
                                             float eps);
HVD_EXTERN void hvd_nn_optimizer_free(hvd_nn_optimizer *o);

/* Applies one update from every parameter's grad. */
HVD_EXTERN int hvd_nn_optimizer_step(hvd_nn_optimizer *o);
HVD_EXTERN hvd_nn_model *hvd_nn_optimizer_model(hvd_nn_optimizer *o);

HVD_EXTERN float hvd_nn_optimizer_lr(const hvd_nn_optimizer *o);
HVD_EXTERN void hvd_nn_optimizer_set_lr(hvd_nn_optimizer *o, float lr);

/* The state, for broadcasting and checkpoints.  Hyper-parameters travel as
 * HVD_NN_HYPERS doubles (lr, momentum or beta1, weight decay or beta2, eps;
 * unused ones 0).  The step count is Adam's t (SGD counts steps too). */
#define HVD_NN_HYPERS 4
HVD_EXTERN int hvd_nn_optimizer_num_slots(const hvd_nn_optimizer *o);
HVD_EXTERN float *hvd_nn_optimizer_slot(hvd_nn_optimizer *o, int i, size_t *count,
                                        const char **name);
HVD_EXTERN int64_t *hvd_nn_optimizer_steps(hvd_nn_optimizer *o);
HVD_EXTERN double *hvd_nn_optimizer_hypers(hvd_nn_optimizer *o);

/* ---- Checkpoints ----------------------------------------------------------
 *
 * One file holds the parameters, the optimizer's state (when opt is not
 * NULL) and a few numbers of the training loop.  Saving is atomic: a
 * temporary file in the same directory, fsync, rename, fsync of the
 * directory, so a crash leaves the old checkpoint or the new one, never a
 * torn one.  Loading checks the format, a checksum, and that every tensor's
 * name and size match the model; it changes nothing on failure. */

typedef struct {
  int64_t epoch;       /* epochs completed */
  int64_t step;        /* optimizer steps taken */
  uint64_t seed;       /* the run's seed (the sampler's shuffles depend on it) */
} hvd_nn_ckpt_meta;

HVD_EXTERN int hvd_nn_checkpoint_save(const char *path, hvd_nn_model *m, hvd_nn_optimizer *opt,
                                      const hvd_nn_ckpt_meta *meta);
HVD_EXTERN int hvd_nn_checkpoint_load(const char *path, hvd_nn_model *m, hvd_nn_optimizer *opt,
                                      hvd_nn_ckpt_meta *meta);

/* ---- Data: Fashion-MNIST (and MNIST) IDX files, gzip-compressed ---------- */

typedef struct {
  int n;            /* samples */
  int rows, cols;   /* 28 x 28 */
  float *images;    /* n * rows * cols, scaled to [0, 1] then normalised
                       with mean 0.2860 and std 0.3530 (Fashion-MNIST's) */
  int *labels;      /* n, in [0, 10) */
} hvd_nn_dataset;

/* Loads "<dir>/<split>-images-idx3-ubyte.gz" and "<dir>/<split>-labels-idx1-ubyte.gz"
 * (split "train" or "t10k").  A missing, truncated, corrupt or inconsistent
 * file fails with a message naming the file and what is wrong. */
#define HVD_NN_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"
HVD_EXTERN int hvd_nn_dataset_load_idx(hvd_nn_dataset *d, const char *dir, const char *split);
HVD_EXTERN void hvd_nn_dataset_free(hvd_nn_dataset *d);

/* ---- Recipes ---------------------------------------------------------------
 *
 * Horovod's recipes for going from one process to many. */

/* Learning-rate scaling with linear warmup (Goyal et al. 2017, Horovod's
 * examples): base_lr * scale at and after warmup_epochs, rising linearly
 * from base_lr at epoch 0.  epoch is fractional (epoch + batch / batches).
 * scale is hvd_size() for AVERAGE, 1 for ADASUM (Horovod's advice on CPU). */
HVD_EXTERN double hvd_nn_lr_warmup(double base_lr, double scale, double epoch,
                                   double warmup_epochs);

/* A distributed sampler with torch.utils.data.DistributedSampler's rules:
 * each epoch, one permutation of [0, n) from (seed, epoch), the same on
 * every rank; padded by repeating its head to a multiple of replicas; rank
 * r takes positions r, r + replicas, ...  Every rank gets num_samples. */
typedef struct {
  int n, replicas, rank;
  uint64_t seed;
  int shuffle;         /* 1 (default from init); 0 keeps the order */
  int num_samples;     /* per rank: ceil(n / replicas) */
  int *indices;        /* this rank's num_samples indices for the epoch */
} hvd_nn_sampler;

HVD_EXTERN int hvd_nn_sampler_init(hvd_nn_sampler *s, int n, int replicas, int rank,
                                   uint64_t seed);
HVD_EXTERN int hvd_nn_sampler_set_epoch(hvd_nn_sampler *s, int64_t epoch);
HVD_EXTERN void hvd_nn_sampler_free(hvd_nn_sampler *s);

/* Averages a metric over every rank (allreduce of a double, named so that
 * several metrics may be in flight).  Horovod's MetricAverageCallback. */
HVD_EXTERN int hvd_nn_metric_average(double value, const char *name, double *avg);

/* The same start on every rank: the root's parameters, and the root's
 * optimizer state, step count and hyper-parameters. */
HVD_EXTERN int hvd_nn_broadcast_parameters(hvd_nn_model *m, int root_rank);
HVD_EXTERN int hvd_nn_broadcast_optimizer_state(hvd_nn_optimizer *o, int root_rank);

/* Rank 0 saves (atomically, as above) and the others wait for it, so every
 * rank sees the same outcome; the returned code is rank 0's. */
HVD_EXTERN int hvd_nn_checkpoint_save_rank0(const char *path, hvd_nn_model *m,
                                            hvd_nn_optimizer *opt, const hvd_nn_ckpt_meta *meta);
/* Resume: rank 0 loads path when it exists, then broadcasts parameters,
 * optimizer state and meta.  Returns 1 if resumed, 0 if there was no file
 * (nothing changed), or a negative code (on every rank) if rank 0's file
 * was bad. */
HVD_EXTERN int hvd_nn_checkpoint_resume(const char *path, hvd_nn_model *m, hvd_nn_optimizer *opt,
                                        hvd_nn_ckpt_meta *meta);

/* ---- DistributedOptimizer -------------------------------------------------
 *
 * Wraps an optimizer the way horovod.torch.DistributedOptimizer does.
 * hvd_nn_dist_backward runs the model's backward and, as each layer's
 * gradients are complete, enqueues their allreduce by name, so
 * communication overlaps the rest of backprop.  hvd_nn_dist_step waits for
 * the reductions, writes the results into the gradients and steps the
 * wrapped optimizer. */

typedef enum {
  HVD_NN_COMPRESS_NONE,
  HVD_NN_COMPRESS_FP16,     /* float16 on the wire (Horovod's Compression.fp16) */
  HVD_NN_COMPRESS_BF16,     /* bfloat16 on the wire */
  HVD_NN_COMPRESS_POWERSGD, /* rank-r P Q^T with error feedback and warm start
                               (Vogels et al. 2019, torch's PowerSGD hook):
                               P and Q travel by allreduce */
  HVD_NN_COMPRESS_TOPK      /* the k largest magnitudes with error feedback:
                               (index, value) pairs travel by allgather */
} hvd_nn_compression;

/* PowerSGD and top-k (docs/compression.md) need op AVERAGE without
 * gradient_predivide_factor.  Each weight is viewed as a matrix (output
 * units x fan_in); biases, and weights where compression would send more
 * than 1/min_compression_rate of the values, go uncompressed (through the
 * ordinary allreduce, fused with the others).  What a step does not send
 * is kept per rank and added to the next step's gradient. */

typedef struct {
  hvd_op op;                         /* HVD_AVERAGE, HVD_SUM or HVD_ADASUM */
  hvd_nn_compression compression;
  int backward_passes_per_step;      /* gradients of N backward passes are added
                                        locally; one reduction per N passes */
  int average_aggregated_gradients;  /* 1: divide those N-pass sums by N (as
                                        horovod.tensorflow's option) */
  double gradient_predivide_factor;  /* AVERAGE: divide by f before the sum and
                                        by size/f after (Horovod's split) */
  int process_set;                   /* 0: every rank */
  int overlap;                       /* 1: enqueue during backward; 0: all
                                        after backward (to measure overlap) */
  int powersgd_rank;                 /* PowerSGD's matrix approximation rank
                                        (torch's matrix_approximation_rank), >= 1 */
  double topk_ratio;                 /* top-k: share of each tensor's values sent,
                                        in (0, 1] */
  double min_compression_rate;       /* compress a tensor only when its values
                                        outnumber what is sent by more than this
                                        (torch's default 2); 0 compresses all
                                        weights */
  uint64_t compression_seed;         /* PowerSGD's initial Q: the same on every
                                        rank for the same seed */
} hvd_nn_dist_opts;
#define HVD_NN_DIST_OPTS_INIT \
  {HVD_AVERAGE, HVD_NN_COMPRESS_NONE, 1, 0, 1.0, 0, 1, 1, 0.01, 2.0, 0}

typedef struct hvd_nn_dist hvd_nn_dist;

HVD_EXTERN hvd_nn_dist *hvd_nn_dist_new(hvd_nn_optimizer *opt, const hvd_nn_dist_opts *opts);
HVD_EXTERN void hvd_nn_dist_free(hvd_nn_dist *d);

/* Model backward with the gradient hook installed. */
HVD_EXTERN int hvd_nn_dist_backward(hvd_nn_dist *d, const float *dout);

/* Waits for every enqueued reduction and writes the results into the
 * gradients (horovod.torch's optimizer.synchronize()). */
HVD_EXTERN int hvd_nn_dist_synchronize(hvd_nn_dist *d);

/* Call once per step, after backward_passes_per_step backward passes:
 * synchronize (unless already done), then the wrapped optimizer's step.
 * Called after fewer passes it fails with HVD_E_INVALID and changes
 * nothing.  The gradients are left as reduced: zero them before the next
 * step's first backward. */
HVD_EXTERN int hvd_nn_dist_step(hvd_nn_dist *d);

/* Drops a step that failed midway (elastic training, after the job was
 * re-formed): waits for what is still in flight (a handle of an earlier
 * job fails at once) and starts the next step from its first backward
 * pass.  Gradients are not applied. */
HVD_EXTERN void hvd_nn_dist_reset(hvd_nn_dist *d);

/* Seconds spent blocked in synchronize since the last call (for the
 * overlap benchmark), then reset. */
HVD_EXTERN double hvd_nn_dist_wait_seconds(hvd_nn_dist *d);

#ifdef __cplusplus
}
#endif
#endif /* HVD_NN_H */
