"""Gradient compression for allreduce, as horovod.torch.compression.

A compressor turns a tensor into what is sent (compress) and the reduced
result back into the original dtype (decompress, with the context that
compress returned).
"""
import torch


class Compressor:
    """Interface of the compression algorithms."""

    @staticmethod
    def compress(tensor):
        """Returns (the tensor to send, a context for decompress)."""
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        """Returns the received tensor restored with compress's context."""
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends tensors as they are."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
    """Sends floating-point tensors as float16 (others as they are) and
    casts the result back to the original dtype."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating_point:
            return tensor.type(torch.float16), tensor.dtype
        return tensor, tensor.dtype

    @staticmethod
    def decompress(tensor, ctx):
        if ctx.is_floating_point:
            return tensor.type(ctx)
        return tensor


class Compression:
    """The available compressors: Compression.none and Compression.fp16."""

    none = NoneCompressor
    fp16 = FP16Compressor
