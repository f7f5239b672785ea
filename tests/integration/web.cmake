# Live updates and the dashboard, against a real ddpd running the real trainer on
# Fashion-MNIST:
#  - server-sent events (tests/integration/web/test_sse.py, Python standard library): replay
#    with Last-Event-ID, coalescing, hundreds of streams, shutdown;
#  - the dashboard in headless Chromium (Debian's chromium, driven by npm's
#    playwright-core, which never downloads a browser): node --test. Screenshots at
#    1280 and 390 px are kept in <build>/test-artifacts/web/. Its command-run cases
#    run ddp-run and Debian's python3-torch (gloo, CPU).
if(TARGET ddpd AND TARGET ddp-trainer AND TARGET ddp-run)
  ddpd_py_cases(sse_ ${CMAKE_CURRENT_LIST_DIR}/web/test_sse.py
                ARGS --ddpd $<TARGET_FILE:ddpd> --trainer $<TARGET_FILE:ddp-trainer>)

  find_program(NODE_EXECUTABLE node)
  if(NODE_EXECUTABLE)
    # web_dashboard: the runs, a run, the form, nodes, users; web_sweeps: the sweep pages
    # (#/sweeps, #/sweeps/{id}) on a real sweep of real trials; web_usage: the usage page
    # (#/usage) against GET /usage on two users' real runs; web_runs_pages: the runs page through a
    # history of several pages, its filters asked of the server; web_loads_once: each page
    # reads each resource once and revalidates with If-None-Match; web_node_marks: the nodes
    # page's marks (a device made suspect by a user's real failed run), hidden evidence, an
    # admin's Clear
    foreach(page dashboard sweeps usage runs_pages loads_once node_marks)
      add_test(NAME web_${page}
               COMMAND ${NODE_EXECUTABLE} --test --test-reporter=spec --test-concurrency=1
                       ${CMAKE_CURRENT_LIST_DIR}/web/${page}.test.mjs
               WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
      set_tests_properties(web_${page} PROPERTIES TIMEOUT 900
        ENVIRONMENT "DDPD_BIN=$<TARGET_FILE:ddpd>;DDP_TRAINER=$<TARGET_FILE:ddp-trainer>;DDP_RUN=$<TARGET_FILE:ddp-run>;DDPD_TEST_ARTIFACTS=${CMAKE_BINARY_DIR}/test-artifacts/web")
    endforeach()
  else()
    message(WARNING "node is not installed: the dashboard's browser tests are not registered (scripts/install-deps.sh installs it)")
  endif()
endif()
