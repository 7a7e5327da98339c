"""Objects (through cloudpickle: lambdas and local classes too), parameter
and optimizer-state broadcasts, errors from the engine surfacing as
exceptions that name the tensor, and the timeline started and stopped
from Python."""
import pytest
import torch

import hvd.torch as hvd
from hvd.common.exceptions import HorovodInternalError


def make_obj(r):
    return {"rank": r, "list": list(range(r)), "text": "x" * (1000 * r), 0: (r, None)}


def test_broadcast_object_every_root():
    for root in range(hvd.size()):
        assert hvd.broadcast_object(make_obj(hvd.rank()), root_rank=root) == make_obj(root)
    # the default root is 0
    assert hvd.broadcast_object(make_obj(hvd.rank())) == make_obj(0)
    t = torch.arange(5) * hvd.rank()
    assert torch.equal(hvd.broadcast_object(t, root_rank=0, name="bobj.tensor"), torch.zeros(5,
                       dtype=torch.int64))


def test_allgather_object():
    assert hvd.allgather_object(make_obj(hvd.rank())) == [make_obj(r) for r in range(hvd.size())]
    assert hvd.allgather_object(None, name="agobj.none") == [None] * hvd.size()


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU(), torch.nn.Linear(6, 2),
                               torch.nn.BatchNorm1d(2))


def test_broadcast_parameters_state_dict():
    me = hvd.rank()
    for root in range(hvd.size()):
        model = make_model(seed=100 + me)
        model.train()
        model(torch.randn(5, 4))  # rank-dependent running stats
        hvd.broadcast_parameters(model.state_dict(), root_rank=root)
        ref = make_model(seed=100 + root)
        ref.train()
        ref(torch.randn(5, 4))
        for (k, a), (_, b) in zip(model.state_dict().items(), ref.state_dict().items()):
            assert torch.equal(a, b), k


def test_broadcast_parameters_named_parameters():
    model = make_model(seed=200 + hvd.rank())
    hvd.broadcast_parameters(model.named_parameters(), root_rank=0)
    ref = make_model(seed=200)
    for (k, a), (_, b) in zip(model.named_parameters(), ref.named_parameters()):
        assert torch.equal(a, b), k


def optimizer_after_a_step(kind, r):
    model = make_model(seed=300 + r)
    if kind == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=0.1 * (r + 1), momentum=0.9)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=0.01 * (r + 1), betas=(0.8, 0.99))
    g = torch.Generator().manual_seed(400 + r)
    for _ in range(r % 2 + 1):  # rank-dependent number of steps, too
        opt.zero_grad()
        model(torch.randn(6, 4, generator=g)).pow(2).mean().backward()
        opt.step()
    return model, opt


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_broadcast_optimizer_state(kind):
    root = hvd.size() - 1
    model, opt = optimizer_after_a_step(kind, hvd.rank())
    hvd.broadcast_parameters(model.state_dict(), root_rank=root)
    hvd.broadcast_optimizer_state(opt, root_rank=root)
    ref_model, ref_opt = optimizer_after_a_step(kind, root)
    got, want = opt.state_dict(), ref_opt.state_dict()
    for ga, wa in zip(got["param_groups"], want["param_groups"]):
        for key in wa:
            if key != "params":
                assert ga[key] == pytest.approx(wa[key]) if isinstance(wa[key], float) \
                    else ga[key] == wa[key], key
    assert set(got["state"]) == set(want["state"])
    for pid, st in want["state"].items():
        for key, val in st.items():
            mine = got["state"][pid][key]
            if torch.is_tensor(val):
                assert torch.equal(torch.as_tensor(mine).to(val.dtype), val), (pid, key)
            else:
                assert mine == val, (pid, key)
    for a, b in zip(model.parameters(), ref_model.parameters()):
        assert torch.equal(a, b)
    # and the next step is the same everywhere
    x = torch.ones(3, 4)
    for m, o in ((model, opt), (ref_model, ref_opt)):
        o.zero_grad()
        m(x).sum().backward()
        o.step()
    for a, b in zip(model.parameters(), ref_model.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_broadcast_optimizer_state_fresh_adam():
    model = make_model(seed=0)
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.Adam(model.parameters(), lr=0.01 * (hvd.rank() + 1))
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.01)
    for a, b in zip(model.parameters(), before):
        assert torch.equal(a, b)


def test_exceptions_types():
    assert issubclass(HorovodInternalError, RuntimeError)


def test_mismatched_shapes_raise_on_every_rank():
    n, me = hvd.size(), hvd.rank()
    if n == 1:
        pytest.skip("no mismatch is possible in a job of one")  # same on every rank
    t = torch.ones((me + 1, 2))
    with pytest.raises(HorovodInternalError) as info:
        hvd.allreduce(t, name="mismatch.shape.tensor")
    assert "mismatch.shape.tensor" in str(info.value)
    # the job goes on after a coordination error
    out = hvd.allreduce(torch.ones(3), op=hvd.Sum, name="after.mismatch")
    assert torch.equal(out, torch.full((3,), float(n)))


def test_mismatched_dtypes_and_roots_raise():
    n, me = hvd.size(), hvd.rank()
    if n == 1:
        pytest.skip("no mismatch is possible in a job of one")
    t = torch.ones(4, dtype=torch.float32 if me % 2 == 0 else torch.float64)
    with pytest.raises(HorovodInternalError) as info:
        hvd.allreduce(t, name="mismatch.dtype.tensor")
    assert "mismatch.dtype.tensor" in str(info.value)
    with pytest.raises(HorovodInternalError) as info:
        hvd.broadcast(torch.ones(3), root_rank=me, name="mismatch.root.tensor")
    assert "mismatch.root.tensor" in str(info.value)
    with pytest.raises(HorovodInternalError) as info:
        hvd.allgather(torch.ones(2, me + 1), name="mismatch.gather.tensor")
    assert "mismatch.gather.tensor" in str(info.value)
    h = hvd.allreduce_async(torch.ones(me + 2), name="mismatch.async.tensor")
    with pytest.raises(HorovodInternalError) as info:
        hvd.synchronize(h)
    assert "mismatch.async.tensor" in str(info.value)
    out = hvd.allreduce(torch.ones(2), op=hvd.Sum, name="after.mismatch.2")
    assert torch.equal(out, torch.full((2,), float(n)))


def test_broadcast_object_lambda_and_local_class():
    """Objects travel through cloudpickle, as in Horovod: lambdas and
    classes defined in a function go through too."""
    import cloudpickle  # noqa: F401  scripts/deps.sh installs it: a missing one fails

    class Local:
        def __init__(self, r):
            self.r = r

        def twice(self):
            return 2 * self.r

    root = hvd.size() - 1
    me = hvd.rank()
    f = hvd.broadcast_object(lambda x: x * 10 + me, root_rank=root, name="bobj.lambda")
    assert f(3) == 30 + root
    obj = hvd.broadcast_object(Local(me), root_rank=root, name="bobj.local")
    assert obj.r == root and obj.twice() == 2 * root
    fs = hvd.allgather_object(lambda: me, name="agobj.lambda")
    assert [g() for g in fs] == list(range(hvd.size()))


def test_start_stop_timeline_writes_valid_json(tmp_path):
    """start_timeline/stop_timeline on every rank; rank 0 writes a Chrome
    trace (JSON) that names the collectives run in between, and tells the
    others what it found."""
    import json
    path = hvd.broadcast_object(str(tmp_path / "timeline.json"), root_rank=0,
                                name="timeline.path")
    hvd.start_timeline(path)
    hvd.allreduce(torch.ones(5), name="timeline.allreduce.tensor")
    hvd.allgather(torch.ones(2, 1), name="timeline.allgather.tensor")
    hvd.stop_timeline()
    hvd.stop_timeline()  # stopping again: nothing to stop
    after = hvd.allreduce(torch.ones(1), name="timeline.after.stop")
    found = None
    if hvd.rank() == 0:
        with open(path) as f:
            text = f.read()
        trace = json.loads(text)
        events = trace["traceEvents"] if isinstance(trace, dict) else trace
        found = {"events": len(events),
                 "allreduce": "timeline.allreduce.tensor" in text,
                 "allgather": "timeline.allgather.tensor" in text,
                 "after stop": "timeline.after.stop" in text}
    found = hvd.broadcast_object(found, root_rank=0, name="timeline.found")
    assert found["events"] > 0 and found["allreduce"] and found["allgather"], found
    assert not found["after stop"], found
    assert after.item() == 1.0  # allreduce averages by default
