# libpenstock.so: the client library as one shared library, and its installation (headers,
# library, pkg-config file, CMake package, the penstock command).
#
# The library is linked from the static libraries of the client and every part below it. Those
# parts are compiled position-independent and with hidden visibility, so that only what
# include/penstock marks PENSTOCK_API (penstock/export.h) is exported; the version script
# (library.map) is the second fence: it keeps anything else, such as default-visible code pulled
# from a system archive, local. The engine, mgmt, target and repair are not in the library and
# keep their default flags. The penstock command links the static libraries, not this one: it
# also holds mgmt and the target, and uses client internals that the library does not export.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(PENSTOCK_LIBRARY_PARTS penstock_client penstock_codec penstock_transport penstock_mgmt_client
    penstock_protocol penstock_proto penstock_common)
# The file system API (penstock/fs.h) rides in the same library when it is built.
set(PENSTOCK_LIBRARY_WHOLE penstock_client)
if(TARGET penstock_fs)
  list(PREPEND PENSTOCK_LIBRARY_PARTS penstock_fs)
  list(PREPEND PENSTOCK_LIBRARY_WHOLE penstock_fs)
endif()
set_target_properties(${PENSTOCK_LIBRARY_PARTS} PROPERTIES
  POSITION_INDEPENDENT_CODE ON C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden
  VISIBILITY_INLINES_HIDDEN ON)

# A shared library needs a source: the version script stands in (the code comes from the archive).
set(PENSTOCK_VERSION_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/library.map)
add_library(penstock_shared SHARED ${PENSTOCK_VERSION_SCRIPT})
add_library(Penstock::penstock ALIAS penstock_shared)
set_target_properties(penstock_shared PROPERTIES
  OUTPUT_NAME penstock EXPORT_NAME penstock LINKER_LANGUAGE CXX
  VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
  LINK_DEPENDS ${PENSTOCK_VERSION_SCRIPT})
string(JOIN "," PENSTOCK_LIBRARY_WHOLE_LIST ${PENSTOCK_LIBRARY_WHOLE})
target_link_libraries(penstock_shared PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,${PENSTOCK_LIBRARY_WHOLE_LIST}>")
# penstock_fs depends on penstock_client: one feature for it on the whole link line.
set_property(TARGET penstock_shared PROPERTY LINK_LIBRARY_OVERRIDE_penstock_client WHOLE_ARCHIVE)
target_link_options(penstock_shared PRIVATE -Wl,--no-undefined
  -Wl,--version-script=${PENSTOCK_VERSION_SCRIPT})
target_include_directories(penstock_shared INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(penstock_shared INTERFACE cxx_std_20)

# Installation. Everything here is relocatable: `cmake --install build --prefix P` (and DESTDIR)
# may put it anywhere after configuring.
set(PENSTOCK_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Penstock)
install(TARGETS penstock_shared EXPORT PenstockTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_COMPONENT Development)
install(FILES ${PENSTOCK_PUBLIC_HEADERS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/penstock)
install(EXPORT PenstockTargets NAMESPACE Penstock:: DESTINATION ${PENSTOCK_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/PenstockConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/PenstockConfig.cmake INSTALL_DESTINATION ${PENSTOCK_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/PenstockConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/PenstockConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/PenstockConfigVersion.cmake DESTINATION ${PENSTOCK_CMAKE_DIR})

# penstock.pc finds its prefix from where it lies (${pcfiledir}), so it needs no rewriting when
# installed elsewhere.
file(RELATIVE_PATH PENSTOCK_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${CMAKE_CURRENT_LIST_DIR}/penstock.pc.in ${CMAKE_CURRENT_BINARY_DIR}/penstock.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/penstock.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
