"""The goals table of ``make bench``: each row declared in ``bench/goals.toml``, judged here
against the figures the scenarios returned.

One row per goal point: its id, what it measures, the figure, the target, the ratio, and PASS,
FAIL or "not run". For a goal stated as a ratio (register/s over the SQLAlchemy baseline's,
say) the ratio column is that ratio; for one stated as a bound (a p50 in ms, RSS in MB) it is
the figure over its bound, so below 1 passes an upper bound. A figure whose own checks failed
(a lost sequence, an unfinished Flow) FAILs whatever its ratio. A row whose scenario was not
chosen, failed or was skipped is "not run", saying which; so is one whose figure is missing
from the results (its note names the path).

The rows of goal 5 (memory) read ``bench/results/memory.json``, which ``make bench-memory``
leaves (it does not fit in ``make bench``), with that run's date.

``goals.toml``'s head describes its keys. What a path cannot say is a function in
``DERIVED``, named from the file.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
GOALS_FILE = HERE / "goals.toml"
MEMORY_RESULTS = HERE / "results" / "memory.json"
#: The "scenario" of goal 5's rows: the last ``make bench-memory`` summary, not a scenario of
#: ``make bench``.
MEMORY = "memory"
PASS, FAIL, NOT_RUN = "PASS", "FAIL", "not run"
COMPARES = ("at_least", "at_most", "all", "report")
OVER_BOUND = "over_bound"


@dataclass(frozen=True)
class Goal:
    """One row of the goals table."""

    goal: str
    what: str
    figure: str
    target: str
    ratio: float | None
    verdict: str
    note: str = ""


@dataclass(frozen=True)
class Check:
    """A figure that must be true (``checks``, ``requires``, ``pass_only_if``) and the note
    shown when it is not."""

    path: str
    note: str = ""


@dataclass(frozen=True)
class GoalSpec:
    """One ``[[goal]]`` of goals.toml (its head describes the keys)."""

    id: str
    what: str
    scenario: str
    compare: str
    target: str
    figure: str
    value: str | None = None
    bound: float | None = None
    ratio: str | None = None
    checks: tuple[Check, ...] = ()
    requires: tuple[Check, ...] = ()
    pass_only_if: Check | None = None
    note: str = ""
    values: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


# -- derived figures: what a path cannot say ----------------------------------------------------

_SEARCH_FULL_RATIO = "search_p50_1m_over_100k"


def search_quick_sizes(figures: Mapping[str, Any]) -> str:
    """4c's note: "quick sizes: 100k / 10k" when ``search`` ran smaller than the goal's
    1,000,000 over 100,000 Flows (its ``ratio_name`` spells the sizes), else ""."""
    name = str(figures["ratio_name"])
    if name == _SEARCH_FULL_RATIO:
        return ""
    return "quick sizes: " + name.removeprefix("search_p50_").replace("_over_", " / ")


def search_plans(figures: Mapping[str, Any]) -> dict[str, Any]:
    """4d: the table scans in ``search``'s plans at every size, and the calls whose SQL was
    not captured (no plan to judge: that fails too). ``shown``: the figure; ``ok``: neither."""
    scans = sorted({s for found in figures["scans"].values() for s in found})
    unseen = sorted(
        f"{kind} at {size}"
        for size, at_size in figures["by_size"].items()
        for kind, statements in at_size["plans"].items()
        if not statements
    )
    shown = "; ".join(scans) if scans else "none at " + " and ".join(figures["scans"])
    if unseen:
        shown += "; no plan captured: " + ", ".join(unseen)
    return {"shown": shown, "ok": not scans and not unseen}


#: The functions a row's ``{ fn = "name" }`` value may name: each takes a scenario's figures.
DERIVED: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "search_quick_sizes": search_quick_sizes,
    "search_plans": search_plans,
}
_OPS = ("path", "sum", "max", "ratio_of", "fn")


# -- reading goals.toml -------------------------------------------------------------------------

_KEYS = set(GoalSpec.__dataclass_fields__)


def load_goals(path: Path = GOALS_FILE) -> list[GoalSpec]:
    """Read and check the rows of goals.toml, in order."""
    with path.open("rb") as f:
        data = tomllib.load(f)
    specs = [_spec(raw) for raw in data.get("goal", [])]
    ids = [s.id for s in specs]
    duplicated = sorted({i for i in ids if ids.count(i) > 1})
    if duplicated:
        raise ValueError(f"{path.name}: goal ids used twice: {duplicated}")
    return specs


def _spec(raw: dict[str, Any]) -> GoalSpec:
    where = f"goal {raw.get('id', '?')}"
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown}")
    spec = GoalSpec(
        **{
            **raw,
            "checks": tuple(_check(c, where) for c in raw.get("checks", [])),
            "requires": tuple(_check(c, where) for c in raw.get("requires", [])),
            "pass_only_if": _check(raw["pass_only_if"], where) if "pass_only_if" in raw else None,
        }
    )
    if spec.compare not in COMPARES:
        raise ValueError(f"{where}: compare {spec.compare!r} is not one of {COMPARES}")
    if spec.compare in ("at_least", "at_most") and (spec.value is None or spec.bound is None):
        raise ValueError(f"{where}: {spec.compare} needs a value and a bound")
    if spec.ratio == OVER_BOUND and (spec.value is None or spec.bound is None):
        raise ValueError(f"{where}: ratio {OVER_BOUND!r} needs a value and a bound")
    for name, how in spec.values.items():
        if len(how) != 1 or next(iter(how)) not in _OPS:
            raise ValueError(f"{where}: value {name!r} needs one of {_OPS}, not {sorted(how)}")
        if "fn" in how and how["fn"] not in DERIVED:
            raise ValueError(f"{where}: value {name!r}: no function {how['fn']!r} in DERIVED")
    notes = [c.note for c in (*spec.checks, *spec.requires, spec.pass_only_if) if c is not None]
    for text in (spec.figure, spec.note, *notes):
        list(_pieces(text))  # balanced braces, or ValueError now rather than mid-run
    return spec


def _check(raw: dict[str, Any], where: str) -> Check:
    if set(raw) - {"path", "note"} or "path" not in raw:
        raise ValueError(f"{where}: a check is {{ path, note }}, not {raw}")
    return Check(**raw)


# -- paths and templates ------------------------------------------------------------------------


def _pieces(text: str) -> Iterator[tuple[str, bool]]:
    """Split a template into literal text (False) and the insides of its {fields} (True);
    braces nest, ``{{`` and ``}}`` are literal braces."""
    literal: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in "{}" and text[i : i + 2] == ch * 2:
            literal.append(ch)
            i += 2
        elif ch == "}":
            raise ValueError(f"unbalanced '}}' in {text!r}")
        elif ch == "{":
            depth, end = 1, i + 1
            while depth and end < len(text):
                depth += {"{": 1, "}": -1}.get(text[end], 0)
                end += 1
            if depth:
                raise ValueError(f"unbalanced '{{' in {text!r}")
            if literal:
                yield "".join(literal), False
                literal = []
            yield text[i + 1 : end - 1], True
            i = end
        else:
            literal.append(ch)
            i += 1
    if literal:
        yield "".join(literal), False


def _outside(text: str) -> Iterator[tuple[int, str]]:
    """The characters of ``text`` outside any {field} or [key], with their index."""
    depth = 0
    for i, ch in enumerate(text):
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        elif depth == 0:
            yield i, ch


def _segments(path: str) -> list[tuple[str, bool]]:
    """Split a path at its dots and brackets outside {fields}: ``a.b[c: d].e{f.g}`` gives
    ``a``, ``b``, ``c: d`` (bracketed: True), ``e{f.g}``."""
    segments: list[tuple[str, bool]] = []
    text: list[str] = []
    depth, i = 0, 0
    while i < len(path):
        ch = path[i]
        if depth == 0 and ch in ".[":
            if text:
                segments.append(("".join(text), False))
                text = []
            if ch == "[":
                end = path.find("]", i)
                if end < 0:
                    raise ValueError(f"unbalanced '[' in {path!r}")
                segments.append((path[i + 1 : end], True))
                i = end
        else:
            depth += {"{": 1, "}": -1}.get(ch, 0)
            text.append(ch)
        i += 1
    if text:
        segments.append(("".join(text), False))
    if not segments:
        raise ValueError(f"empty path {path!r}")
    return segments


class _Figures:
    """One row's view of a scenario's figures: its paths, its derived values, its templates."""

    def __init__(self, spec: GoalSpec, figures: Mapping[str, Any]) -> None:
        self._spec = spec
        self._figures = figures
        self._named: dict[str, Any] = {}

    def one(self, path: str) -> Any:
        """The figure at ``path`` (a list of them when it has a ``*`` segment)."""
        found, many = self._walk(path)
        return found if many else found[0]

    def every(self, path: str) -> list[Any]:
        """Every figure ``path`` names: one, or one per match of its ``*`` segments."""
        return self._walk(path)[0]

    def holds(self, path: str, *, missing: bool | None = None) -> bool:
        """Whether every figure at ``path`` is true; when there is none, ``missing`` (or the
        KeyError, when None)."""
        try:
            return all(bool(v) for v in self.every(path))
        except KeyError:
            if missing is None:
                raise
            return missing

    def format(self, text: str) -> str:
        """Fill a template's ``{path:format}`` fields."""
        out: list[str] = []
        for piece, is_field in _pieces(text):
            if not is_field:
                out.append(piece)
                continue
            colon = max((i for i, ch in _outside(piece) if ch == ":"), default=-1)
            path, spec = (piece[:colon], piece[colon + 1 :]) if colon >= 0 else (piece, "")
            out.append(format(self.one(path), spec))
        return "".join(out)

    def _walk(self, path: str) -> tuple[list[Any], bool]:
        segments = [
            (self.format(text), quoted, text == "*" and not quoted)
            for text, quoted in _segments(path)
        ]
        head, quoted, _ = segments[0]
        named = head in self._spec.values or (head == "value" and self._spec.value is not None)
        if not quoted and named:
            found, rest = [self._name(head)], segments[1:]
        else:
            found, rest = [self._figures], segments
        many = False
        for key, _, wild in rest:
            step: list[Any] = []
            for item in found:
                if wild:
                    step.extend(item.values() if isinstance(item, Mapping) else item)
                elif isinstance(item, Mapping) and key in item:
                    step.append(item[key])
                elif isinstance(item, list) and key.isdigit() and int(key) < len(item):
                    step.append(item[int(key)])
                else:
                    raise KeyError(path)
            found, many = step, many or wild
        return found, many

    def _name(self, name: str) -> Any:
        if name not in self._named:
            self._named[name] = self._derive(name)
        return self._named[name]

    def _derive(self, name: str) -> Any:
        if name not in self._spec.values:  # "value": the compared figure
            if self._spec.value is None:
                raise KeyError(name)
            return self.one(self._spec.value)
        ((how, arg),) = self._spec.values[name].items()
        if how == "path":
            return self.one(arg)
        if how == "sum":
            return sum(self.every(arg))
        if how == "max":
            return max(v for p in ([arg] if isinstance(arg, str) else arg) for v in self.every(p))
        if how == "ratio_of":
            top, bottom = (self.one(x) if isinstance(x, str) else x for x in arg)
            return top / bottom
        return DERIVED[arg](self._figures)


# -- the table ----------------------------------------------------------------------------------


def scenario(results: Mapping[str, Any], name: str) -> tuple[dict[str, Any] | None, str]:
    """Return a scenario's figures, or None and why there are none."""
    got = results.get("scenarios", {}).get(name)
    if got is None:
        return None, f"{name} not chosen"
    if "error" in got:
        return None, f"{name} failed"
    if "skipped" in got:
        return None, f"{name} skipped: {got['skipped']}"
    return got, ""


def _not_run(spec: GoalSpec, why: str) -> Goal:
    return Goal(spec.id, spec.what, "-", spec.target, None, NOT_RUN, why)


def _row(spec: GoalSpec, results: Mapping[str, Any], memory: Mapping[str, Any] | None) -> Goal:
    if spec.scenario == MEMORY:
        figures, why = memory, "run make bench-memory"
    else:
        figures, why = scenario(results, spec.scenario)
    if figures is None:
        return _not_run(spec, why)
    view = _Figures(spec, figures)
    for need in spec.requires:
        if not view.holds(need.path, missing=False):
            return _not_run(spec, need.note)
    try:
        return _judged(spec, view)
    except KeyError as exc:  # a figure missing: say which, go on
        return _not_run(spec, f"missing {exc}")
    except (TypeError, ValueError, ArithmeticError) as exc:
        return _not_run(spec, f"cannot judge its figures: {exc}")


def _judged(spec: GoalSpec, view: _Figures) -> Goal:
    figure = view.format(spec.figure)
    failed = [c for c in spec.checks if not view.holds(c.path)]
    passed = not failed
    # load_goals saw that a comparison, or a ratio over the bound, has a value and a bound.
    value: Any = None if spec.value is None else view.one("value")
    bound: Any = spec.bound
    if spec.compare == "at_least":
        passed = value >= bound and passed
    elif spec.compare == "at_most":
        passed = value <= bound and passed
    ratio: float | None
    if spec.ratio is None:
        ratio = None
    elif spec.ratio == OVER_BOUND:
        ratio = value / bound
    else:
        ratio = view.one(spec.ratio)
    verdict = PASS if passed else FAIL
    notes = [view.format(spec.note)]
    if spec.pass_only_if is not None and not view.holds(spec.pass_only_if.path, missing=False):
        # A smaller run can show a failure, not that the goal's sizes pass.
        notes = [view.format(spec.pass_only_if.note)]
        verdict = NOT_RUN if passed else FAIL
    notes += [view.format(c.note) for c in failed]
    return Goal(
        spec.id, spec.what, figure, spec.target, ratio, verdict, "; ".join(n for n in notes if n)
    )


def load_memory(path: Path = MEMORY_RESULTS) -> dict[str, Any] | None:
    """Return the last ``make bench-memory`` summary, or None when there is none."""
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data


def goals(
    results: Mapping[str, Any],
    memory: Mapping[str, Any] | None,
    specs: list[GoalSpec] | None = None,
) -> list[Goal]:
    """Return every goal row of goals.toml (or ``specs``) from a run's results and the memory
    run's summary, if any."""
    return [_row(spec, results, memory) for spec in (load_goals() if specs is None else specs)]


def print_goals(rows: list[Goal], quick: bool, info: Mapping[str, Any]) -> None:
    """Print the goals table, headed by the machine and versions it was measured on."""
    print()
    title = "== goals: each figure against its target" + (
        " -- QUICK sizes and durations" if quick else ""
    )
    print(title + " " + "=" * max(0, 79 - len(title)))
    print(
        f"  {info['nproc']} CPUs ({info['cpu_model']}), Python {info['python']}, "
        f"SQLite {info['sqlite']}, load average at start {info['load_average'][0]:.2f}"
    )
    print("  " + ", ".join(f"{k} {v or '-'}" for k, v in info["versions"].items()))
    print(f"  {'goal':<5}{'what':<72}{'verdict':>8}")
    print(f"  {'':<5}{'figure':<48}{'target':>10}{'ratio':>10}")
    for row in rows:
        print(f"  {row.goal:<5}{row.what:<72}{row.verdict:>8}")
        value = "-" if row.ratio is None else f"{row.ratio:.2f}x"
        print(f"  {'':<5}{row.figure:<48}{row.target:>10}{value:>10}")
        if row.note:
            print(f"  {'':<5}({row.note})")
    counts = {v: sum(r.verdict == v for r in rows) for v in (PASS, FAIL, NOT_RUN)}
    print("  " + ", ".join(f"{n} {v}" for v, n in counts.items()))


def as_json(rows: list[Goal]) -> list[dict[str, Any]]:
    """Return the rows as JSON objects."""
    return [asdict(row) for row in rows]
