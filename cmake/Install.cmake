# `cmake --install`: the CLI (cli/), the public headers (include/ptd/ only, from
# recorder/include, decoder/include and the generated version.h), the static libraries of
# ptd::recorder and ptd::decoder with every library they need, a CMake package
# (find_package(ptrace_direct) -> ptd::recorder, ptd::decoder) and a pkg-config file
# (ptrace-direct). Consumers need only the prefix on CMAKE_PREFIX_PATH / PKG_CONFIG_PATH
# (docs/library.md). examples/harness/ is built against it by scripts/test-install.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(PTD_EXPORTED_LIBRARIES ptd_recorder ptd_decoder ptd_image ptd_sideband ptd_ftf ptd_common ptd_libipt ptd_libiberty)
foreach(lib IN LISTS PTD_EXPORTED_LIBRARIES)
  string(REGEX REPLACE "^ptd_" "" export_name ${lib})
  set_target_properties(${lib} PROPERTIES EXPORT_NAME ${export_name})
endforeach()
# libipt-dev has no package file of its own: the installed target names the files found here.
target_include_directories(ptd_libipt INTERFACE $<INSTALL_INTERFACE:${LIBIPT_INCLUDE_DIR}>)

install(TARGETS ${PTD_EXPORTED_LIBRARIES} EXPORT ptrace_directTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${CMAKE_BINARY_DIR}/generated/ptd/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ptd)
install(EXPORT ptrace_directTargets NAMESPACE ptd::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ptrace_direct)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ptrace_directConfig.cmake.in
  ${CMAKE_BINARY_DIR}/ptrace_directConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ptrace_direct)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/ptrace_directConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/ptrace_directConfig.cmake ${CMAKE_BINARY_DIR}/ptrace_directConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ptrace_direct)

# libipt's headers: a -I only when they are not in the compiler's own search path.
set(PTD_PC_LIBIPT_CFLAGS "")
if(NOT LIBIPT_INCLUDE_DIR IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
  set(PTD_PC_LIBIPT_CFLAGS "-I${LIBIPT_INCLUDE_DIR}")
endif()
file(RELATIVE_PATH PTD_PC_INCLUDE_FROM_PCDIR /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig
     /prefix/${CMAKE_INSTALL_INCLUDEDIR})
configure_file(${PROJECT_SOURCE_DIR}/cmake/ptrace-direct.pc.in ${CMAKE_BINARY_DIR}/ptrace-direct.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/ptrace-direct.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
