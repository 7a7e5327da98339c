"""hvd.elastic (horovod.torch.elastic's API) in a job whose membership does
not change: the states' commit, restore and sync, hvd.elastic.run's
recovery through a new job (hvd_elastic_reset under hvdrun), reset
callbacks, process sets that survive it, and ElasticSampler's resharding.
Real changes of membership are driven through hvdrun's elastic driver by
tests/cluster and tests/launcher."""
import pytest
import torch

import hvd.torch as hvd
from hvd.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt

from conftest import digest, rank_float


def model_of(rank):
    torch.manual_seed(100 + rank)  # a different start on every rank
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))


def same_everywhere(tensors):
    mine = digest(tensors)
    return all(d == mine for d in hvd.allgather_object(mine, name="elastic.digest"))


def test_object_state_commit_restore_sync():
    me = hvd.rank()
    state = hvd.elastic.ObjectState(epoch=me, batch=10 + me, note={"rank": me})
    state.sync()
    assert (state.epoch, state.batch, state.note) == (0, 10, {"rank": 0})
    state.epoch, state.batch = 3, 7
    state.commit()
    state.epoch, state.batch = 4, 0
    state.restore()
    assert (state.epoch, state.batch) == (3, 7)
    # Every rank holds the same commit: a sync sends nothing.
    state.batch = 100 + me
    state.sync()
    assert state.batch == 100 + me
    state.restore()
    assert state.batch == 7


def test_torch_state_model_and_optimizer():
    me = hvd.rank()
    model = model_of(me)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    state = hvd.elastic.TorchState(model=model, optimizer=opt, epoch=0)
    state.sync()
    assert same_everywhere(list(model.state_dict().values()))
    reference = model_of(0).state_dict()
    assert all(torch.equal(reference[k], v) for k, v in model.state_dict().items())
    # A step, commit, another step, restore: back to the committed weights
    # and momentum.
    x = rank_float([5, 4], 0, 1)
    model(x).sum().backward()
    opt.step()
    state.epoch = 1
    state.commit()
    committed = {k: v.clone() for k, v in model.state_dict().items()}
    momentum = [opt.state[p]["momentum_buffer"].clone() for p in model.parameters()]
    opt.zero_grad()
    model(x * 2).sum().backward()
    opt.step()
    state.epoch = 2
    state.restore()
    assert state.epoch == 1
    assert all(torch.equal(committed[k], v) for k, v in model.state_dict().items())
    assert all(torch.equal(m, opt.state[p]["momentum_buffer"])
               for m, p in zip(momentum, model.parameters()))


def test_run_recovers_through_a_new_job():
    """A step fails (as when a worker is lost): the state goes back to the
    commit, the job is re-formed, the reset callbacks run, and the function
    runs again; a process set added before is still there, same id."""
    me, n = hvd.rank(), hvd.size()
    # (at size 1 the set of rank n - 1 is the global one, which is not added again)
    subset = hvd.add_process_set([n - 1]) if n > 1 else hvd.global_process_set
    state = hvd.elastic.ObjectState(step=0)
    calls, resets = [], []
    state.register_reset_callbacks([lambda: resets.append(hvd.size())])

    @hvd.elastic.run
    def train(state):
        calls.append(state.step)
        while state.step < 6:
            state.step += 1
            if state.step % 2 == 0:
                state.commit()
            if state.step == 5 and len(calls) == 1:
                raise HorovodInternalError("a worker was lost (simulated)")
        return state.step

    assert train(state) == 6
    assert calls == [0, 4]  # the second run starts from the commit at step 4
    assert resets == [n]
    assert hvd.size() == n and hvd.rank() == me
    out = hvd.allreduce(torch.ones(1), op=hvd.Sum, name="elastic.after.run")
    assert out.item() == n
    assert subset.size() == 1 and subset.included() == (me == n - 1)
    if me == n - 1:
        t = hvd.allreduce(torch.full((2,), 3.0), op=hvd.Sum, process_set=subset,
                          name="elastic.in.subset")
        assert torch.equal(t, torch.full((2,), 3.0))
    hvd.remove_process_set(subset)


def test_run_on_hosts_updated_keeps_the_state():
    state = hvd.elastic.ObjectState(step=0)
    seen = []

    @hvd.elastic.run
    def train(state):
        seen.append(state.step)
        state.step += 5
        if len(seen) == 1:
            raise HostsUpdatedInterrupt(skip_sync=True)
        return state.step

    assert train(state) == 10  # not restored: the step counts on
    assert seen == [0, 5]


def test_check_host_updates_without_a_driver():
    state = hvd.elastic.ObjectState(x=1)
    for _ in range(3):
        state.commit()  # never raises outside an elastic job
    from hvd import _C
    assert _C.elastic_updates() == (0, 0, 0)


@pytest.mark.parametrize("shuffle", [False, True])
def test_elastic_sampler_reshards_what_is_left(shuffle):
    n = hvd.size()
    data = list(range(23))
    sampler = hvd.elastic.ElasticSampler(data, shuffle=shuffle, seed=5)
    mine = list(sampler)
    shards = hvd.allgather_object(mine, name="elastic.sampler.shards.%s" % shuffle)
    assert sorted(set(i for s in shards for i in s)) == data  # everything, padded evenly
    assert len(mine) == -(-len(data) // n)
    # Two batches of 3 processed by every worker, then a "new job": what
    # is left is split again, nothing processed twice, nothing lost.
    state = hvd.elastic.TorchState(sampler=sampler)
    sampler.record_batch(0, 3)
    sampler.record_batch(1, 3)
    state.commit()
    done = set().union(*hvd.allgather_object(set(mine[:6]), name="elastic.sampler.done.%s" % shuffle))
    state.restore()
    left = list(sampler)
    lefts = hvd.allgather_object(left, name="elastic.sampler.left.%s" % shuffle)
    assert set(i for s in lefts for i in s) == set(data) - done
    assert len(left) == -(-(len(data) - len(done)) // n)
    sampler.set_epoch(1)
    assert len(list(sampler)) == len(mine)
