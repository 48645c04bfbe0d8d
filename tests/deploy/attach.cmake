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
endif()
