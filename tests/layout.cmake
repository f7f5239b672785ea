# The tree's shape: no include cycle in base/, server/, trainer/, runner/, schema/, client/,
# no include upward out of the libraries below the trainer and every program (and the detectors find
# what is planted).
ddpd_py_cases(layout_ ${CMAKE_CURRENT_LIST_DIR}/layout/test_include_cycles.py ARGS --source ${PROJECT_SOURCE_DIR}
              TIMEOUT 60)
