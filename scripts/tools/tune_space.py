"""scripts/tools/tune.py's search space: --param name=KIND:... parsed, sampled through an Optuna trial,
and written back as attnlab train flags.

  name=log:LO:HI     a float on a log scale, 0 < LO < HI        (lr=log:1e-4:1e-2)
  name=float:LO:HI   a float, LO < HI                           (dropout=float:0:0.3)
  name=int:LO:HI     an integer, LO < HI, both ends included    (layers=int:1:4)
  name=cat:A,B,...   one of the listed values                   (positional=cat:sinusoidal,learned,rope)

The name is a train flag without its dashes. Floats are passed to attnlab with 4 significant
digits, and the tables show the values passed, so the best command runs exactly what was measured.
"""

from attnlab_runs.flags import format_value

KINDS = ("log", "float", "int", "cat")


class ParamError(ValueError):
    pass


def _number(text, kind, spec):
    try:
        return int(text) if kind == "int" else float(text)
    except ValueError:
        what = "an integer" if kind == "int" else "a number"
        raise ParamError(f"--param {spec}: '{text}' is not {what}") from None


def _choice(text):
    """A categorical value as Optuna stores it: an int or float when it reads as one, else the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


class Param:
    def __init__(self, name, kind, low=None, high=None, choices=None):
        self.name, self.kind, self.low, self.high, self.choices = name, kind, low, high, choices

    def spec(self):
        if self.kind == "cat":
            return f"{self.name}=cat:" + ",".join(str(c) for c in self.choices)
        return f"{self.name}={self.kind}:{self.low}:{self.high}"

    def suggest(self, trial):
        if self.kind == "cat":
            return trial.suggest_categorical(self.name, self.choices)
        if self.kind == "int":
            return trial.suggest_int(self.name, self.low, self.high)
        return trial.suggest_float(self.name, self.low, self.high, log=self.kind == "log")

    def check_values(self):
        """The values attnlab checks before the first trial: a categorical's every value, a range's two ends."""
        return list(self.choices) if self.kind == "cat" else [self.low, self.high]

    def grid_values(self):
        """The values the grid sampler visits: a categorical's list, an integer range's every integer."""
        if self.kind == "cat":
            return list(self.choices)
        if self.kind == "int":
            return list(range(self.low, self.high + 1))
        raise ParamError(f"--param {self.spec()}: the grid sampler needs listed values, e.g. {self.name}=cat:"
                         f"{format_value(self.low)},{format_value(self.high)}")


def parse_param(spec):
    """One --param; a malformed one raises ParamError naming it and what was expected."""
    name, sep, rest = spec.partition("=")
    name = name.lstrip("-")
    kind, sep2, values = rest.partition(":")
    if not sep or not name or not sep2 or kind not in KINDS:
        raise ParamError(f"--param {spec}: expected name=log:LO:HI, name=float:LO:HI, name=int:LO:HI or name=cat:A,B,...")
    if kind == "cat":
        choices = values.split(",")
        if any(c == "" for c in choices):
            raise ParamError(f"--param {spec}: an empty value in the list")
        if len(set(choices)) != len(choices):
            raise ParamError(f"--param {spec}: a value is listed twice")
        return Param(name, kind, choices=[_choice(c) for c in choices])
    ends = values.split(":")
    if len(ends) != 2:
        raise ParamError(f"--param {spec}: expected {name}={kind}:LO:HI")
    low, high = (_number(e, kind, spec) for e in ends)
    if not low < high:
        raise ParamError(f"--param {spec}: LO must be below HI")
    if kind == "log" and low <= 0:
        raise ParamError(f"--param {spec}: a log range needs LO > 0")
    return Param(name, kind, low, high)


def parse_space(specs):
    space = [parse_param(s) for s in specs]
    names = [p.name for p in space]
    for n in names:
        if names.count(n) > 1:
            raise ParamError(f"--param {n} is given twice")
    return space
