# Server benchmarks (run by bench/server/bench_server.py, not by ctest):
# bench_ingest_trainer stands in for ddp-trainer and sends step events as fast as
# the event socket takes them, to measure ingest into SQLite.
add_executable(bench_ingest_trainer ${CMAKE_CURRENT_LIST_DIR}/server/bench_ingest_trainer.c)
target_link_libraries(bench_ingest_trainer PRIVATE PkgConfig::JANSSON)
# bench_event_kinds: the CPU cost of each event kind's parse and of the store's
# apply of steps, in-process (no socket): before/after figures for a change to
# server/store/event_kinds.c, run_ops.c or kind_fields.c.
add_executable(bench_event_kinds ${CMAKE_CURRENT_LIST_DIR}/server/bench_event_kinds.c)
target_link_libraries(bench_event_kinds PRIVATE ddpd_sched)
target_include_directories(bench_event_kinds PRIVATE ${PROJECT_SOURCE_DIR}/tests/support)
# bench_queue_policy: how long the queue policy takes to choose among 1000 queued runs
# of 10 users (the target: at most 1 ms a decision).
add_executable(bench_queue_policy ${CMAKE_CURRENT_LIST_DIR}/server/bench_queue_policy.c)
target_link_libraries(bench_queue_policy PRIVATE ddpd_sched)
target_include_directories(bench_queue_policy PRIVATE ${PROJECT_SOURCE_DIR}/server/sched)
# bench_victims: the device-seconds preemptions throw away under the rule before
# (lowest priority, newest) and under the least lost work, on one scenario.
add_executable(bench_victims ${CMAKE_CURRENT_LIST_DIR}/server/bench_victims.c)
target_link_libraries(bench_victims PRIVATE ddpd_sched)
target_include_directories(bench_victims PRIVATE ${PROJECT_SOURCE_DIR}/server/sched)
