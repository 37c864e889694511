"""A toy CLBench-V suite: every one of the 14 subsets, two small hand-made items each.

Not data to measure models with: a fixture that exercises every template, answer format and
evaluator end to end, offline, in seconds. Each item's ``meta["reference_reply"]`` is a reply in
the required format that earns full marks, and ``meta["wrong_reply"]`` one that parses but is
wrong, so a scripted model can check the scoring path both ways.
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image, ImageDraw

from mmctx.data.clbench.loader import write_clbench
from mmctx.data.clbench.suite import get_subset
from mmctx.schema import Benchmark, ContextBlock, Sample

METRO = {
    "Line 1": ["Harbor Station", "Market Station", "Central Station", "Museum Station"],
    "Line 2": ["Airport Station", "Central Station", "Park Station"],
    "Line 3": ["Market Station", "University Station", "Stadium Station"],
}
_POS = {
    "Harbor Station": (30, 110),
    "Market Station": (110, 110),
    "Central Station": (190, 110),
    "Museum Station": (270, 110),
    "Airport Station": (190, 30),
    "Park Station": (190, 190),
    "University Station": (110, 170),
    "Stadium Station": (110, 230),
}
_COLORS = {"Line 1": (220, 40, 40), "Line 2": (40, 90, 220), "Line 3": (30, 160, 60)}


def _image(path: Path, lines: list[str], size: tuple[int, int] = (320, 200), bg: str = "white") -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    im = Image.new("RGB", size, bg)
    draw = ImageDraw.Draw(im)
    for i, text in enumerate(lines):
        draw.text((10, 10 + 16 * i), text, fill="black")
    im.save(path)
    return path.name


def _metro_map(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    im = Image.new("RGB", (320, 260), "white")
    draw = ImageDraw.Draw(im)
    for line, stations in METRO.items():
        pts = [_POS[s] for s in stations]
        draw.line(pts, fill=_COLORS[line], width=4)
        draw.text((pts[0][0], pts[0][1] - 14), line, fill=_COLORS[line])
    for name, (x, y) in _POS.items():
        draw.ellipse((x - 4, y - 4, x + 4, y + 4), fill="black")
        draw.text((x + 5, y + 3), name.replace(" Station", ""), fill="black")
    im.save(path)


def _route(segments: list[tuple[str, str, str, list[str]]], via: str) -> str:
    out = []
    for line, dep, arr, stops in segments:
        text = f"Route Name: {line}\nDeparture Stop: {dep}\nArrival Stop: {arr}"
        if via == "long_num_via":
            text += f"\nNumber of Via Stops: {len(stops)}"
        elif via == "long_via":
            text += f"\nVia Stops: {', '.join(stops)}"
        out.append(text)
    return "\n--\n".join(out)


def _open(
    sid: str, subset: str, blocks: list[ContextBlock], question: str, gold, answer: str, right: str, wrong: str, **extra
) -> Sample:
    s = get_subset(subset)
    return Sample(
        id=sid,
        task=s.name,
        source=s.name,
        format="open",
        question=question,
        answer=answer,
        blocks=blocks,
        answer_type=extra.pop("answer_type", s.answer_type),
        gold=gold,
        evaluator=s.evaluator,
        level=s.level,
        meta={"reference_reply": right, "wrong_reply": wrong, **extra.pop("meta", {})},
        **extra,
    )


def _img(rel: str) -> ContextBlock:
    return ContextBlock(kind="image", image=rel)


def _txt(text: str, title: str = "") -> ContextBlock:
    return ContextBlock(kind="text", text=text, title=title)


def toy_samples(root: Path) -> list[Sample]:
    """The toy items, writing their images under ``root/images``."""
    img = Path(root) / "images"
    _metro_map(img / "metro.png")
    routes = {
        "plan-0": [
            {
                "route_name": "Line 1",
                "departure_stop": "Harbor Station",
                "arrival_stop": "Central Station",
                "via_stops": ["Market Station"],
                "num_via_stops": 1,
            },
            {
                "route_name": "Line 2",
                "departure_stop": "Central Station",
                "arrival_stop": "Park Station",
                "via_stops": [],
                "num_via_stops": 0,
            },
        ]
    }
    right_segments = [
        ("Line 1", "Harbor Station", "Central Station", ["Market Station"]),
        ("Line 2", "Central Station", "Park Station", []),
    ]
    wrong_segments = [
        ("Line 1", "Harbor Station", "Museum Station", ["Market Station", "Central Station"]),
        ("Line 2", "Central Station", "Park Station", []),
    ]
    q_short = (
        "According to the subway map, how do I get from Harbor Station to Park Station? Provide only one "
        "optimal route, with only the line name and the departure and arrival stations."
    )
    q_long = q_short.replace(
        "stations.",
        "stations, and include the number of via stops for each route section "
        "(excluding the departure and arrival stops).",
    )
    samples: list[Sample] = []
    for subset, question, variant in [
        ("ReasonMap-Short", q_short, "short"),
        ("ReasonMap-Long", q_long, "long_num_via"),
    ]:
        gold = {
            "station_1": "Harbor Station",
            "station_2": "Park Station",
            "metro": METRO,
            "routes": routes,
            "variant": variant,
        }
        samples.append(
            _open(
                f"toy-reasonmap-{variant}",
                subset,
                [_img("images/metro.png")],
                question,
                gold,
                _route(right_segments, variant),
                _route(right_segments, variant),
                _route(wrong_segments, variant),
            )
        )
        samples.append(
            _open(
                f"toy-reasonmap-{variant}-2",
                subset,
                [_img("images/metro.png")],
                question.replace("Park Station", "Stadium Station"),
                {**gold, "station_2": "Stadium Station", "routes": {}},
                "Line 1 then Line 3",
                _route(
                    [
                        ("Line 1", "Harbor Station", "Market Station", []),
                        ("Line 3", "Market Station", "Stadium Station", ["University Station"]),
                    ],
                    variant,
                ),
                _route([("Line 1", "Harbor Station", "Stadium Station", [])], variant),
            )
        )
    samples += [
        _open(
            "toy-rmplus-1",
            "ReasonMap-Plus",
            [_img("images/metro.png")],
            "How many metro lines are shown on the map? Answer with a number.",
            "3",
            "3",
            "Answer: 3",
            "Answer: 2",
        ),
        _open(
            "toy-rmplus-2",
            "ReasonMap-Plus",
            [_img("images/metro.png")],
            "Is Central Station a transfer station? Answer yes or no.",
            "yes",
            "yes",
            "Answer: yes",
            "Answer: no",
        ),
    ]
    _image(img / "o3-scene.png", ["A red kite above the blue tent.", "A yellow flag on the pier."], (480, 320))
    options = ["red", "blue", "green", "yellow", "white", "black"]
    opt_text = "".join(f"\n{chr(65 + k)}. {c}" for k, c in enumerate(options))
    samples += [
        _open(
            "toy-o3-1",
            "Insight-O3",
            [_img("images/o3-scene.png")],
            f"What colour is the kite?{opt_text}",
            "A",
            "A",
            "The kite is red.\nAnswer: A",
            "Answer: B",
        ),
        _open(
            "toy-o3-2",
            "Insight-O3",
            [_img("images/o3-scene.png")],
            f"What colour is the flag?{opt_text}",
            "D",
            "D",
            "Answer: D",
            "Answer: C",
        ),
    ]
    _image(img / "zb-digits.png", ["7   5", "", "3"])
    samples += [
        _open(
            "toy-zb-1",
            "ZeroBench",
            [_img("images/zb-digits.png")],
            "What is the sum of the digits in the image?",
            "15",
            "15",
            "7 + 5 + 3 = 15. {15}",
            "{12}",
        ),
        _open(
            "toy-zb-2",
            "ZeroBench",
            [_img("images/zb-digits.png")],
            "What is the largest digit in the image?",
            "7",
            "7",
            "{7}",
            "{5}",
        ),
    ]
    court = ["Player A at (2.0, 3.0) m", "Player B at (5.0, 7.0) m, head 1.8 m up", "Court 28 m x 15 m"]
    _image(img / "court.png", court)
    samples += [
        _open(
            "toy-court-1",
            "CourtSI",
            [_img("images/court.png")],
            "How far apart are player A and player B, in metres?",
            {"value": 5.0},
            "5.0",
            "Answer: 5.0",
            "Answer: 9",
        ),
        _open(
            "toy-court-2",
            "CourtSI",
            [_img("images/court.png")],
            "Where is player B's head? Give court coordinates (x, y, z) in metres, z the height.",
            {"xyz": [5.0, 7.0, 1.8], "radius": 0.3},
            "(5.0, 7.0, 1.8)",
            "Answer: (5.1, 6.9, 1.7)",
            "Answer: (12, 1, 1.8)",
            answer_type="point",
        ),
    ]
    _image(img / "mir-a.png", ["Figure 1: accuracy rises", "from 40% to 80% with data."])
    _image(img / "mir-b.png", ["Figure 2: loss falls", "from 2.0 to 0.5 with data."])
    mir_opts = ["Both improve with more data", "Accuracy falls", "Loss rises", "Neither changes"]
    mir_text = "".join(f"\n{chr(65 + k)}. {c}" for k, c in enumerate(mir_opts))
    samples += [
        _open(
            "toy-mir-1",
            "MIRBench",
            [_img("images/mir-a.png"), _img("images/mir-b.png")],
            f"What do the two figures show together?{mir_text}",
            "A",
            "A",
            "Option: A\nReason: both improve.",
            "Option: C\nReason: guess.",
        ),
        _open(
            "toy-mir-2",
            "MIRBench",
            [_img("images/mir-a.png"), _img("images/mir-b.png")],
            f"Which statement is false?{mir_text}",
            "B",
            "B",
            "Option: B\nReason: accuracy rises.",
            "Option: A\nReason: guess.",
        ),
    ]
    _image(img / "p2f.png", ["Storefront sign:", "BAKERY 1897"])
    page = "Crawled webpage: The bakery on Elm Street was founded in 1897 by Anna Berg."
    samples += [
        _open(
            "toy-p2f-1",
            "Pix2Fact",
            [_img("images/p2f.png"), _txt(page, "Webpage")],
            "Who founded the bakery shown in the image?",
            "Anna Berg",
            "Anna Berg",
            '{"Observation": "sign", "Comprehensive Answer": "Anna Berg founded it.", "Final Answer": "Anna Berg"}',
            '{"Observation": "sign", "Comprehensive Answer": "x", "Final Answer": "John Smith"}',
        ),
        _open(
            "toy-p2f-2",
            "Pix2Fact",
            [_img("images/p2f.png"), _txt(page, "Webpage")],
            "In which year was the bakery founded?",
            "1897",
            "1897",
            '{"Final Answer": "1897"}',
            '{"Final Answer": "1901"}',
        ),
    ]
    for k in range(3):
        _image(img / f"doc-p{k + 1}.png", [f"Annual review, page {k + 1}", f"Members in year {k + 1}: {100 * (k + 2)}"])
    pages = [_img(f"images/doc-p{k + 1}.png") for k in range(3)]
    samples += [
        _open(
            "toy-mml-1",
            "MMLongBench-Pic",
            pages,
            "How many members were there in year 3?",
            "400",
            "400",
            "Answer: 400",
            "Answer: 300",
        ),
        _open(
            "toy-mml-2",
            "MMLongBench-Pic",
            pages,
            "What was the membership fee in year 2?",
            "Not answerable",
            "Not answerable",
            "Answer: Not answerable",
            "Answer: 20 dollars",
        ),
    ]
    sources = [
        _txt("The Lighthouse Museum opened in 1921 in Porto Vela.", "Reference Source [1]"),
        _txt("Porto Vela is the capital of the Sora region.", "Reference Source [2]"),
    ]
    _image(img / "bc.png", ["Photo: a white lighthouse", "Plaque: LIGHTHOUSE MUSEUM"])
    samples += [
        _open(
            "toy-bc-1",
            "BrowseComp-V3",
            [_img("images/bc.png"), *sources],
            "In which region is the museum in the photo located?",
            "Sora",
            "Sora",
            "Answer: Sora",
            "Answer: Vela",
        ),
        _open(
            "toy-bc-2",
            "BrowseComp-V3",
            [_img("images/bc.png"), *sources],
            "When did the museum in the photo open?",
            "1921",
            "1921",
            "Answer: 1921",
            "Answer: 1912",
        ),
    ]
    report = (
        "# Acme Corp annual report 2025\n\n| Item | Value (million) |\n|---|---|\n| Revenue | 800 |\n"
        "| Net profit | 60 |\n| Total assets | 1200 |\n| Shareholders' equity | 480 |\n"
    )
    report_b = report.replace("| 60 |", "| 96 |").replace("Acme", "Birch")
    samples += [
        _open(
            "toy-roe-1",
            "Financial Report ROE",
            [_txt(report)],
            "",
            {"value": 12.5, "abs_tol": 0.01, "unit": "%"},
            "12.5%",
            "Margin 7.5%, turnover 0.667, multiplier 2.5.\nROE: 12.50%",
            "ROE: 7.5%",
        ),
        _open(
            "toy-roe-2",
            "Financial Report ROE",
            [_txt(report_b)],
            "",
            {"value": 20.0, "abs_tol": 0.01, "unit": "%"},
            "20.0%",
            "ROE: 20%",
            "ROE: 8%",
        ),
    ]
    _image(img / "prismm-fig.png", ["Figure 3: 5 layers", "(text says 6 layers)"])
    paper = "## Method\nOur encoder has 6 layers.\n\n## Results\nSee Figure 3."
    pr_opts = ["Layer count differs between text and figure", "Wrong dataset name", "Missing citation", "Typo in title"]
    pr_text = "".join(f"\n{chr(65 + k)}. {c}" for k, c in enumerate(pr_opts))
    samples += [
        _open(
            "toy-prismm-1",
            "PRISMM-Bench",
            [_txt(paper), _img("images/prismm-fig.png")],
            "What is the inconsistency in this paper?",
            "A",
            "A",
            "Answer: A",
            "Answer: D",
            choices=pr_opts,
        ),
        _open(
            "toy-prismm-2",
            "PRISMM-Bench",
            [_txt(paper), _img("images/prismm-fig.png")],
            f"Which option describes the figure-text conflict?{pr_text}",
            "A",
            "A",
            "Answer: A",
            "Answer: B",
        ),
    ]
    _image(img / "rules-table.png", ["Rule table", "Glorp: double the input", "Snib: add three"])
    samples += [
        _open(
            "toy-clb-1",
            "CL-Bench-Table",
            [_img("images/rules-table.png")],
            "Apply Glorp then Snib to 4. State the result and name both rules used.",
            ["States the result 11", "Names Glorp and Snib"],
            "11 (Glorp, Snib)",
            "Glorp doubles 4 to 8, Snib adds three: 11.",
            "The result is 7.",
        ),
        _open(
            "toy-clb-2",
            "CL-Bench-Table",
            [_img("images/rules-table.png")],
            "Apply Snib to 10.",
            ["States the result 13"],
            "13",
            "Snib adds three: 13.",
            "The result is 20.",
        ),
    ]
    _image(img / "paper-fig.png", ["Figure 1: dose vs response", "response rises with dose"])
    methods = "## Methods\nWe gave three doses of drug X to 120 patients and measured response at 12 weeks."
    samples += [
        _open(
            "toy-pc-1",
            "Paper Conclusion",
            [_txt(methods), _img("images/paper-fig.png")],
            "",
            ["Response increases with dose", "Drug X is well tolerated"],
            "2 conclusions",
            "1. Response increases with dose.\n2. Drug X is well tolerated.",
            "1. Drug X cures the disease.\n2. Response falls with dose.\n3. Costs are low.",
        ),
        _open(
            "toy-pc-2",
            "Paper Conclusion",
            [_txt(methods.replace("120 patients", "40 mice")), _img("images/paper-fig.png")],
            "",
            ["Higher doses give higher response"],
            "1 conclusion",
            "1. Higher doses give higher response.",
            "1. Dose has no effect.",
        ),
    ]
    return samples


def write_toy_suite(out: Path) -> Benchmark:
    """Write the toy suite to ``out`` (``samples.jsonl`` + ``images/``) and return it loaded."""
    from mmctx.data.clbench.loader import load_clbench

    out = Path(out)
    write_clbench(toy_samples(out), out)
    return load_clbench(out)
