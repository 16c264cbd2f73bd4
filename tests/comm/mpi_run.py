#!/usr/bin/python3
"""Runs a program as N ranks under mpirun (--oversubscribe, allowed as root);
exit 77 when mpirun is missing, else the job's status.
usage: mpi_run.py MPIRUN N PROGRAM [ARGS...]"""
import os
import shutil
import subprocess
import sys

mpirun, n, prog = sys.argv[1], sys.argv[2], sys.argv[3:]
if not shutil.which(mpirun):
    print("skip: mpirun not found (Debian: apt-get install openmpi-bin)")
    sys.exit(77)
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", HTR_CPU_THREADS="1",
           ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
sys.exit(subprocess.run([mpirun, "--oversubscribe", "--bind-to", "none", "-np", n] + prog, env=env,
                        timeout=110).returncode)
