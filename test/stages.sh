#!/bin/sh
# stages.sh: make test's driver. It runs each stage (a make target) in
# order, stops at the first that fails, and ends with a table of how long
# each took, so a slow gate names its slow part by a number:
#
#   sh test/stages.sh check cross fuzz ...
#
# The VM stages' own summaries (test/vm) give each package's time in each
# guest above the table. The last line adds up the VM tests' counts in the
# form CI reads: "make test: N passed, N failed, N skipped".
set -u

MAKE=${MAKE:-make}
log=$(mktemp "${TMPDIR:-/tmp}/goverbs-stages.XXXXXX")
trap 'rm -f "$log"' EXIT
table=""
start=$(date +%s)
failed=""
for stage in "$@"; do
	t0=$(date +%s)
	echo "=== make $stage"
	# The stage's output goes to the terminal as it comes and into the log,
	# from which the VM summaries' closing lines are summed.
	{ $MAKE --no-print-directory "$stage" 2>&1; echo "rc=$?" >"$log.rc"; } | tee -a "$log"
	rc=$(sed 's/rc=//' "$log.rc")
	rm -f "$log.rc"
	t1=$(date +%s)
	verdict=ok
	[ "$rc" = 0 ] || verdict="FAILED (exit $rc)"
	table="$table$(printf '  %-12s %5ds  %s' "$stage" $((t1 - t0)) "$verdict")
"
	if [ "$rc" != 0 ]; then
		failed=$stage
		break
	fi
done
end=$(date +%s)
echo
echo "make test stages (wall-clock seconds):"
printf '%s' "$table"
printf '  %-12s %5ds\n' total $((end - start))
# vm: N passed, N failed, N skipped  (one line for each VM stage)
awk '/^vm: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$/ { p += $2; f += $4; s += $6 }
	END { printf "make test: %d passed, %d failed, %d skipped\n", p, f, s }' "$log"
if [ -n "$failed" ]; then
	echo "make test: stopped at make $failed"
	exit 1
fi
