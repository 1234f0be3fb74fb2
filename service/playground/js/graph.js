// The computation graph in SVG, left to right: inputs on the left, the output furthest right,
// each node a card (name or operation, value, grad), each edge a curve into its own port so
// that merging branches visibly merge. `draw` lays out a structure; `show` fills in numbers.

import { edgeLabel } from "./format.js";
import { language, t } from "./i18n.js";

const SVG = "http://www.w3.org/2000/svg";
const CARD_W = 124;
// Where a card's number may start: clear of its "value" and "grad" words. A longer number is
// drawn narrower to fit rather than over them.
const NUMBER_LEFT = 48;
const NUMBER_CHAR = 8.4; // width of one character of a card's number
const EXPANSION_CHAR = 6.9; // and of a derived node's expansion under it
const CARD_H = 66;
const HEAD_H = 22;
const EXPANSION_BASELINE = CARD_H + 16; // a derived node's expansion, written under its card
// Columns are as far apart as the longest edge label needs, within bounds.
const COLUMN_GAP = { min: 220, max: 300 };
const LABEL_CHAR = 7.1; // width of one character of an edge label
const LABEL_H = 20; // a label's box, one line high
const LABEL_LINE = 14; // from one line of a label written on two to the next
const LABEL_CLEARANCE = 22; // between a label's text and the cards either side of it, together
const LABEL_SPACE = 3; // between two labels in one gap, one above the other
const ROW_GAP = 96;
const PAD = 16;
const MIN_SCALE = 0.75; // below this the cards' text is too small; the frame scrolls instead
const MAX_SCALE = 1.3; // a small graph is drawn larger, for the back of the classroom
const MAX_HEIGHT = 440; // pixels a graph may grow to before it stops growing with the width
const SWEEPS = 4; // barycentre passes that order each column by its neighbours

function element(name, attributes = {}, parent = null) {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  if (parent) parent.append(node);
  return node;
}

export function edgeKey(parent, index) {
  return `${parent}:${index}`;
}

// Columns: variables at 0, each operation one right of its furthest operand, each constant just
// left of the first node that uses it (so `x * 2` does not draw its 2 from the far left).
function columns(nodes) {
  const column = new Array(nodes.length).fill(0);
  const parents = nodes.map(() => []);
  for (const node of nodes) {
    for (const child of node.children) parents[child].push(node.id);
  }
  for (const node of nodes) {
    if (node.kind !== "operation") continue;
    const operands = node.children.filter((c) => nodes[c].kind !== "constant");
    column[node.id] = 1 + Math.max(0, ...operands.map((c) => column[c]));
  }
  for (const node of nodes) {
    if (node.kind === "constant" && parents[node.id].length) {
      column[node.id] = Math.max(0, Math.min(...parents[node.id].map((p) => column[p])) - 1);
    }
  }
  return { column, parents };
}

// The widest `incoming × local = contribution` the finished pass writes between two columns.
function columnGap(graph) {
  let longest = 0;
  for (const node of graph.nodes) {
    node.children.forEach((_, index) => {
      if (node.grad === undefined) return;
      const local = node.local_grads[index];
      longest = Math.max(longest, edgeLabel(node.grad, local, node.grad * local).length);
    });
  }
  const wanted = CARD_W + LABEL_CLEARANCE + longest * LABEL_CHAR;
  return Math.min(COLUMN_GAP.max, Math.max(COLUMN_GAP.min, wanted));
}

// A label as it is written between two columns `gap` apart: on one line where it fits; else,
// past the widest gap, `= contribution` under the product, and the product's factors on a line
// each where even the product is too wide (huge numbers). Each line but the last keeps its
// space, so the lines read together are the label.
function labelLines(label, gap) {
  const fits = (text) => CARD_W + LABEL_CLEARANCE + text.length * LABEL_CHAR <= gap;
  const equals = label.indexOf(" = ");
  if (fits(label) || equals < 0) return [label];
  const product = label.slice(0, equals + 1);
  const times = product.indexOf(" × ");
  const factors = fits(product) || times < 0 ? [product] : [product.slice(0, times + 3), product.slice(times + 3)];
  return [...factors, label.slice(equals + 1)];
}

// An edge that skips columns passes through each column between its ends at a waypoint, laid
// out with the cards (the layered drawing's usual dummy nodes), so it runs between cards, never
// under one. The edges out of one node share its waypoints, one per column: a trunk they leave
// where they reach their operations, as an input read at every step of a loop's unrolling is.
// Vertical room, top to top: a card needs ROW_GAP below another; an edge's line, drawn at its
// waypoint's centre, keeps clear of a card's foot (and the expansion under it).
const WAYPOINT_ROOM = { cardToWay: 72, wayToCard: 50, wayToWay: 14 };
// A long chain fed from its start skips ever more columns (a sum of n products, each from the
// second column, or an input read at each of n steps, skips some n²/2), and each edge's curve
// passes all its waypoints: past this many in all, edges are drawn straight instead.
const MAX_ROUTE_POINTS = 5000;

function room(upper, lower, isWaypoint) {
  if (isWaypoint(upper)) return isWaypoint(lower) ? WAYPOINT_ROOM.wayToWay : WAYPOINT_ROOM.wayToCard;
  return isWaypoint(lower) ? WAYPOINT_ROOM.cardToWay : ROW_GAP;
}

// The positions of the cards, `gap` apart in columns, and the waypoints of each edge that skips
// columns (`routes`, by edge key).
export function layout(graph, gap) {
  const nodes = graph.nodes;
  const { column, parents } = columns(nodes);
  // Items are the nodes' ids, then a waypoint for each column an edge skips. `left` and `right`
  // are each item's neighbours: in the columns beside it, or, without waypoints, its operands
  // and the operations that use it.
  const passed = nodes.reduce(
    (sum, node) => sum + node.children.reduce((s, child) => s + Math.max(0, column[node.id] - column[child] - 1), 0),
    0,
  );
  const routed = passed <= MAX_ROUTE_POINTS;
  const left = routed
    ? nodes.map((node) => node.children.filter((child) => column[child] === column[node.id] - 1))
    : nodes.map((node) => node.children);
  const right = routed ? nodes.map(() => []) : parents;
  // Each node's trunk runs to the column before its furthest operation.
  const reach = [...column];
  for (const node of routed ? nodes : []) {
    for (const child of node.children) reach[child] = Math.max(reach[child], column[node.id] - 1);
  }
  const itemColumn = [...column];
  const trunks = nodes.map(() => []); // each node's waypoints, left to right
  for (const node of routed ? nodes : []) {
    let previous = node.id;
    for (let c = column[node.id] + 1; c <= reach[node.id]; c += 1) {
      const item = itemColumn.length;
      itemColumn.push(c);
      left.push([previous]);
      right.push([]);
      right[previous].push(item);
      trunks[node.id].push(item);
      previous = item;
    }
  }
  const waypoints = new Map(); // edge key -> the waypoints it passes, left to right
  for (const node of routed ? nodes : []) {
    node.children.forEach((child, index) => {
      const items = trunks[child].slice(0, column[node.id] - column[child] - 1);
      const last = items.length ? items[items.length - 1] : child;
      if (items.length) {
        waypoints.set(edgeKey(node.id, index), items);
        left[node.id].push(last);
      }
      right[last].push(node.id);
    });
  }
  const isWaypoint = (item) => item >= nodes.length;
  const width = Math.max(...column) + 1;
  const byColumn = Array.from({ length: width }, () => []);
  itemColumn.forEach((c, item) => byColumn[c].push(item));
  const rank = new Array(itemColumn.length).fill(0);
  // Only the column just ordered moves: placing every column after each would make the sweeps
  // quadratic in a long chain's length.
  const place = (ids) => ids.forEach((id, i) => (rank[id] = i - (ids.length - 1) / 2));
  byColumn.forEach(place);
  const centre = (ids) => ids.reduce((sum, id) => sum + rank[id], 0) / ids.length;
  const order = (ids, neighbours) => {
    const keyed = ids.map((id, i) => {
      const around = neighbours[id];
      return [around.length ? centre(around) : rank[id], i, id];
    });
    keyed.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
    return keyed.map((entry) => entry[2]);
  };
  for (let sweep = 0; sweep < SWEEPS; sweep += 1) {
    for (let c = 1; c < width; c += 1) {
      byColumn[c] = order(byColumn[c], left);
      place(byColumn[c]);
    }
    for (let c = width - 2; c >= 0; c -= 1) {
      byColumn[c] = order(byColumn[c], right);
      place(byColumn[c]);
    }
  }
  // Heights: the first column evenly spaced; each item level with the middle of its neighbours
  // on the left, so two branches visibly meet in an operation and an edge runs straight where
  // it can, then pushed apart to keep each pair's room, order kept.
  const y = rank.map((r) => r * ROW_GAP);
  for (let c = 1; c < width; c += 1) {
    const ids = byColumn[c];
    const wanted = ids.map((id) =>
      left[id].length ? left[id].reduce((sum, item) => sum + y[item], 0) / left[id].length : y[id],
    );
    const placed = [];
    wanted.forEach((w, i) =>
      placed.push(i === 0 ? w : Math.max(w, placed[i - 1] + room(ids[i - 1], ids[i], isWaypoint))),
    );
    const shift = wanted.reduce((sum, w, i) => sum + (w - placed[i]), 0) / ids.length;
    ids.forEach((id, i) => (y[id] = placed[i] + shift));
  }
  const position = nodes.map((node) => ({ x: column[node.id] * gap, y: y[node.id] }));
  // Where each skipping edge crosses the columns between its ends: the line's height there.
  const routes = new Map();
  for (const [key, items] of waypoints) {
    routes.set(key, items.map((item) => ({ x: itemColumn[item] * gap, y: y[item] + CARD_H / 2 })));
  }
  return { position, gap, routes };
}

// The point of a cubic Bézier at parameter t.
function bezier(p0, p1, p2, p3, t) {
  const u = 1 - t;
  return u * u * u * p0 + 3 * u * u * t * p1 + 3 * u * t * t * p2 + t * t * t * p3;
}

// Where each edge leaves its child and enters its parent: one port per edge on each side,
// ordered by the height the edge comes from or goes to (the other end, or the edge's nearest
// waypoint), so `a * a` draws two distinct arrows and edges do not cross at a card.
function ports(nodes, position, routes) {
  const enter = new Map();
  const leave = new Map();
  const middle = (id) => position[id].y + CARD_H / 2;
  const from = (parent, index, child) => routes.get(edgeKey(parent, index))?.at(-1).y ?? middle(child);
  const to = (parent, index) => routes.get(edgeKey(parent, index))?.[0].y ?? middle(parent);
  for (const node of nodes) {
    const order = node.children
      .map((child, index) => ({ child, index, y: from(node.id, index, child) }))
      .sort((p, q) => p.y - q.y || p.index - q.index);
    order.forEach(({ index }, slot) => {
      enter.set(edgeKey(node.id, index), (CARD_H * (slot + 1)) / (order.length + 1));
    });
  }
  const outgoing = nodes.map(() => []);
  for (const node of nodes) {
    node.children.forEach((child, index) => outgoing[child].push({ parent: node.id, index }));
  }
  outgoing.forEach((edges) => {
    edges.sort((p, q) => to(p.parent, p.index) - to(q.parent, q.index) || p.index - q.index);
    edges.forEach(({ parent, index }, slot) => {
      leave.set(edgeKey(parent, index), (CARD_H * (slot + 1)) / (edges.length + 1));
    });
  });
  return { enter, leave };
}

// A card's head: its title from the left, its corner tag at the right, each as wide as its
// characters (the title's 13-pixel monospace, the tag's 10-pixel italics).
const TITLE_CHAR = 7.85;
const TAG_CHAR = 5.2;
const HEAD_ROOM = CARD_W - 18; // from the title's start to the tag's end
const HEAD_GAP = 3; // between the two
const MAX_TITLE_SOURCE = 200; // code points of source text a title is looked for in

// The room a corner tag takes from the title, with the gap between them.
function tagWidth(tagText) {
  return tagText ? HEAD_GAP + tagText.length * TAG_CHAR : 0;
}

function headFits(titleText, tagText) {
  return titleText.length * TITLE_CHAR + tagWidth(tagText) <= HEAD_ROOM;
}

// A card's title: the node's name, else the source text it stands for (as the lessons say
// "(a+b)"), else its operator. `characters` is the source's code points, as spans count them.
function title(node, characters, owner) {
  if (node.name) return node.name;
  // In the primitive view `a / b` is `a * b**-1`, both with the division's text: it titles
  // the node that computes it, the last; `b**-1` is titled by its operator.
  if (node.kind !== "operation" || !node.span || owner.get(String(node.span)) !== node.id) {
    return node.label;
  }
  // Text far longer than a head holds cannot fit, even with its runs of space made one: not
  // copied, as a long chain's nodes each span all the text before them.
  if (node.span[1] - node.span[0] > MAX_TITLE_SOURCE) return node.label;
  const text = characters.slice(node.span[0], node.span[1]).join("").replace(/\s+/g, " ");
  // Text across statements (it holds `=`), no text at all or text too long for the head says
  // less than the operator.
  const readable = text.trim() !== "" && headFits(text, node.derived ? "derived" : "") && !text.includes("=");
  return readable ? text : node.label;
}

// The corner tag: what kind of leaf, whether an operation is derived, or which operation it is
// when the title does not already show it. A leaf's tag gives way to a long name (the head's
// colour says what kind of leaf it is); "derived" never does, and the title is shortened instead.
// "const" and "derived", like the cards' "value" and "grad", are the lessons' own English terms in
// every language; an input is named in the page's language, as the lessons speak of it.
function tag(node, titleText) {
  if (node.derived) return "derived";
  const word = node.kind === "constant" ? "const" : node.kind === "variable" ? t("variable") : null;
  if (word !== null) return headFits(titleText, word) ? word : "";
  const op = node.op === "**" && node.exponent !== null ? `**${node.exponent}` : node.label;
  return titleText !== op && headFits(titleText, op) ? op : "";
}

// The title as the head shows it beside `tagText`: a name too long for it ends in "…" (the
// card's description, which a pointer or a screen reader reads, has it whole).
function shown(titleText, tagText) {
  if (headFits(titleText, tagText)) return titleText;
  const characters = Math.floor((HEAD_ROOM - tagWidth(tagText)) / TITLE_CHAR) - 1;
  return `${Array.from(titleText).slice(0, characters).join("")}…`;
}

// A card's number, squeezed into its room when it is too long for it.
function fitNumber(text, number) {
  text.textContent = number;
  const room = CARD_W - 10 - NUMBER_LEFT;
  if (number.length * NUMBER_CHAR > room) {
    text.setAttribute("textLength", String(room));
    text.setAttribute("lengthAdjust", "spacingAndGlyphs");
  } else {
    text.removeAttribute("textLength");
  }
}

// A label's text: one line as the text itself, more as lines centred on the label's middle.
function writeLines(text, lines) {
  if (lines.length === 1) {
    text.textContent = lines[0];
    return;
  }
  text.replaceChildren(
    ...lines.map((line, i) => {
      const y = 4 + LABEL_LINE * (i - (lines.length - 1) / 2);
      const span = element("tspan", { x: "0", y: String(y) });
      span.textContent = line;
      return span;
    }),
  );
}

export class GraphView {
  constructor(svg, frame) {
    this.svg = svg;
    this.frame = frame;
    this.signature = null;
    this.graph = null;
    this.source = ""; // the text the graph was drawn from
    this.followed = null; // the moment whose nodes `follow` last brought into sight
    this.gap = 0;
    this.cards = [];
    this.edges = new Map();
    this.size = { width: 0, height: 0 };
    new ResizeObserver(() => this.fit()).observe(frame);
  }

  // Lays the graph out again only when its structure changed, or its edge labels have grown
  // wider than the columns' gap leaves room for (a slider moved to larger values), so a moving
  // slider mostly just updates the numbers in place.
  draw(graph, source) {
    const signature = JSON.stringify([
      source,
      language(), // the cards' tags are words of the page's language
      graph.nodes.map((n) => [n.kind, n.op, n.label, n.children, n.name ?? null, n.expansion]),
    ]);
    const wanted = columnGap(graph);
    const same = signature === this.signature;
    if (same && wanted <= this.gap) return false;
    this.signature = signature;
    this.graph = graph;
    this.source = source;
    this.followed = null;
    this.gap = same ? Math.max(wanted, this.gap) : wanted; // never narrower while a slider moves
    const { position, gap, routes } = layout(graph, this.gap);
    const { enter, leave } = ports(graph.nodes, position, routes);
    const svg = this.svg;
    svg.replaceChildren();
    const defs = element("defs", {}, svg);
    for (const [id, cls] of [["arrow-forward", "forward"], ["arrow-backward", "backward"]]) {
      const marker = element(
        "marker",
        { id, viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" },
        defs,
      );
      element("path", { d: "M 0 0 L 10 5 L 0 10 z", class: `arrowhead ${cls}` }, marker);
    }
    const edgeLayer = element("g", { class: "edges" }, svg);
    const nodeLayer = element("g", { class: "nodes" }, svg);
    const labelLayer = element("g", { class: "edge-labels" }, svg); // on top: always readable

    this.edges = new Map();
    for (const node of graph.nodes) {
      node.children.forEach((child, index) => {
        const key = edgeKey(node.id, index);
        // A curve from the child to the parent, through the edge's waypoints: across each
        // column it skips straight, between the cards there.
        let x1 = position[child].x + CARD_W;
        let y1 = position[child].y + leave.get(key);
        const x2 = position[node.id].x;
        const y2 = position[node.id].y + enter.get(key);
        let d = `M ${x1} ${y1}`;
        for (const point of routes.get(key) ?? []) {
          const bend = Math.max(40, (point.x - x1) / 2);
          d += ` C ${x1 + bend} ${y1}, ${point.x - bend} ${point.y}, ${point.x} ${point.y} H ${point.x + CARD_W}`;
          [x1, y1] = [point.x + CARD_W, point.y];
        }
        const bend = Math.max(40, (x2 - x1) / 2);
        d += ` C ${x1 + bend} ${y1}, ${x2 - bend} ${y2}, ${x2 - 2} ${y2}`;
        const group = element("g", { class: "edge", "data-edge": key }, edgeLayer);
        const path = element("path", { d, class: "edge-path" }, group);
        // The label sits where the curve crosses the middle of the gap just left of the parent,
        // on its last piece: the curve's midpoint between neighbouring columns. x grows along
        // the curve, so bisection finds the point.
        const targetX = x2 - (gap - CARD_W) / 2;
        const xs = [x1, x1 + bend, x2 - bend, x2 - 2];
        let low = 0;
        let high = 1;
        for (let i = 0; i < 24; i += 1) {
          const mid = (low + high) / 2;
          if (bezier(...xs, mid) < targetX) low = mid;
          else high = mid;
        }
        const mx = bezier(...xs, low);
        const my = bezier(y1, y1, y2, y2, low);
        const label = element("g", { class: "edge-label", transform: `translate(${mx} ${my})` }, labelLayer);
        const box = element("rect", { x: "0", y: String(-LABEL_H / 2), width: "0", height: String(LABEL_H), rx: "4" }, label);
        const text = element("text", { x: "0", y: "4", "text-anchor": "middle" }, label);
        // `column`: the parent's, left of which is the gap the label is in; `y`: where the
        // curve crosses that gap, and `placed`: where the label is, moved from there.
        const edge = { group, path, label, box, text, shown: null, width: 0, height: LABEL_H };
        this.edges.set(key, { ...edge, column: x2, x: mx, y: my, placed: my });
      });
    }

    const owner = new Map(graph.nodes.filter((n) => n.span).map((n) => [String(n.span), n.id]));
    const characters = Array.from(source); // once: each card's title is a slice of it
    this.cards = graph.nodes.map((node) => {
      const { x, y } = position[node.id];
      const classes = ["node", node.kind];
      if (node.id === graph.root) classes.push("root");
      if (node.derived) classes.push("derived");
      const group = element("g", { class: classes.join(" "), transform: `translate(${x} ${y})`, "data-node": String(node.id) }, nodeLayer);
      element("rect", { class: "card", width: CARD_W, height: CARD_H, rx: "8" }, group);
      element("path", { class: "card-head", d: `M 0 8 a 8 8 0 0 1 8 -8 h ${CARD_W - 16} a 8 8 0 0 1 8 8 v ${HEAD_H - 8} h ${-CARD_W} z` }, group);
      const name = element("text", { class: "card-title", x: "10", y: "15.5" }, group);
      const full = title(node, characters, owner);
      const badge = element("text", { class: "card-tag", x: String(CARD_W - 8), y: "15", "text-anchor": "end" }, group);
      badge.textContent = tag(node, full);
      name.textContent = shown(full, badge.textContent);
      const valueKey = element("text", { class: "card-key", x: "10", y: "40" }, group);
      valueKey.textContent = "value";
      const value = element("text", { class: "card-value", x: String(CARD_W - 10), y: "40", "text-anchor": "end" }, group);
      const gradKey = element("text", { class: "card-key grad", x: "10", y: "58" }, group);
      gradKey.textContent = "grad";
      const grad = element("text", { class: "card-grad", x: String(CARD_W - 10), y: "58", "text-anchor": "end" }, group);
      const expansion = element("text", { class: "card-expansion", x: String(CARD_W / 2), y: String(EXPANSION_BASELINE), "text-anchor": "middle" }, group);
      expansion.textContent = node.expansion ? `= ${node.expansion}` : "";
      const description = element("title", {}, group);
      return { node, group, value, grad, expansion, description, title: full };
    });
    // Where each derived node's expansion is written, under its card and centred on it: it may
    // be wider than the card and reach into the gaps either side, where the labels are.
    this.expansions = graph.nodes.filter((n) => n.expansion).map((node) => {
      const { x, y } = position[node.id];
      const half = ((node.expansion.length + 2) * EXPANSION_CHAR) / 2;
      const centre = x + CARD_W / 2;
      // its 11.5-pixel letters reach about 11 pixels above the baseline and 4 below
      return { left: centre - half, right: centre + half, top: y + EXPANSION_BASELINE - 11, bottom: y + EXPANSION_BASELINE + 4 };
    });

    // Extremes by reduce, not by spreading thousands of numbers as arguments (the stack's limit).
    const least = (numbers) => numbers.reduce((a, b) => Math.min(a, b), Infinity);
    const most = (numbers) => numbers.reduce((a, b) => Math.max(a, b), -Infinity);
    const xs = position.map((p) => p.x);
    // An edge may pass below every card or above them all: its waypoints count as cards' middles.
    const ys = position.map((p) => p.y);
    for (const route of routes.values()) ys.push(...route.map((p) => p.y - CARD_H / 2));
    // A derived node's expansion, written under its card, may be wider than the card.
    const overhang = Math.max(0, most(this.expansions.map((e) => e.right - e.left)) - CARD_W) / 2;
    const minX = least(xs) - PAD - overhang;
    const minY = least(ys) - PAD;
    const width = most(xs) + CARD_W + PAD + overhang - minX;
    const height = most(ys) + EXPANSION_BASELINE + PAD + 2 - minY;
    // The cards' and edges' box; labels moved apart in a crowded gap may reach past it.
    this.box = { minX, width, top: minY, bottom: minY + height };
    this.showBox();
    return true;
  }

  // The graph drawn again with the text it was drawn from, which may no longer be the editor's
  // (a text that does not parse leaves the last graph shown): the page's language changed.
  redraw() {
    if (this.graph) this.draw(this.graph, this.source);
  }

  // The box takes in labels from `top` to `bottom`. It only grows until the next layout, so
  // stepping through a pass does not rescale the graph.
  growBox(top, bottom) {
    this.box.top = Math.min(this.box.top, top - PAD / 2);
    this.box.bottom = Math.max(this.box.bottom, bottom + PAD / 2);
    this.showBox();
  }

  showBox() {
    const { minX, width, top, bottom } = this.box;
    const viewBox = `${minX} ${top} ${width} ${bottom - top}`;
    if (this.svg.getAttribute("viewBox") === viewBox) return;
    this.svg.setAttribute("viewBox", viewBox);
    this.size = { width, height: bottom - top };
    this.fit();
  }

  titleOf(id) {
    return this.cards[id]?.title ?? String(id);
  }

  // As large as the frame allows up to natural size; never so small the numbers cannot be read.
  fit() {
    const { width, height } = this.size;
    if (!width) return;
    const available = this.frame.clientWidth - 2;
    const fitting = Math.min(MAX_SCALE, available / width, Math.max(1, MAX_HEIGHT / height));
    const scale = Math.max(MIN_SCALE, fitting);
    this.svg.setAttribute("width", String(Math.round(width * scale)));
    this.svg.setAttribute("height", String(Math.round(height * scale)));
  }

  // The numbers of one moment: `view` from the timeline.
  show(view, options) {
    for (const card of this.cards) {
      const id = card.node.id;
      const value = view.values[id];
      const grad = view.grads[id];
      fitNumber(card.value, value);
      fitNumber(card.grad, grad);
      card.group.classList.toggle("reached", grad !== "--");
      card.group.classList.toggle("pending", value === "--");
      card.group.classList.toggle("active", view.activeNodes.has(id));
      card.expansion.classList.toggle("shown", options.local && Boolean(card.node.expansion));
      card.description.textContent = `${card.title}: value ${value}, grad ${grad}`;
    }
    const changed = [];
    for (const [key, edge] of this.edges) {
      const label = view.labels.get(key) ?? (options.local ? view.locals.get(key) : null) ?? null;
      const backward = view.labels.has(key);
      edge.group.classList.toggle("backward", backward);
      edge.group.classList.toggle("active", view.activeEdges.has(key));
      // Forward, the arrow points at the operation; backward, at the operand receiving gradient.
      edge.path.setAttribute(backward ? "marker-start" : "marker-end", `url(#arrow-${backward ? "backward" : "forward"})`);
      edge.path.removeAttribute(backward ? "marker-end" : "marker-start");
      edge.label.classList.toggle("shown", label !== null);
      edge.label.classList.toggle("local", label !== null && !backward);
      edge.label.classList.toggle("active", view.activeEdges.has(key));
      if (label !== edge.shown) {
        writeLines(edge.text, label === null ? [""] : labelLines(label, this.gap));
        edge.shown = label;
        changed.push(edge);
      }
    }
    // Every label's text first, then every width read, then every box: reading a width after
    // each write would lay the page out once per edge, seconds for a large graph.
    const widths = changed.map((edge) => {
      if (!edge.shown) return 0;
      const lines = edge.text.children.length ? [...edge.text.children] : [edge.text];
      return Math.max(...lines.map((line) => Math.max(line.getComputedTextLength?.() ?? 0, line.textContent.length * 6.4))) + 12;
    });
    changed.forEach((edge, i) => {
      edge.width = widths[i];
      edge.height = LABEL_H + LABEL_LINE * Math.max(0, edge.text.children.length - 1);
      edge.box.setAttribute("x", String(-widths[i] / 2));
      edge.box.setAttribute("y", String(-edge.height / 2));
      edge.box.setAttribute("width", String(widths[i]));
      edge.box.setAttribute("height", String(edge.height));
    });
    this.placeLabels(options.local ? this.expansions : []);
    this.follow(view.inSight);
  }

  // Where the frame scrolls sideways (a phone, a graph wider than the page), the nodes of a new
  // moment are brought into sight: by as little scrolling as shows them, or centred when they
  // are wider than the frame. A moment shown again (a slider moved) leaves the frame where the
  // reader scrolled it.
  follow(active) {
    const moment = [...active].join();
    if (moment === this.followed) return;
    this.followed = moment;
    const frame = this.frame;
    if (!active.size || frame.scrollWidth <= frame.clientWidth) return;
    const start = frame.getBoundingClientRect().left;
    let [left, right] = [Infinity, -Infinity];
    for (const id of active) {
      const box = this.cards[id]?.group.getBoundingClientRect();
      if (!box) continue;
      left = Math.min(left, box.left - start);
      right = Math.max(right, box.right - start);
    }
    if (left < right) frame.scrollBy(scrolling(left, right, frame.clientWidth), 0);
  }

  // The labels shown in each gap, moved apart where they would overlap (two edges between the
  // same two cards cross the gap at nearly the same height) and off the `expansions` shown that
  // reach them; the box grows to take them in.
  placeLabels(expansions) {
    const gaps = new Map();
    for (const edge of this.edges.values()) {
      if (!edge.shown) continue;
      if (!gaps.has(edge.column)) gaps.set(edge.column, []);
      gaps.get(edge.column).push(edge);
    }
    let [top, bottom] = [Infinity, -Infinity];
    for (const labels of gaps.values()) {
      // The labels of a gap are centred on one line down its middle.
      const half = labels.reduce((widest, label) => Math.max(widest, label.width), 0) / 2;
      const { x } = labels[0];
      const fixed = expansions
        .filter((e) => e.left < x + half && x - half < e.right)
        .map((e) => ({ y: (e.top + e.bottom) / 2, height: e.bottom - e.top, fixed: true }));
      const items = [...labels, ...fixed].sort((a, b) => a.y - b.y);
      spread(items).forEach((y, i) => {
        const edge = items[i];
        if (edge.fixed) return;
        top = Math.min(top, y - edge.height / 2);
        bottom = Math.max(bottom, y + edge.height / 2);
        if (edge.placed === y) return;
        edge.placed = y;
        edge.label.setAttribute("transform", `translate(${edge.x} ${y})`);
      });
    }
    this.growBox(top, bottom);
  }
}

// How far to scroll a frame `size` long so that from `start` to `end` (from its visible start)
// is in sight, with a little room: as little as does it, or to their middle when they do not fit.
function scrolling(start, end, size) {
  const room = 12;
  if (end - start + 2 * room > size) return (start + end - size) / 2;
  if (start < room) return start - room;
  if (end > size - room) return end - size + room;
  return 0;
}

// Where labels one above the other in a gap go (`items` by where their curves cross it, top
// first, with the expansions written there, which are `fixed`): each where its curve crosses,
// unless it would overlap the item above; then the two, and any more they push into, form a
// stack centred on where its curves cross, or held where its expansion is written. The gap has
// no cards in it, so a label moved up or down meets none.
function spread(items) {
  const stacks = []; // each the items from `first` up to the next stack's first
  items.forEach((item, first) => {
    // `sum`: the tops its labels ask the stack's top to be at, added up; its top is their mean,
    // unless it holds an expansion: `held` is then the top that leaves the expansion in place.
    const wanted = item.y - item.height / 2;
    let stack = { first, count: 1, size: item.height, sum: wanted, held: item.fixed ? wanted : null };
    stack.top = wanted;
    while (stacks.length && stacks.at(-1).top + stacks.at(-1).size + LABEL_SPACE > stack.top) {
      const above = stacks.at(-1);
      // Two expansions closer than a label's room: neither moves, and a label between them
      // overlaps one (a derived node's expansion would meet another's first).
      if (above.held !== null && stack.held !== null) break;
      stacks.pop();
      const shift = above.size + LABEL_SPACE; // how far below the stack's top the lower ones go
      const count = above.count + stack.count;
      const sum = above.sum + stack.sum - shift * stack.count;
      const held = above.held ?? (stack.held === null ? null : stack.held - shift);
      stack = { first: above.first, count, size: shift + stack.size, sum, held, top: held ?? sum / count };
    }
    stacks.push(stack);
  });
  const places = [];
  for (const stack of stacks) {
    let top = stack.top;
    for (const item of items.slice(stack.first, stack.first + stack.count)) {
      places.push(top + item.height / 2);
      top += item.height + LABEL_SPACE;
    }
  }
  return places;
}
