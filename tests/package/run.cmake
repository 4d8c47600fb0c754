# One package test (tests/package/CMakeLists.txt), in script mode:
#   1. install the build into WORK_DIR/prefix,
#   2. build consumer/main.cpp against it, with CMake's find_package(steppe)
#      (CONSUMER=find_package) or with the compiler and the flags pkg-config
#      reads from the installed steppe.pc (CONSUMER=pkg_config),
#      optimised and with warnings as errors, as a user's release build is
#      (GCC warns at -O2 about things it does not see at -O0),
#   3. run it: it writes a store, commits, reopens and reads it back,
#   4. run the installed CLI on that store (a shared build: it finds its library).
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
set(strict_flags -O2 -Wall -Wextra -Werror)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " command "${ARGN}")
    message(FATAL_ERROR "failed (${rc}): ${command}\n${out}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

if(CONSUMER STREQUAL "find_package")
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build -DCMAKE_PREFIX_PATH=${prefix}
      -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${LINK_FLAGS}")
  run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
  set(consumer ${WORK_DIR}/build/consumer)
elseif(CONSUMER STREQUAL "pkg_config")
  if(NOT PKG_CONFIG)
    message(FATAL_ERROR "pkg-config not found (apt-get install pkg-config)")
  endif()
  set(ENV{PKG_CONFIG_PATH} ${prefix}/${LIBDIR}/pkgconfig)
  unset(ENV{PKG_CONFIG_LIBDIR})
  # The .pc names the prefix the files went to, not the configured one.
  run(${PKG_CONFIG} --variable=prefix steppe)
  string(STRIP "${out}" pc_prefix)
  if(NOT pc_prefix STREQUAL prefix)
    message(FATAL_ERROR "steppe.pc says prefix=${pc_prefix}, installed under ${prefix}")
  endif()
  run(${PKG_CONFIG} --modversion steppe)
  run(${PKG_CONFIG} --cflags --libs steppe)
  separate_arguments(pc_flags UNIX_COMMAND "${out}")
  separate_arguments(cxx_flags UNIX_COMMAND "${CXX_FLAGS}")
  separate_arguments(link_flags UNIX_COMMAND "${LINK_FLAGS}")
  run(${PKG_CONFIG} --variable=libdir steppe)
  string(STRIP "${out}" pc_libdir)
  file(MAKE_DIRECTORY ${WORK_DIR}/build)
  set(consumer ${WORK_DIR}/build/consumer)
  run(${CXX} ${cxx_flags} ${strict_flags} ${SOURCE_DIR}/main.cpp -o ${consumer} ${pc_flags} ${link_flags} -Wl,-rpath,${pc_libdir})
else()
  message(FATAL_ERROR "CONSUMER is find_package or pkg_config, not '${CONSUMER}'")
endif()

run(${consumer} ${WORK_DIR}/store.db)
message(STATUS "${out}")
run(${prefix}/${BINDIR}/steppe check ${WORK_DIR}/store.db)
message(STATUS "an outside program built with ${CONSUMER} ran against the steppe installed in ${prefix}")
