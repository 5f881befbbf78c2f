"""Reading an attnlab run directory's CSV files, for the plotting and study scripts."""
import csv
import os
import sys


def read_csv(path, hint=""):
    """The rows of a CSV file as dicts; exits with one line naming the file if it cannot be read."""
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except OSError as e:
        who = os.path.basename(sys.argv[0]).removesuffix(".py")
        sys.exit(f"{who}: cannot read {path}: {e.strerror}" + (f" ({hint})" if hint else ""))
