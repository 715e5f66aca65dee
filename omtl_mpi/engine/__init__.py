"""The engine under every run: placement (:mod:`.placement`), a rank's roles and their exchange
(:mod:`.roles`: :func:`build`, :class:`Engine`), and the round loops of the two exchange
patterns (:mod:`.star`, :mod:`.graph`) with the between-round work (:mod:`.schedule`)."""
from .roles import Engine, build

__all__ = ["Engine", "build"]
