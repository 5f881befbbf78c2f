#!/usr/bin/python3
"""scripts/checks/check_tree.py finds what it promises to: each rule planted in a small tree of its own."""
import importlib.util
import os
import subprocess
import sys
import tempfile

from checks import check, verdict

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "checks", "check_tree.py")
SPEC = importlib.util.spec_from_file_location("check_tree", SCRIPT)
GATE = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(GATE)


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def gate(files):
    """check_tree's exit code and output on a fresh tree holding `files` ({path: text})."""
    with tempfile.TemporaryDirectory() as root:
        for rel, text in files.items():
            write(root, rel, text)
        done = subprocess.run([sys.executable, SCRIPT, "--root", root], capture_output=True, text=True)
        return done.returncode, done.stdout


def function(name, lines, lambda_lines=0):
    """A C++ function `name` whose body spans `lines` lines, `lambda_lines` of them a lambda's."""
    body = "".join(f"  x += {i};\n" for i in range(lines - 2 - lambda_lines))
    if lambda_lines:
        body += "  auto h = [&](int y) {\n" + "".join(f"    y += {i};\n" for i in range(lambda_lines - 2)) + "  };\n"
    return f"int {name}() {{\n{body}}}\n"


def functions_and_files():
    ok_method = "namespace a {\nclass C {\n void f() {\n" + "".join(f"  x += {i};\n" for i in range(58)) + " }\n};\n}\n"
    code, out = gate({"framework/ok.cpp": ok_method + function("g", 60, lambda_lines=30)})
    check(code == 0, "a 60-line method and a 60-line function holding a lambda pass", out)
    code, out = gate({"models/long.cpp": function("f", 62)})
    check(code == 1 and "models/long.cpp:1: f has 62 lines, more than 60" in out, "a 62-line function fails", out)
    code, out = gate({"models/lam.cpp": function("f", 61, lambda_lines=40)})
    check(code == 1 and "f has 61 lines" in out, "a function counts with its lambdas (61 lines, 40 a lambda's)", out)
    (path, name), limit = next(iter(GATE.LONG_KERNELS.items()))
    code, out = gate({path: function(name, limit)})
    check(code == 0, f"{name}, a named kernel, may have {limit} lines in {path}", out)
    code, out = gate({path: function(name, limit + 1)})
    check(code == 1 and f"{name} has {limit + 1} lines, more than {limit}" in out, f"... and not {limit + 1}", out)
    code, out = gate({"framework/other.cpp": function(name, 61)})
    check(code == 1 and f"{name} has 61 lines" in out, f"{name} elsewhere than {path} has the common limit", out)
    code, out = gate({"training/big.h": "// line\n" * 401})
    check(code == 1 and "training/big.h: 401 lines" in out, "a 401-line file fails (comments count here)", out)


def named_paths():
    code, out = gate({"framework/ok.cpp": "// see framework/ok.cpp and bench/*.cpp\n", "bench/b.cpp": "\n",
                      "docs/page.md": "[ok](page.md), [a link](../framework/ok.cpp)\n"})
    check(code == 0, "paths that exist, a pattern that matches and Markdown links that resolve pass", out)
    code, out = gate({"cli/names.cpp": "// as in training/missing.cpp and bench/*.cpp\n",
                      "docs/links.md": "[a link](nowhere.md)\n"})
    for e in ["names 'training/missing.cpp'", "names 'bench/*.cpp'", "names 'docs/nowhere.md'"]:
        check(code == 1 and e in out, f"a missing path is reported: {e}", out)


def budgets_and_density():
    samples = {"C++": ("framework/f.cpp", "x;\n", "// a comment\n\n"),
               "report JS/CSS": ("cli/report/r.js", "x;\n", "/* a\n   comment */\n"),
               "Python": ("scripts/s.py", "x = 1\n", "# a comment\n\n")}
    for label, language in GATE.LANGUAGES.items():
        path, line, comment = samples[label]
        budget, ceiling = language["budget"], language["density"]
        files = {path.replace(".", f"{k}.", 1): line * 300 for k in range(budget // 300)}
        files[path] = line * (budget % 300)
        files[path.replace(".", "_notes.", 1)] = comment * 150
        code, out = gate(files)
        check(code == 0 and f"{label} {budget} of {budget} code lines" in out,
              f"{label}: {budget:,} code lines and 300 comment or blank lines are within the budget", out)
        files[path] += line
        code, out = gate(files)
        check(code == 1 and f"is {budget + 1} code lines, past the budget of {budget}" in out,
              f"{label}: {budget + 1:,} code lines fail", out)
        wide = line.rstrip("\n").ljust(int(ceiling) + 2, " ") + "x\n" if label != "Python" else \
            "x = " + "1 + " * int(ceiling / 4) + "1\n"
        code, out = gate({path: wide * 10})
        check(code == 1 and "past the ceiling of" in out, f"{label}: lines past {ceiling} characters fail", out)
    code, out = gate({"scripts/d.py": '"""A docstring\n' + "of many lines\n" * 20 + '"""\nx = 1  # and a comment\n'})
    check("Python 1 of" in out and "5.0 of" in out, "a Python docstring and a trailing comment are no code", out)
    code, out = gate({"cli/report/s.css": "/* style */\na { b: c; } /* note */\n",
                      "cli/report/t.js": 'const u = "http://x"; // note\n'})
    check("report JS/CSS 2 of" in out, "CSS and JS comments are no code; a // in a string is", out)


def main():
    functions_and_files()
    named_paths()
    budgets_and_density()
    return verdict("test_check_tree")


if __name__ == "__main__":
    sys.exit(main())
