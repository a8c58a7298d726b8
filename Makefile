# The two commands of the README:
#   make demo   set everything up, then run the built-in default (runs/circle_example_c)
#   make test   set everything up, then run the test suite
#   make docs   set up with the docs extra, then build the site: docs/_build/html/index.html
VENV ?= .venv

.PHONY: setup demo demo-sphere test bench docs clean

setup:
	@VENV=$(VENV) bash scripts/setup.sh

demo: setup
	$(VENV)/bin/spheredens run runs/circle_example_c/config.toml --overwrite

demo-sphere: setup
	$(VENV)/bin/spheredens run runs/sphere_great_circle/config.toml --overwrite

test: setup
	$(VENV)/bin/python -m pytest -q --durations=20

bench: setup
	$(VENV)/bin/python benchmarks/bench_circle_rhs.py
	$(VENV)/bin/python benchmarks/bench_sphere_rhs.py
	$(VENV)/bin/python benchmarks/bench_sphere_fv.py
	$(VENV)/bin/python benchmarks/bench_auxiliary.py

# every internal link and anchor of the pages resolves (tests/test_doc_links.py), then a clean
# build, warnings as errors: every gallery script runs (one that fails fails the build);
# one BLAS thread, as the gallery's products are small (threads only contend for the 2 cores)
docs:
	@VENV=$(VENV) bash scripts/setup.sh docs
	rm -rf docs/_build docs/auto_examples docs/generated docs/sg_execution_times.rst
	$(VENV)/bin/python -m pytest -q -p no:cacheprovider tests/test_doc_links.py
	@start=$$(date +%s); OPENBLAS_NUM_THREADS=1 $(VENV)/bin/python -m sphinx -q -W --keep-going \
	    -b html docs docs/_build/html && echo "docs: built docs/_build/html/index.html in $$(( $$(date +%s) - start )) s"

clean:
	rm -rf $(VENV) .pytest_cache
