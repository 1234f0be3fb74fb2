// One slider per input, with a number box for exact values and an adjustable range.

import { formatNumber } from "./format.js";
import { t } from "./i18n.js";

const STEPS = 200; // positions across a slider's range

function stepFor([low, high]) {
  const raw = (high - low) / STEPS;
  const power = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw * 0.999) ?? raw;
}

function field(tag, attributes) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  return node;
}

export class Sliders {
  constructor(container, onValue, onRange) {
    this.container = container;
    this.onValue = onValue;
    this.onRange = onRange;
    this.rows = new Map();
  }

  // Rebuilt only when the inputs change; otherwise the values move under the user's hand.
  render(names, bindings, ranges) {
    const signature = names.join("\n");
    if (signature !== this.signature) {
      this.signature = signature;
      this.rows = new Map();
      this.container.replaceChildren(...names.map((name, index) => this.row(name, index)));
      if (!names.length) {
        const empty = document.createElement("p");
        empty.className = "hint";
        empty.textContent = t("noInputs");
        this.container.append(empty);
      }
    }
    for (const name of names) this.set(name, bindings[name], ranges[name]);
  }

  relabel() {
    for (const [name, row] of this.rows) {
      row.slider.setAttribute("aria-label", t("sliderOf", { name }));
      row.number.setAttribute("aria-label", t("sliderOf", { name }));
      row.low.setAttribute("aria-label", `${t("rangeOf", { name })}: ${t("rangeFrom")}`);
      row.high.setAttribute("aria-label", `${t("rangeOf", { name })}: ${t("rangeTo")}`);
      row.from.textContent = t("rangeFrom");
      row.to.textContent = t("rangeTo");
    }
  }

  row(name, index) {
    const id = `input-${index}`;
    const box = document.createElement("div");
    box.className = "slider";
    const head = document.createElement("div");
    head.className = "slider-head";
    const label = field("label", { for: id, class: "slider-name" });
    label.textContent = name;
    const number = field("input", { type: "number", step: "any", class: "slider-number", inputmode: "decimal" });
    head.append(label, number);
    const slider = field("input", { type: "range", id, class: "slider-range" });
    // The range's ends sit at the slider's ends: "from [-10] ——o—— [10] to" reads as it works.
    const bounds = document.createElement("div");
    bounds.className = "slider-bounds";
    const from = field("span", { class: "visually-hidden" });
    const to = field("span", { class: "visually-hidden" });
    const low = field("input", { type: "number", step: "any", class: "bound" });
    const high = field("input", { type: "number", step: "any", class: "bound" });
    bounds.append(from, low, slider, to, high);
    box.append(head, bounds);
    const row = { slider, number, low, high, from, to };
    this.rows.set(name, row);

    slider.addEventListener("input", () => {
      const value = Number(slider.value);
      number.value = formatNumber(value);
      this.onValue(name, value);
    });
    number.addEventListener("change", () => {
      const value = Number(number.value);
      if (number.value.trim() === "" || !Number.isFinite(value)) return;
      this.onValue(name, value, true);
    });
    const changeRange = () => {
      const range = [Number(low.value), Number(high.value)];
      if (range.every(Number.isFinite) && range[0] < range[1]) {
        this.onRange(name, range);
      } else {
        // a reversed or empty range is not taken: the boxes show the range in force again
        [low.value, high.value] = row.range.map(String);
      }
    };
    low.addEventListener("change", changeRange);
    high.addEventListener("change", changeRange);
    this.relabel();
    return box;
  }

  set(name, value, range) {
    const row = this.rows.get(name);
    if (!row) return;
    row.range = range;
    const step = stepFor(range);
    row.slider.min = String(range[0]);
    row.slider.max = String(range[1]);
    row.slider.step = String(step);
    row.slider.value = String(value);
    row.slider.setAttribute("aria-valuetext", `${name} = ${formatNumber(value)}`);
    if (document.activeElement !== row.number) row.number.value = String(value);
    if (document.activeElement !== row.low) row.low.value = String(range[0]);
    if (document.activeElement !== row.high) row.high.value = String(range[1]);
  }
}
