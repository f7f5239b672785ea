# The tree's shape: no include cycle in server/, trainer/, schema/, client/ (and the
# detector finds one planted).
ddpd_py_cases(layout_ ${CMAKE_CURRENT_LIST_DIR}/layout/test_include_cycles.py ARGS --source ${PROJECT_SOURCE_DIR}
              TIMEOUT 60)
