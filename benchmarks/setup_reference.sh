#!/usr/bin/env sh
# Create the reference environment for the benchmarks: the old PyPI release trama 0.2.0 (a
# different library that happens to share the name) in its own virtual environment, so it can
# never shadow ours. The benchmarks run it as a separate interpreter and skip it when absent.
#
#   sh benchmarks/setup_reference.sh        # from the repository root; creates .venv-ref/
set -eu
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv-ref/bin/python ]; then
    "$PYTHON" -m venv .venv-ref
fi
.venv-ref/bin/pip install --quiet --disable-pip-version-check trama==0.2.0 numpy
.venv-ref/bin/python -c 'import trama; assert trama.__version__ == "0.2.0", trama.__version__; print("reference ready: .venv-ref (trama", trama.__version__ + ")")'
