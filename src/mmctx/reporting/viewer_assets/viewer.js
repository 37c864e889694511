// mmctx sample browser. Plain JS, no framework, no network.
//
// One browser, two modes, picked by DATA.kind: "fewshot" (a sample: demos + query, options,
// extracted answer and rule) and "context" (a CLBench-V item: its context in order, prompt,
// response, prediction, gold, score, evaluator detail, judge). A mode supplies its filters, list
// row, detail column and peer key; filters, list, pager, routing and side-by-side are shared.
//
// Everything shown comes from the JSON block #mmctx-data, read with JSON.parse, and every
// string from it (model text, questions, options, rule names, errors, model names) reaches
// the page through textContent or a form control's value — never innerHTML — so no run can
// put markup or script into the page. The page's CSP forbids inline script and handlers.
"use strict";

(function () {
  const DATA = JSON.parse(document.getElementById("mmctx-data").textContent);
  const SAMPLES = DATA.samples;
  const PAGE_SIZE = 100;
  const OUTCOMES = ["correct", "wrong", "unparsed", "error", "missing",
    "scored", "judge_error", "invalid_sample", "context_overflow"];
  let MODE = null; // set below, once the modes' functions exist
  const state = { filters: {}, text: "", page: 0, shown: [] };

  // ---------------------------------------------------------------- DOM helpers

  // el("div", {className: "x", dataset: {i: 1}}, "text", child, [more]) — strings become text nodes.
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (key.startsWith("on")) throw new Error("no handler properties: use addEventListener");
      if (key === "dataset") Object.assign(node.dataset, value);
      else if (key === "attrs") for (const [a, v] of Object.entries(value)) node.setAttribute(a, String(v));
      else node[key] = value;
    }
    append(node, children);
    return node;
  }

  function append(node, children) {
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      if (Array.isArray(child)) append(node, child);
      else node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
    return node;
  }

  function badge(outcome) {
    const known = OUTCOMES.includes(outcome) ? outcome : "other";
    return el("span", { className: "badge outcome-" + known }, outcome);
  }

  function fmt(x, digits) {
    return x === null || x === undefined ? "–" : Number(x).toFixed(digits);
  }

  function optionText(s, i) {
    if (i === null || i === undefined || i < 0 || i >= s.options.length) return "—";
    return (s.labels[i] ? s.labels[i] + ". " : "") + s.options[i];
  }

  function label(s, i) {
    if (i === null || i === undefined) return "—";
    return s.labels[i] || String(i + 1);
  }

  function plural(n, word) {
    return n + " " + word + (n === 1 ? "" : "s");
  }

  function runName(s) {
    return DATA.runs[s.run].name;
  }

  // ---------------------------------------------------------------- filters and list

  // A filter's values for one sample: one (f.value) or several (f.values, e.g. a sample's tags).
  function filterValues(f, s) {
    return f.values ? f.values(s) : [f.value(s)];
  }

  // The filters this page offers: a filter with `when` only where some sample has what it filters.
  function activeFilters() {
    return MODE.filters.filter((f) => !f.when || SAMPLES.some(f.when));
  }

  function buildFilters() {
    const bar = clear(document.getElementById("filters"));
    for (const f of activeFilters()) {
      const counts = new Map();
      for (const s of SAMPLES) for (const v of filterValues(f, s)) counts.set(v, (counts.get(v) || 0) + 1);
      const select = el("select", { id: "filter-" + f.key, dataset: { filter: f.key } });
      select.append(el("option", { value: "" }, "All (" + SAMPLES.length + ")"));
      for (const value of [...counts.keys()].sort()) {
        select.append(el("option", { value: value }, value + " (" + counts.get(value) + ")"));
      }
      select.addEventListener("change", () => {
        state.filters[f.key] = select.value;
        state.page = 0;
        renderList();
      });
      bar.append(el("label", { className: "filter" }, el("span", {}, f.label), select));
    }
    const search = el("input", { id: "filter-text", type: "search", placeholder: MODE.searchHint });
    search.addEventListener("input", () => {
      state.text = search.value.toLowerCase();
      state.page = 0;
      renderList();
    });
    bar.append(el("label", { className: "filter grow" }, el("span", {}, "Search"), search));
    const reset = el("button", { id: "filter-reset", type: "button" }, "Reset");
    reset.addEventListener("click", () => {
      state.filters = {};
      state.text = "";
      state.page = 0;
      for (const select of bar.querySelectorAll("select")) select.value = "";
      search.value = "";
      renderList();
    });
    bar.append(reset);
  }

  function matches(s) {
    for (const f of activeFilters()) {
      const want = state.filters[f.key];
      if (want && !filterValues(f, s).includes(want)) return false;
    }
    if (state.text) {
      const hay = MODE.haystack(s).toLowerCase();
      if (!hay.includes(state.text)) return false;
    }
    return true;
  }

  function renderList() {
    state.shown = [];
    SAMPLES.forEach((s, i) => {
      if (matches(s)) state.shown.push(i);
    });
    const count = document.getElementById("count");
    count.dataset.shown = String(state.shown.length);
    count.textContent = state.shown.length + " of " + SAMPLES.length + " " + MODE.noun;
    const pages = Math.max(1, Math.ceil(state.shown.length / PAGE_SIZE));
    state.page = Math.min(state.page, pages - 1);
    const tbody = clear(document.querySelector("#sample-list tbody"));
    for (const i of state.shown.slice(state.page * PAGE_SIZE, (state.page + 1) * PAGE_SIZE)) {
      const row = el(
        "tr",
        { className: "sample-row", dataset: { index: i } },
        el("td", { className: "num" }, el("a", { href: "#sample=" + i }, String(i + 1))),
        MODE.cells(SAMPLES[i])
      );
      row.addEventListener("click", () => {
        location.hash = "sample=" + i;
      });
      tbody.append(row);
    }
    renderPager(pages);
  }

  function renderPager(pages) {
    const pager = clear(document.getElementById("pager"));
    if (pages <= 1) return;
    const prev = el("button", { type: "button", disabled: state.page === 0 }, "‹ Prev");
    const next = el("button", { type: "button", disabled: state.page >= pages - 1 }, "Next ›");
    prev.addEventListener("click", () => {
      state.page -= 1;
      renderList();
    });
    next.addEventListener("click", () => {
      state.page += 1;
      renderList();
    });
    pager.append(prev, el("span", {}, "Page " + (state.page + 1) + " of " + pages), next);
  }

  // ---------------------------------------------------------------- one sample

  // An image by its hash; `caption` (a suite path) names it when it could not be copied.
  function image(sha, caption) {
    const src = sha ? DATA.images[sha] : null;
    const tag = sha ? "<image:" + String(sha).slice(0, 8) + ">" : "<image>";
    const name = caption ? tag + " " + caption : tag;
    if (!src) return el("figure", { className: "img missing" }, el("span", {}, name + " not available"));
    return el(
      "figure",
      { className: "img" },
      el("a", { href: src, target: "_blank", rel: "noopener" }, el("img", { src: src, alt: name, title: name })),
      el("figcaption", {}, name)
    );
  }

  function section(title, ...children) {
    return el("section", { className: "block" }, el("h3", {}, title), children);
  }

  // The raw response; its reasoning trace (<think>…, as extraction drops it) marked, not hidden.
  function responseBlock(s) {
    if (!s.response) return el("pre", { className: "response" }, "(empty)");
    const pre = el("pre", { className: "response" });
    if (!s.response_parts) return append(pre, [s.response]);
    for (const [reasoning, text] of s.response_parts) {
      pre.append(reasoning ? el("span", { className: "think", title: "reasoning trace: not read for the answer" }, text) : text);
    }
    return pre;
  }

  function responseSection(s) {
    const note = s.response_parts ? el("p", { className: "muted legend" }, el("span", { className: "think" }, "marked"), " text is the reasoning trace, which answer extraction skips.") : null;
    return section("Raw response", note, responseBlock(s));
  }

  function answerBlock(s) {
    const rows = [
      ["Outcome", badge(s.outcome)],
      ["Gold", optionText(s, s.gold)],
      ["Extracted", optionText(s, s.pred)],
      ["Rule", el("code", { className: "rule" }, s.rule || "(none)")],
    ];
    if (s.truncated) rows.push(["Truncated", "yes: the response hit max_new_tokens"]);
    if (s.cot) rows.push(["CoT tags", cotTagList(s)]);
    if (s.error) rows.push(["Error", el("pre", { className: "error" }, s.error)]);
    return el("dl", { className: "facts" }, rows.map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  }

  // A CoT response's failure tags ("(no tag)" when none applies; "(not tagged)" for a result
  // without a response, or stored before tags existed); a non-CoT sample has none to filter by.
  function cotTagValues(s) {
    if (!s.cot) return ["(not CoT)"];
    if (s.cot_tags === null || s.cot_tags === undefined) return ["(not tagged)"];
    return s.cot_tags.length ? s.cot_tags : ["(no tag)"];
  }

  function cotTagList(s) {
    return el("span", { className: "cot-tags" }, cotTagValues(s).map((t) => el("code", { className: "cot-tag" }, t)));
  }

  function optionsBlock(s) {
    const scored = s.loglikelihoods.length === s.options.length && s.options.length > 0;
    const head = ["", "Option"].concat(scored ? ["log-lik", "tokens", "log-lik / token", "probability"] : []);
    const rows = s.options.map((text, i) => {
      const marks = [];
      if (i === s.gold) marks.push(el("span", { className: "mark gold" }, "gold"));
      if (i === s.pred) marks.push(el("span", { className: "mark pred" }, "answer"));
      const cells = [el("td", { className: "lbl" }, s.labels[i] || ""), el("td", {}, text, " ", marks)];
      if (scored) {
        const ll = s.loglikelihoods[i];
        const n = s.token_counts[i];
        const p = s.probs[i];
        const fill = el("span", { className: "fill" });
        fill.style.width = p === null || p === undefined ? "0" : Math.max(0, Math.min(100, p * 100)) + "%";
        cells.push(
          el("td", { className: "num" }, fmt(ll, 3)),
          el("td", { className: "num" }, n === undefined ? "–" : String(n)),
          el("td", { className: "num" }, ll === null || !n ? "–" : fmt(ll / n, 3)),
          el("td", { className: "prob" }, el("span", { className: "bar" }, fill), el("span", { className: "num" }, fmt(p, 3)))
        );
      }
      const cls = (i === s.gold ? " is-gold" : "") + (i === s.pred ? " is-pred" : "");
      return el("tr", { className: cls.trim() }, cells);
    });
    return el(
      "table",
      { className: "options" },
      el("thead", {}, el("tr", {}, head.map((h, k) => el("th", { className: k > 1 ? "num" : "" }, h)))),
      el("tbody", {}, rows)
    );
  }

  function queryBlock(p) {
    return el("div", { className: "turn" }, el("div", { className: "images" }, p.query.images.map(image)), el("pre", { className: "text" }, p.query.text));
  }

  function demosBlock(s, p) {
    if (!s.demo_ids.length) return el("p", { className: "muted" }, "No demonstrations (0-shot).");
    if (!p.demos.length) return el("p", { className: "muted" }, s.demo_ids.length + " demonstrations: see the prompt below.");
    return el(
      "ol",
      { className: "demos" },
      p.demos.map((d, k) =>
        el(
          "li",
          { className: "demo" },
          el("div", { className: "demo-id mono" }, s.demo_ids[k] || ""),
          el("div", { className: "images" }, d.images.map(image)),
          el("pre", { className: "text" }, d.text),
          d.answer ? el("div", { className: "demo-answer" }, el("span", { className: "muted" }, "answer "), el("code", {}, d.answer)) : null
        )
      )
    );
  }

  function promptBlock(p) {
    const images = p.messages.reduce((n, m) => n + m.content.filter((c) => c.type === "image").length, 0);
    return el(
      "details",
      { className: "prompt", open: true },
      el("summary", {}, plural(p.messages.length, "message") + ", " + plural(images, "image")),
      p.messages.map((m) =>
        el(
          "div",
          { className: "msg role-" + (["system", "user", "assistant"].includes(m.role) ? m.role : "other") },
          el("div", { className: "role" }, m.role),
          m.content.map((c) => (c.type === "image" ? image(c.sha256) : el("pre", { className: "text" }, c.text)))
        )
      )
    );
  }

  function fewshotColumn(i) {
    const s = SAMPLES[i];
    const p = DATA.prompts[s.prompt];
    return el(
      "article",
      { className: "sample-col", dataset: { index: i } },
      el(
        "header",
        { className: "col-head" },
        el("h2", { className: "model" }, runName(s)),
        el("div", { className: "muted" }, s.setting + " · " + s.scorer + " · " + s.id)
      ),
      section("Answer", answerBlock(s)),
      section("Options", optionsBlock(s)),
      s.scorer === "generate" ? responseSection(s) : null,
      section("Query", queryBlock(p)),
      section("Demonstrations (" + s.demo_ids.length + ")", demosBlock(s, p)),
      section("Exact prompt", promptBlock(p))
    );
  }

  // ---------------------------------------------------------------- one context item

  function short(text, n) {
    const flat = String(text || "").replace(/\s+/g, " ").trim();
    return flat.length > n ? flat.slice(0, n - 1) + "…" : flat;
  }

  function scoreText(s) {
    return s.score === null || s.score === undefined ? "–" : fmt(s.score, 4);
  }

  function contextFacts(s) {
    const rows = [
      ["Outcome", badge(s.outcome)],
      ["Score", el("span", { className: "score num" }, scoreText(s))],
      ["Prediction", el("pre", { className: "prediction" }, s.prediction || "(none)")],
      ["Extracted by", el("code", { className: "extracted-by" }, s.extracted_by || "(none)")],
      ["Repaired", s.repaired ? "yes: the answer came from the repair turn" : "no"],
      ["Gold", el("pre", { className: "gold" }, s.gold || "(none)")],
      ["Judge", s.judge ? el("code", { className: "judge" }, s.judge) : "— (not judged)"],
      ["Evaluator", el("code", {}, s.evaluator + (s.answer_type ? " · " + s.answer_type : ""))],
      ["Prompt", (s.prompt_tokens === null ? "? tokens" : plural(s.prompt_tokens, "token")) + ", " + (s.images === null ? "? images" : plural(s.images, "image"))],
    ];
    if (s.truncated_tokens) rows.push(["Truncated", plural(s.truncated_tokens, "token") + " of context text cut from the prompt (the context below is uncut)"]);
    if (s.problems.length) rows.push(["Problems", el("ul", { className: "problems" }, s.problems.map((p) => el("li", {}, p)))]);
    return el("dl", { className: "facts" }, rows.map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  }

  function contextColumn(i) {
    const s = SAMPLES[i];
    return el(
      "article",
      { className: "sample-col", dataset: { index: i } },
      el(
        "header",
        { className: "col-head" },
        el("h2", { className: "model" }, runName(s)),
        el("div", { className: "muted" }, s.subset + " · " + s.level + " · " + s.outcome + " · " + scoreText(s))
      ),
      section("Result", contextFacts(s)),
      responseSection(s),
      section("Evaluator detail", el("pre", { className: "detail" }, s.detail)),
      section(
        "Prompt as sent",
        el(
          "details",
          { className: "prompt" },
          el("summary", {}, "template " + (s.template || "none") + ", suffix " + (s.suffix || "none") + " · " + plural(DATA.prompts[s.prompt].length, "character")),
          el("pre", { className: "prompt-text" }, DATA.prompts[s.prompt] || "(no prompt: the item was not sent)")
        )
      )
    );
  }

  function contextBlock(b) {
    if (b.kind === "image") return el("li", { className: "ctx ctx-image" }, b.title ? el("div", { className: "ctx-title" }, b.title) : null, image(b.image, b.path));
    return el("li", { className: "ctx ctx-text" }, b.title ? el("div", { className: "ctx-title" }, b.title) : null, el("pre", { className: "text" }, b.text));
  }

  function contextShared(s) {
    if (s.item < 0) return el("section", { className: "card context" }, el("h3", {}, "Context"), el("p", { className: "muted" }, "The item's context is not available: its suite could not be read (see the summary page)."));
    const item = DATA.items[s.item];
    return el(
      "section",
      { className: "card context" },
      el("h3", {}, "Context, in the order the model read it (" + plural(item.blocks.length, "block") + ")"),
      el("ol", { className: "context-blocks" }, item.blocks.map(contextBlock)),
      item.question ? section("Question", el("pre", { className: "question" }, item.question)) : null,
      item.choices.length ? section("Choices", el("ol", { className: "choices" }, item.choices.map((c) => el("li", {}, c)))) : null,
      item.after.length ? section("Images after the question", el("ol", { className: "context-blocks" }, item.after.map(contextBlock))) : null,
      section("Gold", el("pre", { className: "gold" }, item.answer), el("details", { className: "gold-json" }, el("summary", {}, "as the evaluator reads it"), el("pre", {}, item.gold)))
    );
  }

  // ---------------------------------------------------------------- modes

  const MODES = {
    fewshot: {
      noun: "samples",
      searchHint: "query id or response text",
      filters: [
        { key: "model", label: "Model", value: (s) => runName(s) },
        { key: "task", label: "Task", value: (s) => s.task },
        { key: "setting", label: "Setting", value: (s) => s.setting },
        { key: "scorer", label: "Scorer", value: (s) => s.scorer },
        { key: "outcome", label: "Outcome", value: (s) => s.outcome },
        { key: "rule", label: "Rule", value: (s) => s.rule || "(none)" },
        { key: "cot_tag", label: "CoT tag", values: cotTagValues, when: (s) => s.cot },
      ],
      haystack: (s) => s.query_id + "\n" + s.id + "\n" + s.response,
      cells: (s) => [
        el("td", {}, runName(s)),
        el("td", {}, s.task),
        el("td", {}, s.setting),
        el("td", {}, s.scorer),
        el("td", { className: "mono" }, s.query_id),
        el("td", {}, badge(s.outcome)),
        el("td", {}, label(s, s.pred)),
        el("td", {}, label(s, s.gold)),
        el("td", { className: "mono" }, s.rule),
      ],
      peerKey: (s) => s.query_id,
      peerLabel: (t) => runName(t) + " · " + t.setting + " · " + t.scorer + " · " + t.outcome,
      title: (s) => [s.query_id, s.task + " · " + s.format + " · " + s.source],
      column: fewshotColumn,
      shared: () => null,
    },
    context: {
      noun: "items",
      searchHint: "item id, response or prediction text",
      filters: [
        { key: "model", label: "Model", value: (s) => runName(s) },
        { key: "subset", label: "Subset", value: (s) => s.subset },
        { key: "level", label: "Level", value: (s) => s.level || "(none)" },
        { key: "outcome", label: "Outcome", value: (s) => s.outcome },
        { key: "repaired", label: "Repaired", value: (s) => (s.repaired ? "yes" : "no") },
        { key: "extracted_by", label: "Extracted by", value: (s) => s.extracted_by || "(none)" },
        { key: "evaluator", label: "Evaluator", value: (s) => s.evaluator },
      ],
      haystack: (s) => s.id + "\n" + s.response + "\n" + s.prediction,
      cells: (s) => [
        el("td", {}, runName(s)),
        el("td", {}, s.subset),
        el("td", {}, s.level),
        el("td", { className: "mono" }, s.id),
        el("td", {}, badge(s.outcome)),
        el("td", { className: "num" }, scoreText(s)),
        el("td", { className: "clip" }, short(s.prediction, 60)),
        el("td", { className: "clip" }, short(s.gold, 60)),
        el("td", { className: "mono" }, s.extracted_by),
        el("td", {}, s.repaired ? "yes" : "no"),
      ],
      peerKey: (s) => s.id,
      peerLabel: (t) => runName(t) + " · " + t.outcome + " · " + scoreText(t),
      title: (s) => [s.id, s.subset + " · " + s.level + (s.table_level && s.table_level !== s.level ? " (counts in " + s.table_level + ")" : "") + " · " + s.evaluator],
      column: contextColumn,
      shared: contextShared,
    },
  };
  MODE = MODES[DATA.kind] || MODES.fewshot;
  document.body.dataset.kind = DATA.kind || "fewshot";

  // ---------------------------------------------------------------- side by side

  function peersOf(i) {
    const key = MODE.peerKey(SAMPLES[i]);
    const out = [];
    SAMPLES.forEach((t, j) => {
      if (j !== i && MODE.peerKey(t) === key) out.push(j);
    });
    return out;
  }

  function renderDetail(i, j) {
    const s = SAMPLES[i];
    const view = clear(document.getElementById("detail-view"));
    const nav = el("nav", { className: "detail-nav" }, el("a", { href: "#", id: "back" }, "← All " + MODE.noun));
    const pos = state.shown.indexOf(i);
    if (pos > 0) nav.append(el("a", { href: "#sample=" + state.shown[pos - 1], id: "prev" }, "‹ previous"));
    if (pos >= 0 && pos < state.shown.length - 1) nav.append(el("a", { href: "#sample=" + state.shown[pos + 1], id: "next" }, "next ›"));

    const select = el("select", { id: "compare-select" });
    select.append(el("option", { value: "" }, "— none —"));
    for (const k of peersOf(i)) select.append(el("option", { value: String(k), selected: k === j }, MODE.peerLabel(SAMPLES[k])));
    select.addEventListener("change", () => {
      location.hash = "sample=" + i + (select.value ? "&compare=" + select.value : "");
    });
    const [heading, subtitle] = MODE.title(s);
    const title = el(
      "header",
      { className: "detail-head card" },
      el("h1", { className: "mono" }, heading),
      el("div", { className: "muted" }, subtitle),
      el("label", { className: "compare" }, el("span", {}, "Compare side by side with "), select)
    );
    const columns = el("div", { className: "columns" + (j === null ? "" : " two") }, MODE.column(i), j === null ? null : MODE.column(j));
    append(view, [nav, title, columns, MODE.shared(s)]);
  }

  // ---------------------------------------------------------------- routing

  function index(value) {
    const n = Number(value);
    return value !== null && value !== "" && Number.isInteger(n) && n >= 0 && n < SAMPLES.length ? n : null;
  }

  function route() {
    const params = new URLSearchParams(location.hash.replace(/^#/, ""));
    const i = index(params.get("sample"));
    const list = document.getElementById("list-view");
    const detail = document.getElementById("detail-view");
    const filters = document.getElementById("filters");
    const count = document.querySelector("p.count");
    const inDetail = i !== null;
    list.hidden = inDetail;
    filters.hidden = inDetail;
    count.hidden = inDetail;
    detail.hidden = !inDetail;
    if (inDetail) {
      const j = index(params.get("compare"));
      renderDetail(i, j !== null && j !== i ? j : null);
      window.scrollTo(0, 0);
    }
  }

  buildFilters();
  renderList();
  window.addEventListener("hashchange", route);
  route();
  document.body.dataset.ready = "1";
})();
