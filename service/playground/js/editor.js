// The expression editor: a textarea over a mirror of its text, in which the characters a problem
// points at (`position`) are underlined while the user types.

const DEBOUNCE_MS = 250;

// The service counts positions in code points; JavaScript strings index UTF-16 units.
function toUtf16(text, codePoint) {
  let index = 0;
  let seen = 0;
  for (const character of text) {
    if (seen === codePoint) return index;
    index += character.length;
    seen += 1;
  }
  return index;
}

export class Editor {
  constructor(textarea, mirror, message, onChange) {
    this.textarea = textarea;
    this.mirror = mirror;
    this.message = message;
    this.timer = null;
    textarea.addEventListener("input", () => {
      this.clearMark();
      message.classList.add("outdated"); // until the service has read the new text
      clearTimeout(this.timer);
      this.timer = setTimeout(() => onChange(this.value), DEBOUNCE_MS);
      this.fit();
    });
    textarea.addEventListener("scroll", () => this.follow());
  }

  // The mirror scrolled as the text is: a long line scrolls the textarea sideways.
  follow() {
    this.mirror.scrollTop = this.textarea.scrollTop;
    this.mirror.scrollLeft = this.textarea.scrollLeft;
  }

  get value() {
    return this.textarea.value;
  }

  set value(text) {
    this.textarea.value = text;
    this.clearMark();
    this.fit();
  }

  // As many rows as the text has lines, within bounds: a program is seen whole.
  fit() {
    const lines = this.textarea.value.split("\n").length;
    this.textarea.rows = Math.min(Math.max(lines, 2), 12);
  }

  // Underline `position` ({start, end} in code points) and say what is wrong there.
  showProblem(text, position) {
    this.say(text, "error");
    this.textarea.setAttribute("aria-invalid", "true");
    this.mark(position ? [[position.start, position.end]] : [], "problem");
  }

  // A program's assignments the output does not use: each marked lightly, with its sentence.
  // The text stays valid; no warnings clears what an earlier answer marked.
  showWarnings(warnings) {
    if (!warnings.length) {
      this.clearProblem();
      return;
    }
    this.textarea.removeAttribute("aria-invalid");
    this.say(warnings.map((warning) => warning.message).join("\n"), "warning");
    this.mark(warnings.map((warning) => warning.span), "unused");
  }

  say(text, kind) {
    this.message.textContent = text;
    this.message.classList.remove("outdated", "error", "warning");
    this.message.classList.add(kind);
  }

  // Lay the text in the mirror with each [start, end) of `spans` (code points) in a mark of
  // `className`; an empty span (the end of the text) is one character wide. A span that starts
  // inside one already marked is left out: the names of one tuple assignment share its span.
  mark(spans, className) {
    this.mirror.replaceChildren();
    if (!spans.length) return;
    const source = this.textarea.value;
    let shown = 0;
    for (const [from, to] of [...spans].sort((a, b) => a[0] - b[0])) {
      const start = toUtf16(source, from);
      const end = Math.max(toUtf16(source, to), start);
      if (start < shown) continue;
      const mark = document.createElement("mark");
      mark.className = start === end ? `${className} empty` : className;
      mark.textContent = start === end ? " " : source.slice(start, end);
      this.mirror.append(source.slice(shown, start), mark);
      shown = end;
    }
    this.mirror.append(source.slice(shown), "\n");
    // The textarea may have scrolled while the mirror was empty, which cannot scroll.
    this.follow();
  }

  clearMark() {
    this.mirror.replaceChildren();
    this.textarea.removeAttribute("aria-invalid");
  }

  clearProblem() {
    this.clearMark();
    this.message.textContent = "";
    this.message.classList.remove("error", "warning", "outdated");
  }
}
