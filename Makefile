# Everything runs from .venv, which `make setup` creates with the package, an MPI runtime
# (the mpich wheel: mpiexec lands in .venv/bin) and the test tools.
# Idempotent.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export PATH := $(abspath $(VENV))/bin:$(PATH)
export PYTHONUNBUFFERED := 1

.PHONY: setup demo test bench paper wstep quality minilm clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[mpich,test]'
	touch $(STAMP)

demo: setup
	mkdir -p results
	$(VENV)/bin/omtl-mpi data synth -o results/demo-data.h5 --tasks 5 --samples 10000 --seed 0
	$(VENV)/bin/omtl-mpi run --np 6 --data results/demo-data.h5 --out results/demo.h5
	$(PY) scripts/plot_curve.py results/demo.h5 -o results/demo.png

# the tests run in parallel, one worker per CPU (most of them wait on MPI jobs they start)
test: setup
	$(PY) -m pytest -q -n auto

# BASE=REV sets an earlier revision's figures beside this tree's in the default-path table
# (make bench BASE=64c7ce4 is how docs/PERFORMANCE.md's table was made)
bench: setup
	$(PY) scripts/bench.py scripts/bench/default-path.toml --docs $(if $(BASE),--base $(BASE))
	$(PY) scripts/bench.py scripts/bench/aslr.toml --docs
	$(PY) scripts/bench.py scripts/bench/startup.toml --docs

# The paper's Tables 2-4 and Figure 1 (scripts/paper.toml; about half an hour on 2 cores):
# imports the real sets found in $(DATA), sweeps, reports into results/paper/report and
# rewrites the 'paper' section of docs/RESULTS.md.
DATA ?= ../shared/data
paper: setup
	DATA=$(DATA) $(PY) scripts/paper.py --docs

# Issue 8: adaptive w-steps against euclid and the single-task learners (scripts/wstep.toml;
# about half an hour on 2 cores); rewrites the 'wstep' section of docs/RESULTS.md.
wstep: setup
	DATA=$(DATA) $(PY) scripts/wstep.py --docs

# Issues 20 and 24: every learner of the comparison on every local data set and the known-answer
# test beds, 3 seeds (scripts/quality.toml); rewrites the 'quality' section of docs/RESULTS.md.
quality: setup
	DATA=$(DATA) $(PY) scripts/quality.py --docs

# TweetEval with hashed n-grams against MiniLM sentence embeddings (scripts/minilm.toml). Needs the
# optional extra: $(VENV)/bin/pip install torch --index-url https://download.pytorch.org/whl/cpu,
# then $(VENV)/bin/pip install -e '.[embed]'. Imports TweetEval both ways into results/data (the
# embeddings take about ten minutes on 2 cores, once); rewrites the 'minilm' section of docs/RESULTS.md.
minilm: setup
	DATA=$(DATA) $(PY) scripts/minilm.py --docs

clean:
	rm -rf $(VENV) results build *.egg-info .pytest_cache
