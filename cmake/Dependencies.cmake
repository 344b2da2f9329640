# All third-party dependencies come from Debian packages (scripts/setup installs them).
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(absl REQUIRED CONFIG)
# The project's programs link abseil's static archives (libabsl-dev ships them beside the
# shared libraries): loading its ~30 shared libraries took every start of ptrace-direct
# ~2.3 ms (`--version`: 6.2 → 3.9 ms). The installed package names absl:: targets only, so
# its consumers still link whichever abseil their find_package gives them.
get_directory_property(ptd_imported_targets IMPORTED_TARGETS)
foreach(target IN LISTS ptd_imported_targets)
  if(NOT target MATCHES "^absl::")
    continue()
  endif()
  get_target_property(type ${target} TYPE)
  if(NOT type STREQUAL "SHARED_LIBRARY")
    continue()
  endif()
  get_target_property(configs ${target} IMPORTED_CONFIGURATIONS)
  foreach(config IN LISTS configs)
    get_target_property(location ${target} IMPORTED_LOCATION_${config})
    string(REGEX REPLACE "\\.so[.0-9]*$" ".a" archive "${location}")
    if(EXISTS "${archive}")
      set_target_properties(${target} PROPERTIES IMPORTED_LOCATION_${config} "${archive}")
    endif()
  endforeach()
endforeach()
find_package(nlohmann_json 3.10 REQUIRED CONFIG)
find_package(CLI11 REQUIRED CONFIG)
find_package(ZLIB REQUIRED)
pkg_check_modules(LIBELF REQUIRED IMPORTED_TARGET libelf)
# MiniDebugInfo (.gnu_debugdata) is xz-compressed.
pkg_check_modules(LIBLZMA REQUIRED IMPORTED_TARGET liblzma)
# The x86 instruction decoder (image/insn_classifier.h; capstone 4, used before, missed
# CET shadow-stack and AVX-512 instructions).
find_package(zydis 4 REQUIRED CONFIG)

# Debug files fetched by build-id from debuginfod servers (elfutils' client library).
pkg_check_modules(LIBDEBUGINFOD REQUIRED IMPORTED_TARGET libdebuginfod)
# DWARF (inlined frames, source locations: image/inline_table.h; line tables:
# image/line_table.h): elfutils' libdw.
pkg_check_modules(LIBDW REQUIRED IMPORTED_TARGET libdw)
# Demangling (C++, Rust legacy and v0, D): libiberty's cplus_demangle, as binutils and gdb.
# libiberty-dev ships a static, position-independent archive and no pkg-config file.
find_path(LIBIBERTY_INCLUDE_DIR libiberty/demangle.h REQUIRED)
find_library(LIBIBERTY_LIBRARY NAMES libiberty.a REQUIRED)
add_library(ptd_libiberty INTERFACE)
target_link_libraries(ptd_libiberty INTERFACE ${LIBIBERTY_LIBRARY})

# libipt-dev ships no pkg-config or CMake file: find header and library by hand.
find_path(LIBIPT_INCLUDE_DIR intel-pt.h REQUIRED)
find_library(LIBIPT_LIBRARY ipt REQUIRED)
add_library(ptd_libipt INTERFACE)
target_include_directories(ptd_libipt INTERFACE $<BUILD_INTERFACE:${LIBIPT_INCLUDE_DIR}>)
target_link_libraries(ptd_libipt INTERFACE ${LIBIPT_LIBRARY})

# Where tests find the sources, the build and the CLI. The shared test PCH is compiled
# with exactly these, so every test target can reuse it.
function(ptd_test_definitions target)
  target_compile_definitions(${target} PRIVATE
    PTD_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    PTD_BINARY_DIR="${CMAKE_BINARY_DIR}"
    PTD_CLI_PATH="$<TARGET_FILE:ptrace-direct>")
endfunction()

if(PTD_BUILD_TESTS)
  find_package(GTest REQUIRED CONFIG)
  include(GoogleTest)
  # gtest/gmock headers dominate test compile time: precompile them once, in this small
  # target, and let every test executable reuse that one header (same flags and defines).
  add_library(ptd_test_pch STATIC ${PROJECT_SOURCE_DIR}/tests/testing/pch_anchor.cc)
  target_link_libraries(ptd_test_pch PRIVATE GTest::gtest GTest::gmock)
  target_precompile_headers(ptd_test_pch PRIVATE <gtest/gtest.h> <gmock/gmock.h>)
  ptd_test_definitions(ptd_test_pch)
endif()
if(PTD_BUILD_BENCH)
  find_package(benchmark REQUIRED CONFIG)
endif()

# Helper: one static library per module folder; public headers live in the folder and
# are included as "<folder>/<header>.h" from the project root.
function(ptd_module name)
  cmake_parse_arguments(M "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${M_SOURCES})
  # Build tree only: the installed package exposes nothing but include/ptd/ (cmake/Install.cmake).
  target_include_directories(${name} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
                                            $<BUILD_INTERFACE:${CMAKE_BINARY_DIR}/generated>)
  target_link_libraries(${name} PUBLIC ${M_DEPS})
  if(PTD_UNITY_LIBRARIES)
    set_target_properties(${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endif()
  if(PTD_FUZZ)
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer-no-link)
  endif()
endfunction()

# A test that records under Valgrind runs the tool from the build tree: build the tool
# first where it can be built (without Valgrind's headers the tests skip, saying why).
function(ptd_test_uses_valgrind_tool name)
  if(TARGET ptdtrace)
    add_dependencies(${name} ptdtrace)
  endif()
endfunction()

# Helper: one GoogleTest executable registered with CTest. LABELS lets scripts pick groups.
function(ptd_test name)
  cmake_parse_arguments(T "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  foreach(label ${T_LABELS})
    if(label IN_LIST PTD_SKIP_TEST_LABELS)
      # Defined (callers add dependencies to it) but neither built by default nor run.
      set_target_properties(${name} PROPERTIES EXCLUDE_FROM_ALL TRUE)
      target_link_libraries(${name} PRIVATE ${T_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
      ptd_test_definitions(${name})
      return()
    endif()
  endforeach()
  target_link_libraries(${name} PRIVATE ${T_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  target_precompile_headers(${name} REUSE_FROM ptd_test_pch)
  ptd_test_definitions(${name})
  if(PTD_UNITY_TESTS)
    set_target_properties(${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endif()
  if(PTD_TEST_LINKER)
    target_link_options(${name} PRIVATE -fuse-ld=${PTD_TEST_LINKER})
  endif()
  # Recordings archive their binaries in a shared cache (recorder/images/trace_archive.h): the
  # tests' goes in the build tree, not in the home directory.
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${T_LABELS}"
                       ENVIRONMENT "PTD_CACHE_DIR=${CMAKE_BINARY_DIR}/test-archive-cache")
endfunction()
