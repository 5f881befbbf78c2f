"""A tool's command line: bad input refused in one line with exit 2, said once under mpirun."""
import argparse
import os
import sys


def launcher_rank_size():
    """This process's rank and the process count under mpirun (Open MPI or PMI variables); 0, 1 otherwise."""
    env = os.environ
    size = int(env.get("OMPI_COMM_WORLD_SIZE") or env.get("PMI_SIZE") or 1)
    rank = int(env.get("OMPI_COMM_WORLD_RANK") or env.get("PMI_RANK") or 0)
    return rank, size


def job_id():
    """The same on every rank of one mpirun job and different for the next one (a stale result is not this job's)."""
    env = os.environ
    return env.get("PMIX_NAMESPACE") or env.get("OMPI_MCA_ess_base_jobid") or f"pid{os.getpid()}"


def split_at_dashes(argv):
    """(the tool's own arguments, the train flags after `--`)."""
    if "--" not in argv:
        return argv, []
    i = argv.index("--")
    return argv[:i], argv[i + 1:]


def refuse(tool, message):
    """Bad input: one line on stderr (rank 0 alone under mpirun: every rank meets the same input), exit 2."""
    if launcher_rank_size()[0] == 0:
        print(f"{tool}: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


class OneLineParser(argparse.ArgumentParser):
    """argparse whose refusals are one line and exit 2, said by rank 0 alone (refuse)."""

    def error(self, message):
        refuse(self.prog.removesuffix(".py"), f"{message} (see --help)")
