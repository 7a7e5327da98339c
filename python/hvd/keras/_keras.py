"""Which Keras hvd.keras works with: tf-keras 2 (TensorFlow's own Keras 2,
the `tf_keras` package) when TensorFlow is told to use it
(TF_USE_LEGACY_KERAS=1, as tf.keras itself then is), else Keras 3.  Its
callbacks must derive from that Keras's Callback, so the choice is made
once, when hvd.keras is imported."""
import os

import tensorflow as tf

LEGACY = os.environ.get("TF_USE_LEGACY_KERAS", "").strip().lower() in ("1", "true", "yes")

if LEGACY:
    keras = tf.keras  # tf_keras's API, as TensorFlow exports it
else:
    import keras  # noqa: F401

