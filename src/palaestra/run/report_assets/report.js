// palaestra report: draws the embedded run data as SVG charts, tables and a trajectory viewer.
// Every bar and point carries its number in data-value and a <title>; every chart has a table.
// The overview and the rate charts are drawn server-side (run/report_figures.py): they show
// without JavaScript; this script adds the cost scatter, histograms, comparison and viewer.
"use strict";
async function inflate(base64) {
  const text = atob(base64);
  const bytes = new Uint8Array(text.length);  // a plain loop: Uint8Array.from(text, fn) is slow
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}

inflate(document.getElementById("report-data").textContent.trim()).then((DATA) => {
  const RUNS = DATA.runs;
  const SVGNS = "http://www.w3.org/2000/svg";
  const COLORS = ["var(--c0)", "var(--c1)", "var(--c2)", "var(--c3)", "var(--c4)", "var(--c5)"];
  const color = (i) => COLORS[i % COLORS.length];
  const pct = (x) => (x === null || x === undefined ? "—" : (100 * x).toFixed(1) + "%");
  const usd = (x) => (x === null || x === undefined ? "unknown" : "$" + x.toFixed(4));
  const num = (x, d) => (x === null || x === undefined ? "—" : Number(x).toFixed(d));

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v;
      else if (k === "onclick") node.addEventListener("click", v);
      else node.setAttribute(k, v);
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return node;
  }

  function table(head, rows, attrs) {
    return el("table", attrs || {},
      el("thead", {}, el("tr", {}, ...head.map((h) => el("th", {}, h)))),
      el("tbody", {}, ...rows.map((r) => el("tr", {}, ...r.map((c) => el("td", {}, c))))));
  }

  function legend() {
    if (RUNS.length < 2) return null;
    return el("div", { class: "legend" },
      ...RUNS.map((r, i) => el("span", {}, el("i", { style: "background:" + color(i) }), r.label)));
  }

  function scatter() {
    const box = document.getElementById("chart-cost");
    const points = [];
    RUNS.forEach((run, ri) => {
      const byTask = {};
      for (const e of run.episodes) (byTask[e.task_id] = byTask[e.task_id] || []).push(e);
      for (const [task, eps] of Object.entries(byTask)) {
        const known = eps.filter((e) => e.cost_usd !== null);
        if (!known.length) continue;
        const cost = known.reduce((a, e) => a + e.cost_usd, 0) / known.length;
        const rate = eps.filter((e) => e.status === "passed").length / eps.length;
        points.push({ ri, task, cost, rate });
      }
    });
    if (!points.length) { box.append(el("p", { class: "muted", "data-chart": "cost_vs_success" }, "Cost unknown for every episode (the policy reports no cost).")); return; }
    const w = 560, h = 260, left = 54, bottom = 30;
    const maxCost = Math.max(...points.map((p) => p.cost)) || 1;
    const chart = svg("svg", { class: "chart", "data-chart": "cost_vs_success", width: w, height: h + bottom, viewBox: `0 0 ${w} ${h + bottom}` });
    chart.append(svg("line", { class: "axis", x1: left, x2: w, y1: h, y2: h }), svg("line", { class: "axis", x1: left, x2: left, y1: 0, y2: h }));
    chart.append(svg("text", { x: left - 6, y: 10, "text-anchor": "end" }, "100%"), svg("text", { x: left - 6, y: h, "text-anchor": "end" }, "0%"));
    chart.append(svg("text", { x: w - 4, y: h + 20, "text-anchor": "end" }, usd(maxCost)),
      svg("text", { class: "axis-title", x: left + (w - left) / 2, y: h + 20, "text-anchor": "middle" }, "mean cost per trial (USD) →"),
      svg("text", { class: "axis-title", x: 12, y: h / 2, "text-anchor": "middle", transform: `rotate(-90 12 ${h / 2})` }, "task pass rate"));
    for (const p of points) {
      chart.append(svg("circle", { class: "point", cx: left + (p.cost / maxCost) * (w - left - 10), cy: h - p.rate * (h - 10),
        r: 5, fill: color(p.ri), "fill-opacity": 0.75, "data-run": p.ri, "data-task": p.task, "data-value": p.rate, "data-cost": p.cost },
        svg("title", {}, `${p.task} · ${RUNS[p.ri].label}: ${pct(p.rate)} at ${usd(p.cost)}/trial`)));
    }
    box.append(legend() || "", chart, el("details", {}, el("summary", {}, "table"),
      table(["task", "run", "mean cost per trial", "pass rate"], points.map((p) => [p.task, RUNS[p.ri].label, usd(p.cost), pct(p.rate)]), { "data-table": "cost_vs_success" })));
  }

  function histogram(target, name, get, digits, xTitle) {
    const box = document.getElementById(target);
    const all = RUNS.map((run) => run.episodes.map(get).filter((v) => v !== null && v !== undefined));
    const flat = all.flat();
    if (!flat.length) { box.append(el("p", { class: "muted" }, "No data.")); return; }
    const lo = Math.min(...flat), hi = Math.max(...flat);
    const integer = digits === 0 && hi - lo + 1 <= 20;  // one bin per value
    const nb = integer ? hi - lo + 1 : 20;
    const width = integer ? 1 : (hi - lo) / nb || 1;
    const bin = (v) => Math.min(nb - 1, Math.floor((v - lo) / width));
    const counts = all.map((vals) => { const c = new Array(nb).fill(0); for (const v of vals) c[bin(v)]++; return c; });
    const maxC = Math.max(...counts.flat());
    const w = 560, h = 180, left = 40, bw = (w - left - 10) / nb;
    const chart = svg("svg", { class: "chart", "data-chart": name, width: w, height: h + 40, viewBox: `0 0 ${w} ${h + 40}` });
    chart.append(svg("line", { class: "axis", x1: left, x2: w, y1: h, y2: h }));
    chart.append(svg("text", { x: left - 4, y: 10, "text-anchor": "end" }, maxC),
      svg("text", { class: "axis-title", x: left + (w - left) / 2, y: h + 32, "text-anchor": "middle" }, xTitle),
      svg("text", { class: "axis-title", x: 12, y: h / 2, "text-anchor": "middle", transform: `rotate(-90 12 ${h / 2})` }, "episodes"));
    const label = (b) => integer ? String(lo + b) : `${num(lo + b * width, digits)}–${num(lo + (b + 1) * width, digits)}`;
    counts.forEach((c, ri) => c.forEach((n, b) => {
      const bh = (n / maxC) * (h - 12);
      const sub = bw / RUNS.length;
      chart.append(svg("rect", { class: "bar", x: left + b * bw + ri * sub, y: h - bh, width: Math.max(sub - 1, 1), height: bh,
        fill: color(ri), "data-run": ri, "data-bin": label(b), "data-value": n }, svg("title", {}, `${label(b)} · ${RUNS[ri].label}: ${n}`)));
    }));
    if (integer) {
      for (let b = 0; b < nb; b++) chart.append(svg("text", { x: left + (b + 0.5) * bw, y: h + 16, "text-anchor": "middle" }, label(b)));
    } else {
      chart.append(svg("text", { x: left, y: h + 16 }, num(lo, digits)),
        svg("text", { x: w - 4, y: h + 16, "text-anchor": "end" }, num(hi, digits)));
    }
    box.append(legend() || "", chart, el("details", {}, el("summary", {}, "table"),
      table(["bin", ...RUNS.map((r) => r.label)], counts[0].map((_, b) => [label(b), ...counts.map((c) => String(c[b]))]), { "data-table": name })));
  }

  function comparison() {
    const section = document.getElementById("comparison-section");
    if (RUNS.length < 2) { section.remove(); return; }
    const tasks = [...new Set(RUNS.flatMap((r) => r.episodes.map((e) => e.task_id)))].sort();
    const rows = tasks.map((t) => [t, ...RUNS.map((run) => {
      const eps = run.episodes.filter((e) => e.task_id === t);
      return eps.length ? `${pct(eps.filter((e) => e.status === "passed").length / eps.length)} (${eps.length})` : "—";
    })]);
    document.getElementById("comparison").append(table(["task", ...RUNS.map((r) => r.label)], rows, { "data-table": "comparison" }));
  }

  // -- trajectory viewer ------------------------------------------------------------------
  const ALL = RUNS.flatMap((run, ri) => run.episodes.map((e) => ({ ...e, ri })));
  // What the status column says: the status (passed, failed, error), except that a failed
  // episode a step or time limit cut short says which limit (its end_reason).
  const LIMITS = ["agent_timeout", "step_limit"];
  const shownStatus = (e) => (e.status === "failed" && LIMITS.includes(e.end_reason) ? e.end_reason : e.status);
  const PAGE = 300;

  function message(m) {
    let content = m.content;
    if (Array.isArray(content)) content = content.map((p) => p.text || "").join("");
    const parts = [el("div", { class: "role" }, m.role)];
    if (content) parts.push(el("pre", {}, content));
    if (m.tool_calls) parts.push(el("pre", {}, JSON.stringify(m.tool_calls, null, 1)));
    return el("div", { class: "msg" }, ...parts);
  }

  function openEpisode(e, row) {
    document.querySelectorAll("#episodes tr.selected").forEach((r) => r.classList.remove("selected"));
    if (row) row.classList.add("selected");
    const v = document.getElementById("viewer");
    v.className = "";
    // replaceChildren writes null as the text "null": the parts an episode lacks are dropped
    v.replaceChildren(...[
      el("h3", { id: "viewer-title" }, `${e.task_id} · attempt ${e.attempt} · ${RUNS[e.ri].label}`),
      el("p", {}, "status ", el("b", { class: "status-" + shownStatus(e), id: "viewer-status" }, shownStatus(e)),
        ` · reward ${num(e.reward, 3)} · ${e.steps} steps · ${num(e.wall_s, 2)} s · cost ${usd(e.cost_usd)} · end ${e.end_reason}`),
      el("p", {}, "rewards ", el("code", {}, JSON.stringify(e.rewards))),
      e.error_class ? el("p", { class: "status-error" }, `${e.error_class}: ${e.error_message || ""}`) : null,
      e.turns === null ? el("p", { class: "muted", id: "viewer-not-embedded" }, "This episode's trajectory is not embedded in the page " +
        "(only the first episodes of a large run are). Make the report with --max-trajectories -1, or read it with `palaestra export`.") : null,
      ...(e.turns || []).map((t) => el("div", { class: "turn", "data-turn": t.turn },
        el("h4", {}, `Turn ${t.turn}`),
        el("details", { open: "" }, el("summary", {}, `request: ${t.new_messages.length} new message(s) (from #${t.messages_from})`),
          ...t.new_messages.map(message)),
        el("div", { class: "msg response" }, el("div", { class: "role" }, "response"),
          el("pre", {}, t.response.content || ""),
          t.response.tool_calls && t.response.tool_calls.length ? el("pre", {}, JSON.stringify(t.response.tool_calls, null, 1)) : null),
        t.execution && t.execution.command !== undefined ? el("div", { class: "msg execution" },
          el("div", { class: "role" }, `command (exit ${t.execution.exit_code}${t.execution.timed_out ? ", timed out" : ""})`),
          el("pre", {}, t.execution.command), el("div", { class: "role" }, "output"),
          t.execution.output_in_next_request ? el("p", { class: "muted" }, "(shown in the next turn's request)") : el("pre", { class: "output" }, t.execution.output || "")) : null,
        t.execution && t.execution.format_error !== undefined ? el("p", { class: "status-error" }, `format error: ${t.execution.format_error} bash blocks`) : null)),
      el("h4", {}, "Verifier output"), el("pre", { id: "verifier-output" }, e.verifier_output || "(none)"),
    ].filter((part) => part !== null));
  }

  function episodes() {
    const runSel = document.getElementById("filter-run"), statusSel = document.getElementById("filter-status");
    const taskIn = document.getElementById("filter-task");
    runSel.append(el("option", { value: "" }, "all"), ...RUNS.map((r, i) => el("option", { value: i }, r.label)));
    statusSel.append(el("option", { value: "" }, "all"), ...[...new Set(ALL.map(shownStatus))].sort().map((s) => el("option", { value: s }, s)));
    function draw() {
      const shown = ALL.filter((e) => (runSel.value === "" || e.ri === Number(runSel.value)) &&
        (statusSel.value === "" || shownStatus(e) === statusSel.value) && e.task_id.includes(taskIn.value));
      document.getElementById("episode-count").textContent = `${shown.length} episodes` + (shown.length > PAGE ? ` (first ${PAGE} listed; filter to see others)` : "");
      const body = el("tbody", {});
      for (const e of shown.slice(0, PAGE)) {
        const row = el("tr", { class: "episode", "data-episode": `${e.ri}:${e.id}` },
          el("td", {}, e.task_id), el("td", {}, e.attempt), el("td", { class: "status-" + shownStatus(e) }, shownStatus(e)),
          el("td", {}, num(e.reward, 2)), el("td", {}, e.steps), RUNS.length > 1 ? el("td", {}, RUNS[e.ri].label) : null);
        row.addEventListener("click", () => openEpisode(e, row));
        body.append(row);
      }
      const head = ["task", "attempt", "status", "reward", "steps", ...(RUNS.length > 1 ? ["run"] : [])];
      document.getElementById("episodes").replaceChildren(el("table", {}, el("thead", {}, el("tr", {}, ...head.map((h) => el("th", {}, h)))), body));
    }
    runSel.addEventListener("change", draw); statusSel.addEventListener("change", draw); taskIn.addEventListener("input", draw);
    draw();
  }

  scatter();
  histogram("chart-steps", "steps", (e) => e.steps, 0, "steps (policy actions) per episode");
  histogram("chart-time", "wall_time", (e) => e.wall_s, 2, "wall time per episode (s)");
  comparison();
  episodes();
  document.body.setAttribute("data-rendered", "true");
}).catch((err) => {
  document.body.prepend(document.createTextNode("This report could not be read: " + err));
  throw err;
});
