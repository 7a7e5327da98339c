"""hvd.tensorflow.keras.callbacks: hvd.keras.callbacks under horovod.tensorflow.keras's name."""
from hvd.keras.callbacks import *  # noqa: F401,F403
