#!/usr/bin/env bash
# Long crash and power-cut runs (make stress: the release build). The cases
# of tests/fs/t_crash.sh with more cycles, and two more power-cut models:
#
#   sigkill_long          PD_CRASH_CYCLES (120) SIGKILLs, 3 writers
#   powercut_sync_blobs   PD_POWER_CYCLES (50) cuts under -o sync_blobs
#   powercut_reordered    PD_REORDER_CYCLES (25) cuts under -o sync_blobs
#                         where each block written since the last flush
#                         reached the platter or not, at random (a disk
#                         cache that writes back out of order)
#   powercut_default      PD_DEFAULT_CYCLES (15) cuts 2-4 s into a run
#                         without sync_blobs: the README promises that such
#                         a cut loses at most the commits since the last
#                         checkpoint (every sync_ms, 1000 ms here, and the
#                         time its sync takes; core/store/store_ckpt.c):
#                         what completed before that checkpoint was taken
#                         must be there, later operations may be lost as a
#                         whole, in order, and the store must be clean
#
# The seed is printed; replay with PD_SEED=N (and PD_ONLY=case).
PD_CRASH_LIB=1 . "$(dirname "$0")/../fs/t_crash.sh"

case_sigkill_long() {
	crash_sigkill "${PD_CRASH_CYCLES:-120}" "${PD_CRASH_WRITERS:-3}" 200 1500
}
case_powercut_sync_blobs() {
	crash_power "${PD_POWER_CYCLES:-50}" "${PD_CRASH_WRITERS:-3}" 200 1500 sync_blobs
}
case_powercut_reordered() {
	PD_POWER_KEEP=${PD_POWER_KEEP:-0.5} crash_power "${PD_REORDER_CYCLES:-25}" "${PD_CRASH_WRITERS:-3}" 200 1500 sync_blobs
}
case_powercut_default() {
	crash_power "${PD_DEFAULT_CYCLES:-15}" "${PD_CRASH_WRITERS:-3}" 2000 4000 sync_ms=1000 ckpt
}

PD_CASE_TIMEOUT=${PD_CASE_TIMEOUT:-900}
pd_case verify_selfcheck
pd_case sigkill_long
pd_case powercut_sync_blobs
pd_case powercut_reordered
pd_case powercut_default
pd_finish
