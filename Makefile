# The two commands of the README:
#   make demo   set everything up, then run the built-in default (runs/circle_example_c)
#   make test   set everything up, then run the test suite
VENV ?= .venv

.PHONY: setup demo demo-sphere test bench clean

setup:
	@VENV=$(VENV) bash scripts/setup.sh

demo: setup
	$(VENV)/bin/spheredens run runs/circle_example_c/config.toml --overwrite

demo-sphere: setup
	$(VENV)/bin/spheredens run runs/sphere_great_circle/config.toml --overwrite

test: setup
	$(VENV)/bin/python -m pytest -q

bench: setup
	$(VENV)/bin/python benchmarks/bench_circle_rhs.py
	$(VENV)/bin/python benchmarks/bench_sphere_rhs.py
	$(VENV)/bin/python benchmarks/bench_sphere_fv.py
	$(VENV)/bin/python benchmarks/bench_auxiliary.py

clean:
	rm -rf $(VENV) .pytest_cache
