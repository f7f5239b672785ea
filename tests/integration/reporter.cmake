# The reporters command runs' scripts report through: the `ddpd` Python module
# (reporter/python/ddpd), run with Debian's /usr/bin/python3 as users' scripts are,
# and the C header (reporter/c/ddpd_report.h), both against a real socket.
add_executable(report_c_demo ${CMAKE_CURRENT_LIST_DIR}/reporter/report_c_demo.c)
target_include_directories(report_c_demo PRIVATE ${PROJECT_SOURCE_DIR}/reporter/c)
target_link_libraries(report_c_demo PRIVATE m)
# A C command run that answers a real preemption's notice (test_command_preemption.py's
# notice_c_header case runs it behind a real ddpd).
add_executable(notice_c_demo ${CMAKE_CURRENT_LIST_DIR}/reporter/notice_c_demo.c)
target_include_directories(notice_c_demo PRIVATE ${PROJECT_SOURCE_DIR}/reporter/c)
target_link_libraries(notice_c_demo PRIVATE m)
ddpd_py_cases(reporter_ ${CMAKE_CURRENT_LIST_DIR}/reporter/test_reporter.py PYTHON /usr/bin/python3
              ARGS --c-demo $<TARGET_FILE:report_c_demo> --cmake ${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR}
                   --python-install-dir ${DDPD_PYTHON_INSTALL_DIR} TIMEOUT 300)
