#!/usr/bin/env bash
# Seeded randomized model test: tests/fs/model.py applies the same random
# operations to a directory on a pagededupfs mount and to a plain directory,
# comparing every result and errno, and the whole trees every 1000
# operations. The seed comes from PD_SEED (random otherwise) and is printed;
# PD_MODEL_OPS sets the number of operations (default 20000).
. "$(dirname "$0")/lib.sh"
pd_require

SEED=${PD_SEED:-$(( (RANDOM << 15 | RANDOM) ))}
OPS=${PD_MODEL_OPS:-20000}
echo "# model seed $SEED, $OPS operations (replay with PD_SEED=$SEED)"

# The comparison itself must notice a difference: two plain directories pass,
# and the same run with a file planted on one side fails.
case_model_selfcheck() {
	local d=$PD_TMP/selfcheck out
	python3 "$PD_FSDIR/model.py" --a "$d/a1" --b "$d/b1" --seed 12345 --ops 3000 >"$d.1.out" 2>&1 ||
		{ cat "$d.1.out"; fail "model.py fails on two plain directories"; }
	if python3 "$PD_FSDIR/model.py" --a "$d/a2" --b "$d/b2" --seed 12345 --ops 3000 --plant 1234 >"$d.2.out" 2>&1; then
		cat "$d.2.out"; fail "model.py did not notice a planted difference"
	fi
	grep -q "planted" "$d.2.out" || { cat "$d.2.out"; fail "model.py failed, but not on the planted file"; }
}

# model_random [--fds 0]: the model run on a fresh mount, then a remount and
# a last comparison.
model_run() {
	pd_mount || fail mount
	python3 "$PD_FSDIR/model.py" --a "$PD_TMP/plain$1" --b "$MNT/m" --seed "$SEED" --ops "$OPS" "${@:2}" ||
		fail "model test failed (seed $SEED; replay with PD_SEED=$SEED)"
	pd_remount || fail "remount after the model run"
	python3 "$PD_FSDIR/model.py" --a "$PD_TMP/plain$1" --b "$MNT/m" --compare-only ||
		fail "trees differ after a remount (seed $SEED)"
	pd_umount || fail "unmount (seed $SEED)"
}
# Files kept open across operations (renamed, unlinked, listed while open).
case_model_random() { model_run 1; }
# Every operation opens and closes its files: differences here are not about
# open files.
case_model_closed_files() { model_run 2 --fds 0; }

pd_case model_selfcheck
PD_CASE_TIMEOUT=${PD_MODEL_TIMEOUT:-900} pd_case model_random
PD_CASE_TIMEOUT=${PD_MODEL_TIMEOUT:-900} pd_case model_closed_files
pd_finish
