# hvd.tensorflow's op library: built when the project's venv
# (HVD_VENV_PYTHON, scripts/venv.sh) can import TensorFlow, against that
# TensorFlow's C API headers (its functions bound at load).  It carries
# no libhvd objects: it calls hvd._C's engine through hvd._C._capi.
# Sanitizer builds skip it (their runtimes cannot load into the venv's
# python without preloading).
set(HVD_BUILT_TENSORFLOW 0)
set(HVD_BUILT_KERAS 0)
if(HVD_VENV_PYTHON AND TARGET hvd_python AND NOT HVD_SANITIZE)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env TF_CPP_MIN_LOG_LEVEL=3 ${HVD_VENV_PYTHON} -c
            "import tensorflow as tf; print(tf.sysconfig.get_include()); print(tf.sysconfig.get_lib()); print(tf.__version__)"
    OUTPUT_VARIABLE HVD_TF_INFO ERROR_QUIET RESULT_VARIABLE HVD_TF_RC
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(HVD_TF_RC EQUAL 0)
    string(REPLACE "\n" ";" HVD_TF_INFO "${HVD_TF_INFO}")
    list(GET HVD_TF_INFO 0 HVD_TF_INCLUDE)
    list(GET HVD_TF_INFO 1 HVD_TF_LIB)
    list(GET HVD_TF_INFO 2 HVD_TF_VERSION)
    message(STATUS "TensorFlow ${HVD_TF_VERSION} (${HVD_TF_LIB}): building hvd.tensorflow's ops")
    enable_language(CXX)
    add_library(hvd_tf_ops MODULE python/tensorflow/ops.c python/tensorflow/done.cc)
    target_include_directories(hvd_tf_ops PRIVATE python/_C include)
    target_include_directories(hvd_tf_ops SYSTEM PRIVATE ${HVD_TF_INCLUDE})
    # Not linked with libtensorflow_framework.so.2: its TF_* functions are
    # bound when hvd.tensorflow loads the library into the user's
    # TensorFlow, which it first makes global (hvd/common/frameworks.py),
    # so one library serves every TensorFlow hvd serves and a wheel
    # carries no dependency on a library it must not bundle.
    target_link_libraries(hvd_tf_ops PRIVATE Threads::Threads)
    set_target_properties(hvd_tf_ops PROPERTIES
      PREFIX "" OUTPUT_NAME _hvd_tf_ops C_VISIBILITY_PRESET hidden
      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/python/hvd/tensorflow)
    add_dependencies(hvd_tf_ops hvd_python_files)
    set(HVD_BUILT_TENSORFLOW 1)
    execute_process(COMMAND ${HVD_VENV_PYTHON} -c "import keras; print(keras.__version__)"
      OUTPUT_QUIET ERROR_QUIET RESULT_VARIABLE HVD_KERAS_RC)
    if(HVD_KERAS_RC EQUAL 0)
      set(HVD_BUILT_KERAS 1)
    endif()
  else()
    message(STATUS "${HVD_VENV_PYTHON} cannot import tensorflow: hvd.tensorflow is not built")
  endif()
endif()
