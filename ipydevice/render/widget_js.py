"""The buttons' front-end code: the ES module (:data:`ESM`, sent once per session in the
module host's state) and the loader each error's widget carries (:data:`LOADER`).

Kept apart from :mod:`ipydevice.render.widget` (the kernel side: the widget classes,
the click handler, the widgets' lifecycle) so that each stays readable.
"""

from __future__ import annotations

__all__ = ["ESM", "LOADER"]

ESM = """
const BUTTON = "jupyter-button widget-button";

function makeButton(label, className, tooltip) {
  const button = document.createElement("button");
  button.className = `${BUTTON} ${className}`;
  button.textContent = label;
  button.title = tooltip;
  // The same box for every button, so they line up whatever the theme's CSS says.
  Object.assign(button.style, {
    margin: "0", height: "24px", minWidth: "64px", width: "auto", padding: "0 12px",
    lineHeight: "normal", boxSizing: "border-box", verticalAlign: "middle",
    fontSize: "12px", cursor: "pointer",
  });
  return button;
}

// True only when the text reached the clipboard: no success is claimed otherwise.
async function copyText(text) {
  try {
    if (navigator.clipboard && window.isSecureContext !== false) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch (error) { /* the fallback below */ }
  try {
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    Object.assign(area.style, { position: "fixed", opacity: "0" });
    document.body.appendChild(area);
    area.select();
    const done = document.execCommand("copy");
    area.remove();
    return Boolean(done);
  } catch (error) {
    return false;
  }
}

// Which front end this is, for the kernel's words on where an inserted cell goes.
function frontEnd() {
  try {
    if (typeof acquireVsCodeApi === "function" || String(location.protocol).startsWith("vscode")) {
      return "vscode";
    }
    if ((window.google && window.google.colab) || /colab|googleusercontent/.test(location.host)) {
      return "colab";
    }
  } catch (error) { /* unknown */ }
  return "";
}

// The notebook model of the document this widget's manager serves: JupyterLab 4 and
// Notebook 7 (@jupyter-widgets/jupyterlab-manager) have one, other front ends may not.
function notebookOf(model) {
  try {
    const manager = model.widget_manager;
    const shared = manager && manager.context && manager.context.model
      && manager.context.model.sharedModel;
    return shared && typeof shared.insertCell === "function" ? shared : null;
  } catch (error) {
    return null;
  }
}

function insertBelow(model, code) {
  const cellId = model.get("cell_id");
  const notebook = notebookOf(model);
  if (!notebook || !cellId) return false;
  const index = notebook.cells.findIndex((cell) => cell.id === cellId);
  if (index < 0) return false;
  notebook.insertCell(index + 1, { cell_type: "code", source: code, metadata: {} });
  return true;
}

// One row of buttons for fix ``index``, with its status line.
function makeRow(model, fix, index, label, anyApply, anchor) {
  const row = document.createElement("div");
  row.className = "ipydevice-actions ipydevice-actions-row";
  row.dataset.fix = String(index);
  Object.assign(row.style, {
    display: "flex", flexWrap: "wrap", alignItems: "center", gap: "6px", margin: "0 0 8px 0",
    fontFamily: "var(--jp-ui-font-family, system-ui, sans-serif)", fontSize: "12px",
  });
  if (label) {
    const name = document.createElement("span");
    name.textContent = label;
    Object.assign(name.style, { minWidth: "3.5em", fontWeight: "600" });
    row.appendChild(name);
  }
  if (fix.apply) {
    const apply = makeButton("Apply", "ipydevice-apply mod-warning",
      "Move the live objects now, then re-run the cell");
    apply.onclick = () => model.send({ action: "apply", index, anchor });
    row.appendChild(apply);
  } else if (anyApply && label) {  // keep Copy and Insert in the same columns on every row
    const gap = makeButton("Apply", "", "");
    gap.style.visibility = "hidden";
    gap.setAttribute("aria-hidden", "true");
    row.appendChild(gap);
  }
  const copy = makeButton("Copy", "ipydevice-copy", "Copy this code to the clipboard");
  copy.onclick = async () => {
    const copied = await copyText(fix.code);
    model.send({ action: copied ? "copied" : "copy-failed", index, anchor });
  };
  row.appendChild(copy);
  if (fix.insert) {
    const insert = makeButton("Insert", "ipydevice-insert", fix.insert_tip);
    insert.onclick = () => {
      let done = false;
      try { done = insertBelow(model, fix.code); } catch (error) { done = false; }
      model.send({ action: done ? "inserted" : "insert", index, anchor, frontend: frontEnd() });
    };
    row.appendChild(insert);
  }
  const status = document.createElement("span");
  status.className = "ipydevice-status";
  row.appendChild(status);
  return row;
}

// Where the header and the panel of this widget's error are: the outputs marked with
// its anchor, in the same cell's output area (JupyterLab, Notebook 7, classic) or,
// where no such area is known, in the whole page.
function targetsOf(el, anchor) {
  if (!anchor || !el.isConnected) return null;
  const area = el.closest(".jp-OutputArea, .output, .output_container, .cell_container");
  const scope = area || el.ownerDocument;
  const found = scope.querySelectorAll(`[data-ipydevice-anchor="${CSS.escape(anchor)}"]`);
  return found.length ? Array.from(found) : null;
}

// The code blocks the rows go beside: the header's (its best fix), then each fix of
// the panel, in the order of the widget's fixes.
function slotsOf(targets, count) {
  const slots = [];
  for (const target of targets) {
    const fixes = target.querySelectorAll(".ipydevice-fix");
    if (fixes.length) {
      fixes.forEach((fix, index) => {
        if (index < count) slots.push([index, fix.querySelector("pre") || fix]);
      });
    } else {
      const code = target.querySelector("pre.ipydevice-code");
      if (code) slots.push([0, code]);
    }
  }
  return slots;
}

function render({ model, el }) {
  // The error this view was made for: a later error reuses the model (one comm per
  // output, not one opened and one closed per error); a view of an earlier error then
  // takes its rows away, as a closed widget's view would.
  const anchor = model.get("anchor");
  const fixes = model.get("fixes");
  const anyApply = fixes.some((fix) => fix.apply);
  const rows = [];
  const paint = () => {
    const text = model.get("status");
    const at = model.get("status_index");
    for (const row of rows) {
      const status = row.querySelector(".ipydevice-status");
      status.textContent = "";
      if (!text || Number(row.dataset.fix) !== at) continue;
      const mark = document.createElement("span");
      const ok = model.get("status_ok");
      mark.textContent = ok ? "✔ " : "✘ ";
      mark.style.color = ok ? "#2f9e44" : "#e03131";
      status.append(mark, text);
    }
  };
  // Beside each fix's code in the header and the panel, when they are found ...
  const placeBeside = () => {
    const targets = targetsOf(el, anchor);
    if (!targets) return false;
    for (const [index, code] of slotsOf(targets, fixes.length)) {
      const next = code.nextElementSibling;
      if (next && next.classList.contains("ipydevice-actions")) next.remove();  // a view before
      const row = makeRow(model, fixes[index], index, "", anyApply, anchor);
      code.after(row);
      rows.push(row);
    }
    if (!rows.length) return false;
    el.style.display = "none";  // the rows are in the header and the panel
    return true;
  };
  // ... else (a front end that shows outputs apart) as a block of their own.
  const placeHere = () => {
    const box = document.createElement("div");
    Object.assign(box.style, {
      borderLeft: "4px solid #e8590c", background: "rgba(232,89,12,0.07)",
      borderRadius: "0 4px 4px 0", padding: "8px 12px 2px 12px", margin: "0 0 6px 0",
    });
    const labelled = fixes.length > 1 || model.get("labelled");
    for (const [index, fix] of fixes.entries()) {
      const row = makeRow(model, fix, index, labelled ? fix.label : "", anyApply, anchor);
      box.appendChild(row);
      rows.push(row);
    }
    el.appendChild(box);
  };
  let tries = 0;
  let timer = null;
  const place = () => {
    timer = null;
    if (placeBeside()) { paint(); return; }
    if (++tries < 12) { timer = setTimeout(place, 25 * tries); return; }
    placeHere();
    paint();
  };
  const remove = () => {
    if (timer !== null) clearTimeout(timer);
    timer = null;
    for (const row of rows) row.remove();
    rows.length = 0;
  };
  const retire = () => {  // the model now serves a later error
    if (model.get("anchor") === anchor) return;
    tries = 12;
    remove();
    el.replaceChildren();
    el.style.display = "none";
  };
  place();
  model.on("change:status", paint);
  model.on("change:status_ok", paint);
  model.on("change:status_index", paint);
  model.on("change:anchor", retire);
  return remove;  // the view goes (the widget closed, the output cleared): so do its rows
}
export default { render };
"""

#: What each panel's widget carries instead of :data:`ESM`: a loader that takes the
#: module's text from the session's one module widget (:func:`ipydevice.render.widget.module_host`), whose
#: state the front end got once, and imports it once per page.
LOADER = (  # compact: every error's widget carries it, each byte once per error.
    # It waits for the host's model (up to 40 tries, 20 s in all), imports its source
    # once per page (the blob's URL stays while the page does: one per ipydevice
    # version) and renders with it.
    "const M=globalThis.__ipydeviceButtons||=new Map;"
    "export default{async render(o){let m=o.model,i=m.get('host'),h,n=0;"
    "for(;!h&&n<40;){try{h=await m.widget_manager.get_model(i)}catch{}"
    "h||await new Promise(r=>setTimeout(r,25*++n))}"
    "if(!h)throw Error('ipydevice: no module '+i);let s=h.get('source');"
    "M.has(s)||M.set(s,import(URL.createObjectURL(new Blob([s],{type:'text/javascript'}))));"
    "return(await M.get(s)).default.render(o)}}"
)
