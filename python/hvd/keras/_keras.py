"""Which Keras hvd.keras works with: tf-keras 2 (TensorFlow's own Keras 2,
the `tf_keras` package) when TensorFlow is told to use it
(TF_USE_LEGACY_KERAS=1, as tf.keras itself then is), else Keras 3 on
whichever backend KERAS_BACKEND names (hvd.keras._backend follows it).
Its callbacks must derive from that Keras's Callback, so the choice is
made once, when hvd.keras is imported.  TensorFlow is imported only for
tf-keras 2 (Keras 3 on JAX or PyTorch runs without it)."""
import os

LEGACY = os.environ.get("TF_USE_LEGACY_KERAS", "").strip().lower() in ("1", "true", "yes")

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
