# Launching (issue 9): the role assignment shared by every launcher, worked by
# hand; scripts/launch.sh on a 2-host emulated cluster and over real ssh; a
# real Slurm job.
nereus_add_test(launch_plan_test SOURCES launch_plan_test.cc LIBS nereus_launch)

# Shell tests start the real binaries; 77 means "cannot run here" (no network
# namespaces nor 127.0.0.x addresses; no sshd; Slurm daemons that cannot
# start) and is reported as skipped, never as passed.
foreach(t launch_script launch_ssh slurm)
  add_test(NAME ${t}_test COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/${t}_test.sh)
  set_tests_properties(${t}_test PROPERTIES SKIP_RETURN_CODE 77
    ENVIRONMENT "NEREUS_BIN_DIR=${CMAKE_BINARY_DIR}/bin;NEREUS_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endforeach()
set_tests_properties(launch_script_test launch_ssh_test PROPERTIES TIMEOUT 180)
# Installing slurm-wlm (first run only) takes a minute or two.
set_tests_properties(slurm_test PROPERTIES TIMEOUT 300 RESOURCE_LOCK slurm)
