"""What a program says of its own use: `-h` / `--help` (a usage line, examples, and the
flags in groups, exit 0), and a flag it does not know or cannot take (one line, exit 2,
with the flags it may have meant)."""

import difflib
import re
import sys
import textwrap
from dataclasses import dataclass

from absl import flags

__all__ = ["Program", "parse", "render", "USAGE_EXIT"]

USAGE_EXIT = 2  # bad usage, as the README's exit statuses say
WIDTH = 100
HELP_FLAGS = ("-h", "--help", "-help", "--helpshort", "-?")


@dataclass(frozen=True)
class Program:
    """A program's help: its name in messages (`prefix`), how it is run (`usage`), what
    it does (`summary`), examples as (command, what it does), its flags in groups
    as (heading, flag names), and what its exit statuses mean (`exits`)."""

    prefix: str
    usage: str
    summary: str
    examples: tuple
    groups: tuple
    exits: str


def _value(flag):
    if isinstance(flag, flags.MultiFlag) or flag.name.endswith("hosts"):
        return "=VALUE,..."
    if isinstance(flag.parser, flags.BooleanParser):
        return ""
    if isinstance(flag.parser, flags.EnumParser):
        return "={%s}" % "|".join(flag.parser.enum_values)
    return "=%s" % {"IntegerParser": "N", "FloatParser": "SECONDS"}.get(type(flag.parser).__name__, "VALUE")


def _default(flag):
    if flag.default is None or isinstance(flag, flags.MultiFlag) or flag.name == "verbosity":
        return ""
    value = flag.default
    if flag.name.endswith("_size") and isinstance(value, int):
        return (
            " (default: %d MB)" % (value >> 20)
            if value >= 1 << 20 and not value % (1 << 20)
            else " (default: %d)" % value
        )
    if isinstance(flag.parser, flags.BooleanParser):
        return " (default: %s)" % ("on" if value else "off")
    if value == "" or value == []:
        return ""
    return " (default: %s)" % (value if not isinstance(value, float) or value % 1 else int(value))


# What absl adds to a flag's own help: its choices, and how a list is given.
_ABSL_ADDED = re.compile(r"^<[^>]*>: |;\s*repeat this option to specify a list of values$")


def _flag_lines(flag):
    name = ("--[no]" if isinstance(flag.parser, flags.BooleanParser) else "--") + flag.name + _value(flag)
    text = _ABSL_ADDED.sub("", flag.help or "")
    body = textwrap.wrap(text + _default(flag), WIDTH - 6)
    return ["  " + name] + ["      " + line for line in body]


def render(program: Program, values: flags.FlagValues) -> str:
    """The program's help, as -h prints it."""
    lines = ["usage: " + program.usage, ""] + textwrap.wrap(program.summary, WIDTH) + ["", "examples:"]
    for command, what in program.examples:
        lines += ["  # " + what, "  " + command]
    for heading, names in program.groups:
        lines += ["", heading + ":"]
        for name in names:
            if name in values:
                lines += _flag_lines(values[name])
    lines += [""] + textwrap.wrap(
        "Exit status: %s. --helpfull lists every flag, absl's included." % program.exits, WIDTH
    )
    return "\n".join(lines) + "\n"


def _fail(program, message):
    print("%serror: %s" % (program.prefix, message), file=sys.stderr, flush=True)
    sys.exit(USAGE_EXIT)


def _suggestions(name, values):
    return difflib.get_close_matches(name, list(values), n=3, cutoff=0.6)


def parse(program: Program, values: flags.FlagValues):
    """An absl `flags_parser` for `app.run`: parses argv into `values` and returns what is
    left (the positional arguments); prints the help and exits 0 for -h, or one error
    line and exits 2 for a flag it does not know or a value it cannot take."""

    def parser(argv):
        options = argv[1 : argv.index("--")] if "--" in argv else argv[1:]
        if any(arg in HELP_FLAGS for arg in options):
            sys.stdout.write(render(program, values))
            sys.exit(0)
        try:
            return values(argv)
        except flags.UnrecognizedFlagError as e:
            name = e.flagname
            close = _suggestions(name, values)
            hint = " (did you mean %s?)" % " or ".join("--" + c for c in close) if close else ""
            _fail(program, "unknown flag --%s%s; -h lists the flags" % (name, hint))
        except flags.Error as e:
            _fail(program, "%s; -h lists the flags" % str(e).replace("\n", " "))

    return parser
