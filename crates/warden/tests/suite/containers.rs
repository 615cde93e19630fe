//! The same tests where users run Warden: inside a container whose runtime masked `/proc`
//! (simulated by `fixtures/containers/masked-proc.sh` with `unshare` and bind mounts: no
//! Docker here). Every `warden` these tests start runs there; the escape battery, the
//! detection tests (fixtures, local projects, the real public servers), the network boundary,
//! the limits, tracing, `warden run`, `warden serve` and `detonate` must
//! pass as they do on the bare machine. (Oracle tests that start no `warden` are left out.)

use super::common::in_a_container;

/// `#[test] fn NAME() { in_a_container(super::MODULE::NAME) }` for each name.
macro_rules! in_a_container {
    ($module:ident: $($test:ident),* $(,)?) => {
        mod $module {
            $(
                #[test]
                fn $test() {
                    super::in_a_container(super::super::$module::$test);
                }
            )*
        }
    };
}

in_a_container!(escape:
    host_secrets_are_not_visible,
    writes_outside_the_workspace_fail,
    proc_does_not_reach_the_host_or_the_runtime,
    ptrace_and_cross_process_memory_are_denied,
    mounts_and_the_new_mount_api_are_denied,
    new_namespaces_and_setns_are_denied,
    kernel_attack_surface_is_closed,
    terminal_injection_is_denied,
    only_unix_and_ip_sockets_exist,
    host_loopback_and_abstract_sockets_are_unreachable,
    rename_race_cannot_leave_the_workspace,
    symlinks_planted_in_the_workspace_resolve_inside_the_jail,
    setuid_binaries_grant_nothing,
    inherited_descriptors_are_closed,
    host_processes_cannot_be_signalled,
    background_grandchild_does_not_outlive_the_timeout,
    the_sandbox_dies_with_warden,
    regression_parent_death_signal_survives_the_id_change,
    the_sandbox_dies_with_the_library_caller_lifeline,
    probe_from_the_inside,
    landlock_is_an_independent_layer,
    symlinked_bind_sources_are_refused,
    symlinked_mount_targets_in_the_workspace_are_refused,
    setuid_bits_cannot_be_planted_in_the_workspace,
    code_that_runs_later_cannot_be_planted_in_the_workspace,
);

in_a_container!(detonate:
    a_credential_thief_is_critical,
    a_vulnerable_server_is_caught_by_its_payloads,
    poisoned_metadata_and_a_rug_pull_are_caught,
    a_benign_server_passes_and_its_calls_are_accepted,
    the_ci_gate_sarif_and_the_timeline,
    the_html_page_draws_the_findings_and_escapes_what_the_server_chose,
    a_two_mebibyte_tool_name_does_not_stop_the_session,
    one_fixture_per_category,
    a_local_packages_install_hook_runs_in_the_jail_and_is_judged,
    ordinary_behaviour_is_low_and_repeats_are_grouped,
);

in_a_container!(projects:
    a_local_python_projects_build_runs_in_the_jail_and_is_judged,
    github_clones_are_installed_as_projects,
);

in_a_container!(real_servers:
    mcp_server_time_passes,
    mcp_server_git_is_judged_by_its_destructive_tools_only,
    mcp_server_fetch_is_an_ssrf_surface_of_medium_severity,
    server_everything_leaks_its_environment_and_fetches_urls,
    server_filesystem_and_memory_raise_only_their_destructive_tools,
    registry_targets_are_fetched_then_installed_inside_the_jail,
    an_sdist_is_fetched_and_built_inside_the_jail_through_the_index_allowlist,
    a_failed_install_still_gets_a_report_and_is_never_a_pass,
    // (an_interrupted_detonation_leaves_no_folder_and_no_process_behind signals the warden
    // process, which here is the container's `unshare`: it is not repeated.)
);

in_a_container!(inconclusive:
    a_server_that_never_ran_is_never_a_pass,
    inconclusive_shows_in_every_output_and_exits_3_whatever_fail_on_says,
    a_serious_finding_before_a_crash_stands_as_the_verdict,
);

in_a_container!(runtimes:
    a_python_under_a_home_is_bound_by_its_prefix_never_the_home,
    a_venv_interpreter_with_the_script_elsewhere_is_bound,
    a_node_copied_into_opt_runs_the_server,
);

in_a_container!(serve:
    python_sdk_over_stdio,
    python_sdk_over_streamable_http,
    a_client_that_disconnects_leaves_no_process,
    a_killed_server_leaves_no_process,
    locked_down_profile_allowlists_and_limits,
);

in_a_container!(run_cli:
    id_is_the_unprivileged_uid_the_policy_names,
    shadow_and_system_writes_fail,
    root_and_work_are_not_there,
    exit_status_passes_through,
    stdout_stderr_and_stdin_stream_through,
    env_is_only_what_the_policy_gives,
    binds_and_tmpfs_from_flags,
    workspace_is_mounted_and_kept,
    default_workspace_is_a_fresh_bounded_tmpfs,
    json_outcome_has_the_documented_fields,
);

in_a_container!(observe:
    a_canary_in_a_dns_label_is_caught,
    connections_anywhere_land_on_the_sink,
    an_addressed_datagram_is_recorded_and_decoded,
    environment_reads_are_observed_in_python_node_and_c,
    canaries_in_written_files_and_output_are_caught_and_clean_ones_are_not,
    windows_attribute_a_grandchilds_exec,
    paths_through_wardens_tools_directory_are_still_evidence,
    an_exec_from_a_second_thread_does_not_blind_the_tracer,
    egress_reaches_allowlisted_names_and_ports_only_and_nothing_of_the_hosts,
);

in_a_container!(trace:
    processes_files_deletes_renames_and_connections_are_traced,
    limits_are_traced,
    deny_rules_still_apply_while_tracing,
    denied_attempts_are_evidence,
    process_exits_carry_their_status,
    the_run_frame_directories_modes_and_listening_sockets,
    fileless_execution_is_recorded,
);

in_a_container!(boundary:
    secrets_are_seen_leaving_by_any_route,
    node_fetch_is_read_and_a_pinning_client_is_a_refusal,
    every_channel_to_the_network_is_seen_or_refused,
    https_from_curl_and_requests_is_read,
);

in_a_container!(limits:
    memory_bomb_is_stopped_and_reported,
    fork_bomb_is_stopped_and_reported,
    cpu_spin_of_a_whole_tree_is_stopped,
    output_flood_is_cut_and_reported,
    wall_time_kills_the_tree,
    file_size_limit_stops_a_large_write,
    tmp_fill_ends_with_enospc_not_a_host_problem,
    open_files_limit_applies,
    // (a_stalled_reader_stops_neither_limits_nor_signals counts host processes by command
    // line, and the container's own `unshare` and `sh` share it: it is not repeated here.)
);

/// A container without CAP_KILL could not end the jail's processes (they run under
/// subordinate ids): a `--timeout 2s` run hung past its timeout. Now it is refused at once.
#[test]
fn without_cap_kill_a_sandbox_is_refused_not_left_unstoppable() {
    let begun = std::time::Instant::now();
    let out = std::process::Command::new("setpriv")
        .args(["--bounding-set", "-kill", "--inh-caps=-all", "--"])
        .arg(super::common::the_binary())
        .args(["run", "--timeout", "2s", "--", "sleep", "100"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains("CAP_KILL") && stderr.contains("--cap-add KILL"),
        "{stderr}"
    );
    assert!(begun.elapsed() < std::time::Duration::from_secs(30));
}
