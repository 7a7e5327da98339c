"""What this hvd was built with and runs on, as horovod.common.basics
answers it (mpi_built(), gloo_enabled(), ...), for scripts that branch on
Horovod's backends.

hvd has no MPI, NCCL, DDL, oneCCL, CUDA or ROCm underneath: those answer
False.  Its own controller and collectives (TCP and shared memory, started
by hvdrun's rendezvous) take the place Gloo takes in Horovod -- the
non-MPI path, configured by the same HOROVOD_GLOO_* variables -- so
gloo_built() is True and gloo_enabled() is True once init() has joined a
job: a script that asks "is Gloo running?" to choose the non-MPI branch
takes it.
"""
from hvd import _C

__all__ = ["mpi_threads_supported", "mpi_enabled", "mpi_built", "gloo_enabled", "gloo_built",
           "nccl_built", "ddl_built", "ccl_built", "cuda_built", "rocm_built"]


def mpi_built():
    """False: hvd is not built with MPI."""
    return False


def mpi_enabled():
    """False: hvd never runs over MPI."""
    return False


def mpi_threads_supported():
    """Raises ValueError, as Horovod does when MPI is not enabled."""
    raise ValueError("Horovod MPI is not enabled; Please make sure it's installed and enabled.")


def gloo_built():
    """True: hvd's own controller and collectives stand where Gloo stands."""
    return True


def gloo_enabled():
    """True once init() has joined a job (hvd's controller is running)."""
    return bool(_C.is_initialized())


def nccl_built():
    """False (Horovod answers NCCL's version, or 0 without it)."""
    return False


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    return False


def rocm_built():
    return False
