# Job sizes each multi-rank program runs at (through hvdrun).  Programs
# that are expected to fail (peer loss) are driven by tests/launcher.
hvd_add_mpi_test(test_collectives 1 2 3 4 8)
# Many ranks on one host (docs/scale.md): every collective exact at 64
# ranks on this 2-core machine, the first allreduce within 60 s (the ranks
# take 2 s here under load; hvd_init's own bound is the start timeout).
add_test(NAME mpi.scale_probe.np64 COMMAND $<TARGET_FILE:hvdrun> -np 64
         $<TARGET_FILE:scale_probe> 60000)
set_tests_properties(mpi.scale_probe.np64 PROPERTIES TIMEOUT 300
  ENVIRONMENT "HOROVOD_GLOO_TIMEOUT_SECONDS=30;HOROVOD_START_TIMEOUT=60")
# Each allreduce algorithm (HOROVOD_ALLREDUCE_ALGORITHM), powers of two
# and not: the reference result, the same bits on every rank, fused = alone.
foreach(algo auto ring recursive_doubling rabenseifner shm)
  foreach(np 1 2 3 4 5 8)
    if(HVD_SANITIZE AND np GREATER HVD_SANITIZE_MAX_NP)
      continue() # tests/CMakeLists.txt says why
    endif()
    set(t mpi.test_algorithms.${algo}.np${np})
    add_test(NAME ${t} COMMAND $<TARGET_FILE:hvdrun> -np ${np} $<TARGET_FILE:test_algorithms>)
    set_tests_properties(${t} PROPERTIES TIMEOUT 300
      ENVIRONMENT "${HVD_TEST_ENV};HOROVOD_ALLREDUCE_ALGORITHM=${algo}")
  endforeach()
endforeach()
# The hierarchical allreduce (HOROVOD_HIERARCHICAL_ALLREDUCE=1) on hosts
# emulated by hvdrun -H: every -H entry is a host, so LxC below is L ranks
# on each of C hosts.  The reference results, the same bits everywhere and
# fused = alone (test_algorithms, test_fusion); that it really runs, that
# uneven hosts fall back to the flat allreduce and that ranks whose
# layouts disagree fail hvd_init (test_hierarchical).
function(hvd_add_hier_test name np hosts prog)
  set(t mpi.${name})
  add_test(NAME ${t} COMMAND $<TARGET_FILE:hvdrun> -np ${np} -H ${hosts} $<TARGET_FILE:${prog}>
           ${ARGN})
  set_tests_properties(${t} PROPERTIES TIMEOUT 300
    ENVIRONMENT "${HVD_TEST_ENV};HOROVOD_HIERARCHICAL_ALLREDUCE=1")
endfunction()
# A name given twice is one host: the third is this machine by its name.
cmake_host_system_information(RESULT HVD_THIS_HOST QUERY HOSTNAME)
hvd_add_hier_test(test_algorithms.hierarchical.2x2 4 localhost:2,127.0.0.1:2 test_algorithms)
hvd_add_hier_test(test_algorithms.hierarchical.3x2 6 localhost:3,127.0.0.1:3 test_algorithms)
hvd_add_hier_test(test_algorithms.hierarchical.2x3 6 localhost:2,127.0.0.1:2,${HVD_THIS_HOST}:2
                  test_algorithms)
hvd_add_hier_test(test_fusion.hierarchical.2x2 4 localhost:2,127.0.0.1:2 test_fusion)
hvd_add_hier_test(test_hierarchical.2x2 4 localhost:2,127.0.0.1:2 test_hierarchical hier)
hvd_add_hier_test(test_hierarchical.2x3 6 localhost:2,127.0.0.1:2,${HVD_THIS_HOST}:2
                  test_hierarchical hier)
hvd_add_hier_test(test_hierarchical.uneven 3 localhost:2,127.0.0.1:1 test_hierarchical flat)
hvd_add_hier_test(test_hierarchical.mismatch 4 localhost:2,127.0.0.1:2 test_hierarchical
                  mismatch)
# The hierarchical allgather (hvdrun --hierarchical-allgather, rank 0's
# setting wins): built and used for allgathers alone, exact results for
# uneven and empty blocks, on 2 hosts of 2 and 3 hosts of 2.
foreach(layout "2x2;4;localhost:2,127.0.0.1:2" "2x3;6;localhost:2,127.0.0.1:2,${HVD_THIS_HOST}:2")
  list(GET layout 0 name)
  list(GET layout 1 np)
  list(GET layout 2 hosts)
  add_test(NAME mpi.test_hierarchical.allgather.${name} COMMAND $<TARGET_FILE:hvdrun> -np ${np}
           -H ${hosts} --hierarchical-allgather $<TARGET_FILE:test_hierarchical> allgather)
  set_tests_properties(mpi.test_hierarchical.allgather.${name} PROPERTIES TIMEOUT 300
    ENVIRONMENT "${HVD_TEST_ENV}")
endforeach()
# Without the switch, emulated hosts reduce flat.
add_test(NAME mpi.test_hierarchical.off COMMAND $<TARGET_FILE:hvdrun> -np 4
         -H localhost:2,127.0.0.1:2 $<TARGET_FILE:test_hierarchical> flat)
set_tests_properties(mpi.test_hierarchical.off PROPERTIES TIMEOUT 300
  ENVIRONMENT "${HVD_TEST_ENV}")
hvd_add_mpi_test(test_api_errors 1 2)
# hvd_opts of an older, smaller size works; nonsense sizes fail (struct_size).
hvd_add_mpi_test(test_opts_size 2)
hvd_add_mpi_test(test_mismatch 2 3)
# Shapes negotiated, integer scale factors, grouped allgather and
# reducescatter against the single calls, start/stop timeline.
hvd_add_mpi_test(test_tensor_ops 1 2 3 4)
# hvd_opts.device: host against device memory is a named mismatch; device
# memory agreed by every rank is refused as not yet run (docs/gpu.md).
hvd_add_mpi_test(test_device_memory 1 2 3)
# A process started without hvdrun is a job of size 1.
add_test(NAME mpi.test_collectives.alone COMMAND test_collectives)
add_test(NAME mpi.test_api_errors.alone COMMAND test_api_errors)
# Garbage, a wrong secret and a silent stranger at the rendezvous: the job goes on.
hvd_add_mpi_test(rdzv_attack 2 4)
# The engine: async enqueue from threads in any order, every async
# collective, callbacks, scale factors, mismatch and in-flight errors.
hvd_add_mpi_test(test_engine 1 2 3 4)
# A blocking small call on an idle engine reads no clock (exact at np 1).
hvd_add_mpi_test(test_engine_clock 1 2)
# The cached fast path: the same bits as full negotiation, tensors leaving
# the cache (new shapes, dtypes, eviction) negotiated again, skewed ranks.
hvd_add_mpi_test(test_cache_path 1 2 4)
# A small cached allreduce riding the fast path's exchange: the collective's
# bits (shm's rank order, recursive doubling's tree), fused, wrong guesses.
hvd_add_mpi_test(test_fast_rider 2 3 4)
# After a cycle that completed something, the engine's thread watches for
# the next enqueue a while (Python's waits poll, they do not drive): it
# takes some of a polled loop's operations with a core per rank (np 2 on
# CI's 2 cores), never with more ranks than cores (np 4).
hvd_add_mpi_test(test_engine_watch 2 4)
# The shm allreduce reading the other ranks' buffers (process_vm_readv)
# gives the windows' bits; a rank that refuses it turns it off.
hvd_add_mpi_test(test_single_copy 2)
# HOROVOD_AUTOTUNE: every rank applies rank 0's settings in the same cycle,
# results exact while they change; on emulated hosts the hierarchical
# allreduce is one of the knobs.
hvd_add_mpi_test(test_autotune_ranks 2 3)
add_test(NAME mpi.test_autotune_ranks.hosts.2x2 COMMAND $<TARGET_FILE:hvdrun> -np 4
         -H localhost:2,127.0.0.1:2 $<TARGET_FILE:test_autotune_ranks>)
set_tests_properties(mpi.test_autotune_ranks.hosts.2x2 PROPERTIES TIMEOUT 300 ENVIRONMENT "${HVD_TEST_ENV}")
# Fusion changes no bit; join with uneven batches; process sets.
hvd_add_mpi_test(test_fusion 2 4)
hvd_add_mpi_test(test_join 2 3 4)
hvd_add_mpi_test(test_process_sets 2 4)
# The elastic state (commit, restore, sync, hooks) and hvd_elastic_run
# across a new job, in a job whose membership stays the same.
hvd_add_mpi_test(test_elastic_state 1 2 3)
# engine_stall, engine_timeline and engine_peer_loss are driven by
# tests/launcher (test_engine_stall.py, test_timeline.py, test_engine_failures.py).
# Adasum against the formula at power-of-two sizes; a clear error at 3.
hvd_add_mpi_test(test_adasum 1 2 3 4)
# The DistributedOptimizer against single-process training, Adasum
# against its formula, bitwise-identical parameters after every step.
hvd_add_mpi_test(nn_dist 1 2 4)
# PowerSGD and top-k against expected results built from every rank's
# gradient: full rank is the average, error feedback, bitwise everywhere.
hvd_add_mpi_test(nn_compress 1 2 4)
# Broadcast of parameters and optimizer state, metric averaging, rank 0's
# checkpoint and resume, sampler shards across ranks.
hvd_add_mpi_test(nn_recipes 1 2 3)

# The same collectives over TCP: on one host the ranks use shared memory
# unless HOROVOD_SHM_DISABLE=1, so the main programs run again without it.
function(hvd_add_mpi_test_tcp prog)
  foreach(np ${ARGN})
    set(t mpi.${prog}.tcp.np${np})
    add_test(NAME ${t} COMMAND $<TARGET_FILE:hvdrun> -np ${np} $<TARGET_FILE:${prog}>)
    set_tests_properties(${t} PROPERTIES TIMEOUT 300
      ENVIRONMENT "${HVD_TEST_ENV};HOROVOD_SHM_DISABLE=1")
  endforeach()
endfunction()
hvd_add_mpi_test_tcp(test_collectives 2 3 4)
hvd_add_mpi_test_tcp(test_algorithms 2 3 4 5)
hvd_add_mpi_test_tcp(test_engine 2 4)
hvd_add_mpi_test_tcp(test_fusion 4)
hvd_add_mpi_test_tcp(test_cache_path 3)
hvd_add_mpi_test_tcp(test_fast_rider 2 3)
hvd_add_mpi_test_tcp(test_autotune_ranks 2)
# HOROVOD_THREAD_AFFINITY through hvdrun --thread-affinity: each local
# rank's engine thread on its CPU of the list (1,0: in another order than
# the ranks'), too short a list pins nothing,
# a malformed one fails hvd_init (test_affinity).
foreach(list "1,0" "0,1")
  string(REPLACE "," "" t ${list})
  add_test(NAME mpi.test_affinity.pinned${t} COMMAND $<TARGET_FILE:hvdrun> -np 2
           --thread-affinity ${list} $<TARGET_FILE:test_affinity> pinned ${list})
  set_tests_properties(mpi.test_affinity.pinned${t} PROPERTIES TIMEOUT 300
    ENVIRONMENT "${HVD_TEST_ENV}")
endforeach()
add_test(NAME mpi.test_affinity.unpinned COMMAND $<TARGET_FILE:hvdrun> -np 2
         --thread-affinity 0 $<TARGET_FILE:test_affinity> unpinned)
add_test(NAME mpi.test_affinity.bad COMMAND $<TARGET_FILE:hvdrun> -np 2
         $<TARGET_FILE:test_affinity> bad)
set_tests_properties(mpi.test_affinity.unpinned mpi.test_affinity.bad PROPERTIES TIMEOUT 300
  ENVIRONMENT "${HVD_TEST_ENV}")
