"""The ``route`` evaluator: ReasonMap's topology judge, plus its map score in the detail.

Parsing (ReasonMap ``main.py``): the final answer (an ``<answer>…</answer>`` span if there is
one) is split on ``--``; a section is a segment only if it holds all of ``Route Name:``,
``Departure Stop:`` and ``Arrival Stop:`` with a non-blank value, other sections are dropped (a
blank value counts as missing, so a bare template is unparsed, not scored 0). ``Number of Via
Stops:`` and ``Via Stops:`` are read when present. No segment → unparsed.

Correctness, the verdict's score (ReasonMap Alg. 1; membership only, as upstream):
  1. endpoints: the first departure is ``station_1`` and the last arrival is ``station_2``;
  2. every segment's line exists in ``gold["metro"]``;
  3. both stops of each segment are on that line (no order, adjacency or distinctness check);
  4. transfer continuity: each arrival is the next segment's departure.
Optimality is not checked. ``detail`` has one boolean per check, ``reason`` (the first failing
check, in words; "" when correct) and ``map_score``.

Map score (ReasonMap Alg. 2, in [0, 1]), the max over the reference plans in ``gold["routes"]``:
  when the endpoints match: +1, then pairing answer and reference segments by position (a zip:
  extra segments on either side are ignored) +2 same line, +1 same departure, +1 same arrival;
  long variants add one part: ``long_num_via``: per segment 4 if the via-stop count is exact
  else ``max(0, 4 − |n − ref|/ref·4)`` (0 when ref = 0), capped at 10; ``long_via``:
  ``(IoU·10 + min(10, hits))/2`` with hits = answer via stops found among the paired reference
  segment's, and the IoU over the via stops of segments whose lines match.
  Cap at 10 (short) or 20 (long), add 10 / 20 if correct, divide by 20 / 40. ``variant``
  comes from ``gold["variant"]``, else from the question, case-insensitively ("Number of Via
  Stops" / "the number of via stops" → long_num_via, "Via Stops" / "including all the via stops"
  → long_via, else short). No reference plan → ``map_score`` None.

Where this differs from ReasonMap's released code (deliberately):
  - stations: ``clean_string`` (drop "Metro"/"metro", ``,``, ``*``, newlines, ``(…)`` and
    ``（…）`` groups, blanks and dashes; lowercase) after NFKC, PLUS an optional trailing
    "Station"/"站" and a trailing ``.``/``;`` ignored; upstream compares with the suffix kept
    (it appends it to reference stops instead), so "Xizhimen" never equalled "Xizhimen Station".
  - lines: "Line 1" == "1" == "Route 1" == "line 1" == "1号线" == "地铁1号线(…)": NFKC, casefold,
    annotations dropped, the words line/route/metro/subway/linea/train/地铁/号线/线 dropped,
    blanks and dashes dropped, leading zeros dropped; an exact key match wins, and any key of
    the metro data (a local-language name) is accepted as itself. Upstream needs an exact key
    (only 八通 → Line 1 and 大兴 → Line 4, kept here as a fallback).
  - fields: each value is the rest of its line (cut at another field's label on the same
    line); upstream's short parser takes everything after the last ``Arrival Stop:``, which
    turns a trailing remark into part of the station name. Labels match case-insensitively
    and in markdown bold.
  - the two quirks the notes list are NOT copied: the reference line name is derived from the
    reference's ``route_name`` (upstream's non-China branch derives it from the answer's), and
    the reference arrival is ``arrival_stop`` (upstream used ``departure_stop``).
  - via stops are split on ``,``/``，``/``、``/``;`` for every city (upstream: only when the
    text holds "站", i.e. China only) and compared normalised (upstream: raw strings).
  - a missing ``Number of Via Stops:`` field scores 0 for its segment (upstream then read the
    first digit anywhere in the section); a field without a digit counts as 0, as upstream.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, ClassVar

from mmctx.schema import Sample

from .base import Extraction, Judge, Metric, Verdict, register
from .text import final_answer_text

VARIANTS: tuple[str, ...] = ("short", "long_num_via", "long_via")

_LABELS = {
    "line": "Route Name",
    "departure": "Departure Stop",
    "arrival": "Arrival Stop",
    "num_via": "Number of Via Stops",
    "via": "Via Stops",
}
_CORE = ("line", "departure", "arrival")


def _label_re(label: str) -> re.Pattern[str]:
    # "Via Stops" must not match inside "Number of Via Stops"
    guard = r"(?<!of )" if label == "Via Stops" else ""
    return re.compile(rf"(?:\*\*|__)?{guard}\b{re.escape(label)}(?:\*\*|__)?[ \t]*[:：]", re.I)


_LABEL_RES = {key: _label_re(label) for key, label in _LABELS.items()}
_ANY_LABEL = re.compile("|".join(p.pattern for p in _LABEL_RES.values()), re.I)
_ANSWER_SPAN = re.compile(r"<answer>(.*?)</answer>", re.I | re.S)
_VIA_SPLIT = re.compile(r"[,，、;；\n]")


@dataclass(frozen=True)
class Segment:
    line: str
    departure: str
    arrival: str
    num_via: str | None = None
    via: tuple[str, ...] | None = None

    def render(self) -> str:
        rows = [f"Route Name: {self.line}", f"Departure Stop: {self.departure}", f"Arrival Stop: {self.arrival}"]
        if self.num_via is not None:
            rows.append(f"Number of Via Stops: {self.num_via}")
        if self.via is not None:
            rows.append(f"Via Stops: {', '.join(self.via)}")
        return "\n".join(rows)


# ---------------------------------------------------------------- parsing


def _field(section: str, key: str) -> str | None:
    """The value of ``key`` in ``section``: the rest of its line, cut at another label; None if absent."""
    m = _LABEL_RES[key].search(section)
    if m is None:
        return None
    rest = section[m.end() :].split("\n", 1)[0]
    other = _ANY_LABEL.search(rest)
    if other is not None:
        rest = rest[: other.start()]
    return rest.replace("**", "").strip().strip("*_ \t").rstrip(",;").strip()


def _via_list(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    parts = [p.strip() for p in _VIA_SPLIT.split(value)]
    return tuple(p for p in parts if p and p.casefold() not in ("none", "n/a", "无", "-"))


def parse_segments(text: str) -> list[Segment]:
    """The ``--``-separated segments holding all three core fields with non-blank values, in order."""
    spans = _ANSWER_SPAN.findall(text or "")
    if spans:
        text = spans[-1]
    segments = []
    for section in (text or "").split("--"):
        values = {key: _field(section, key) for key in _LABELS}
        if any(not (values[key] or "").strip() for key in _CORE):
            continue  # ReasonMap drops sections lacking a core field; a blank value counts as lacking
        segments.append(
            Segment(
                values["line"] or "",
                values["departure"] or "",
                values["arrival"] or "",
                values["num_via"],
                _via_list(values["via"]),
            )
        )
    return segments


def render(segments: Iterable[Segment]) -> str:
    return "\n--\n".join(s.render() for s in segments)


# ---------------------------------------------------------------- normalisation

_PARENS = re.compile(r"[(（][^)）]*[)）]")
_DASHES_BLANKS = re.compile(r"[\s\-‐‑‒–—_]+")
_STATION_SUFFIXES = ("station", "站")
_LINE_WORDS = re.compile(r"地铁|轨道交通|号线|線|线|\b(?:metro|subway|route|linea|line|train)")
_UPSTREAM_ALIASES = (("八通", "1"), ("大兴", "4"))  # ReasonMap's Beijing special cases


def station_key(name: str) -> str:
    """ReasonMap's ``clean_string`` after NFKC, plus an optional "Station"/"站" suffix ignored."""
    s = unicodedata.normalize("NFKC", name or "")
    s = s.replace("Metro", "").replace("metro", "").replace(",", "").replace("*", "").replace("\n", "")
    s = _PARENS.sub("", s)
    s = _DASHES_BLANKS.sub("", s).casefold().rstrip(".;:。")
    for suffix in _STATION_SUFFIXES:
        if s.endswith(suffix) and len(s) > len(suffix):
            s = s[: -len(suffix)]
            break
    return s


def line_key(name: str) -> str:
    """A line name without its wrapping: "Line 1", "1", "Route 1", "1号线" all give "1"."""
    s = unicodedata.normalize("NFKC", name or "").casefold().replace("*", "")
    s = _PARENS.sub(" ", s)
    s = _LINE_WORDS.sub(" ", s)
    s = _DASHES_BLANKS.sub("", s).strip(".:;,")
    if s.isdigit():
        return s.lstrip("0") or "0"  # "Line 01" == "Line 1"
    return s


def resolve_line(name: str, metro: Mapping[str, Any]) -> list[str]:
    """The metro keys ``name`` denotes: itself if it is a key, else keys with the same `line_key`."""
    if name in metro:
        return [name]
    key = line_key(name)
    keys = [k for k in metro if key and line_key(k) == key]
    if not keys:
        for token, alias in _UPSTREAM_ALIASES:
            if token in name:
                keys = [k for k in metro if line_key(k) == alias]
                break
    return keys


# ---------------------------------------------------------------- topology judge


@dataclass
class Topology:
    departure_ok: bool
    arrival_ok: bool
    lines_exist: bool
    stops_on_lines: bool
    continuity: bool
    reason: str = ""
    unknown_lines: list[str] = field(default_factory=list)

    @property
    def endpoints(self) -> bool:
        return self.departure_ok and self.arrival_ok

    @property
    def correct(self) -> bool:
        return self.endpoints and self.lines_exist and self.stops_on_lines and self.continuity


def _metro_keys(metro: Mapping[str, Iterable[str]]) -> dict[str, set[str]]:
    return {line: {station_key(s) for s in stations} for line, stations in metro.items()}


def check_topology(segments: list[Segment], gold: Mapping[str, Any]) -> Topology:
    metro = _metro_keys(gold["metro"])
    first, last = segments[0], segments[-1]
    departure_ok = station_key(first.departure) == station_key(gold["station_1"])
    arrival_ok = station_key(last.arrival) == station_key(gold["station_2"])
    reasons: list[str] = []
    if not departure_ok:
        reasons.append(f"the route starts at {first.departure!r}, not at {gold['station_1']!r}")
    if not arrival_ok:
        reasons.append(f"the route ends at {last.arrival!r}, not at {gold['station_2']!r}")
    unknown, off_line = [], []
    for seg in segments:
        keys = resolve_line(seg.line, metro)
        if not keys:
            unknown.append(seg.line)
            continue
        dep, arr = station_key(seg.departure), station_key(seg.arrival)
        if not any(dep in metro[k] and arr in metro[k] for k in keys):
            missing = seg.departure if not any(dep in metro[k] for k in keys) else seg.arrival
            off_line.append(f"{missing!r} is not on {keys[0]!r}")
    if unknown:
        reasons.append(f"line {unknown[0]!r} is not in the metro data")
    if off_line:
        reasons.append(off_line[0])
    breaks = [
        f"segment {i + 1} arrives at {a.arrival!r} but segment {i + 2} departs from {b.departure!r}"
        for i, (a, b) in enumerate(pairwise(segments))
        if station_key(a.arrival) != station_key(b.departure)
    ]
    reasons.extend(breaks[:1])
    return Topology(
        departure_ok, arrival_ok, not unknown, not off_line, not breaks, reasons[0] if reasons else "", unknown
    )


# ---------------------------------------------------------------- map score


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    m = re.search(r"\d+", str(value)) if value is not None else None
    return int(m.group()) if m else None


def num_via_points(answer: str | None, reference: Any) -> float:
    """Up to 4 points for one segment's via-stop count (upstream: error relative to the reference)."""
    ref = _int_or_none(reference)
    if answer is None or ref is None:
        return 0.0
    ans = _int_or_none(answer) or 0  # a field without a digit counts as 0, as upstream
    error = abs(ans - ref)
    if error == 0:
        return 4.0
    return 0.0 if ref == 0 else max(0.0, 4.0 - error / ref * 4.0)


def plan_points(segments: list[Segment], plan: list[Mapping[str, Any]], variant: str, topo: Topology) -> float:
    """ReasonMap's raw map score of the answer against one reference plan (max 20 or 40)."""
    cap = 10.0 if variant == "short" else 20.0
    points = 0.0
    if topo.endpoints:
        points += 1
        num_part, hits = 0.0, 0
        union: set[str] = set()
        inter: set[str] = set()
        for seg, ref in zip(segments, plan, strict=False):  # truncates, as ReasonMap's zip
            same_line = bool(line_key(seg.line)) and line_key(seg.line) == line_key(str(ref.get("route_name", "")))
            points += 2 * same_line
            points += station_key(seg.departure) == station_key(str(ref.get("departure_stop", "")))
            points += station_key(seg.arrival) == station_key(str(ref.get("arrival_stop", "")))
            if variant == "long_num_via":
                num_part += num_via_points(seg.num_via, ref.get("num_via_stops"))
            elif variant == "long_via":
                answer_via = [station_key(v) for v in seg.via or ()]
                ref_via = {station_key(v) for v in ref.get("via_stops") or ()}
                hits += sum(v in ref_via for v in answer_via)
                if same_line:
                    union |= set(answer_via) | ref_via
                    inter |= set(answer_via) & ref_via
        if variant == "long_num_via":
            points += min(10.0, num_part)
        elif variant == "long_via":
            iou = len(inter) / len(union) if union else 0.0
            points += (iou * 10 + min(10, hits)) / 2
    return min(cap, points) + (cap if topo.correct else 0.0)


def _plans(routes: Any) -> list[tuple[str, list[Mapping[str, Any]]]]:
    if isinstance(routes, Mapping):
        return [(str(k), list(v)) for k, v in routes.items() if isinstance(v, list)]
    if isinstance(routes, list):
        if routes and all(isinstance(r, Mapping) for r in routes):
            return [("0", routes)]  # one plan given as a bare list of segments
        return [(str(i), list(p)) for i, p in enumerate(routes) if isinstance(p, list)]
    return []


def map_score(
    segments: list[Segment], gold: Mapping[str, Any], variant: str, topo: Topology
) -> tuple[float | None, str | None]:
    """The best normalised map score over the reference plans, and the plan that gave it."""
    plans = _plans(gold.get("routes"))
    if not plans:
        return None, None
    full = 20.0 if variant == "short" else 40.0
    best_key, best = max(
        ((key, plan_points(segments, plan, variant, topo)) for key, plan in plans), key=lambda kv: kv[1]
    )
    return best / full, best_key


# ReasonMap's long questions say "number of via stops" / "including all the via stops" in lowercase
_NUM_VIA_QUESTION = re.compile(r"\bnumber\s+of\s+via[\s-]+stops\b", re.I)
_VIA_QUESTION = re.compile(r"\bvia[\s-]+stops\b", re.I)


def variant_of(sample: Sample) -> str:
    gold = sample.gold if isinstance(sample.gold, Mapping) else {}
    variant = gold.get("variant")
    if variant in VARIANTS:
        return variant
    question = sample.question or ""
    if _NUM_VIA_QUESTION.search(question):
        return "long_num_via"
    if _VIA_QUESTION.search(question):
        return "long_via"
    return "short"


def _gold_problem(gold: Any) -> str | None:
    if not isinstance(gold, Mapping):
        return "the item has no route gold"
    missing = [k for k in ("station_1", "station_2", "metro") if not gold.get(k)]
    if missing:
        return f"the route gold lacks {missing}"
    if not isinstance(gold["metro"], Mapping):
        return "the route gold's metro is not a mapping of lines to stations"
    return None


_FORMAT = "segments 'Route Name: …', 'Departure Stop: …', 'Arrival Stop: …', separated by a line '--'"


def _map_score(row: Mapping[str, Any]) -> float | None:
    """ReasonMap's map score beside the binary topology score; non-scored items count 0, an
    invalid item not at all (it has no map to score against)."""
    if row["outcome"] == "invalid_sample":
        return None
    value = (row.get("detail") or {}).get("map_score") if row["outcome"] == "scored" else 0.0
    return float(value) if isinstance(value, (int, float)) else None


@dataclass(frozen=True)
class RouteEvaluator:
    name: str = "route"
    free_form: bool = False
    judge: Judge | None = None
    answer_types: ClassVar[tuple[str, ...]] = ("route",)
    metrics: ClassVar[tuple[Metric, ...]] = (Metric("map score", _map_score),)

    def extract(self, sample: Sample, response: str) -> Extraction:
        segments = parse_segments(final_answer_text(response))
        if not segments:
            return Extraction(None, issue=f"no route segment found; give {_FORMAT}")
        return Extraction(render(segments), "segments")

    def score(self, sample: Sample, answer: str) -> Verdict:
        problem = _gold_problem(sample.gold)
        if problem:
            return Verdict.failed("invalid_sample", problem, prediction=answer or "")
        segments = parse_segments(answer or "")
        if not segments:
            return Verdict.failed("unparsed", f"no route segment found; give {_FORMAT}", prediction=answer or "")
        gold = sample.gold
        variant = variant_of(sample)
        topo = check_topology(segments, gold)
        score, plan = map_score(segments, gold, variant, topo)
        return Verdict.scored(
            1.0 if topo.correct else 0.0,
            render(segments),
            correct=topo.correct,
            endpoints=topo.endpoints,
            departure_ok=topo.departure_ok,
            arrival_ok=topo.arrival_ok,
            lines_exist=topo.lines_exist,
            stops_on_lines=topo.stops_on_lines,
            continuity=topo.continuity,
            reason=topo.reason,
            segments=len(segments),
            variant=variant,
            map_score=score,
            best_plan=plan,
        )


ROUTE = register(RouteEvaluator())
