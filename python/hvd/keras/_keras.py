"""Which Keras hvd.keras works with: tf-keras 2 (TensorFlow's own Keras 2,
the `tf_keras` package) when TensorFlow is told to use it
(TF_USE_LEGACY_KERAS=1, as tf.keras itself then is), else Keras 3 on
whichever backend KERAS_BACKEND names (hvd.keras._backend follows it).
Its callbacks must derive from that Keras's Callback, so the choice is
made once, when hvd.keras is imported.  TensorFlow is imported only for
tf-keras 2 (Keras 3 on JAX or PyTorch runs without it)."""
import os

from hvd.common.frameworks import require as _require

LEGACY = os.environ.get("TF_USE_LEGACY_KERAS", "").strip().lower() in ("1", "true", "yes")


def _require_tensorflow():
    """On TensorFlow (tf-keras 2, or Keras 3 with KERAS_BACKEND unset or
    tensorflow, Keras's default), TensorFlow in the range hvd.keras serves
    there, checked before Keras is imported: a missing or unserved
    TensorFlow is hvd's ImportError, not Keras's.  Unless Keras's own
    config file names another backend, which Keras then says."""
    try:
        _require("hvd.keras")
    except ImportError:
        if LEGACY:
            raise
        try:
            import keras
            other = keras.backend.backend() != "tensorflow"
        except Exception:  # Keras fails without TensorFlow: hvd's error says why
            other = False
        if not other:
            raise


if LEGACY or os.environ.get("KERAS_BACKEND", "tensorflow") == "tensorflow":
    _require_tensorflow()

if LEGACY:
    import tensorflow as tf
    keras = tf.keras  # tf_keras's API, as TensorFlow exports it
else:
    import keras  # noqa: F401


def backend():
    """The Keras backend in use: "tensorflow" (tf-keras 2 is), "jax" or "torch"."""
    return "tensorflow" if LEGACY else keras.backend.backend()


def attach_state(model):
    """Puts the state Keras's JAX trainer holds outside the model's
    variables during fit() back into them (jax_state_sync), and makes
    its next step read them again: a callback that reads or assigns
    variables mid-epoch calls this first.  Nothing to do on the other
    backends (their variables are the state)."""
    sync = getattr(model, "jax_state_sync", None)
    if sync is not None:
        sync()
