# Server tests. C unit tests of the pieces that are pure logic (downsampling, the API's times,
# migrations, per-address counts, the settings table, the queue policy, the blame among a run's parts, a
# launcher's command line) and of the core modules (store, ingest parsing, feed, scheduler, rendezvous),
# then integration tests in Python (standard library only) that start a
# real ddpd on a free loopback port with a temporary state dir: the API and its
# errors, the cheap reads (cached answers, ETags), the runs' rendezvous, hostile and careless clients, connection limits (floods,
# slowloris, stream caps, running out of descriptors), the event socket with a scripted
# trainer, resuming runs (POST /runs/{id}/resume), end-to-end runs of the real ddp-trainer on Fashion-MNIST, and a server killed and started again
# under a live run. Each Python case is its own ctest test: they run in
# parallel, and a failure names the case.
ddpd_c_test(test_downsample ${CMAKE_CURRENT_LIST_DIR}/server/test_downsample.c LIBS ddpd_lib)
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
foreach(store_test test_store test_store_faults test_store_sweep_write test_kind_fields test_journal_replay
                   test_run_ops)
  ddpd_c_test(${store_test} ${CMAKE_CURRENT_LIST_DIR}/server/${store_test}.c LIBS ddpd_store)
endforeach()
foreach(feed_test test_ingest_parse test_feed test_kind_bytes)
  ddpd_c_test(${feed_test} ${CMAKE_CURRENT_LIST_DIR}/server/${feed_test}.c LIBS ddpd_feed)
endforeach()
ddpd_c_test(test_scheduler ${CMAKE_CURRENT_LIST_DIR}/server/test_scheduler.c LIBS ddpd_sched)

set(server_test_args --ddpd $<TARGET_FILE:ddpd> --fake-trainer ${CMAKE_CURRENT_LIST_DIR}/server/fake_trainer.py)
if(TARGET ddp-trainer)
  list(APPEND server_test_args --trainer $<TARGET_FILE:ddp-trainer>)
endif()
ddpd_py_cases(server_api_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_api.py SANITIZE ARGS ${server_test_args} TIMEOUT 120)
ddpd_py_cases(server_ingest_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_ingest.py SANITIZE ARGS ${server_test_args}
              TIMEOUT 180)
ddpd_py_cases(server_e2e_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_e2e.py SANITIZE ARGS ${server_test_args} TIMEOUT 300)
ddpd_py_cases(server_restart_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_restart.py ARGS ${server_test_args}
              TIMEOUT 300)
ddpd_py_cases(server_resume_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_resume.py ARGS ${server_test_args}
              TIMEOUT 420)
ddpd_py_cases(server_attempts_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_attempts.py ARGS ${server_test_args}
              TIMEOUT 420)
ddpd_py_cases(server_cache_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_cached_reads.py SANITIZE ARGS ${server_test_args}
              TIMEOUT 120)
ddpd_py_cases(server_rendezvous_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_rendezvous.py SANITIZE ARGS ${server_test_args}
              TIMEOUT 180)
ddpd_py_cases(server_hostile_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_hostile.py SANITIZE ARGS ${server_test_args}
              TIMEOUT 180)
# A real full disk: the state dir on a small tmpfs of its own (mounting needs root;
# skipped with a message where it cannot be mounted).
ddpd_py_cases(server_full_disk_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_full_disk.py ARGS ${server_test_args}
              TIMEOUT 300 SKIP_RETURN_CODE 77)
# What another local process can get at: the state dir's modes, the secret, the event
# socket's binding to live runs, data paths at open time (the real trainer and runner).
set(server_secret_args ${server_test_args})
if(TARGET ddp-run)
  list(APPEND server_secret_args --runner $<TARGET_FILE:ddp-run>)
endif()
ddpd_py_cases(server_secret_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_secrets.py ARGS ${server_secret_args}
              TIMEOUT 300)
# The wall between accounts: real Unix accounts made and removed by the test, the
# server as root and with capabilities only (needs root: skipped with a message else).
ddpd_py_cases(server_wall_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_wall.py ARGS ${server_secret_args}
              TIMEOUT 300 SKIP_RETURN_CODE 77)
# The wall's second course: what bob's account plants in his own run directories
# (links, FIFOs, a subdirectory swapped mid-delete, a sparse journal line) while the
# server, as root, works in them (needs root: skipped with a message else).
ddpd_py_cases(server_wall_files_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_wall_files.py ARGS ${server_secret_args}
              TIMEOUT 420)
# The gates a run passes, attacked between two members (real accounts, the server as root):
# a resume of a config its account edited, a resume past a lowered limit, a command's
# arguments kept out of every log.
ddpd_py_cases(server_gates_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_gates.py SANITIZE ARGS ${server_secret_args}
              TIMEOUT 300 SKIP_RETURN_CODE 77)
# Each run bounded: memory, processes, stored points, log bytes and each user's disk,
# attacked from bob's run beside alice's (real accounts, the server as root: skipped
# with a message else); the runs' directories apart from the database (--runs-dir).
ddpd_py_cases(server_bounds_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_bounds.py ARGS ${server_secret_args}
              TIMEOUT 600 SKIP_RETURN_CODE 77)
# Users, ownership, quotas, fair share, priorities, backfill and preemption (the real
# `ddpd user`, the stand-in trainer for the queue's order, ddp-trainer for preemption).
ddpd_py_cases(server_sharing_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_sharing.py SANITIZE ARGS ${server_test_args}
              TIMEOUT 420)
# The audit log: an entry for each action and decision, there after a SIGKILL; who reads which.
ddpd_py_cases(server_audit_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_audit.py SANITIZE ARGS ${server_test_args}
              TIMEOUT 180)
# Usage and goodput: phases that add up, lost steps after a rank's SIGKILL, /metrics, ddpctl usage.
ddpd_py_cases(server_usage_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_usage.py SANITIZE ARGS ${server_test_args}
              TIMEOUT 420)
# Who may read what: reads need a token once there are users (--open-reads opens them),
# a command run's env values and arguments are its owner's, a run reads only its
# submitter's runs.
ddpd_py_cases(server_reads_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_reads.py SANITIZE ARGS ${server_test_args}
              TIMEOUT 300)
ddpd_py_cases(server_limits_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_limits.py ARGS ${server_test_args}
              TIMEOUT 180)
ddpd_py_cases(server_reconnect_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_reconnect.py ARGS ${server_test_args}
              TIMEOUT 300)
ddpd_py_cases(server_rebuild_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_rebuild.py ARGS ${server_test_args}
              TIMEOUT 400)
# The queue policy on hand-made snapshots: no process, socket or clock.
ddpd_c_test(test_queue_policy ${CMAKE_CURRENT_LIST_DIR}/server/test_queue_policy.c LIBS ddpd_sched)
ddpd_c_test(test_fair_share ${CMAKE_CURRENT_LIST_DIR}/server/test_fair_share.c LIBS ddpd_sched)
# The blame among the parts of a failed run across nodes: a pure rule.
ddpd_c_test(test_part_blame ${CMAKE_CURRENT_LIST_DIR}/server/test_part_blame.c LIBS ddpd_sched)
# A live run's status: the table of legal moves, and the transitions that refuse the rest.
ddpd_c_test(test_scheduler_moves ${CMAKE_CURRENT_LIST_DIR}/server/test_scheduler_moves.c LIBS ddpd_sched)
# These test files of scheduling that the rest of the server does not see: they
# read its private headers, as its own files do.
foreach(sched_inner test_placement test_queue_policy test_fair_share test_part_blame test_scheduler_moves)
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
