// A thumbnail's map enlarged over the page, every token labelled: opened by a click on the
// thumbnail, closed by Escape, the close button or a click beside the panel.

const ZOOM_CELL_MIN = 12;  // px: every label drawn (labelStep 1), a line apart
const ZOOM_CELL_MAX = 28;

function closeZoom() {
  const open = document.getElementById("attn-zoom");
  if (open) open.remove();
}
document.addEventListener("keydown", (e) => { if (e.key === "Escape") closeZoom(); });

// Opens the enlarged view of one head's map w (decoded, decodeHeads) of `layer`, whose
// thumbnail is `thumb`: cells as large as the window allows, never under a label's line.
function openZoom(layer, w, head, thumb) {
  closeZoom();
  const n = Math.max(w.rows, w.cols), room = Math.min(window.innerWidth - 120, window.innerHeight - 160);
  const c = Math.max(ZOOM_CELL_MIN, Math.min(ZOOM_CELL_MAX, Math.floor(room / n)));
  const L = mapLayout(layer, c);
  const canvas = drawMap(layer, w, head, L, "attn-zoom", { "data-run": thumb.getAttribute("data-run"),
                                                           "data-example": thumb.getAttribute("data-example") });
  const close = el("button", { type: "button", class: "zoom-close" }, "close (Esc)");
  close.addEventListener("click", closeZoom);
  const panel = el("div", { class: "zoom-panel" },
                   el("div", { class: "zoom-head" }, el("b", {}, "layer " + layer.name + ", head " + head), " ", close),
                   el("p", { class: "note" }, summaryLine(headSummary(w, layer.causal), layer)), canvas);
  const overlay = el("div", { id: "attn-zoom", class: "zoom-overlay" }, panel);
  overlay.addEventListener("click", (e) => { if (e.target === overlay) closeZoom(); });
  document.body.append(overlay);
  return overlay;
}
