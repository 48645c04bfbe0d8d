# SPDX-License-Identifier: Apache-2.0
# deploy_install: `cmake --install` of this build into a fresh prefix and under DESTDIR, every file
# of the layout checked, then programs built against the installed tree through pkg-config and
# find_package(harp) (install.sh says what each check is). No root needed. RUN_SERIAL: installing
# writes CMake's install_manifest.txt into the build tree.
add_test(NAME deploy_install
	COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install.sh
		--build ${CMAKE_BINARY_DIR} --source ${CMAKE_SOURCE_DIR} --version ${PROJECT_VERSION}
		--harp-perf $<TARGET_FILE:harp-perf> --plugin $<TARGET_FILE:nccl-net-harp>
		--bpf-object ${BPF_OBJ}
		--libdir ${CMAKE_INSTALL_LIBDIR} --bindir ${CMAKE_INSTALL_BINDIR}
		--sbindir ${CMAKE_INSTALL_SBINDIR} --includedir ${CMAKE_INSTALL_INCLUDEDIR}
		--datadir ${CMAKE_INSTALL_DATADIR} --full-libdir ${CMAKE_INSTALL_FULL_LIBDIR}
		--cmake ${CMAKE_COMMAND} --cc ${CMAKE_C_COMPILER})
set_tests_properties(deploy_install PROPERTIES
	LABELS deploy
	TIMEOUT 300
	RUN_SERIAL TRUE
	SKIP_RETURN_CODE 77)
