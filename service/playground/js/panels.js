// The panels beside the graph: a plot of f and ∂f/∂x over a slider's range (/v1/sweep), the
// three ways to a derivative (/v1/derivatives), and "predict first" (/v1/check). Each one shows
// a problem in its own words and leaves the rest of the page working. The output is f unless
// the program names it (`cost = ...`): then ∂cost/∂x.

import { api } from "./api.js";
import { formatNumber } from "./format.js";
import { t } from "./i18n.js";

const SVG = "http://www.w3.org/2000/svg";
const POINTS = 201;

function svgElement(name, attributes = {}, parent = null) {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, String(value));
  if (parent) parent.append(node);
  return node;
}

function html(name, attributes = {}, children = []) {
  const node = document.createElement(name);
  for (const [key, value] of Object.entries(attributes)) {
    if (key === "class") node.className = value;
    else node.setAttribute(key, value);
  }
  node.append(...children);
  return node;
}

function say(target, problem, endpoint) {
  if (!problem) {
    target.textContent = "";
    target.classList.remove("error");
    return;
  }
  const detail = problem.detail || problem.title;
  // A 404 or 405 means this service has no such endpoint; anything else is about the request.
  const missing = problem.status === 404 || problem.status === 405 || problem.status === 0;
  target.textContent = missing ? t("panelUnavailable", { endpoint, detail }) : detail;
  target.classList.add("error");
}

// Round steps for an axis: 1, 2 or 5 times a power of ten.
function ticks(low, high, count = 5) {
  const span = high - low || 1;
  const raw = span / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw) ?? raw;
  const first = Math.ceil(low / step) * step;
  const values = [];
  for (let v = first; v <= high + step * 1e-9; v += step) values.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  return values;
}

function linspace(from, to, count) {
  return Array.from({ length: count }, (_, i) => from + ((to - from) * i) / (count - 1));
}

function axisOf(axes, name, from, to, count) {
  if (axes && !Array.isArray(axes) && Array.isArray(axes[name])) return axes[name];
  if (Array.isArray(axes) && axes.length) {
    const first = axes[0];
    if (Array.isArray(first)) return first;
    if (first && Array.isArray(first.values)) return first.values;
  }
  return linspace(from, to, count);
}

export function drawPlot(container, sweep, name, current, range, output) {
  const xs = axisOf(sweep.axes, name, range[0], range[1], POINTS);
  const fs = sweep.value ?? [];
  const gs = sweep.gradients?.[name] ?? [];
  const W = 560;
  const H = 300;
  const M = { left: 48, right: 16, top: 16, bottom: 34 };
  const finite = [...fs, ...gs].filter((v) => typeof v === "number" && Number.isFinite(v));
  let low = Math.min(0, ...finite);
  let high = Math.max(0, ...finite);
  if (low === high) high = low + 1;
  const margin = (high - low) * 0.06;
  low -= margin;
  high += margin;
  const x = (v) => M.left + ((v - range[0]) / (range[1] - range[0])) * (W - M.left - M.right);
  const y = (v) => M.top + ((high - v) / (high - low)) * (H - M.top - M.bottom);
  const svg = svgElement("svg", { viewBox: `0 0 ${W} ${H}`, class: "plot-svg", role: "img" });
  svgElement("title", {}, svg).textContent = t("plotCaption", {
    name,
    output,
    from: formatNumber(range[0]),
    to: formatNumber(range[1]),
  });
  const grid = svgElement("g", { class: "plot-grid" }, svg);
  for (const v of ticks(low, high)) {
    svgElement("line", { x1: M.left, x2: W - M.right, y1: y(v), y2: y(v), class: v === 0 ? "zero" : "" }, grid);
    svgElement("text", { x: M.left - 6, y: y(v) + 4, "text-anchor": "end" }, grid).textContent = formatNumber(v);
  }
  for (const v of ticks(range[0], range[1], 6)) {
    svgElement("line", { x1: x(v), x2: x(v), y1: M.top, y2: H - M.bottom, class: v === 0 ? "zero" : "" }, grid);
    svgElement("text", { x: x(v), y: H - M.bottom + 16, "text-anchor": "middle" }, grid).textContent = formatNumber(v);
  }
  svgElement("text", { x: W - M.right, y: H - 4, "text-anchor": "end", class: "axis-name" }, grid).textContent = name;
  const line = (values, cls) => {
    // A point outside the domain is null: the line breaks there instead of joining across it.
    let d = "";
    let pen = false;
    values.forEach((v, i) => {
      if (typeof v !== "number" || !Number.isFinite(v) || i >= xs.length) {
        pen = false;
        return;
      }
      d += `${pen ? "L" : "M"} ${x(xs[i]).toFixed(1)} ${y(v).toFixed(1)} `;
      pen = true;
    });
    if (d) svgElement("path", { d, class: cls }, svg);
  };
  line(gs, "series grad");
  line(fs, "series value");
  if (current !== undefined && current >= range[0] && current <= range[1]) {
    svgElement("line", { x1: x(current), x2: x(current), y1: M.top, y2: H - M.bottom, class: "now" }, svg);
    const index = xs.reduce((best, v, i) => (Math.abs(v - current) < Math.abs(xs[best] - current) ? i : best), 0);
    if (Number.isFinite(fs[index])) svgElement("circle", { cx: x(current), cy: y(fs[index]), r: 4, class: "dot value" }, svg);
    if (Number.isFinite(gs[index])) svgElement("circle", { cx: x(current), cy: y(gs[index]), r: 4, class: "dot grad" }, svg);
  }
  const legend = html("p", { class: "plot-legend" }, [
    html("span", { class: "key value" }, [t("plotLegendValue", { output })]),
    html("span", { class: "key grad" }, [t("derivative", { name, output })]),
    html("span", { class: "key now" }, [t("plotCurrent", { name, value: formatNumber(current) })]),
  ]);
  const gaps = fs.filter((v) => v === null).length;
  const notes = gaps ? [html("p", { class: "plot-note" }, [t("plotGaps", { count: gaps, output })])] : [];
  container.replaceChildren(svg, legend, ...notes);
}

export class Panels {
  constructor(elements) {
    this.elements = elements;
    this.timer = null;
    this.context = null;
  }

  // Called whenever the expression, the bindings, the ranges or the language change.
  update(context, delay = 250) {
    this.context = context;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.refresh(), delay);
  }

  refresh() {
    const context = this.context;
    if (!context) return;
    if (context.panel === "plot") this.plot(context);
    if (context.panel === "derivatives") this.derivatives(context);
    if (context.panel === "predict") this.predictFields(context);
  }

  async plot(context) {
    const { plot, plotMessage, plotVariable } = this.elements;
    const names = context.variables;
    plotVariable.replaceChildren(...names.map((n) => html("option", { value: n }, [n])));
    if (!names.length) {
      plot.replaceChildren();
      plotMessage.textContent = t("noInputs");
      return;
    }
    const name = names.includes(context.plotName) ? context.plotName : names[0];
    plotVariable.value = name;
    const range = context.ranges[name];
    const reply = await api.sweep(context.expression, context.bindings, name, range[0], range[1], POINTS);
    if (reply.aborted || context !== this.context) return;
    if (!reply.ok) {
      plot.replaceChildren();
      say(plotMessage, reply.problem, "/v1/sweep");
      return;
    }
    say(plotMessage, null);
    drawPlot(plot, reply.data, name, context.bindings[name], range, context.output);
  }

  async derivatives(context) {
    const { derivatives, derivativesMessage } = this.elements;
    const reply = await api.derivatives(context.expression, context.bindings);
    if (reply.aborted || context !== this.context) return;
    if (!reply.ok) {
      derivatives.replaceChildren();
      say(derivativesMessage, reply.problem, "/v1/derivatives");
      return;
    }
    say(derivativesMessage, null);
    const document = reply.data;
    const head = html("tr", {}, [
      html("th", { scope: "col" }, [t("variable")]),
      html("th", { scope: "col" }, [t("reverseMode")]),
      html("th", { scope: "col" }, [t("symbolic")]),
      html("th", { scope: "col" }, [t("numeric")]),
    ]);
    const rows = (document.derivatives ?? []).map((item) => {
      const symbolic = item.symbolic ?? {};
      const numeric = item.numeric ?? {};
      return html("tr", {}, [
        html("th", { scope: "row" }, [t("derivative", { name: item.variable, output: context.output })]),
        html("td", { class: "number" }, [formatNumber(item.reverse_mode)]),
        html("td", {}, [
          html("code", { class: "formula" }, [symbolic.text ?? ""]),
          html("span", { class: "sub" }, [
            `= ${formatNumber(symbolic.value)}`,
            symbolic.operations !== undefined ? ` · ${t("operations", { count: symbolic.operations })}` : "",
          ]),
        ]),
        html("td", { class: "number" }, [
          formatNumber(numeric.central),
          html("span", { class: "sub" }, [
            t("centralWith", { h: formatNumber(numeric.h) }),
            numeric.central_error !== undefined ? ` · ${t("errorOf", { error: formatNumber(numeric.central_error) })}` : "",
          ]),
        ]),
      ]);
    });
    const table = html("table", { class: "derivatives" }, [html("thead", {}, [head]), html("tbody", {}, rows)]);
    const cost = document.cost ? [html("h3", {}, [t("costHeading")]), costList(document.cost)] : [];
    const agree = document.agree === undefined ? [] : [html("p", { class: document.agree ? "agree" : "disagree" }, [t(document.agree ? "agree" : "disagree")])];
    derivatives.replaceChildren(html("div", { class: "table-frame" }, [table]), ...agree, ...cost);
  }

  // One field per input for the learner's predictions; typed answers survive a re-render, while
  // verdicts on a question since changed (another expression, other values) are taken away.
  predictFields(context) {
    const { predictFields, predictResults, predictMessage } = this.elements;
    if (predictResults.dataset.question && predictResults.dataset.question !== question(context)) {
      predictResults.replaceChildren();
      delete predictResults.dataset.question;
      say(predictMessage, null);
    }
    const typed = Object.fromEntries(
      [...predictFields.querySelectorAll("input")].map((input) => [input.name, input.value]),
    );
    const signature = [context.output, ...context.variables].join(",");
    if (predictFields.dataset.signature === signature && predictFields.dataset.lang === context.lang) return;
    predictFields.dataset.signature = signature;
    predictFields.dataset.lang = context.lang;
    predictFields.replaceChildren(
      ...context.variables.map((name) =>
        html("label", { class: "predict-field" }, [
          html("span", {}, [`${t("derivative", { name, output: context.output })} =`]),
          Object.assign(html("input", { type: "text", inputmode: "decimal", name, autocomplete: "off" }), {
            value: typed[name] ?? "",
          }),
        ]),
      ),
    );
  }

  async check(context) {
    const { predictFields, predictResults, predictMessage } = this.elements;
    const gradients = {};
    for (const input of predictFields.querySelectorAll("input")) {
      const text = input.value.trim().replace(",", ".").replace("−", "-");
      if (!text) continue;
      const number = Number(text);
      // Anything else goes as typed: the service judges each answer on its own (`1/3` is a
      // number too, `abc` is told it is not one), so one slip does not hold back the others.
      gradients[input.name] = Number.isFinite(number) ? number : input.value.trim();
    }
    if (!Object.keys(gradients).length) {
      predictResults.replaceChildren();
      predictMessage.textContent = t("nothingToCheck");
      predictMessage.classList.add("error");
      return;
    }
    // The cards show four decimals or more: an answer copied from them is right (0.3333 for 1/3).
    const tolerance = { absolute: 5e-5 };
    const reply = await api.check(context.expression, context.bindings, { gradients }, tolerance);
    if (reply.aborted) return;
    if (!reply.ok) {
      predictResults.replaceChildren();
      say(predictMessage, reply.problem, "/v1/check");
      return;
    }
    say(predictMessage, null);
    const { score, results = [] } = reply.data;
    // The items the learner answered, and the gradients left open; not the value nobody asked.
    const shown = results.filter((r) => r.verdict !== "unanswered" || r.item.startsWith("gradients."));
    const items = shown.map((result) =>
      html("li", { class: `verdict ${result.verdict}` }, [
        html("span", { class: "verdict-mark", "aria-hidden": "true" }, [
          { correct: "✓", incorrect: "✗" }[result.verdict] ?? "–",
        ]),
        html("strong", {}, [`${itemName(result.item, context.output)}: ${t(result.verdict)}`]),
        // "Correct." under "correct" says nothing new; every other verdict explains itself.
        html("span", { class: "feedback" }, [result.verdict === "correct" ? "" : (result.feedback?.message ?? "")]),
      ]),
    );
    // The service scores the answered items only: the sentence says how many that is.
    const asked = results.filter((r) => r.item.startsWith("gradients."));
    const answered = asked.filter((r) => r.verdict !== "unanswered").length;
    const open = asked.length - answered;
    const percent = `${Math.round((score ?? 0) * 100)}%`;
    const summary = html("p", { class: "score" }, [
      open ? t("scorePartial", { score: percent, answered, open }) : t("score", { score: percent }),
    ]);
    predictResults.replaceChildren(summary, html("ul", { class: "verdicts" }, items));
    predictResults.dataset.question = question(context);
  }
}

// An item of /v1/check as the page writes it: `gradients.x` is ∂f/∂x, `value` is f.
const GRADIENT_ITEM = "gradients.";
function itemName(item, output) {
  if (item.startsWith(GRADIENT_ITEM)) return t("derivative", { name: item.slice(GRADIENT_ITEM.length), output });
  return item === "value" ? output : item;
}

// What a prediction answers: the expression at its values.
function question(context) {
  return JSON.stringify([context.expression, context.bindings]);
}

// The ways as the table's columns name them.
const WAYS = { reverse_mode: "reverseMode", numeric: "numeric", symbolic: "symbolic" };

// The response's `cost`, one line per way, each count in a sentence of the page's language.
function costList(cost) {
  const entries = Object.entries(cost).map(([way, counts]) => {
    const text = Object.entries(counts).map(([name, n]) => t(`cost_${name}`, { n })).join(", ");
    return html("li", {}, [html("strong", {}, [`${t(WAYS[way])}: `]), text]);
  });
  return html("ul", { class: "cost" }, entries);
}
