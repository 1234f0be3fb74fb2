// The page's whole state, and how it is read from and written to the URL, so that a teacher
// shares a link rather than instructions: /?expression=(a%2Bb)*c&a=2&b=-3&c=10&step=end&lang=ru

export const LANGUAGES = ["en", "ru", "et"];
export const PANELS = ["predict", "plot", "derivatives"];

const SHIPPING = `base_fee = Value(50.0)          # base delivery fee
weight = Value(3.0)             # parcel weight, kg
distance = Value(12.0)          # distance, km
discount = Value(-8.0)          # seasonal discount
weight_fee = weight * 15.0
distance_fee = distance * 2.0
raw_cost = base_fee + weight_fee + distance_fee + discount
cost = raw_cost.relu()`;

const SANITY_CHECK = `x = Value(-4.0)
z = 2 * x + 2 + x
q = z.relu() + z * x
h = (z * z).relu()
y = h + q + q * x
y.backward()`;

// The lessons' presets; a program's inputs take their declared defaults unless bound here.
export const PRESETS = [
  { id: "lesson", expression: "(a + b) * c", bindings: { a: 2, b: -3, c: 10 } },
  { id: "relu", expression: "relu(a * b)", bindings: { a: 2, b: -3 } }, // dead: a * b < 0
  { id: "square", expression: "a * a", bindings: { a: 3 } },
  { id: "shipping", expression: SHIPPING, bindings: {} },
  { id: "sanity", expression: SANITY_CHECK, bindings: {} },
];

export const DEFAULTS = Object.freeze({
  expression: PRESETS[0].expression,
  granularity: "operator",
  pass: "backward",
  step: 0,
  local: false,
  final: false,
  lang: "en",
  panel: "predict",
  plot: null,
});

// Query keys the page itself uses; a variable with one of these names is written `var.<name>`.
const RESERVED = new Set([...Object.keys(DEFAULTS), "range"]);

function bindingKey(name) {
  return RESERVED.has(name) ? `var.${name}` : name;
}

function parseNumber(text) {
  if (text === null || text.trim() === "") return null;
  const number = Number(text);
  return Number.isFinite(number) ? number : null;
}

function parseStep(text) {
  if (text === "end") return "end";
  const number = Number.parseInt(text ?? "", 10);
  return Number.isFinite(number) && number >= 0 ? number : DEFAULTS.step;
}

// The state a URL describes. Bindings and ranges are kept by name for every name the URL gives:
// which of them are variables is known only once the service has parsed the expression.
export function readState(search, preferredLanguage = "en") {
  const params = new URLSearchParams(search);
  const given = (key) => params.get(key);
  const lang = LANGUAGES.includes(given("lang")) ? given("lang") : preferredLanguage;
  const bindings = {};
  const ranges = {};
  for (const [key, text] of params) {
    const name = key.startsWith("var.") ? key.slice(4) : key;
    if (key.startsWith("range.")) {
      const [low, high] = text.split(",").map(parseNumber);
      if (low !== null && high !== null && low < high) ranges[key.slice(6)] = [low, high];
    } else if (!RESERVED.has(key) || key.startsWith("var.")) {
      const number = parseNumber(text);
      if (number !== null) bindings[name] = number;
    }
  }
  return {
    expression: given("expression") ?? DEFAULTS.expression,
    bindings: given("expression") === null ? { ...PRESETS[0].bindings, ...bindings } : bindings,
    ranges,
    granularity: given("granularity") === "primitive" ? "primitive" : DEFAULTS.granularity,
    pass: given("pass") === "forward" ? "forward" : DEFAULTS.pass,
    step: parseStep(given("step")),
    local: given("local") === "1",
    final: given("final") === "1",
    lang,
    panel: PANELS.includes(given("panel")) ? given("panel") : DEFAULTS.panel,
    plot: given("plot"),
  };
}

// The query string for a state; only the variables the expression has are written.
export function writeState(state, variables) {
  const params = new URLSearchParams();
  params.set("expression", state.expression);
  for (const name of variables) {
    if (name in state.bindings) params.set(bindingKey(name), String(state.bindings[name]));
  }
  for (const name of variables) {
    if (state.ranges[name]) params.set(`range.${name}`, state.ranges[name].join(","));
  }
  if (state.granularity !== DEFAULTS.granularity) params.set("granularity", state.granularity);
  if (state.pass !== DEFAULTS.pass) params.set("pass", state.pass);
  if (state.step !== DEFAULTS.step) params.set("step", String(state.step));
  if (state.local) params.set("local", "1");
  if (state.final) params.set("final", "1");
  if (state.panel !== DEFAULTS.panel) params.set("panel", state.panel);
  if (state.plot && variables.includes(state.plot)) params.set("plot", state.plot);
  if (state.lang !== DEFAULTS.lang) params.set("lang", state.lang);
  return `?${params.toString()}`;
}

// A slider's range when the URL does not give one: symmetric around zero, wide enough for the
// value with room to move it either way.
export function defaultRange(value) {
  const magnitude = Math.abs(value);
  if (magnitude <= 5) return [-10, 10];
  const top = 10 ** Math.ceil(Math.log10(magnitude * 2));
  const half = top / 2 >= magnitude * 1.5 ? top / 2 : top;
  return [-half, half];
}
