# Server benchmarks (run by bench/server/bench_server.py, not by ctest):
# bench_ingest_trainer stands in for ddp-trainer and sends step events as fast as
# the event socket takes them, to measure ingest into SQLite.
add_executable(bench_ingest_trainer ${CMAKE_CURRENT_LIST_DIR}/server/bench_ingest_trainer.c)
target_link_libraries(bench_ingest_trainer PRIVATE PkgConfig::JANSSON)
