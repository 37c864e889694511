"""The extraction rules as an ordered registry: the chain `decide` walks is read from here.

A rule is one function ``rule(ctx) -> Decision | int | None`` registered under a name with
`extraction_rule`; ``before=`` / ``after=`` place it next to a rule already registered. Without
either it goes just before ``no_match`` (the catch-all that always decides, so nothing after
it would ever run; placing a rule after it is refused). A rule that returns an option index is
recorded under its registered name (the result's ``rule`` field); one that returns a `Decision`
is recorded as that decision says, which is how a rule reports a refusal ("ambiguous").

    @extraction_rule("final_choice", before="no_match")
    def final_choice(ctx: Ctx) -> int | None:
        m = re.search(r"Final choice:\\s*\\(?([A-Z])\\)?", ctx.text)
        return ctx.label_index.get(m.group(1).casefold()) if m else None

The built-in rules register in `mmctx.extract.chain`, in their documented order.
"""

from __future__ import annotations

from collections.abc import Callable

from .context import Ctx
from .decision import Decision, Rule

CATCH_ALL = "no_match"

_CHAIN: list[tuple[str, Rule]] = []


def register_rule(
    name: str, rule: Callable[[Ctx], Decision | int | None], *, before: str = "", after: str = ""
) -> None:
    """Add ``rule`` to the chain under ``name`` (see the module docstring for where it goes)."""
    names = rule_names()
    if not name or name in names:
        raise ValueError(f"extraction rule {name!r} is {'registered already' if name else 'unnamed'}")
    if before and after:
        raise ValueError(f"extraction rule {name!r}: give before= or after=, not both")
    anchor = before or after
    if anchor and anchor not in names:
        raise ValueError(f"extraction rule {name!r}: no rule {anchor!r} to place it by; rules: {list(names)}")
    if after == CATCH_ALL:
        raise ValueError(f"extraction rule {name!r}: nothing after {CATCH_ALL!r} runs (it always decides)")
    if anchor:
        at = names.index(anchor) + (1 if after else 0)
    else:
        at = names.index(CATCH_ALL) if CATCH_ALL in names else len(names)
    _CHAIN.insert(at, (name, _named(name, rule)))


def extraction_rule(name: str, *, before: str = "", after: str = "") -> Callable[[Callable], Callable]:
    """Decorator form of `register_rule`; the function is returned unchanged."""

    def add(rule: Callable[[Ctx], Decision | int | None]) -> Callable[[Ctx], Decision | int | None]:
        register_rule(name, rule, before=before, after=after)
        return rule

    return add


def unregister_rule(name: str) -> None:
    """Take rule ``name`` out of the chain (a plugin unloaded, a test undone); KeyError if absent."""
    names = rule_names()
    if name not in names:
        raise KeyError(f"no extraction rule {name!r}; rules: {list(names)}")
    del _CHAIN[names.index(name)]


def rule_chain() -> tuple[tuple[str, Rule], ...]:
    """The rules in the order they are tried."""
    return tuple(_CHAIN)


def rule_names() -> tuple[str, ...]:
    """The names of the rules in the order they are tried (what a run records)."""
    return tuple(name for name, _ in _CHAIN)


def _named(name: str, rule: Callable[[Ctx], Decision | int | None]) -> Rule:
    """``rule`` as the chain calls it: an option index becomes a `Decision` under ``name``."""

    def run(ctx: Ctx) -> Decision | None:
        found = rule(ctx)
        if found is None or isinstance(found, Decision):
            return found
        if isinstance(found, bool) or not isinstance(found, int) or not 0 <= found < len(ctx.options):
            raise ValueError(f"extraction rule {name!r} returned {found!r}, not an option index, Decision or None")
        return Decision(found, name)

    run.__name__ = getattr(rule, "__name__", name)
    run.__doc__ = rule.__doc__
    return run
