"""The checks of the Python tool tests (test_sweep.py, test_tune.py, test_tune_units.py): each check
prints ok or FAIL with what it proves and the run goes on; verdict() ends a test with its exit code."""
FAILURES = []


def check(cond, what, detail=""):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        FAILURES.append(what)
        if detail:
            print(detail)


def verdict(test):
    """Prints how `test` ended; 1 if any check failed, else 0."""
    if FAILURES:
        print(f"{test}: {len(FAILURES)} checks failed")
        return 1
    print(f"{test}: all checks passed")
    return 0
