# SPDX-License-Identifier: Apache-2.0
# harp-attach on namespaced veth and the privilege split (attach.sh); root, exit 77 without it.
if(TARGET harp-xfer)
	add_test(NAME deploy_attach COMMAND ${CMAKE_CURRENT_LIST_DIR}/attach.sh)
	set_tests_properties(deploy_attach PROPERTIES
		LABELS deploy
		TIMEOUT 400
		RUN_SERIAL TRUE
		SKIP_RETURN_CODE 77
		ENVIRONMENT "HARP_XFER=$<TARGET_FILE:harp-xfer>")
	# The same on links with IPv6 addresses only (tests/netns/lib.sh, topo_family): harp-attach
	# needs no address of either family, and the unprivileged process moves data over IPv6.
	add_test(NAME deploy_attach6 COMMAND ${CMAKE_CURRENT_LIST_DIR}/attach.sh)
	set_tests_properties(deploy_attach6 PROPERTIES
		LABELS deploy
		TIMEOUT 400
		RUN_SERIAL TRUE
		SKIP_RETURN_CODE 77
		ENVIRONMENT "HARP_XFER=$<TARGET_FILE:harp-xfer>;topo_family=6")
endif()
