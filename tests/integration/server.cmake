# The server's integration tests in Python (standard library only): each starts a real
# ddpd on a free loopback port with a temporary state dir (support/ddpd_harness.py): the
# API and its errors, the cheap reads (cached answers, ETags), the runs' rendezvous,
# hostile and careless clients, connection limits (floods, slowloris, stream caps,
# running out of descriptors), the event socket with a scripted trainer, resuming runs
# (POST /runs/{id}/resume), end-to-end runs of the real ddp-trainer on Fashion-MNIST, a
# server killed and started again under a live run, and the wall between real Unix
# accounts. Each Python case is its own ctest test: they run in parallel, and a failure
# names the case.
set(server_test_args --ddpd $<TARGET_FILE:ddpd> --fake-trainer ${DDPD_TEST_SUPPORT}/fake_trainer.py)
if(TARGET ddp-trainer)
  list(APPEND server_test_args --trainer ${DDPD_SERVER_TESTS_TRAINER})
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
ddpd_py_cases(server_charts_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_charts.py SANITIZE ARGS ${server_test_args}
              TIMEOUT 300)
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
# Failures told apart before a restart (docs/failures.md): bob's command runs beside
# alice's, each failed attempt classified and answered by its class (root: skipped else).
if(TARGET ddp-run AND TARGET ddpctl)
  ddpd_py_cases(server_failures_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_failures.py
                ARGS ${server_secret_args} --ddpctl $<TARGET_FILE:ddpctl> TIMEOUT 420 SKIP_RETURN_CODE 77)
endif()
# Users, ownership, quotas, fair share, priorities, backfill and preemption (the real
# `ddpd user`, the stand-in trainer for the queue's order, ddp-trainer for preemption).
ddpd_py_cases(server_sharing_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_sharing.py SANITIZE ARGS ${server_test_args}
              TIMEOUT 420)
# Elastic built-in runs: shrunk for a more urgent run instead of preempted, grown back,
# bit for bit the run never interrupted (the real ddp-trainer on 4 CPU slots).
ddpd_py_cases(server_elastic_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_elastic.py SANITIZE ARGS ${server_test_args}
              TIMEOUT 900)
# Time limits: a built-in run past its max_duration_s ends timeout at a checkpoint, and resumes.
ddpd_py_cases(server_timeout_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_timeout.py SANITIZE ARGS ${server_test_args}
              TIMEOUT 300)
# Why a queued run waits (pending reasons, one real situation each) and its start estimate.
ddpd_py_cases(server_pending_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_pending.py SANITIZE
              ARGS ${server_test_args} --runner $<TARGET_FILE:ddp-run> TIMEOUT 180)
# The audit log: an entry for each action and decision, there after a SIGKILL; who reads which.
# GET /runs's filters and keyset pages against the database; a bad filter's 400 names it.
ddpd_py_cases(server_lists_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_lists.py SANITIZE ARGS ${server_test_args}
              TIMEOUT 120)
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
# A finished run's journal compacted once the database holds it: crashes around the
# rewrite (the server kills itself at a named point), a link a run leaves in its place.
ddpd_py_cases(server_journal_compact_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_journal_compact.py
              ARGS ${server_secret_args} TIMEOUT 300 SKIP_RETURN_CODE 77)
