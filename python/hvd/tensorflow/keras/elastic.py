"""hvd.tensorflow.keras.elastic: hvd.keras.elastic under horovod.tensorflow.keras's name."""
from hvd.keras.elastic import *  # noqa: F401,F403
