# hvd.mxnet's library (python/_mxnet): built when HVD_MXNET_PYTHON (the
# second venv, scripts/venv-mxnet.sh) can import MXNet, in C against the
# wheel's include/mxnet/c_api.h (libmxnet.so's functions bound at load); error.cc is its one
# C++ file (a dmlc::Error, which the engine's completion takes).  It
# carries no libhvd objects: it calls hvd._C's engine through
# hvd._C._capi.  Sanitizer builds skip it, as they skip hvd.tensorflow's.
set(HVD_MXNET_PYTHON "" CACHE FILEPATH "python of the MXNet venv (scripts/venv-mxnet.sh)")
set(HVD_BUILT_MXNET 0)
if(HVD_MXNET_PYTHON AND TARGET hvd_python AND NOT HVD_SANITIZE)
  execute_process(
    COMMAND ${HVD_MXNET_PYTHON} -c
            "import os, mxnet; d = os.path.dirname(mxnet.__file__); print(os.path.join(d, 'include')); print(os.path.join(d, 'libmxnet.so')); print(mxnet.__version__)"
    OUTPUT_VARIABLE HVD_MX_INFO ERROR_QUIET RESULT_VARIABLE HVD_MX_RC
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(HVD_MX_RC EQUAL 0)
    string(REPLACE "\n" ";" HVD_MX_INFO "${HVD_MX_INFO}")
    list(GET HVD_MX_INFO 0 HVD_MX_INCLUDE)
    list(GET HVD_MX_INFO 1 HVD_MX_LIB)
    list(GET HVD_MX_INFO 2 HVD_MX_VERSION)
    message(STATUS "MXNet ${HVD_MX_VERSION} (${HVD_MX_LIB}): building hvd.mxnet's library")
    enable_language(CXX)
    file(GLOB HVD_MX_SOURCES CONFIGURE_DEPENDS python/_mxnet/*.c python/_mxnet/*.cc)
    add_library(hvd_mx MODULE ${HVD_MX_SOURCES})
    target_include_directories(hvd_mx PRIVATE python/_C python/_mxnet include)
    target_include_directories(hvd_mx SYSTEM PRIVATE ${HVD_MX_INCLUDE})
    # Not linked with libmxnet.so (which has no soname to be found by):
    # hvd.mxnet makes the loaded one global before loading this library
    # (hvd/common/frameworks.py), whose MX* functions bind to it then.
    set_target_properties(hvd_mx PROPERTIES
      PREFIX "" OUTPUT_NAME _hvd_mx C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden
      CXX_STANDARD 17
      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/python/hvd/mxnet)
    add_dependencies(hvd_mx hvd_python_files)
    install(TARGETS hvd_mx LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/python3/dist-packages/hvd/mxnet)
    set(HVD_BUILT_MXNET 1)
  else()
    message(STATUS "${HVD_MXNET_PYTHON} cannot import mxnet: hvd.mxnet is not built")
  endif()
endif()
