#!/usr/bin/env bash
# Run every benchmark in turn; arguments go to each script (e.g. --quick --threads 1).
# Tables go to stdout. With OUT=DIR each script also writes DIR/<name>.json.
# PYTHON picks the interpreter (default python3). Exits 1 if any script failed.
set -u
out=${OUT:+$(mkdir -p "$OUT" && cd "$OUT" && pwd)}
cd "$(dirname "$0")" || exit 1
status=0
for name in eltwise mlp rnn_loop while_ode scalar_loop dispatch cache_hit per_example_grads batched_newton jacobian gp heat train_cnn train_lm; do
  json=()
  [ -n "$out" ] && json=(--json "$out/$name.json")
  echo "=== $name $(date -Is)"
  "${PYTHON:-python3}" "$name.py" "$@" ${json[@]+"${json[@]}"} || status=1
done
exit $status
