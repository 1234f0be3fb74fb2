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
    textarea.addEventListener("scroll", () => {
      mirror.scrollTop = textarea.scrollTop;
      mirror.scrollLeft = textarea.scrollLeft;
    });
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
    this.message.textContent = text;
    this.message.classList.remove("outdated");
    this.message.classList.add("error");
    this.textarea.setAttribute("aria-invalid", "true");
    this.mirror.replaceChildren();
    if (!position) return;
    const source = this.textarea.value;
    const start = toUtf16(source, position.start);
    // An empty span (the end of the text) still gets a visible mark one character wide.
    const end = Math.max(toUtf16(source, position.end), start);
    const mark = document.createElement("mark");
    mark.className = start === end ? "problem empty" : "problem";
    mark.textContent = start === end ? " " : source.slice(start, end);
    this.mirror.append(source.slice(0, start), mark, source.slice(end), "\n");
  }

  clearMark() {
    this.mirror.replaceChildren();
    this.textarea.removeAttribute("aria-invalid");
  }

  clearProblem() {
    this.clearMark();
    this.message.textContent = "";
    this.message.classList.remove("error", "outdated");
  }
}
