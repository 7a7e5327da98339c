"""Framework-independent parts of hvd's Python package (as horovod.common)."""
