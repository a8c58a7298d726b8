#!/usr/bin/env bash
# The tables of the low-temperature study (docs/concentration.md, "Low temperature"), one command
# per table, from scratch or from whatever is already there (finished runs are kept, partial ones
# resume, missing ones start):
#
#   bash runs/concentration/low_temperature.sh beta1000-space      # n = 1024, 2048, 4096 (sweep)
#   bash runs/concentration/low_temperature.sh beta1000-tolerance  # tolerance 1e-1 ... 1e-3 (sweep)
#   bash runs/concentration/low_temperature.sh beta3000            # n = 2048 and 4096, tolerance 1e-2 and 1e-1
#   bash runs/concentration/low_temperature.sh beta10000           # n = 4096, and n = 2048 at two tolerances
#
# Each ends by printing the table and the refinement changes, and redrawing the figures
# (runs/concentration/figures_low_temperature.py). The wall times are on the docs page.
# Uses .venv/bin (make test or make demo creates it). The single runs go one after the other,
# so they take one core each and leave the other free.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=.venv/bin
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
single() { for name in "$@"; do
  "$BIN/spheredens" run "runs/concentration/$name.toml" --resume --no-figure
done; }
case "${1:-}" in
  beta1000-space) "$BIN/spheredens" sweep runs/concentration/sweep_low_temperature_space.toml ;;
  beta1000-tolerance) "$BIN/spheredens" sweep runs/concentration/sweep_low_temperature_tolerance.toml ;;
  beta3000) single low_temperature_3000 low_temperature_3000_n4096 low_temperature_3000_tol1e-1 ;;
  beta10000) single low_temperature_10000 low_temperature_10000_n2048 low_temperature_10000_n2048_tol3e-2 ;;
  *) echo "usage: bash runs/concentration/low_temperature.sh beta1000-space|beta1000-tolerance|beta3000|beta10000" >&2
     exit 2 ;;
esac
"$BIN/python" runs/concentration/figures_low_temperature.py
