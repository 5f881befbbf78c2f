"""A figure of one run: its command line, and its last steps (curves over steps with a grid, a title,
saved and its path printed)."""
import argparse


def run_figure_parser(doc):
    """The command line of a script that draws one run: RUN and --out (default: a .png in RUN)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run")
    ap.add_argument("--out")
    return ap


def save_figure(fig, out, step_axes=(), title=None, **layout):
    """Steps on the x axis of `step_axes`, each with a light grid; `title` over the figure; written to `out`
    (110 dpi) and its path printed. `layout`: fig.tight_layout's arguments."""
    for a in step_axes:
        a.set_xlabel("step")
        a.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout(**layout)
    fig.savefig(out, dpi=110)
    print(out)
