# The tree's shape: no include cycle in base/, server/, trainer/, runner/, schema/, client/,
# no include upward out of the libraries below the trainer and every program (and the detectors find
# what is planted).
ddpd_py_cases(layout_ ${CMAKE_CURRENT_LIST_DIR}/layout/test_include_cycles.py ARGS --source ${PROJECT_SOURCE_DIR}
              TIMEOUT 60)
# The docs hold together: every relative link and #anchor in README.md, CONTRIBUTING.md and
# docs/*.md leads to a file and heading that exist, the README stays under 300 lines, and
# the detector names planted broken links.
ddpd_py_cases(layout_doc_links_ ${CMAKE_CURRENT_LIST_DIR}/layout/test_doc_links.py ARGS --source ${PROJECT_SOURCE_DIR}
              TIMEOUT 60)
# Every header's include guard names its own path (DDPD_ and the path, upper-cased), so a
# guard copied with a file, or left naming the folder a file moved out of, is found.
ddpd_py_cases(layout_guards_ ${CMAKE_CURRENT_LIST_DIR}/layout/test_header_guards.py ARGS --source ${PROJECT_SOURCE_DIR}
              TIMEOUT 60)
# The tests' own layout: unit/ and integration/ by area, each folder registered by the
# .cmake file named for it, no sys.path edit (tests/support is on PYTHONPATH).
ddpd_py_cases(layout_tests_ ${CMAKE_CURRENT_LIST_DIR}/layout/test_test_layout.py ARGS --source ${PROJECT_SOURCE_DIR}
              TIMEOUT 60)
# The same layers against the calls in the built server libraries (nm), and the detector
# finds a call planted upward.
set(layer_call_args --source ${PROJECT_SOURCE_DIR} --nm ${CMAKE_NM} --cc ${CMAKE_C_COMPILER})
# (each layer's library is ddpd_LAYER, but server/base/'s: ddpd_server_base, the top-level base/ being ddpd_common)
list(APPEND layer_call_args --lib server/base=$<TARGET_FILE:ddpd_server_base>)
foreach(layer lib proc host store feed exec sched sweep api cmd agent)
  list(APPEND layer_call_args --lib server/${layer}=$<TARGET_FILE:ddpd_${layer}>)
endforeach()
ddpd_py_cases(layout_calls_ ${CMAKE_CURRENT_LIST_DIR}/layout/test_layer_calls.py ARGS ${layer_call_args} TIMEOUT 60)
# Nothing in the server reaches a file by its path but run_files and the places whose
# paths are not a run's, each with its reason (the same libraries, nm), and the
# detector finds a planted fopen of a run's config.
ddpd_py_cases(layout_run_paths_ ${CMAKE_CURRENT_LIST_DIR}/layout/test_run_paths.py ARGS ${layer_call_args} TIMEOUT 60)
