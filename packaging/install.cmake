# What `cmake --install` puts in place (GNUInstallDirs, below the prefix):
#   bin/kvxd, bin/kvxctl, bin/kvx-bench
#   LIBDIR/libkvx.so.VERSION, its SONAME link libkvx.so.MAJOR and the link libkvx.so
#   include/kvx/kvx.h, include/kvx/version.h
#   LIBDIR/pkgconfig/kvx.pc and the systemd unit kvxd@.service (packaging/install-files.cmake)
#   share/doc/kvx/README.md, share/doc/kvx/examples/*.ini
# Nothing goes to /etc: a node's /etc/kvx/NAME.ini is the administrator's, written from the
# examples.
include(GNUInstallDirs)

set_target_properties(kvx PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})
install(TARGETS kvxd kvxctl kvx-bench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS kvx LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${CMAKE_SOURCE_DIR}/include/kvx/kvx.h ${CMAKE_BINARY_DIR}/include/kvx/version.h
	DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kvx)
install(FILES ${CMAKE_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
file(GLOB KVX_EXAMPLE_CONFIGS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/configs/*.ini)
install(FILES ${KVX_EXAMPLE_CONFIGS} DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
install(CODE "
	set(KVX_SRC \"${CMAKE_SOURCE_DIR}\")
	set(KVX_GEN \"${CMAKE_BINARY_DIR}/packaging\")
	set(KVX_VERSION \"${PROJECT_VERSION}\")
	set(KVX_BINDIR \"${CMAKE_INSTALL_BINDIR}\")
	set(KVX_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
	set(KVX_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
	set(KVX_DOCDIR \"${CMAKE_INSTALL_DOCDIR}\")
	include(\"${CMAKE_SOURCE_DIR}/packaging/install-files.cmake\")
")
