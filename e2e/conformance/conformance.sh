#!/bin/bash
# make conformance: upstream Kubernetes' own [Conformance] tests against a fresh skiff cluster
# (a server with its node plus one agent, in network namespaces), then a summary by SIG.
#
#   FOCUS     ginkgo focus regex (default '\[Conformance\]')
#   SKIP      ginkgo skip regex (default: none)
#   PROCS     parallel ginkgo processes (default 10: the tests mostly wait). [Serial] tests are
#             run afterwards, one at a time, on the same fresh cluster, unless SERIAL=0.
#   TIMEOUT   minutes per part (default 60)
#   SKIFF     the binary to test (default bin/skiff of this checkout)
#   CONF_DIR  cache and results (default ${TMPDIR:-/tmp}/conformance): e2e.test, ginkgo, agnhost
#             and kubectl v1.37.2 are built there from the Go module proxy once (15-40 min on 2
#             cores), the test images once (~1 min).
#   NAME      results directory name under $CONF_DIR/results (default conformance)
#
# Prints the summary (also in $CONF_DIR/results/summary-$NAME.txt); exits 0 when every test that
# ran passed.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
export CONF_DIR=${CONF_DIR:-${TMPDIR:-/tmp}/conformance}
export SKIFF=${SKIFF:-$ROOT/bin/skiff}
FOCUS=${FOCUS:-'\[Conformance\]'}
SKIP=${SKIP:-}
PROCS=${PROCS:-10}
TIMEOUT=${TIMEOUT:-60}
NAME=${NAME:-conformance}
export INST=${INST:-s1}
R=$CONF_DIR/results

[ -x "$CONF_DIR/bin/e2e.test" ] && [ -x "$CONF_DIR/bin/ginkgo" ] && [ -x "$CONF_DIR/bin/kubectl" ] || "$HERE/build.sh" || exit 1
ls "$CONF_DIR"/images/*.tar >/dev/null 2>&1 || "$HERE/images.sh" || exit 1
# an image set made before the Aggregator images were added gets just those
[ -f "$CONF_DIR/images/sample-apiserver.tar" ] && [ -f "$CONF_DIR/images/etcd.tar" ] || "$HERE/images.sh" aggregator || exit 1

trap '"$HERE/run.sh" down' EXIT
"$HERE/run.sh" up || exit 1

skip_par='\[Serial\]|\[Disruptive\]'
[ -n "$SKIP" ] && skip_par="$skip_par|$SKIP"
"$HERE/run.sh" e2e "$NAME-parallel" "$FOCUS" "$skip_par" "$PROCS" "$TIMEOUT"
parts=("$R/$NAME-parallel")
if [ "${SERIAL:-1}" = 1 ]; then
  # "FOCUS and [Serial]": RE2 has no lookahead, so both orders
  "$HERE/run.sh" e2e "$NAME-serial" "($FOCUS).*\[Serial\]|\[Serial\].*($FOCUS)" "${SKIP:-}" 1 "$TIMEOUT"
  parts+=("$R/$NAME-serial")
fi
python3 "$HERE/summarize.py" "${parts[@]}" | tee "$R/summary-$NAME.txt"
! grep -q '^- \[' <(sed -n '/^Failed:/,$p' "$R/summary-$NAME.txt")
