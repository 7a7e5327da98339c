"""What every binding's gradient compression shares (Horovod's
Compressor interface and its no-op), framework-free: each binding adds
its own FP16Compressor, which casts with its framework's tensors."""

__all__ = ["Compressor", "NoneCompressor"]


class Compressor:
    """Interface of the compression algorithms: compress(tensor) returns
    (the tensor to send, a context); decompress(tensor, ctx) restores the
    reduced result with that context."""

    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends tensors as they are."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor
