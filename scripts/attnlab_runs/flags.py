"""Train command lines: reading a flag's value, the flags the tools add, parameters written as flags."""

# What the sweep and tuning tools pass to every run unless the user's flags set it (flag, value or None).
DEFAULTS = [("quiet", None), ("threads", "1")]


def flag_names(args):
    """The option names in a train command line: --name or --name=value."""
    return {a[2:].partition("=")[0] for a in args if a.startswith("--") and len(a) > 2}


def flag_value(args, name):
    """The value of --name in a train command line (--name V or --name=V; the last one), or None."""
    value = None
    for i, a in enumerate(args):
        if a == f"--{name}" and i + 1 < len(args):
            value = args[i + 1]
        elif a.startswith(f"--{name}="):
            value = a.partition("=")[2]
    return value


def without_flag(args, name):
    """The command line without --name and its value (either form)."""
    out, skip = [], False
    for i, a in enumerate(args):
        if skip:
            skip = False
        elif a == f"--{name}":
            skip = i + 1 < len(args)
        elif not a.startswith(f"--{name}="):
            out.append(a)
    return out


def resolved_value(config_ini, name):
    """`name = value` of a resolved config.ini's text (train --check prints one), or None."""
    for line in config_ini.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == name:
            return value.strip()
    return None


def default_flags(shared, own):
    """DEFAULTS that neither the shared flags nor the tool's own per-run flags (names in `own`) set."""
    given = flag_names(shared) | set(own)
    out = []
    for name, value in DEFAULTS:
        if name not in given:
            out += [f"--{name}"] + ([value] if value is not None else [])
    return out


def format_value(value):
    """A value as passed to attnlab: floats with 4 significant digits, others as written."""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def train_flags(params):
    """{name: value} -> ['--name', 'value', ...] in the order given."""
    return [x for name, value in params.items() for x in (f"--{name}", format_value(value))]
