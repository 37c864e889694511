"""CoT failure tags counted per task × setting (the tags: `mmctx.scoring.cot_tags`), and a judge's
readings of CoT reasoning counted per setting (the judge: `mmctx.scoring.cot_judging`)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from mmctx.run.settings import Setting
from mmctx.schema import TASKS
from mmctx.scoring.cot_judging import CotJudgement
from mmctx.scoring.cot_tags import cot_tag_names
from mmctx.scoring.results import SampleResult

__all__ = ["ALL_SETTINGS", "ALL_TASKS", "CotJudgementCounts", "CotTagCounts", "cot_judgement_counts", "cot_tag_counts"]

ALL_TASKS = "All tasks"
ALL_SETTINGS = "All settings"


@dataclass(frozen=True)
class CotTagCounts:
    """How many tagged CoT responses of one task × setting carry each tag."""

    task: str  # a task, or `ALL_TASKS` for the setting's responses over every task
    setting: str
    responses: int  # CoT responses that were tagged (those with a response to read)
    no_tag: int  # of them, those no tag applies to
    tags: dict[str, int]  # every registered tag (0 included), in registry order; then any other stored tag

    def share(self, count: int) -> float:
        return count / self.responses if self.responses else float("nan")


def cot_tag_counts(results: Iterable[SampleResult]) -> list[CotTagCounts]:
    """Per task × setting, then per setting over all tasks, for the results that carry CoT tags;
    settings by shots, demos and demo order; tasks in FewMMBench's order, then by name."""
    groups: dict[tuple[str, str], list[SampleResult]] = defaultdict(list)
    for r in results:
        if r.cot_tags is not None:
            groups[(r.task, r.setting)].append(r)
            groups[(ALL_TASKS, r.setting)].append(r)
    if not groups:
        return []
    known = cot_tag_names()
    others = sorted({t for rs in groups.values() for r in rs for t in r.cot_tags or () if t not in known})
    out = []
    for task, setting in sorted(groups, key=_order):
        tagged = groups[(task, setting)]
        counts = Counter(t for r in tagged for t in set(r.cot_tags or ()))
        tags = {name: counts[name] for name in (*known, *others)}
        out.append(CotTagCounts(task, setting, len(tagged), sum(not r.cot_tags for r in tagged), tags))
    return out


def _order(key: tuple[str, str]) -> tuple:
    task, setting = key
    s = Setting.parse(setting)
    in_paper = task in TASKS
    return (
        s.shots,
        s.demos or "",
        s.cot,
        s.order,
        task == ALL_TASKS,
        not in_paper,
        TASKS.index(task) if in_paper else 0,
        task,
    )


@dataclass(frozen=True)
class CotJudgementCounts:
    """A judge's readings of one setting's judged CoT responses (or of all of them)."""

    setting: str  # a setting, or `ALL_SETTINGS`
    judged: int  # responses the judge gave a usable reply on
    judge_errors: int  # responses it did not (left out of the shares)
    reasoning_correct: int
    right_reasoning_wrong_answer: int  # correct reasoning, answer wrong or unparsed (FewMMBench Figure 20 v)
    wrong_reasoning_right_answer: int

    def share(self, count: int) -> float:
        return count / self.judged if self.judged else float("nan")


def cot_judgement_counts(judgements: Iterable[CotJudgement]) -> list[CotJudgementCounts]:
    """Per setting (in the tables' order), then over all settings; [] for no judgement."""
    groups: dict[str, list[CotJudgement]] = defaultdict(list)
    for j in judgements:
        groups[j.setting].append(j)
    if not groups:
        return []
    settings = sorted(groups, key=lambda name: _order((ALL_TASKS, name)))
    everything = [j for name in settings for j in groups[name]]
    return [_judged(name, groups[name]) for name in settings] + [_judged(ALL_SETTINGS, everything)]


def _judged(setting: str, judgements: list[CotJudgement]) -> CotJudgementCounts:
    read = [j for j in judgements if j.reasoning_correct is not None]
    return CotJudgementCounts(
        setting=setting,
        judged=len(read),
        judge_errors=len(judgements) - len(read),
        reasoning_correct=sum(j.reasoning_correct is True for j in read),
        right_reasoning_wrong_answer=sum(j.reasoning_correct is True and j.outcome != "correct" for j in read),
        wrong_reasoning_right_answer=sum(j.reasoning_correct is False and j.outcome == "correct" for j in read),
    )
