#!/usr/bin/env bash
# Set up everything spheredens needs on a fresh Debian machine:
#   1. FFTW headers (libfftw3-dev), needed to build shtns, and the udunits2 library
#      (libudunits2-dev), which the CF checker of the tests (cfchecker) loads, installed with
#      apt when missing;
#   2. a virtualenv in .venv (override with VENV=...) holding spheredens and its test extra.
# Safe to run again: it skips what is already done.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
PYTHON="${PYTHON:-python3}"

if [ ! -f /usr/include/fftw3.h ]; then
    echo "spheredens setup: installing libfftw3-dev (FFTW headers, needed to build shtns)"
    SUDO=""
    if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libfftw3-dev make gcc >/dev/null
fi

if [ ! -f /usr/include/udunits2.h ]; then
    echo "spheredens setup: installing libudunits2-dev (units library of the CF checker used by the tests)"
    SUDO=""
    if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libudunits2-dev >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
    echo "spheredens setup: creating virtualenv $VENV"
    "$PYTHON" -m venv "$VENV"
fi

stamp="$VENV/.spheredens-installed"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    echo "spheredens setup: installing spheredens and its dependencies into $VENV (first time: ~2 min, shtns is compiled)"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    "$VENV/bin/python" -m pip install -q -e '.[test]'
    touch "$stamp"
fi

# 3. `make docs` (scripts/setup.sh docs): the docs extra too (Sphinx, myst-parser, sphinx-gallery,
#    furo; about 15 s the first time).
docs_stamp="$VENV/.spheredens-docs-installed"
if [ "${1:-}" = "docs" ] && { [ ! -f "$docs_stamp" ] || [ pyproject.toml -nt "$docs_stamp" ]; }; then
    echo "spheredens setup: installing the docs extra into $VENV"
    "$VENV/bin/python" -m pip install -q -e '.[test,docs]'
    touch "$docs_stamp"
fi
