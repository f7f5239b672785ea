# The server's C unit tests: the pieces that are pure logic (downsampling, rollups, the API's
# times, migrations, per-address counts, the settings table, the queue policy, the blame
# among a run's parts, a launcher's command line) and the core modules (store, ingest
# parsing, feed, scheduler, rendezvous, the one way into a run's directory), each on real
# parts where it has them.
ddpd_c_test(test_downsample ${CMAKE_CURRENT_LIST_DIR}/server/test_downsample.c LIBS ddpd_lib)
ddpd_c_test(test_rollup_math ${CMAKE_CURRENT_LIST_DIR}/server/test_rollup_math.c LIBS ddpd_lib)
ddpd_c_test(test_migrate ${CMAKE_CURRENT_LIST_DIR}/server/test_migrate.c LIBS ddpd_store)
ddpd_c_test(test_run_status ${CMAKE_CURRENT_LIST_DIR}/server/test_run_status.c LIBS ddpd_store)
ddpd_c_test(test_clock ${CMAKE_CURRENT_LIST_DIR}/server/test_clock.c LIBS ddpd_server_base)
ddpd_c_test(test_addr_counts ${CMAKE_CURRENT_LIST_DIR}/server/test_addr_counts.c LIBS ddpd_lib)
ddpd_c_test(test_path_redact ${CMAKE_CURRENT_LIST_DIR}/server/test_path_redact.c LIBS ddpd_lib)
ddpd_c_test(test_dir_usage ${CMAKE_CURRENT_LIST_DIR}/server/test_dir_usage.c LIBS ddpd_lib)
ddpd_c_test(test_placement ${CMAKE_CURRENT_LIST_DIR}/server/test_placement.c LIBS ddpd_sched)
ddpd_c_test(test_rendezvous ${CMAKE_CURRENT_LIST_DIR}/server/test_rendezvous.c LIBS ddpd_exec)
# serve's settings: one table for the flags, the variables, the bounds and --help
ddpd_c_test(test_settings ${CMAKE_CURRENT_LIST_DIR}/server/test_settings.c LIBS ddpd_cmd)

# C unit tests of the core modules through their public headers, on real parts: a
# SQLite file in a fresh temporary directory, the event socket, the supervisor's
# real child processes (a shell script as the trainer).
# Each links the lowest library that holds its subject, so that a call upward out of
# that library fails to link here (docs/architecture.md).
foreach(store_test test_store test_store_faults test_store_sweep_write test_kind_fields test_journal_replay test_rollups test_attempt_steps
                   test_step_rows test_run_ops test_run_list)
  ddpd_c_test(${store_test} ${CMAKE_CURRENT_LIST_DIR}/server/${store_test}.c LIBS ddpd_store)
endforeach()
foreach(feed_test test_ingest_parse test_feed test_kind_bytes)
  ddpd_c_test(${feed_test} ${CMAKE_CURRENT_LIST_DIR}/server/${feed_test}.c LIBS ddpd_feed)
endforeach()
ddpd_c_test(test_scheduler ${CMAKE_CURRENT_LIST_DIR}/server/test_scheduler.c LIBS ddpd_sched)

# test_run_list: GET /runs's statements, their plans held (no scan) and their pages against the plain one.
# The queue policy on hand-made snapshots: no process, socket or clock.
ddpd_c_test(test_queue_policy ${CMAKE_CURRENT_LIST_DIR}/server/test_queue_policy.c LIBS ddpd_sched)
# Its elastic runs: shrunk rather than stopped, grown back on idle devices.
ddpd_c_test(test_queue_policy_elastic ${CMAKE_CURRENT_LIST_DIR}/server/test_queue_policy_elastic.c LIBS ddpd_sched)
# Its time slices (serve --time-slice): equal runs of different owners take turns.
ddpd_c_test(test_queue_policy_slice ${CMAKE_CURRENT_LIST_DIR}/server/test_queue_policy_slice.c LIBS ddpd_sched)
# The policy on the server's own restarts: a backoff waited out, suspect nodes avoided.
ddpd_c_test(test_restart_placement ${CMAKE_CURRENT_LIST_DIR}/server/test_restart_placement.c LIBS ddpd_sched)
ddpd_c_test(test_fair_share ${CMAKE_CURRENT_LIST_DIR}/server/test_fair_share.c LIBS ddpd_sched)
# The start estimate: the queue policy walked forward on hand-made snapshots.
ddpd_c_test(test_queue_forecast ${CMAKE_CURRENT_LIST_DIR}/server/test_queue_forecast.c LIBS ddpd_sched)
# The blame among the parts of a failed run across nodes: a pure rule.
ddpd_c_test(test_part_blame ${CMAKE_CURRENT_LIST_DIR}/server/test_part_blame.c LIBS ddpd_sched)
# A live run's status: the table of legal moves, and the transitions that refuse the rest.
ddpd_c_test(test_scheduler_moves ${CMAKE_CURRENT_LIST_DIR}/server/test_scheduler_moves.c LIBS ddpd_sched)
# The table of live runs: its list in queue order and its index by id, against a plain array.
ddpd_c_test(test_live_runs_table ${CMAKE_CURRENT_LIST_DIR}/server/test_live_runs_table.c LIBS ddpd_sched)
# These test files of scheduling that the rest of the server does not see: they
# read its private headers, as its own files do.
foreach(sched_inner test_placement test_queue_policy test_queue_policy_elastic test_queue_policy_slice test_restart_placement test_queue_forecast test_fair_share test_part_blame test_scheduler_moves test_live_runs_table)
  target_include_directories(${sched_inner} PRIVATE ${PROJECT_SOURCE_DIR}/server/sched)
endforeach()
# A run's launcher as the coordinator and an agent start it: its command line, its
# environment, a forked child's signals.
ddpd_c_test(test_launcher_argv ${CMAKE_CURRENT_LIST_DIR}/server/test_launcher_argv.c LIBS ddpd_host)
# What ddpd tells sbatch: a run's job, and its owner's account, its priority as a nice
# and a preemptible run's QOS.
ddpd_c_test(test_slurm_cli ${CMAKE_CURRENT_LIST_DIR}/server/test_slurm_cli.c LIBS ddpd_host)
# A part's description on the wire: the coordinator's writer against the agent's reader.
ddpd_c_test(test_part_wire ${CMAKE_CURRENT_LIST_DIR}/server/test_part_wire.c LIBS ddpd_host)
# the one way into a run's directory (links, FIFOs, owners, bounds, removal by
# descriptors under a race) and the bounded line reader, on a real scratch directory
ddpd_c_test(test_run_files ${CMAKE_CURRENT_LIST_DIR}/server/test_run_files.c LIBS ddpd_lib)
