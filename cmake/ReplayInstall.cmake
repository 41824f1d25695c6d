# `cmake --install`: the command, the preload, the library and its public
# headers, a CMake package (find_package(replay): replay::core, replay::api)
# and a pkg-config file (replay.pc).
include(CMakePackageConfigHelpers)

install(TARGETS replay_cli replay_drive RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS replay_interpose LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS replay_core replay_api EXPORT replayTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/libreplay/include/replay
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")

set(REPLAY_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/replay)
install(EXPORT replayTargets NAMESPACE replay:: DESTINATION ${REPLAY_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/replayConfig.cmake.in
  ${PROJECT_BINARY_DIR}/replayConfig.cmake
  INSTALL_DESTINATION ${REPLAY_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_BINDIR CMAKE_INSTALL_LIBDIR)
# Before 1.0 a minor version may change the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/replayConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/replayConfig.cmake ${PROJECT_BINARY_DIR}/replayConfigVersion.cmake
  DESTINATION ${REPLAY_CMAKE_DIR})

# The .pc file finds the prefix from where it lies, so the tree can be moved
# (cmake --install --prefix DIR).
file(RELATIVE_PATH REPLAY_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" REPLAY_PC_TO_PREFIX "${REPLAY_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/replay.pc.in ${PROJECT_BINARY_DIR}/replay.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/replay.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
