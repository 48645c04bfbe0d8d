# SPDX-License-Identifier: Apache-2.0
# cpack -G DEB (in the build directory): harp_<version>_<arch>.deb, everything `cmake --install`
# lays down plus the node's systemd unit for `harp-attach run` (packaging/). Configure the build
# with -DCMAKE_INSTALL_PREFIX=/usr: the plugin's RUNPATH and harp-perf's way to it are fixed at
# configure time, from that prefix.
install(FILES ${CMAKE_SOURCE_DIR}/packaging/harp-attach.service
	DESTINATION lib/systemd/system)
# /etc/default for a /usr build (a package); else under the prefix, so that an install with
# --prefix or DESTDIR writes nowhere else
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
	set(HARP_DEFAULT_DIR ${CMAKE_INSTALL_FULL_SYSCONFDIR}/default)
else()
	set(HARP_DEFAULT_DIR ${CMAKE_INSTALL_SYSCONFDIR}/default)
endif()
install(FILES ${CMAKE_SOURCE_DIR}/packaging/harp-attach.default
	DESTINATION ${HARP_DEFAULT_DIR} RENAME harp-attach)
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_SOURCE_DIR}/docs/OPERATIONS.md
	${CMAKE_SOURCE_DIR}/docs/PROTOCOL.md ${CMAKE_SOURCE_DIR}/docs/DESIGN.md
	DESTINATION ${CMAKE_INSTALL_DOCDIR})

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME harp)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "harp developers <harp@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
	"NCCL's inter-node traffic over AF_XDP: library, XDP program, NCCL plugin, node tools")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "harp moves NCCL's traffic between hosts over AF_XDP \
sockets with its own reliable, congestion-controlled transport in user space, on plain cloud \
NICs without RDMA. The package holds libharp, the NCCL net plugin libnccl-net-harp.so with its \
libnccl-net.so alias, harp-attach and harp-agent (node preparation and the node agent, with a \
systemd unit), the XDP object, harp-xfer, harp-params and harp-perf.")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# libbpf and libxdp are linked; harp-attach runs xdp-loader, bpftool, ip and ethtool; HARP_AUTH
# loads libsodium only when it is on
set(CPACK_DEBIAN_PACKAGE_DEPENDS
	"libc6 (>= 2.34), libbpf1 (>= 1:1.1.0), libxdp1 (>= 1.3.0), xdp-tools, bpftool, iproute2, ethtool")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libsodium23")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
	${CMAKE_SOURCE_DIR}/packaging/conffiles ${CMAKE_SOURCE_DIR}/packaging/triggers)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
