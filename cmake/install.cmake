# SPDX-License-Identifier: Apache-2.0
# cmake --install: libharp (shared and static), harp.h, harp.pc and a CMake package for programs
# that use the library; for nodes, the NCCL plugin, the tools, harp-attach and the XDP object that
# harp-attach loads with xdp-loader (the library carries its own copy, compiled in).
include(CMakePackageConfigHelpers)

install(TARGETS harp harp_static EXPORT harpTargets
	LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
	ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
	INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${CMAKE_SOURCE_DIR}/include/harp/harp.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/harp)

# NCCL opens the plugin by full path (NCCL_NET_PLUGIN=/prefix/lib/libnccl-net-harp.so), by name
# on the library path (NCCL_NET_PLUGIN=harp: libnccl-net-harp.so), or, with NCCL_NET_PLUGIN
# unset, as libnccl-net.so: the alias installed beside it. RUNPATH $ORIGIN lets a container carry
# libbpf.so.1 and libxdp.so.1 in that same directory instead of installing the distribution's
# packages; the configured library directory after it finds them when the plugin is reached
# through a link elsewhere (/usr/lib/libnccl-net.so in the plugin layer), where $ORIGIN is the
# link's directory.
set_target_properties(nccl-net-harp PROPERTIES INSTALL_RPATH "$ORIGIN;${CMAKE_INSTALL_FULL_LIBDIR}")
install(TARGETS nccl-net-harp LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(CODE "
	set(harp_alias \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/libnccl-net.so\")
	if(IS_ABSOLUTE \"${CMAKE_INSTALL_LIBDIR}\")
		set(harp_alias \"\$ENV{DESTDIR}${CMAKE_INSTALL_LIBDIR}/libnccl-net.so\")
	endif()
	message(STATUS \"Installing: \${harp_alias} -> libnccl-net-harp.so\")
	file(CREATE_LINK libnccl-net-harp.so \"\${harp_alias}\" SYMBOLIC)
	list(APPEND CMAKE_INSTALL_MANIFEST_FILES \"\${harp_alias}\")")

install(TARGETS harp-params harp-xfer harp-perf RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# the node agent, which harp-attach run starts from beside itself
install(TARGETS harp-agent RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR})
# OPTIONAL: installs are not held up while the script is being written, and it is picked up
# once it exists without configuring again.
install(PROGRAMS ${CMAKE_SOURCE_DIR}/scripts/harp-attach DESTINATION ${CMAKE_INSTALL_SBINDIR}
	OPTIONAL)
install(FILES ${BPF_OBJ} DESTINATION ${CMAKE_INSTALL_DATADIR}/harp)

# harp.pc gets its prefix at install time, where `cmake --install --prefix P` sets it (pkg-config
# has no relocatable prefix that every version understands): configured now with everything but
# the prefix, whose placeholder the install step fills as it writes the file into its place, so
# installing writes nothing into the build tree (which may be read-only).
if(IS_ABSOLUTE ${CMAKE_INSTALL_LIBDIR})
	set(HARP_PC_LIBDIR ${CMAKE_INSTALL_LIBDIR})
	set(HARP_PC_DIR "\$ENV{DESTDIR}${CMAKE_INSTALL_LIBDIR}/pkgconfig")
else()
	set(HARP_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
	set(HARP_PC_DIR "\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig")
endif()
if(IS_ABSOLUTE ${CMAKE_INSTALL_INCLUDEDIR})
	set(HARP_PC_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR})
else()
	set(HARP_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
set(HARP_PC_PREFIX "@CMAKE_INSTALL_PREFIX@")
configure_file(${CMAKE_CURRENT_LIST_DIR}/harp.pc.in ${CMAKE_BINARY_DIR}/pkgconfig/harp.pc.in @ONLY)
install(CODE "
	set(harp_pc \"${HARP_PC_DIR}/harp.pc\")
	message(STATUS \"Installing: \${harp_pc}\")
	configure_file(\"${CMAKE_BINARY_DIR}/pkgconfig/harp.pc.in\" \"\${harp_pc}\" @ONLY)
	list(APPEND CMAKE_INSTALL_MANIFEST_FILES \"\${harp_pc}\")")

# The CMake package is relocatable: its paths are found from the config file's own place.
set(HARP_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/harp)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/harpConfig.cmake.in
	${CMAKE_BINARY_DIR}/cmake/harpConfig.cmake INSTALL_DESTINATION ${HARP_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake/harpConfigVersion.cmake
	VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(EXPORT harpTargets NAMESPACE harp:: DESTINATION ${HARP_CMAKE_DIR})
install(FILES ${CMAKE_BINARY_DIR}/cmake/harpConfig.cmake
	${CMAKE_BINARY_DIR}/cmake/harpConfigVersion.cmake DESTINATION ${HARP_CMAKE_DIR})

if(HARP_FAULT_INJECTION)
	install(CODE "message(WARNING \"this build carries the test fault injector \
(HARP_FAULT_INJECTION=ON, as scripts/setup.sh configures for the tests): HARP_FAULT_DROP_PPM \
set in a job's environment drops packets. For a production install, configure a build with \
the default, -DHARP_FAULT_INJECTION=OFF.\")")
endif()
