// What one head attends to, in numbers and in words, computed from its weights.

// The patterns a head's summary measures: key, the caption's short name, the sentence's words.
const HEAD_PATTERNS = [["previous", "prev", "the previous token"], ["first", "first", "the first token"],
                       ["anti", "anti", "the anti-diagonal, the mirrored position reversing needs"],
                       ["self", "self", "its own position"]];
const MOSTLY = 0.4;  // a share at least this large is what a head "attends mostly to"

// A head's summary from its weights w (rows: queries i, keys j, each row summing to 1), each a
// mean over query rows of the weight on one key: "previous" j = i - 1 (rows i >= 1), "first"
// j = 0 (every row), "anti" j = cols - 1 - i (rows where that key exists and, in a causal
// layer, is not after the query), "self" j = i (rows i < cols); and "offset", the mean over
// rows of sum_j w[i][j] (j - i). null where no row counts.
function headSummary(w, causal) {
  const at = (i, j) => w.q[i * w.cols + j] / w.scale;
  const mean = (pick) => {
    let sum = 0, n = 0;
    for (let i = 0; i < w.rows; ++i) {
      const j = pick(i);
      if (j === null || j < 0 || j >= w.cols || (causal && j > i)) continue;
      sum += at(i, j); ++n;
    }
    return n ? sum / n : null;
  };
  let offset = 0;
  for (let i = 0; i < w.rows; ++i) for (let j = 0; j < w.cols; ++j) offset += at(i, j) * (j - i);
  return { previous: mean((i) => (i >= 1 ? i - 1 : null)), first: mean(() => 0), anti: mean((i) => w.cols - 1 - i),
           self: mean((i) => i), offset: w.rows ? offset / w.rows : null };
}

// The pattern with the largest share: [key, short name, words, share].
function dominantPattern(summary) {
  let best = null;
  for (const [key, short, words] of HEAD_PATTERNS)
    if (summary[key] !== null && (!best || summary[key] > best[3])) best = [key, short, words, summary[key]];
  return best;
}

// The words for the first key: "<bos>, the first token", or its position when it is no <bos>.
function firstWords(layer) {
  return (layer.keys[0] === "<bos>" ? "<bos>" : "position 0") + ", the first token";
}

// The caption under a thumbnail: "head 1 · prev 0.82", its largest share.
function headCaption(head, summary) {
  const d = dominantPattern(summary);
  return "head " + head + (d ? " \u00b7 " + d[1] + " " + d[3].toFixed(2) : "");
}

// Every figure of the summary on one line, for tips.
function summaryLine(summary, layer) {
  const f = (v, digits) => (v === null ? "\u2013" : v.toFixed(digits));
  return "previous " + f(summary.previous, 2) + " \u00b7 first (" + (layer.keys[0] === "<bos>" ? "<bos>" : "pos 0") +
         ") " + f(summary.first, 2) + " \u00b7 anti-diagonal " + f(summary.anti, 2) + " \u00b7 itself " +
         f(summary.self, 2) + " \u00b7 mean key offset " + f(summary.offset, 1);
}

// A head in a sentence: "head 1 attends mostly to the previous token (0.82)", or, with no share
// of MOSTLY or more, how spread it is.
function headSentence(head, summary, layer) {
  const d = dominantPattern(summary);
  if (!d) return "head " + head + ": no weights";
  const words = d[0] === "first" ? firstWords(layer) : d[2];
  if (d[3] >= MOSTLY) return "head " + head + " attends mostly to " + words + " (" + d[3].toFixed(2) + ")";
  return "head " + head + " spreads its attention: at most " + d[3].toFixed(2) + " on " + words +
         "; mean key offset " + summary.offset.toFixed(1);
}

// The sentences for each head of a layer, as a list under its row (attrs: its data-run and data-example).
function headSentences(layer, heads, attrs) {
  const list = el("ul", Object.assign({ class: "head-sentences", "data-layer": layer.name }, attrs));
  heads.forEach((w, h) => {
    const s = headSummary(w, layer.causal), d = dominantPattern(s);
    list.append(el("li", { "data-layer": layer.name, "data-head": h, "data-pattern": d ? d[0] : "",
                           "data-share": d ? d[3] : "" }, headSentence(h, s, layer)));
  });
  return list;
}
