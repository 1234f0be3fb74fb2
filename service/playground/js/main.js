// The playground: wires the editor, sliders, graph, timeline and panels to the page's state, and
// keeps the URL in step with it.

import { api, setLanguage as setApiLanguage } from "./api.js";
import { Editor } from "./editor.js";
import { formatNumber } from "./format.js";
import { GraphView } from "./graph.js";
import { language, setLanguage, t, translatePage } from "./i18n.js";
import { Panels } from "./panels.js";
import { Sliders } from "./sliders.js";
import { defaultRange, LANGUAGES, PRESETS, readState, writeState } from "./state.js";
import { clampStep, outputName, stepCount, viewAt } from "./timeline.js";

const PLAY_INTERVAL_MS = 1100;
const URL_WRITE_MS = 250;
// The longest link the page writes: gunicorn reads request lines of up to 4094 bytes, and a link
// longer than that would open an error instead of the page.
const URL_LIMIT = 3800;

const $ = (id) => document.getElementById(id);

const preferred = LANGUAGES.find((lang) => (navigator.language || "en").toLowerCase().startsWith(lang)) ?? "en";
const state = readState(window.location.search, preferred);
let variables = []; // the inputs of the expression that last parsed, in order of first use
let declared = null; // a program's declared defaults, by input name (null: no text read yet)
let undeclared = []; // the warning for names a declaring program reads but never defines
let evaluation = null; // the last /v1/gradients document
let shape = null; // the last /v1/graph document, with the text and granularity it is of
let playing = null; // the interval of Play, while it plays

const editor = new Editor($("expression"), document.querySelector(".editor-mirror"), $("expression-message"), (text) => {
  state.expression = text;
  state.step = 0;
  syncPreset();
  saveUrl(); // the text as typed, whether or not it parses: reloading the page keeps it
  parse();
});
const graph = new GraphView($("graph"), $("graph-frame"));
const sliders = new Sliders(
  $("sliders"),
  (name, value, typed) => {
    state.bindings[name] = value;
    if (typed) showSliders(); // the thumb follows a typed value; the range widens to hold it
    evaluate();
  },
  (name, range) => {
    state.ranges[name] = range;
    const value = state.bindings[name];
    state.bindings[name] = Math.min(range[1], Math.max(range[0], value));
    showSliders();
    evaluate();
  },
);
const panels = new Panels({
  plot: $("plot"),
  plotMessage: $("plot-message"),
  plotVariable: $("plot-variable"),
  derivatives: $("derivatives"),
  derivativesMessage: $("derivatives-message"),
  predictFields: $("predict-fields"),
  predictResults: $("predict-results"),
  predictMessage: $("predict-message"),
});

// ---- the URL ------------------------------------------------------------------------------

// The inputs whose values the URL keeps: the text's own once the service has read it; until
// then (a text being typed, a link to one that does not parse) every name the text mentions
// that has a value, so that a link keeps them through a mistake.
function urlInputs() {
  if (shape?.expression === state.expression) return variables;
  const mentioned = new Set(state.expression.match(/[A-Za-z_][A-Za-z0-9_]*/g));
  return Object.keys(state.bindings).filter((name) => mentioned.has(name));
}

let urlTimer = null;
function saveUrl() {
  clearTimeout(urlTimer);
  urlTimer = setTimeout(() => {
    let query = writeState(state, urlInputs());
    // Too long to open again: the page's own address, in the page's language, rather than a
    // link that cannot be followed.
    if (window.location.pathname.length + query.length > URL_LIMIT) query = `?lang=${state.lang}`;
    if (query !== window.location.search) window.history.replaceState(null, "", query);
  }, URL_WRITE_MS);
}

// ---- parsing and evaluating -----------------------------------------------------------------

// Inputs from /v1/graph: `inputs` with declared defaults where the service lists them, else the
// plain `variables`.
function inputsOf(structure) {
  const listed = Array.isArray(structure.inputs) ? structure.inputs : (structure.variables ?? []);
  const names = [];
  const defaults = {};
  for (const input of listed) {
    const name = typeof input === "string" ? input : input.name;
    names.push(name);
    const value = typeof input === "object" ? (input.default ?? input.value) : undefined;
    if (typeof value === "number") defaults[name] = value;
  }
  // Defaults may also come as one object by name.
  for (const [name, value] of Object.entries(structure.defaults ?? {})) {
    if (typeof value === "number" && !(name in defaults)) defaults[name] = value;
  }
  return { names, defaults };
}

async function parse() {
  const reply = await api.graph(state.expression, state.granularity);
  if (reply.aborted) return;
  if (!reply.ok) {
    showProblem(reply.problem, reply.problem.status === 422); // else the service's trouble
    return;
  }
  editor.clearProblem();
  shape = {
    graph: reply.data.graph,
    output: reply.data.output, // the output's name where the program gives it one (`cost`)
    expression: state.expression,
    granularity: state.granularity,
  };
  const before = declared; // the text read before, if any: the page opening has none
  ({ names: variables, defaults: declared } = inputsOf(reply.data));
  undeclared = undeclaredWarning(reply.data);
  // A program may declare its inputs (`x = Value(2)`): a declaration new or changed since the
  // text was last read sets its slider, as running the pasted code would; a slider moved since
  // keeps its value while the declaration stays as it was (and a link's values win when the
  // page opens). Where the service did not list the default, the first evaluation leaves the
  // input unbound and the slider takes the value the service used. Any other new input starts
  // at 1.
  const mayDeclare = /Value\s*\(/.test(state.expression);
  for (const name of variables) {
    const declaredNow = typeof declared[name] === "number";
    if (declaredNow && before !== null && before[name] !== declared[name]) {
      state.bindings[name] = declared[name];
      continue;
    }
    if (typeof state.bindings[name] === "number") continue;
    if (declaredNow) state.bindings[name] = declared[name];
    else if (!mayDeclare) state.bindings[name] = 1;
  }
  showSliders();
  evaluate();
}

// A program that declares its inputs (`x = Value(2.0)`) and reads a name it neither declares nor
// assigns: Python would stop there (a NameError), most often at a typo. Such a name gets a slider
// like any input, and a warning where it is first read.
function undeclaredWarning(structure) {
  if (!Object.keys(declared).length) return [];
  const names = variables.filter((name) => !(name in declared));
  const reads = structure.graph.nodes.filter(
    (node) => node.kind === "variable" && names.includes(node.name ?? node.label),
  );
  if (!reads.length) return [];
  const span = reads.map((node) => node.span).reduce((a, b) => (b[0] < a[0] ? b : a));
  return [{ message: t("undeclared", { names: names.join(", ") }), span }];
}

function bound(name) {
  return typeof state.bindings[name] === "number";
}

function showSliders() {
  const shown = variables.filter(bound);
  for (const name of shown) {
    const [low, high] = state.ranges[name] ?? [Infinity, -Infinity];
    if (!(state.bindings[name] >= low && state.bindings[name] <= high)) {
      state.ranges[name] = defaultRange(state.bindings[name]);
    }
  }
  sliders.render(shown, state.bindings, state.ranges);
}

// `unread`: the text itself could not be read, so no graph of it can be shown.
function showProblem(problem, unread = false) {
  const text = problem.status === 0 ? t("unreachable", { detail: problem.detail }) : problem.detail;
  editor.showProblem(text, problem.position);
  $("graph-frame").classList.add("stale");
  $("result").textContent = "";
  // Whatever the graph still shows (the last text that worked, or its shape) is greyed.
  const shown = graph.cards.length > 0;
  $("caption").textContent = shown ? t("stale") : unread ? t("noGraph") : "";
}

// The text parsed but cannot be evaluated at these inputs (1/a at a = 0): unless the graph
// already shows this text at other inputs (greyed, as a slider passes a pole), it shows the
// graph the text builds, without numbers, rather than an empty frame or another text's graph.
function showShape() {
  const current = (document) =>
    document?.expression === state.expression && document?.granularity === state.granularity;
  if (!current(shape) || current(evaluation)) return;
  evaluation = null;
  stop();
  graph.draw(shape.graph, state.expression);
  // The inputs have their values; what is computed from them has none.
  const known = (node) => (node.kind === "variable" ? state.bindings[node.name ?? node.label] : null);
  const values = shape.graph.nodes.map((node) => formatNumber(known(node)));
  const grads = shape.graph.nodes.map(() => "--");
  const none = { labels: new Map(), locals: new Map(), activeNodes: new Set(), activeEdges: new Set(), inSight: new Set() };
  graph.show({ values, grads, ...none }, { local: false });
  $("caption").textContent = t("noValues");
  transport(false); // no pass to step through
  panels.update(panelContext(), 0); // each panel says what its endpoint makes of these inputs
}

// The pass's controls, usable only while a pass is shown.
function transport(usable) {
  for (const id of ["play", "step-back", "step-forward", "timeline"]) $(id).disabled = !usable;
}

let evaluating = false;
let again = false;

// One evaluation in flight at a time; values that change meanwhile are sent when it returns,
// so a dragged slider updates the graph as fast as the service answers and never out of order.
async function evaluate() {
  saveUrl();
  if (evaluating) {
    again = true;
    return;
  }
  evaluating = true;
  try {
    await evaluateUntilCurrent();
  } finally {
    evaluating = false; // an error while drawing must not leave every later edit waiting
  }
}

async function evaluateUntilCurrent() {
  do {
    again = false;
    const expression = state.expression;
    const granularity = state.granularity;
    const bindings = Object.fromEntries(variables.filter(bound).map((n) => [n, state.bindings[n]]));
    const reply = await api.gradients(expression, bindings, granularity);
    if (expression !== state.expression || granularity !== state.granularity) continue;
    if (!reply.ok) {
      // Inputs the program did not declare after all: they start at 1, like any other.
      const unbound = variables.filter((name) => !bound(name));
      if (reply.problem.type?.endsWith("/unbound-variables") && unbound.length) {
        for (const name of unbound) state.bindings[name] = 1;
        showSliders();
        again = true;
        continue;
      }
      showProblem(reply.problem);
      if (reply.problem.status === 422) showShape(); // the inputs' fault, not the service's
      continue;
    }
    editor.showWarnings([...undeclared, ...(reply.data.warnings ?? [])]);
    evaluation = reply.data;
    const adopted = evaluation.graph.nodes.filter(
      (n) => n.kind === "variable" && variables.includes(n.name ?? n.label) && !bound(n.name ?? n.label),
    );
    for (const node of adopted) state.bindings[node.name ?? node.label] = node.value;
    if (adopted.length) showSliders();
    $("graph-frame").classList.remove("stale");
    graph.draw(evaluation.graph, expression);
    render();
    panels.update(panelContext(), again ? 400 : 150);
  } while (again);
}

function panelContext() {
  return {
    panel: state.panel,
    expression: state.expression,
    bindings: Object.fromEntries(variables.filter(bound).map((n) => [n, state.bindings[n]])),
    variables,
    output: shape?.output ?? "f", // what the panels call the output: f unless it is named
    ranges: state.ranges,
    plotName: state.plot,
    lang: language(),
  };
}

// ---- one moment of a pass -----------------------------------------------------------------

function render() {
  if (!evaluation) return;
  const count = stepCount(evaluation, state.pass);
  const step = clampStep(evaluation, state.pass, state.step);
  if (state.step !== "end" && state.step !== step) state.step = step; // `step=99` in a link
  transport(true);
  const timeline = $("timeline");
  timeline.max = String(count);
  timeline.value = String(step);
  timeline.setAttribute("aria-valuetext", t("stepCount", { n: step, total: count }));
  $("step-count").textContent = t("stepCount", { n: step, total: count });
  const view = viewAt(evaluation, state.pass, step, state.final);
  graph.show(view, { local: state.local });
  const shownValue = view.values[evaluation.graph.root];
  $("result").textContent = `${outputName(evaluation.graph)} = ${shownValue === "--" ? "?" : formatNumber(evaluation.value)}`;
  const params = { ...view.caption?.params };
  if (params.node !== undefined) params.node = graph.titleOf(params.node);
  let caption = view.caption ? t(view.caption.key, params) : "";
  if (state.final && view.caption?.key !== "backwardStartFinal") caption += ` (${t("finalShown")})`;
  $("caption").textContent = caption;
  for (const button of document.querySelectorAll("[data-pass]")) {
    button.setAttribute("aria-pressed", String(button.dataset.pass === state.pass));
  }
  $("step-back").disabled = step === 0;
  $("step-forward").disabled = step === count && state.pass === "backward";
  saveUrl();
}

function goTo(step) {
  state.step = evaluation && step >= stepCount(evaluation, state.pass) ? "end" : Math.max(0, step);
  render();
}

function currentStep() {
  return evaluation ? clampStep(evaluation, state.pass, state.step) : 0;
}

function stepForward() {
  if (!evaluation) return false;
  const count = stepCount(evaluation, state.pass);
  const step = currentStep();
  if (step < count) {
    goTo(step + 1);
    return true;
  }
  if (state.pass === "forward") {
    // The forward pass is done: the backward pass starts from its first step.
    state.pass = "backward";
    goTo(0);
    return true;
  }
  return false;
}

function stop() {
  clearInterval(playing);
  playing = null;
  $("play").textContent = t("play");
  $("play").setAttribute("aria-pressed", "false");
}

function play() {
  if (playing) {
    stop();
    return;
  }
  if (!evaluation) return;
  if (state.pass === "backward" && currentStep() === stepCount(evaluation, "backward")) goTo(0);
  playing = setInterval(() => {
    if (!stepForward()) stop();
  }, PLAY_INTERVAL_MS);
  $("play").textContent = t("pause");
  $("play").setAttribute("aria-pressed", "true");
  stepForward();
}

// ---- controls -----------------------------------------------------------------------------

function syncPreset() {
  // `(a+b)*c` in a shared link is the lesson's `(a + b) * c`: spacing does not make it another
  const bare = (text) => text.replace(/[ \t]+/g, "");
  const index = PRESETS.findIndex((preset) => bare(preset.expression) === bare(state.expression));
  $("preset").value = index >= 0 ? PRESETS[index].id : "custom";
}

function renderPresets() {
  const select = $("preset");
  const options = [...PRESETS.map((preset) => preset.id), "custom"].map((id) => {
    const option = document.createElement("option");
    option.value = id;
    option.textContent = t(`preset_${id}`);
    option.disabled = id === "custom";
    return option;
  });
  select.replaceChildren(...options);
  syncPreset();
}

function applyLanguage(lang) {
  state.lang = lang;
  setLanguage(lang);
  setApiLanguage(lang);
  translatePage();
  $("expression").setAttribute("aria-label", t("expressionLabel"));
  for (const button of document.querySelectorAll("[data-lang]")) {
    button.setAttribute("aria-pressed", String(button.dataset.lang === lang));
  }
  $("play").textContent = t(playing ? "pause" : "play");
  $("legend").textContent = t("legend");
  $("legend-keys").textContent = t("legendKeys");
  renderPresets();
  sliders.relabel();
  // Verdicts already given are given again, in the new language.
  if ($("predict-results").childElementCount) panels.check(panelContext());
  if (evaluation) {
    graph.redraw(); // the cards' tags name inputs in the language
    render();
  }
}

function selectPanel(panel, focus = false) {
  state.panel = panel;
  for (const tab of document.querySelectorAll("[role=tab]")) {
    const selected = tab.dataset.panel === panel;
    tab.setAttribute("aria-selected", String(selected));
    tab.tabIndex = selected ? 0 : -1;
    if (selected && focus) tab.focus();
    $(tab.getAttribute("aria-controls")).hidden = !selected;
  }
  if (evaluation) panels.update(panelContext(), 0);
  saveUrl();
}

$("preset").addEventListener("change", (event) => {
  const preset = PRESETS.find((p) => p.id === event.target.value);
  if (!preset) return;
  stop();
  state.expression = preset.expression;
  state.bindings = { ...preset.bindings };
  state.ranges = {};
  state.step = 0;
  editor.value = preset.expression;
  $("predict-results").replaceChildren();
  parse();
});

for (const button of document.querySelectorAll("[data-granularity]")) {
  button.addEventListener("click", () => {
    state.granularity = button.dataset.granularity;
    for (const other of document.querySelectorAll("[data-granularity]")) {
      other.setAttribute("aria-pressed", String(other === button));
    }
    parse();
  });
}

for (const button of document.querySelectorAll("[data-pass]")) {
  button.addEventListener("click", () => {
    stop();
    state.pass = button.dataset.pass;
    state.step = 0; // switching passes restarts the pulse from the beginning
    render();
  });
}

for (const button of document.querySelectorAll("[data-lang]")) {
  button.addEventListener("click", () => {
    applyLanguage(button.dataset.lang);
    parse(); // the service's problems and feedback come back in the new language
    saveUrl();
  });
}

$("local").addEventListener("change", (event) => {
  state.local = event.target.checked;
  render();
});
$("final").addEventListener("change", (event) => {
  state.final = event.target.checked;
  render();
});
$("play").addEventListener("click", play);
$("step-forward").addEventListener("click", () => {
  stop();
  stepForward();
});
$("step-back").addEventListener("click", () => {
  stop();
  goTo(currentStep() - 1);
});
$("timeline").addEventListener("input", (event) => {
  stop();
  goTo(Number(event.target.value));
});

const tabs = [...document.querySelectorAll("[role=tab]")];
for (const tab of tabs) {
  tab.addEventListener("click", () => selectPanel(tab.dataset.panel));
  tab.addEventListener("keydown", (event) => {
    const index = tabs.indexOf(tab);
    const to = { ArrowRight: index + 1, ArrowLeft: index - 1, Home: 0, End: tabs.length - 1 }[event.key];
    if (to === undefined) return;
    event.preventDefault(); // Home and End would scroll the page
    selectPanel(tabs[(to + tabs.length) % tabs.length].dataset.panel, true);
  });
}
$("plot-variable").addEventListener("change", (event) => {
  state.plot = event.target.value;
  panels.update(panelContext(), 0);
  saveUrl();
});
$("predict-form").addEventListener("submit", (event) => {
  event.preventDefault();
  panels.check(panelContext());
});

// Shortcuts while no field has the keyboard: ← and → step, space plays or pauses. On a button
// or a checkbox just clicked (Play, Backward, final gradients) the arrows step too, as they
// mean nothing there; space is the control's own, and the panels' tabs keep their arrows.
document.addEventListener("keydown", (event) => {
  if (event.altKey || event.ctrlKey || event.metaKey) return;
  const target = event.target;
  const onControl =
    (target instanceof HTMLButtonElement && target.getAttribute("role") !== "tab") ||
    (target instanceof HTMLInputElement && target.type === "checkbox");
  if (target !== document.body && !(onControl && event.key !== " ")) return;
  const actions = {
    ArrowRight: () => $("step-forward").click(),
    ArrowLeft: () => $("step-back").click(),
    " ": play,
  };
  if (!actions[event.key]) return;
  event.preventDefault();
  actions[event.key]();
});

// ---- start --------------------------------------------------------------------------------

applyLanguage(state.lang);
editor.value = state.expression;
$("local").checked = state.local;
$("final").checked = state.final;
for (const button of document.querySelectorAll("[data-granularity]")) {
  button.setAttribute("aria-pressed", String(button.dataset.granularity === state.granularity));
}
selectPanel(state.panel);
parse();
