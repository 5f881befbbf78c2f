#!/usr/bin/python3
"""scripts/check_tree.py finds what it promises to: planted in a small tree of its own."""
import importlib.util
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "check_tree.py")


def line_budget():
    spec = importlib.util.spec_from_file_location("check_tree", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.LINE_BUDGET


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def check(root):
    done = subprocess.run([sys.executable, SCRIPT, "--root", root], capture_output=True, text=True)
    return done.returncode, done.stdout


def main():
    failures = []
    with tempfile.TemporaryDirectory() as root:
        body = "".join(f"  x += {i};\n" for i in range(58))
        lambda_body = "".join(f"    y += {i};\n" for i in range(40))
        write(root, "framework/ok.cpp",
              "// see framework/ok.cpp and [docs](docs/page.md)\nnamespace a {\nclass C {\n void f() {\n" + body +
              " }\n};\nint g() {\n  auto h = [&](int y) {\n" + lambda_body + "    return y;\n  };\n" +
              "".join(f"  h({i});\n" for i in range(30)) + "  return 0;\n}\n}  // namespace a\n")
        write(root, "docs/page.md", "# page\n")
        code, out = check(root)
        if code != 0:
            failures.append("a clean tree (a 60-line method, a lambda inside a 35-line function) was refused:\n" + out)
        write(root, "models/long.cpp", "int f() {\n" + body + "  x += 1;\n  return x;\n}\n")
        write(root, "training/big.h", "// line\n" * 401)
        write(root, "cli/names.cpp", "// as in training/missing.cpp and bench/*.cpp\n")
        write(root, "docs/links.md", "[a link](nowhere.md), [b](page.md)\n")
        code, out = check(root)
        expected = ["models/long.cpp:1: a function of 62 lines", "training/big.h: 401 lines",
                    "names 'training/missing.cpp'", "names 'bench/*.cpp'", "names 'docs/nowhere.md'"]
        for e in expected:
            if e not in out:
                failures.append(f"not found: '{e}' in:\n{out}")
        if code != 1 or "page.md" in out.replace("docs/nowhere.md", ""):
            failures.append(f"exit {code} or a false report:\n{out}")
        budget = line_budget()
        write(root, "framework/huge.cpp", "// x\n" * (budget + 1))
        code, out = check(root)
        if "past the budget" not in out:
            failures.append(f"{budget + 1:,} production lines passed the budget of {budget:,}:\n" + out)
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
