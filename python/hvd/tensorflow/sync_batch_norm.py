"""SyncBatchNormalization, as horovod.tensorflow's: batch normalization
whose batch statistics, in training, are those of the global batch (every
rank's, averaged over the job) rather than of this rank's part.  It
derives from the BatchNormalization of the Keras tf.keras is (Keras 3, or
tf-keras 2 under TF_USE_LEGACY_KERAS=1)."""
import tensorflow as tf

from hvd.tensorflow.mpi_ops import Sum, _allreduce, size

__all__ = ["SyncBatchNormalization"]


class SyncBatchNormalization(tf.keras.layers.BatchNormalization):
    """Synchronous batch normalization (its statistics over every rank's
    batch in training)."""

    def __init__(self, fused=False, **kwargs):
        if fused in (True, None):
            raise ValueError("SyncBatchNormalization does not support fused=True.")
        if not kwargs.get("name"):
            kwargs["name"] = "sync_batch_normalization"
        if _takes_fused():
            kwargs["fused"] = fused
        super().__init__(**kwargs)

    def _moments(self, *args, **kwargs):
        """The per-rank mean and variance made global: Var[X] = E[X^2] -
        E[X]^2, with E[X] and E[X^2] averaged over the ranks (equal batch
        sizes), as Horovod's."""
        mean, variance = super()._moments(*args, **kwargs)
        n = size()
        if n == 1:
            return mean, variance
        stats = tf.stack([mean, variance + tf.math.square(mean)])
        stats = _allreduce(stats, op=Sum) / tf.cast(n, stats.dtype)
        group_mean, group_mean_of_square = tf.unstack(stats)
        return group_mean, group_mean_of_square - tf.math.square(group_mean)


def _takes_fused():
    """tf-keras 2's BatchNormalization has `fused`; Keras 3's has not."""
    import inspect
    return "fused" in inspect.signature(tf.keras.layers.BatchNormalization.__init__).parameters
