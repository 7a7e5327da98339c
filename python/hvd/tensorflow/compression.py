"""Gradient compression for allreduce, as horovod.tensorflow.compression:
Compression.none and Compression.fp16 (floating tensors travel as
float16 and come back in their own type)."""
import tensorflow as tf

from hvd.common.compression import Compressor, NoneCompressor


class FP16Compressor(Compressor):
    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating:
            return tf.cast(tensor, tf.float16), tensor.dtype
        return tensor, tensor.dtype

    @staticmethod
    def decompress(tensor, ctx):
        return tf.cast(tensor, ctx) if ctx is not None and ctx.is_floating else tensor


class Compression:
    none = NoneCompressor
    fp16 = FP16Compressor
