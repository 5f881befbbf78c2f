// attnlab report: draws the page from the JSON that `attnlab report` put in
// #report-data (cli/report_data.h says what it holds). Vanilla JS and SVG, so
// the page needs nothing but itself. The scripts in cli/report/ are joined into
// one, this file first and main.js last; what the page drew is summarised in
// #self-check, which the browser tests (tests/test_report_*.py) read.
// This file: the page's data and the helpers every section uses.
"use strict";
const DATA = JSON.parse(document.getElementById("report-data").textContent);
const NS = "http://www.w3.org/2000/svg";
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"];
const CHECK = { errors: [], runs: [] };
window.addEventListener("error", (e) => CHECK.errors.push(String(e.message)));

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  for (const c of children) node.append(c instanceof Node ? c : String(c));
  return node;
}
function svg(tag, attrs) {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  return node;
}
function column(table, name) {
  const i = table.columns.indexOf(name);
  return i < 0 ? null : table.rows.map((r) => r[i]);
}
function finite(text) { return text !== "" && text !== undefined && Number.isFinite(Number(text)); }
function fmt(v) { return Math.abs(v) >= 1e4 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(1) : String(+v.toPrecision(3)); }

// Hover: any element with data-tip shows it beside the pointer.
const tip = document.getElementById("tip");
document.addEventListener("mousemove", (e) => {
  const t = e.target.closest && e.target.closest("[data-tip]");
  if (!t) { tip.hidden = true; return; }
  tip.textContent = t.getAttribute("data-tip");
  tip.style.left = e.clientX + 12 + "px";
  tip.style.top = e.clientY + 12 + "px";
  tip.hidden = false;
});

function legend(items) {
  const div = el("div", { class: "legend" });
  for (const [label, color, dash] of items) {
    const mark = el("i"); mark.style.background = color; if (dash) mark.style.opacity = "0.6";
    div.append(el("span", {}, mark, label));
  }
  return div;
}

function kvTable(rows) {
  const t = el("table");
  for (const [k, v, attrs] of rows) t.append(el("tr", {}, el("th", {}, k), el("td", attrs || {}, v)));
  return t;
}

// Built when first needed: a node registered with later() is filled by its build function when
// it comes within half a screen of the viewport, or before the page is printed, or (attnlab report
// --eager: DATA.eager) as soon as the page is drawn, before its load event, for a static capture.
// Until then it keeps the height given (so that links and the scroll bar point where they will) and
// says that it draws when scrolled to.
const LATER = new Map();
const NEAR = new IntersectionObserver((entries) => { for (const e of entries) if (e.isIntersecting) buildNow(e.target); },
                                      { rootMargin: "50% 0px" });
function later(node, height, build) {
  node.style.minHeight = height + "px";
  node.setAttribute("data-built", "no");
  const note = el("span", { class: "later-note" }, "draws when scrolled to");
  node.append(note);
  LATER.set(node, { build, note });
  NEAR.observe(node);
}
function buildNow(node) {
  const part = LATER.get(node);
  if (!part) return;
  LATER.delete(node);
  NEAR.unobserve(node);
  part.note.remove();
  part.build();
  node.style.minHeight = "";
  node.setAttribute("data-built", "yes");
}
function buildAll() { for (const node of [...LATER.keys()]) buildNow(node); }
window.addEventListener("beforeprint", buildAll);
if (DATA.eager) document.addEventListener("DOMContentLoaded", buildAll);
