# Runs at install time (`cmake --install`, `make install`, CPack), from packaging/install.cmake's
# install(CODE): kvx.pc and kvxd@.service name installed paths, so they are generated here
# with the prefix this install runs with (`cmake --install --prefix DIR` included), not the
# one configured.  In: KVX_SRC, KVX_GEN (a directory of the build tree), KVX_VERSION, and the
# GNUInstallDirs dirs KVX_BINDIR, KVX_LIBDIR, KVX_INCLUDEDIR, KVX_DOCDIR.
set(prefix "${CMAKE_INSTALL_PREFIX}")
foreach(d BINDIR LIBDIR INCLUDEDIR DOCDIR)
	if(IS_ABSOLUTE "${KVX_${d}}")
		set(full_${d} "${KVX_${d}}")
	else()
		set(full_${d} "${prefix}/${KVX_${d}}")
	endif()
endforeach()

# kvx.pc: paths below the prefix stay relative to ${prefix}
set(libdir "${full_LIBDIR}")
set(includedir "${full_INCLUDEDIR}")
if(NOT IS_ABSOLUTE "${KVX_LIBDIR}")
	set(libdir "\${prefix}/${KVX_LIBDIR}")
endif()
if(NOT IS_ABSOLUTE "${KVX_INCLUDEDIR}")
	set(includedir "\${prefix}/${KVX_INCLUDEDIR}")
endif()
set(bindir "${full_BINDIR}")
set(docdir "${full_DOCDIR}")

# The unit: where Debian 12 puts a package's units when the prefix is /usr (like
# GNUInstallDirs' /etc for /usr), otherwise below the prefix (systemd also reads
# /usr/local/lib/systemd/system).
if(prefix STREQUAL "/usr")
	set(unitdir "/lib/systemd/system")
else()
	set(unitdir "${prefix}/lib/systemd/system")
endif()

# generated in a directory of the build tree of their own per prefix and DESTDIR (two installs
# at once do not share it), removed once installed
string(MD5 key "$ENV{DESTDIR}|${prefix}")
set(gen "${KVX_GEN}/${key}")
configure_file("${KVX_SRC}/packaging/kvx.pc.in" "${gen}/kvx.pc" @ONLY)
configure_file("${KVX_SRC}/packaging/kvxd@.service.in" "${gen}/kvxd@.service" @ONLY)
file(INSTALL DESTINATION "${full_LIBDIR}/pkgconfig" TYPE FILE FILES "${gen}/kvx.pc")
file(INSTALL DESTINATION "${unitdir}" TYPE FILE FILES "${gen}/kvxd@.service")
file(REMOVE_RECURSE "${gen}")
