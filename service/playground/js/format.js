// Numbers as a learner reads them: whole numbers exactly, others to four decimals, or four
// significant digits below 1 (0.001234 keeps its digits); huge and tiny ones in exponent form; a
// plain hyphen-minus, so a value can be copied back into the editor.

export function formatNumber(value) {
  if (value === null || value === undefined || Number.isNaN(value)) return "--";
  if (!Number.isFinite(value)) return value > 0 ? "∞" : "-∞";
  if (Object.is(value, -0)) return "0";
  const magnitude = Math.abs(value);
  if (magnitude !== 0 && (magnitude >= 1e6 || magnitude < 1e-4)) {
    return value.toExponential(3).replace(/\.?0+e/, "e");
  }
  if (Number.isInteger(value)) return String(value);
  const rounded = Number.parseFloat(magnitude < 1 ? value.toPrecision(4) : value.toFixed(4));
  return Object.is(rounded, -0) ? "0" : String(rounded);
}

// The local derivative, incoming gradient and contribution of one backward edge.
export function edgeLabel(incoming, local, contribution) {
  return `${formatNumber(incoming)} × ${formatNumber(local)} = ${formatNumber(contribution)}`;
}
