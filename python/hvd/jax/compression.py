"""Gradient compression for the allreduce (horovod.jax has none;
horovod.torch's Compression.none / Compression.fp16)."""
import jax.numpy as jnp

from hvd.common.compression import Compressor, NoneCompressor

__all__ = ["Compression", "Compressor", "NoneCompressor", "FP16Compressor"]


class FP16Compressor(Compressor):
    """Floating arrays wider than 16 bits travel as float16 and come back
    in their own dtype; other arrays are sent as they are."""

    @staticmethod
    def compress(tensor):
        dtype = jnp.result_type(tensor)
        if jnp.issubdtype(dtype, jnp.floating) and jnp.dtype(dtype).itemsize > 2:
            return tensor.astype(jnp.float16), dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor if ctx is None else tensor.astype(ctx)


class Compression:
    none = NoneCompressor
    fp16 = FP16Compressor
