"""What this hvd was built with and runs on, as horovod.common.basics
answers it (mpi_built(), gloo_enabled(), ...), for scripts that branch on
Horovod's backends.

CUDA and NCCL are build options (HVD_WITH_CUDA, HVD_WITH_NCCL; on where
their headers were found, the libraries opened at run time): cuda_built()
and nccl_built() answer for this build, nccl_built() with the version code
of the nccl.h it was built against, as Horovod's, or 0.  hvd has no DDL,
oneCCL or ROCm underneath: those answer False.

MPI is a build option: mpi_built() says whether this hvd has it, and
mpi_enabled() whether the current job was formed through MPI (started by
mpirun, srun --mpi=pmix or hvdrun --mpi, or init(comm=<mpi4py communicator>)).
hvd's own collectives and transports (TCP and shared memory) take the place
Gloo takes in Horovod, configured by the same HOROVOD_GLOO_* variables, so
gloo_built() is True and gloo_enabled() is True once init() has joined a
job, unless HOROVOD_CPU_OPERATIONS=mpi hands the collectives to MPI.
"""
import os

from hvd import _C

__all__ = ["mpi_threads_supported", "mpi_enabled", "mpi_built", "gloo_enabled", "gloo_built",
           "nccl_built", "ddl_built", "ccl_built", "cuda_built", "rocm_built"]


def mpi_built():
    """True if this hvd was built with MPI (HVD_WITH_MPI)."""
    return bool(_C.mpi_built())


def mpi_enabled():
    """True while the current job is one MPI formed."""
    return bool(_C.mpi_enabled())


def mpi_threads_supported():
    """True if MPI runs at MPI_THREAD_MULTIPLE; ValueError, as in Horovod,
    when MPI is not enabled."""
    if not _C.mpi_enabled():
        raise ValueError("Horovod MPI is not enabled; Please make sure it's installed and "
                         "enabled.")
    return bool(_C.mpi_threads_supported())


def gloo_built():
    """True: hvd's own controller and collectives stand where Gloo stands."""
    return True


def gloo_enabled():
    """True once init() has joined a job and hvd's own collectives run it
    (HOROVOD_CPU_OPERATIONS is not mpi)."""
    ops = os.environ.get("HOROVOD_CPU_OPERATIONS", "").lower()
    return bool(_C.is_initialized()) and ops != "mpi"


def nccl_built():
    """NCCL_VERSION_CODE of the nccl.h this hvd was built with (22809 for
    2.28.9), 0 without the NCCL path, as Horovod answers."""
    return int(_C.nccl_built())


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    """True if this hvd was built with CUDA (HVD_WITH_CUDA)."""
    return bool(_C.cuda_built())


def rocm_built():
    return False
