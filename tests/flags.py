"""Command-line flag lists of the Python tests."""


def without(args, *flags):
    """`args` less each of `flags` and its value (a switch, followed by another flag or nothing, has none)."""
    out, value_next = [], False
    for i, a in enumerate(args):
        if value_next:
            value_next = False
        elif a in flags:
            value_next = i + 1 < len(args) and not args[i + 1].startswith("--")
        else:
            out.append(a)
    return out
