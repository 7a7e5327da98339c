"""What the torch benchmarks under hvdrun share (bench/torch_allreduce_vs_gloo.py,
bench/torch_cuda_allreduce.py): a size for people, and the port that rank 0
picks for torch.distributed."""
import socket


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return "%d %s" % (n, unit)
        n //= 1024
    return "%d TiB" % n


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
