"""Gradient compression for allreduce, as horovod.mxnet.compression:
Compression.none and Compression.fp16 (floating NDArrays travel as
float16 and come back in their own dtype)."""
from hvd.common.compression import Compressor, NoneCompressor


class FP16Compressor(Compressor):
    @staticmethod
    def compress(tensor):
        if "float" in str(tensor.dtype):
            return tensor.astype("float16", copy=False), tensor.dtype
        return tensor, tensor.dtype

    @staticmethod
    def decompress(tensor, ctx):
        return tensor.astype(ctx, copy=False) if "float" in str(ctx) else tensor


class Compression:
    none = NoneCompressor
    fp16 = FP16Compressor
