"""How an option of the option table (:mod:`omtl_mpi.options`) becomes a click option, for
``omtl-mpi run`` and ``omtl-mpi algos NAME``."""
import click


def click_option(opt, default_algo: str) -> click.Option:
    """An option of the table as a click option (a hyper-parameter defaults to None, not given,
    so that the chosen learner's own default applies). Its help: what it means to the main
    learner (preceded by the learners it means that to, where the default learner has no such
    option), the learners to which it means something else, then the learners' defaults."""
    text = opt.help
    others = opt.other_meanings
    if opt.learners and default_algo not in opt.learners:
        same = [name for name in opt.learners if name not in others]
        text = f"{', '.join(same)}: {text[:1].lower()}{text[1:]}"
    if others:
        name = others[0] if len(others) == 1 else "NAME"
        text += f" What it means to {', '.join(others)}: 'omtl-mpi algos {name}'."
    if opt.default_text():
        text += f"  [default: {opt.default_text()}]"
    default = None if opt.kind in ("param", "run") else opt.default
    if opt.type is bool:
        return click.Option([f"{opt.flag}/{opt.off_flag}", opt.name], default=default, help=text)
    kind = click.Choice(opt.choices) if opt.choices else opt.type
    metavar = opt.metavar
    if opt.none_text and opt.type in (int, float):          # --eta auto: the default's rule
        kind = NumberOrWord(opt.type, opt.none_text)
        metavar = metavar or f"{opt.type.__name__.upper()}|{opt.none_text}"
    return click.Option([opt.flag, opt.name], type=kind, default=default, metavar=metavar, help=text)


class NumberOrWord(click.ParamType):
    """A number, or the word the option's default reads as ("auto"): the same as not giving it."""

    def __init__(self, number: type, word: str):
        self.number, self.word, self.name = number, word, f"{number.__name__} or {word}"

    def convert(self, value, param, ctx):
        if value is None or value == self.word:
            return None
        try:
            return self.number(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is neither a number nor {self.word!r}", param, ctx)
