# The tests' COST (ctest's property: seconds, roughly), so that `ctest -j` starts the
# longest first and its jobs end together on a fresh build, where ctest has no timings
# of its own yet (Testing/Temporary/CTestCostData.txt; where it has, they take over).
# Without it a long test registered late (the Docker image, a sanitized trainer run)
# started last and ran alone at the end. Seconds of a run on a 2-core machine, the
# tests of 5 s or more; a test not named costs 0 (it runs after these). A name no
# longer registered is skipped: the list is a hint, refreshed now and then from
# CTestCostData.txt (name, runs, seconds).
function(ddpd_test_costs)
  while(ARGN)
    list(POP_FRONT ARGN name cost)
    if(TEST ${name})
      set_tests_properties(${name} PROPERTIES COST ${cost})
    endif()
  endwhile()
endfunction()

if(DDPD_SANITIZE)
  # the sanitizer build's tests (ctest -L sanitize there)
  ddpd_test_costs(
    server_elastic_restart_mid_resize 105
    server_elastic_shrink_and_grow 98 trainer_e2e_cache_cut_short 34
    server_sharing_time_slice 70 server_sharing_preempt_builtin 46 trainer_e2e_host_memory_plan 30
    server_charts_chart_equals_full_series 40 server_elastic_start_narrow 40
    server_sharing_killed_while_preempting 38 test_collectives 35
    server_charts_shuffled_and_rewritten 30 trainer_cnn_e2e_world_sizes 24
    server_resume_cache_cut_short_named 23 server_pending_estimates 20 trainer_cnn_e2e_resume 19
    fuzz_run_config 17 fuzz_idx 17 fuzz_safetensors 17 fuzz_ingest_line 17
    server_pending_decided_once 17 sweep_grow_val_acc_metric 17 sweep_grow_tpe_repeatable 15
    sweep_timeout_trial 15 test_cnn_gradients 14 server_resume_rank_killed_then_resumed 14
    server_resume_canceled_then_resumed 13 server_pending_estimate_steady 12
    trainer_cnn_e2e_widths 11 server_pending_decision_held 11 trainer_cnn_e2e_conv_backends 10
    server_timeout_builtin_timeout 10 server_sharing_fair_share 9
    trainer_restarts_restart_bit_identical 9 trainer_cnn_e2e_dropout 9
    sweep_grow_extend_and_enqueue 9 server_elastic_hostile_resize 9 server_cache_run_etags 8
    server_hostile_token_file 8 trainer_cnn_e2e_determinism 8 server_resume_refusals 8
    server_pending_timeline 8 sweep_grow_asha_max_resource 8 trainer_cnn_e2e_resume_other_ranks 8
    server_api_lock_of_a_dead_server 7 server_ingest_cancel_and_grace 7
    server_hostile_canonical_ids_and_paths 7 server_sharing_backfill 7
    server_sharing_restart_charged 7 server_sharing_users_and_ownership 7 sweep_asha_bit_for_bit 7
    sweep_random_seeded 7 trainer_e2e_resume 7 server_rebuild_rebuilt_from_runs 7
    server_gates_resume_edited_config 7 server_gates_resume_source_deleted 7
    sweep_gates_others_checkpoint 7 server_audit_each_action 7 test_store_faults 6 test_feed 6
    server_hostile_paths_named_by_roots 6 sweep_restart_mid_sweep 6 trainer_cnn_e2e_eval_mode 6
    server_resume_queued_resume_survives_restart 6 server_resume_train_from_checkpoint 6
    test_run_list 6 sweep_gates_others_change 6 sweep_grow_conditional 6 sweep_grow_follow 6
    server_ingest_downsampling 5 server_ingest_queue_order 5 trainer_e2e_hang_stopped_rank 5
    server_pending_backfill_reserved 5 server_pending_fair_share 5 server_lists_filters 5
    server_elastic_not_elastic_evicted 5 sweep_gates_canceled_best 5)
else()
  ddpd_test_costs(
    docker_image 171 sweep_warm_same_results 58 sweep_pause_asha_resume 52
    gpu_e2e_fake_cuda_watchdog 27 sweep_warm_wall 40 slurm_requeued 33 nodes_suspect_nodes 33
    server_sharing_time_slice 33 gpu_bundle_without_gpu 32 server_elastic_restart_mid_resize 30
    slurm_server_restart 26 command_attempts_hang_restarted 10 command_preemption_notice_forged 23
    web_dashboard 21 command_attempts_on_record 7 nodes_remote_rank_restarted 20
    sweep_warm_paused_keeps 20 test_gpu_engine_fake_cuda 19 trainer_e2e_cache_cut_short 8
    sweep_pause_notice_ignored 19 sweep_pause_others_trial 19
    server_attempts_rank_killed_restarted 5 server_charts_chart_equals_full_series 18
    ddp_run_restarts_torchrun_snapshot_restart 17 web_sweeps 17 command_elastic_shrink_and_grow 17
    test_collectives 16 command_runs_torch_two_ranks 16 slurm_rank_fails 16
    server_failures_server_restart_backoff 16 ops_check 15 slurm_command_two_nodes 15
    slurm_scancel_from_shell 15 trainer_e2e_preempted_mid_epoch 15 command_preemption_min_runtime 15
    sweep_pause_sweep_pause 15 nodes_builtin_remote_rank_stopped 14
    server_sharing_preempt_builtin 14 trainer_e2e_host_memory_plan 10 web_runs_pages 14
    web_loads_once 14 sweep_warm_import_fails 14 nodes_torch_across_nodes 13 slurm_cancel 13
    command_runs_stop_grace_kept 12 nodes_remote_rank_fails 12
    server_sharing_killed_while_preempting 12 server_pending_estimates 12
    server_limits_silent_event_conns 11 web_usage 11 sweep_timeout_trial 11 web_node_marks 11
    nodes_builtin_resumed_across_nodes 10 nodes_coordinator_lost 10
    gpu_bundle_missing_cuda_library 10 gpu_e2e_fake_cuda_cnn 10 sse_many_streams 10
    server_bounds_fork_loop 10 server_wall_files_caps_only_delete_race 10 sweep_warm_signals 10
    command_runs_finished_at_exit 9 command_runs_server_killed 9 nodes_builtin_across_nodes 9
    server_sharing_fair_share 9 slurm_sharing 9 trainer_cnn_e2e_resume 9
    server_wall_files_delete_race 9 server_charts_shuffled_and_rewritten 9
    nodes_account_across_nodes 8 nodes_agent_killed 8 server_sharing_backfill 8
    server_sharing_restart_charged 8 server_limits_fd_exhaustion 8 test_cnn_gradients 8 sse_replay 8
    server_timeout_builtin_timeout 8 command_preemption_notice_ignored 8
    server_failures_server_restart_class_fail 8 slurm_retry_elsewhere_no_node_left 8
    command_runs_cancel 7 command_runs_hang_named 7 command_runs_open_attempt_closed 7
    command_runs_rank_exits_3 7 nodes_builtin_agent_killed 7 layout_calls_no_upward_call 7
    ops_serve_refuses_bad_database 7 server_ingest_queue_order 7 server_cache_run_etags 7
    server_hostile_token_file 7 slurm_builtin_two_nodes 7 slurm_mapped_users 7
    server_bounds_disk_quota 7 command_preemption_preemptor_pays 7 server_failures_oom 7
    slurm_retry_elsewhere 7 command_runs_ranks_without_reporter 6
    nodes_account_gone_before_agent_start 6 nodes_account_missing_on_node 6
    test_gpu_kernels_fake_cuda 6 readme_check_sample 6 test_store_faults 6
    server_api_lock_of_a_dead_server 6 server_ingest_cancel_and_grace 6
    server_resume_cache_cut_short_named 6 server_sharing_priority 6 server_sharing_quota 6
    server_sharing_users_and_ownership 6 slurm_waiting 6 sweep_fair_beside_others 6
    trainer_e2e_hang_stopped_rank 6 trainer_e2e_heartbeats 6 trainer_cnn_e2e_world_sizes 6
    sse_coalesce 6 server_wall_files_fifo_catch_up 6 server_pending_estimate_steady 6
    command_preemption_owner_timeout 6 server_elastic_shrink_and_grow 6
    server_elastic_start_narrow 6 nodes_agent_is_the_account 5 ddp_run_error_file 5
    ddp_run_torch_ddp_gloo 5 server_ingest_downsampling 5 server_ingest_exit_reasons 5
    server_ingest_gpu_ranks 5 server_hostile_paths_named_by_roots 5 server_limits_idle_timeout 5
    layout_run_paths_finds_a_planted_path_call 5 server_wall_files_sweep_pause_links 5
    server_wall_files_caps_only_sweep_pause_links 5 command_preemption_least_lost 5
    sweep_grow_pause_resume_builtin 5 sweep_grow_val_acc_metric 5
    command_preemption_notice_answered 5 command_preemption_notice_callback 5
    server_pending_decision_held 5)
endif()
