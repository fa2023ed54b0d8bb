# What `cmake --install` puts in place (GNUInstallDirs, below the prefix):
#   bin/kvxd, bin/kvxctl, bin/kvx-bench
#   LIBDIR/libkvx.so.VERSION, its SONAME link libkvx.so.MAJOR and the link libkvx.so
#   include/kvx/kvx.h, include/kvx/version.h
#   LIBDIR/pkgconfig/kvx.pc and the systemd unit kvxd@.service (packaging/install-files.cmake)
#   share/doc/kvx/README.md, share/doc/kvx/examples/*.ini
#   lib/python3/dist-packages/kvx/: the Python package (plain builds; the rules are next to the
#   package's target in CMakeLists.txt)
# Nothing goes to /etc: a node's /etc/kvx/NAME.ini is the administrator's, written from the
# examples.  `make package` builds a .deb of the same files with CPack.
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

# The .deb (`make package`, or `cpack -G DEB` in the build tree): every file above, with
# prefix /usr, the unit in /lib/systemd/system.  DESTDIR staging (CPACK_SET_DESTDIR) makes the
# install run with CMAKE_INSTALL_PREFIX=/usr, which install-files.cmake reads.  Depends comes
# from dpkg-shlibdeps over the packaged binaries (what they actually link), plus the package's
# own shlibs for libkvx; the verbs providers are loaded with dlopen(), hence Recommends.
set(KVX_DEB_MAINTAINER "kvx maintainers <kvx@localhost>" CACHE STRING
	"the .deb's Maintainer field")
set(CPACK_GENERATOR DEB)
set(CPACK_SOURCE_GENERATOR "")
set(CPACK_PACKAGE_NAME kvx)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
	"RDMA KV-cache transfer sidecar for disaggregated LLM serving")
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${KVX_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# (CPack puts the summary first and indents these lines)
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
	"kvxd moves KV-cache pages from prefill engines to decode engines over RDMA;
engines attach to it through libkvx. This package holds kvxd, kvxctl,
kvx-bench, libkvx with its headers and pkg-config file, the Python package
kvx (for the distribution's python3), the systemd unit template kvxd@.service
and example configurations.")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "ibverbs-providers")
# our own postinst and postrm replace CPack's, which would only run ldconfig: the triggers file
# does that
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CMAKE_SOURCE_DIR}/packaging/deb/postinst
	${CMAKE_SOURCE_DIR}/packaging/deb/postrm ${CMAKE_SOURCE_DIR}/packaging/deb/triggers)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
