"""attnlab_runs: what the Python tools, studies and checks share about attnlab runs.

    schema       the run files' names and fields, declared once (summary.json, metrics.csv, summary.csv)
    launch       finding attnlab, asking it to check flags or claim a directory, running `attnlab train`
    flags        reading and writing train command lines
    files        reading a run's files (CSV, summary.json, held-out rows) and writing tables
    tool         a tool's command line: one-line refusals, mpirun ranks
    study        what the study drivers share: provenance, medians, the docs' generated blocks
    figures      a figure of one run: its command line, its last steps
    mirror       attnlab's rules that the PyTorch references follow (weight-decay groups)
    safetensors  a checkpoint's tensors, read with numpy

Every script under scripts/ imports it as `attnlab_runs` from beside itself: each folder of
scripts holds a link `attnlab_runs -> ../attnlab_runs`, so a script runs as
`scripts/tools/sweep.py ...` from anywhere, with no path set. A test, or your own Python code,
imports it and the scripts' modules with PYTHONPATH naming the folders (ctest sets it:
ATTNLAB_PYTHONPATH in CMakeLists.txt), e.g. PYTHONPATH=scripts:scripts/tools.
"""
