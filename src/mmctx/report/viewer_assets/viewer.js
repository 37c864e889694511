// mmctx sample browser. Plain JS, no framework, no network.
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
  const OUTCOMES = ["correct", "wrong", "unparsed", "error", "missing"];
  const FILTERS = [
    { key: "model", label: "Model", value: (s) => DATA.runs[s.run].name },
    { key: "task", label: "Task", value: (s) => s.task },
    { key: "setting", label: "Setting", value: (s) => s.setting },
    { key: "scorer", label: "Scorer", value: (s) => s.scorer },
    { key: "outcome", label: "Outcome", value: (s) => s.outcome },
    { key: "rule", label: "Rule", value: (s) => s.rule || "(none)" },
  ];
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

  function buildFilters() {
    const bar = clear(document.getElementById("filters"));
    for (const f of FILTERS) {
      const counts = new Map();
      for (const s of SAMPLES) counts.set(f.value(s), (counts.get(f.value(s)) || 0) + 1);
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
    const search = el("input", { id: "filter-text", type: "search", placeholder: "query id or response text" });
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
    for (const f of FILTERS) {
      const want = state.filters[f.key];
      if (want && f.value(s) !== want) return false;
    }
    if (state.text) {
      const hay = (s.query_id + "\n" + s.id + "\n" + s.response).toLowerCase();
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
    count.textContent = state.shown.length + " of " + SAMPLES.length + " samples";
    const pages = Math.max(1, Math.ceil(state.shown.length / PAGE_SIZE));
    state.page = Math.min(state.page, pages - 1);
    const tbody = clear(document.querySelector("#sample-list tbody"));
    for (const i of state.shown.slice(state.page * PAGE_SIZE, (state.page + 1) * PAGE_SIZE)) {
      const s = SAMPLES[i];
      const row = el(
        "tr",
        { className: "sample-row", dataset: { index: i } },
        el("td", { className: "num" }, el("a", { href: "#sample=" + i }, String(i + 1))),
        el("td", {}, runName(s)),
        el("td", {}, s.task),
        el("td", {}, s.setting),
        el("td", {}, s.scorer),
        el("td", { className: "mono" }, s.query_id),
        el("td", {}, badge(s.outcome)),
        el("td", {}, label(s, s.pred)),
        el("td", {}, label(s, s.gold)),
        el("td", { className: "mono" }, s.rule)
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

  function image(sha) {
    const src = DATA.images[sha];
    const tag = "<image:" + String(sha).slice(0, 8) + ">";
    if (!src) return el("figure", { className: "img missing" }, el("span", {}, tag + " not available"));
    return el(
      "figure",
      { className: "img" },
      el("a", { href: src, target: "_blank", rel: "noopener" }, el("img", { src: src, alt: tag, title: tag })),
      el("figcaption", {}, tag)
    );
  }

  function section(title, ...children) {
    return el("section", { className: "block" }, el("h3", {}, title), children);
  }

  function answerBlock(s) {
    const rows = [
      ["Outcome", badge(s.outcome)],
      ["Gold", optionText(s, s.gold)],
      ["Extracted", optionText(s, s.pred)],
      ["Rule", el("code", { className: "rule" }, s.rule || "(none)")],
    ];
    if (s.truncated) rows.push(["Truncated", "yes: the response hit max_new_tokens"]);
    if (s.error) rows.push(["Error", el("pre", { className: "error" }, s.error)]);
    return el("dl", { className: "facts" }, rows.map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
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

  function sampleColumn(i) {
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
      s.scorer === "generate" ? section("Raw response", el("pre", { className: "response" }, s.response || "(empty)")) : null,
      section("Query", queryBlock(p)),
      section("Demonstrations (" + s.demo_ids.length + ")", demosBlock(s, p)),
      section("Exact prompt", promptBlock(p))
    );
  }

  function peersOf(i) {
    const s = SAMPLES[i];
    const out = [];
    SAMPLES.forEach((t, j) => {
      if (j !== i && t.query_id === s.query_id) out.push(j);
    });
    return out;
  }

  function peerLabel(j) {
    const t = SAMPLES[j];
    return runName(t) + " · " + t.setting + " · " + t.scorer + " · " + t.outcome;
  }

  function renderDetail(i, j) {
    const s = SAMPLES[i];
    const view = clear(document.getElementById("detail-view"));
    const nav = el("nav", { className: "detail-nav" }, el("a", { href: "#", id: "back" }, "← All samples"));
    const pos = state.shown.indexOf(i);
    if (pos > 0) nav.append(el("a", { href: "#sample=" + state.shown[pos - 1], id: "prev" }, "‹ previous"));
    if (pos >= 0 && pos < state.shown.length - 1) nav.append(el("a", { href: "#sample=" + state.shown[pos + 1], id: "next" }, "next ›"));

    const select = el("select", { id: "compare-select" });
    select.append(el("option", { value: "" }, "— none —"));
    for (const k of peersOf(i)) select.append(el("option", { value: String(k), selected: k === j }, peerLabel(k)));
    select.addEventListener("change", () => {
      location.hash = "sample=" + i + (select.value ? "&compare=" + select.value : "");
    });
    const title = el(
      "header",
      { className: "detail-head card" },
      el("h1", { className: "mono" }, s.query_id),
      el("div", { className: "muted" }, s.task + " · " + s.format + " · " + s.source),
      el("label", { className: "compare" }, el("span", {}, "Compare side by side with "), select)
    );
    const columns = el("div", { className: "columns" + (j === null ? "" : " two") }, sampleColumn(i), j === null ? null : sampleColumn(j));
    view.append(nav, title, columns);
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
