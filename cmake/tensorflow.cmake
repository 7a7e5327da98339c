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
    add_library(hvd_tf_ops MODULE python/tensorflow/ops.c python/tensorflow/capi.c
                python/tensorflow/done.cc)
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
    # The XLA kernels (HOROVOD_ENABLE_XLA_OPS=1), a library of their own,
    # loaded only under that knob: xla.cc is C++ against TensorFlow's C++
    # headers (two of the third-party trees the wheel ships), so it binds
    # to this one TensorFlow's C++ ABI (HVD_TF_VERSION; hvd.tensorflow
    # refuses another) and stays out of the wheel (setup.py).  Like the op
    # library it links no TensorFlow library: libtensorflow_framework's and
    # libtensorflow_cc's symbols are made global first.  The handlers
    # (xla.c) read the call frame with hvd.jax's frame.c, against
    # TensorFlow's copy of XLA's FFI C API.
    add_library(hvd_tf_xla MODULE python/tensorflow/xla.c python/tensorflow/xla.cc
                python/tensorflow/capi.c python/_jax/frame.c)
    target_include_directories(hvd_tf_xla PRIVATE python/_C python/_jax python/tensorflow include)
    target_include_directories(hvd_tf_xla SYSTEM PRIVATE ${HVD_TF_INCLUDE}
      ${HVD_TF_INCLUDE}/external/highwayhash ${HVD_TF_INCLUDE}/external/farmhash_archive/src)
    target_compile_definitions(hvd_tf_xla PRIVATE "FRAME_WHO=\"hvd.tensorflow (XLA)\""
      "HVD_TF_VERSION=\"${HVD_TF_VERSION}\"")
    set_source_files_properties(python/tensorflow/xla.cc PROPERTIES COMPILE_OPTIONS
      "-std=c++17;-D_GLIBCXX_USE_CXX11_ABI=1;-DEIGEN_MAX_ALIGN_BYTES=64")
    target_link_libraries(hvd_tf_xla PRIVATE Threads::Threads)
    set_target_properties(hvd_tf_xla PROPERTIES
      PREFIX "" OUTPUT_NAME _hvd_tf_xla C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden
      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/python/hvd/tensorflow)
    add_dependencies(hvd_tf_xla hvd_python_files)
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
