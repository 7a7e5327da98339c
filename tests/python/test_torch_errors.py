"""The exceptions hvd.torch raises, as horovod.torch raises them: a
collective that fails (ranks that disagree on a tensor's shape, an
allgather while a rank has joined) or that hvd refuses (an op a collective
does not support) raises HorovodInternalError, a RuntimeError, on every
rank that called it, and the job goes on; an invalid argument raises
ValueError; Adasum over a number of ranks that is not a power of two,
NotImplementedError.  And the capability queries answer for this build."""
import os
import re

import pytest
import torch
from hvd_build import build_config

import hvd.torch as hvd
from hvd.common.exceptions import HorovodInternalError

# Ranks pass shapes with the same number of elements (17 * 1311 =
# 17 * 23 * 57), so only the shapes tell them apart.
SHAPES = ([17, 1311], [17, 23, 57])


def mismatched_tensor():
    return torch.ones(SHAPES[hvd.rank() % 2])


def assert_names_tensor_and_shapes(error, name):
    text = str(error)
    assert name in text, text
    for shape in SHAPES:
        # [17, 1311], (17, 1311) or 17x1311: the dimensions, in order
        assert re.search(r"\D{1,3}".join(str(d) for d in shape), text), text


def assert_job_goes_on(name):
    out = hvd.allreduce(torch.ones(3), op=hvd.Sum, name=name)
    assert torch.equal(out, torch.full((3,), float(hvd.size())))


def raised(call):
    """The exception call() raises (None if none): the test asserts on it
    only after the collectives every rank makes, so that a failing rank
    does not leave the others waiting."""
    try:
        call()
    except Exception as e:  # noqa: BLE001
        return e
    return None


def needs_two():
    if hvd.size() == 1:
        pytest.skip("needs two ranks")  # the same on every rank


@pytest.mark.parametrize("collective", ["allreduce", "broadcast", "allgather"])
def test_mismatched_shapes_raise_runtime_error_on_every_rank(collective):
    needs_two()
    name = "mismatch.%s" % collective
    calls = {"allreduce": lambda: hvd.allreduce(mismatched_tensor(), name=name),
             "broadcast": lambda: hvd.broadcast(mismatched_tensor(), root_rank=0, name=name),
             "allgather": lambda: hvd.allgather(mismatched_tensor(), name=name)}
    error = raised(calls[collective])
    assert_job_goes_on("after." + name)
    print("%s: %r" % (collective, error))
    assert isinstance(error, RuntimeError) and isinstance(error, HorovodInternalError), error
    assert_names_tensor_and_shapes(error, name)


def test_mismatched_shapes_in_reducescatter():
    needs_two()
    # rows that divide evenly: hvd sends the shapes the ranks passed
    n = hvd.size()
    shape = [4 * n, 6] if hvd.rank() % 2 == 0 else [4 * n, 2, 3]
    error = raised(lambda: hvd.reducescatter(torch.ones(shape), name="mismatch.reducescatter"))
    assert_job_goes_on("after.mismatch.reducescatter")
    assert isinstance(error, HorovodInternalError), error
    assert "mismatch.reducescatter" in str(error), error


def test_unsupported_op_for_a_collective_is_internal_error():
    error = raised(lambda: hvd.reducescatter(torch.ones(4, 2), op=hvd.Adasum, name="rs.adasum"))
    assert_job_goes_on("after.rs.adasum")
    assert isinstance(error, HorovodInternalError), error
    assert "adasum" in str(error).lower(), error


def test_invalid_arguments_are_value_errors():
    with pytest.raises(ValueError):
        hvd.allreduce(torch.ones(2, dtype=torch.complex64))
    with pytest.raises(ValueError):
        hvd.poll(123456789)
    with pytest.raises(ValueError):
        hvd.allreduce(torch.ones(2), average=True, op=hvd.Sum)


def test_a_name_already_in_flight_is_a_value_error():
    """The last rank enqueues the tensor only once the others have tried
    to enqueue it twice, so that it is still in flight on them."""
    needs_two()
    n, me = hvd.size(), hvd.rank()
    if me == n - 1:
        hvd.allreduce(torch.ones(1), name="in.flight.tried")
        hvd.synchronize(hvd.allreduce_async(torch.ones(2), name="in.flight.twice"))
        return
    handle = hvd.allreduce_async(torch.ones(2), name="in.flight.twice")
    error = raised(lambda: hvd.allreduce_async(torch.ones(2), name="in.flight.twice"))
    hvd.allreduce(torch.ones(1), name="in.flight.tried")
    assert torch.equal(hvd.synchronize(handle), torch.ones(2))
    assert isinstance(error, ValueError) and "in.flight.twice" in str(error), error


def test_adasum_on_three_ranks_is_not_implemented():
    if hvd.size() < 4:
        pytest.skip("needs a set of three ranks")  # same on every rank
    ps = hvd.add_process_set([1, 2, 3])
    try:
        if ps.included():
            error = raised(lambda: hvd.allreduce(torch.ones(3), op=hvd.Adasum, process_set=ps))
            assert isinstance(error, NotImplementedError), error
    finally:
        hvd.remove_process_set(ps)


def test_allgather_while_a_rank_has_joined():
    """The last rank joins at once; the others' allgather fails on each of
    them, naming the joined rank; then they join, every rank learns the
    same last rank, and the next collective works."""
    needs_two()
    n, me = hvd.size(), hvd.rank()
    joiner = n - 1
    error = None
    if me != joiner:
        try:
            hvd.allgather(torch.tensor([me]), name="gather.while.joined")
        except HorovodInternalError as e:
            error = e
    last = hvd.join()
    assert_job_goes_on("after.join.gather")
    everyone = hvd.allgather_object(last)
    if me != joiner:
        assert error is not None, "allgather succeeded while rank %d had joined" % joiner
        print("rank %d: %s" % (me, error))
        assert "gather.while.joined" in str(error)
        assert re.search(r"\b%d\b" % joiner, str(error)), error
    assert everyone == [last] * n
    assert last != joiner
    if n == 2:
        assert last == 0


JOIN_REFUSED = {
    "broadcast": ("Broadcast", lambda me: hvd.broadcast(torch.full((4,), float(me)), 1,
                                                       name="join.refused.broadcast")),
    "broadcast_": ("Broadcast", lambda me: hvd.broadcast_(torch.full((4,), float(me)), 1,
                                                         name="join.refused.broadcast_")),
    "reducescatter": ("Reducescatter", lambda me: hvd.reducescatter(
        torch.ones(2 * hvd.size(), 3), name="join.refused.reducescatter")),
    "grouped_reducescatter": ("Reducescatter", lambda me: hvd.grouped_reducescatter(
        [torch.ones(hvd.size(), 2)], name="join.refused.grouped_reducescatter")),
    "alltoall": ("Alltoall", lambda me: hvd.alltoall(torch.ones(hvd.size()),
                                                     name="join.refused.alltoall")),
}


@pytest.mark.parametrize("collective", sorted(JOIN_REFUSED))
def test_collectives_horovod_refuses_after_a_join(collective):
    """Horovod's test_horovod_join_broadcast, and its rule for the other
    collectives it refuses after a join: rank 0 joins at once; the others'
    broadcast from root 1 (or reducescatter, alltoall) raises RuntimeError
    (HorovodInternalError) on each of them with Horovod's words; then they
    join, every rank's join() returns, and the next collectives work."""
    needs_two()
    n, me = hvd.size(), hvd.rank()
    kind, call = JOIN_REFUSED[collective]
    error = None
    if me != 0:
        error = raised(lambda: call(me))
    last = hvd.join()
    assert_job_goes_on("after.join." + collective)
    got = hvd.broadcast(torch.full((2,), float(me)), 1, name="after.join.bcast." + collective)
    everyone = hvd.allgather_object(last)
    if me != 0:
        assert isinstance(error, RuntimeError), "%s succeeded while rank 0 had joined: %r" % (
            collective, error)
        assert isinstance(error, HorovodInternalError), error
        assert "%s is not supported with Join at this time" % kind in str(error), error
        assert "ranks [0] joined" in str(error), error
    assert torch.equal(got, torch.full((2,), 1.0))
    assert everyone == [last] * n and last != 0


def test_capability_queries_answer_for_this_build():
    """Under hvdrun (or alone): MPI as built, never enabled; hvd's own
    collectives ("Gloo") run the job; CUDA and NCCL as built (the build's
    hvd_build_config.h), NCCL as the version code of its nccl.h."""
    built = os.environ.get("HVD_WITH_MPI", "OFF").upper() in ("ON", "1", "TRUE", "YES")
    config = build_config()
    answers = {name: getattr(hvd, name)() for name in (
        "mpi_built", "mpi_enabled", "gloo_built", "gloo_enabled", "nccl_built", "ddl_built",
        "ccl_built", "cuda_built", "rocm_built")}
    assert type(answers.pop("nccl_built")) is int
    assert hvd.nccl_built() == config["HVD_BUILT_NCCL_VERSION"]
    assert (hvd.nccl_built() > 20000) == bool(config["HVD_BUILT_NCCL"])
    assert all(isinstance(v, bool) for v in answers.values()), answers
    assert answers == {"mpi_built": built, "mpi_enabled": False, "gloo_built": True,
                       "gloo_enabled": True, "ddl_built": False, "ccl_built": False,
                       "cuda_built": bool(config["HVD_BUILT_CUDA"]), "rocm_built": False}
    # Horovod raises when MPI is not enabled; code that branches on
    # mpi_enabled() first never gets there.
    with pytest.raises(ValueError):
        hvd.mpi_threads_supported()
    import hvd.common.basics as basics
    assert basics.gloo_enabled() and basics.mpi_built() == built
