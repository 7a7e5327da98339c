# Fault injection (HVD_FAULT_INJECTION=ON): libhvd.so routes its own calls
# of the functions below through tests/fault/fault.c, which can make any
# one of them fail (see its header).  Only libhvd.so changes: hvdrun and
# the unit tests link the objects without the wrappers.
set(HVD_FAULT_WRAPPED malloc calloc realloc strdup socket bind listen accept4 connect send
    sendmsg recv recvmsg read write poll open shm_open ftruncate mmap getrandom pthread_create
    getaddrinfo getifaddrs)
target_sources(hvd PRIVATE ${CMAKE_SOURCE_DIR}/tests/fault/fault.c)
foreach(f ${HVD_FAULT_WRAPPED})
  target_link_options(hvd PRIVATE "LINKER:--wrap=${f}")
endforeach()
target_link_libraries(hvd PRIVATE ${CMAKE_DL_LIBS})

# The scenario every fault is injected into, and the sweep that runs it
# once per failure point (tests/fault/sweep.py).
add_executable(fault_scenario ${CMAKE_SOURCE_DIR}/tests/fault/scenario.c)
target_link_libraries(fault_scenario PRIVATE hvd)
