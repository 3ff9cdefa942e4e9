// joynr-sim run report: draws the sequence diagrams and the routing timeline from the
// data the page carries (#report-data) and embeds the Vega-Lite plots. No network.
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const SVG = "http://www.w3.org/2000/svg";
  const byId = new Map(data.messages.map((m) => [m.id, m]));
  const views = {};

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // -- sequence diagrams ---------------------------------------------------------------

  const GUTTER = 120, ROW = 24, TOP = 34, CHAR = 7;

  // The widths above are estimates from a character count; once a diagram is in the page,
  // its drawing is measured and the canvas grown to hold every label (a long header too).
  function fit(root) {
    const box = root.getBBox();
    if (!box.width) return;  // not laid out (hidden): fitted when shown
    const x0 = Math.min(0, Math.floor(box.x) - 2), y0 = Math.min(0, Math.floor(box.y) - 2);
    const width = Math.max(Number(root.getAttribute("width")), Math.ceil(box.x + box.width) + 8) - x0;
    const height = Math.max(Number(root.getAttribute("height")), Math.ceil(box.y + box.height) + 6) - y0;
    root.setAttribute("width", width);
    root.setAttribute("height", height);
    root.setAttribute("viewBox", `${x0} ${y0} ${width} ${height}`);
  }

  function fitAll(container) {
    for (const root of container.querySelectorAll("svg.seq")) fit(root);
  }

  function drawDiagram(conv) {
    const labels = conv.rows.filter((r) => r.k === "hop").map((r) => r.label.length);
    const colW = Math.max(120, ...conv.columns.map((c) => c.length * CHAR + 24), ...labels.map((n) => n * CHAR + 30));
    const x = (c) => GUTTER + c * colW + colW / 2;
    const notesX = GUTTER + conv.columns.length * colW + 8;
    const longest = Math.max(0, ...conv.rows.map((r) => ((r.note || "") + (r.k === "head" || r.k === "note" ? "" : r.label || "")).length));
    const heads = Math.max(0, ...conv.rows.filter((r) => r.k === "head").map((r) => r.text.length * CHAR - (notesX - 8)));
    const width = notesX + Math.max(longest * CHAR + 20, heads + 20, 60);
    const height = TOP + conv.rows.length * ROW + 12;
    const root = svg("svg", {width: width, height: height, viewBox: `0 0 ${width} ${height}`, class: "seq", role: "img"});
    root.appendChild(svg("title", {}, `sequence diagram of ${conv.ids.join(", ")}`));
    const defs = svg("defs");
    for (const s of ["plain", "warn", "bad"]) {
      const marker = svg("marker", {id: `arrow-${s}-${conv.index}`, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7,
                                    markerHeight: 7, orient: "auto-start-reverse"});
      marker.appendChild(svg("path", {d: "M0,0 L10,5 L0,10 z", class: `head ${s}`}));
      defs.appendChild(marker);
    }
    root.appendChild(defs);
    conv.columns.forEach((name, c) => {
      root.appendChild(svg("text", {x: x(c), y: 16, class: "lifeline-name", "text-anchor": "middle"}, name));
      root.appendChild(svg("line", {x1: x(c), y1: 24, x2: x(c), y2: height - 6, class: "lifeline"}));
    });
    conv.rows.forEach((r, i) => {
      const y = TOP + i * ROW + ROW / 2;
      const style = r.s || "plain";
      const g = svg("g", {class: `row row-${r.k}`});
      if (r.g) g.appendChild(svg("text", {x: 4, y: y + 4, class: "gutter"}, r.g));
      if (r.k === "head") {
        g.appendChild(svg("text", {x: 4, y: y + 4, class: "msg-head"}, r.text));
      } else if (r.k === "note") {
        g.appendChild(svg("text", {x: GUTTER, y: y + 4, class: `note ${style}`}, r.text));
      } else if (r.k === "mark") {
        g.appendChild(svg("text", {x: x(r.c), y: y + 5, class: `mark ${style}`, "text-anchor": "middle"}, r.sym));
        g.appendChild(svg("text", {x: notesX, y: y + 4, class: `note ${style}`}, `${conv.columns[r.c]}: ${r.note}`));
      } else if (r.k === "hop") {
        const marker = `url(#arrow-${style}-${conv.index})`;
        let x1, x2, labelX;
        if (r.a !== null && r.b !== null && r.a !== r.b) {
          x1 = x(r.a); x2 = x(r.b) + (r.b > r.a ? -4 : 4); labelX = (x1 + x2) / 2;
          g.appendChild(svg("line", {x1, y1: y, x2, y2: y, class: `hop ${style}`, "marker-end": marker}));
        } else if (r.a !== null && r.a === r.b) {
          x1 = x(r.a);
          g.appendChild(svg("path", {d: `M${x1},${y - 7} h 26 v 14 h -22`, class: `hop ${style}`, fill: "none",
                                     "marker-end": marker}));
          labelX = x1 + 34;
        } else if (r.a === null) {
          x2 = x(r.b) - 4; x1 = x2 - colW / 2;
          g.appendChild(svg("line", {x1, y1: y, x2, y2: y, class: `hop dashed ${style}`, "marker-end": marker}));
          labelX = x1 + colW / 4;
        } else {
          x1 = x(r.a); x2 = x1 + colW / 2;
          g.appendChild(svg("line", {x1, y1: y, x2, y2: y, class: `hop dashed ${style}`, "marker-end": marker}));
          g.appendChild(svg("text", {x: x2 + 4, y: y + 4, class: `mark ${style}`}, "?"));
          labelX = (x1 + x2) / 2;
        }
        g.appendChild(svg("text", {x: labelX, y: y - 4, class: "hop-label", "text-anchor": r.a === r.b ? "start" : "middle"}, r.label));
        if (r.note) g.appendChild(svg("text", {x: notesX, y: y + 4, class: `note ${style}`}, r.note));
      }
      root.appendChild(g);
    });
    return root;
  }

  function conversationBlock(index) {
    const conv = Object.assign({index: index}, data.conversations[index]);
    const block = el("div", {class: "conversation"});
    const title = el("p", {class: "conv-title"});
    for (const id of conv.ids) {
      const m = byId.get(id);
      if (!m) continue;
      title.appendChild(el("span", {id: `diagram-${id}`, class: `pill ${outcomeClass(m)}`}, `${m.type} ${id.slice(0, 8)}: ${m.outcome}`));
      title.appendChild(document.createTextNode(" "));
    }
    if (conv.explained) title.appendChild(el("span", {class: "pill warn explained", title: conv.explained}, "explained by the trace"));
    block.appendChild(title);
    if (conv.explained) block.classList.add("explained");
    const scroll = el("div", {class: "scroll"});
    scroll.appendChild(drawDiagram(conv));
    block.appendChild(scroll);
    return block;
  }

  function outcomeClass(m) {
    if (m.outcome === "delivered") return "ok";
    if (m.explained) return "warn";  // a crash or an outage explains it: no loss
    return m.outcome.startsWith("dropped") || m.outcome.startsWith("sent, not") ? "bad" : "warn";
  }

  const failing = document.getElementById("failing-diagrams");
  if (data.failing.length === 0) {
    failing.appendChild(el("p", {class: "ok"}, "Every message was delivered and every request answered."));
  }
  for (const index of data.failing) failing.appendChild(conversationBlock(index));
  fitAll(failing);

  // -- the message list and the viewer --------------------------------------------------

  const viewer = document.getElementById("viewer");
  const tbody = document.querySelector("#msg-table tbody");
  const rows = data.messages.map((m) => {
    const tr = el("tr", {"data-msg": m.id, class: "clickable"});
    const cells = [m.id, m.type, `+${m.t}ms`, m.from, m.to, String(m.hops), m.outcome, m.where];
    cells.forEach((text, i) => {
      const attrs = i === 6 ? {class: outcomeClass(m)} : {};
      if (i === 6 && m.explained) attrs.title = m.explained;
      tr.appendChild(el("td", attrs, text));
    });
    tr.addEventListener("click", () => { location.hash = `msg-${encodeURIComponent(m.id)}`; });
    tbody.appendChild(tr);
    return {tr: tr, text: [...cells, m.ids].join(" ").toLowerCase()};
  });
  const search = document.getElementById("msg-search");
  const count = document.getElementById("msg-count");
  function filter() {
    const words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
    let shown = 0;
    for (const r of rows) {
      const hit = words.every((w) => r.text.includes(w));
      r.tr.hidden = !hit;
      if (hit) shown += 1;
    }
    count.textContent = `${shown} of ${rows.length}`;
  }
  search.addEventListener("input", filter);
  filter();

  function showMessage(id) {
    const m = byId.get(id);
    viewer.replaceChildren();
    if (!m) {
      viewer.appendChild(el("p", {class: "warn"}, `message ${id} is not in this report`));
    } else {
      const close = el("button", {type: "button", class: "close"}, "close");
      close.addEventListener("click", () => { viewer.hidden = true; });
      viewer.appendChild(close);
      viewer.appendChild(el("h3", {}, `message ${id}`));
      viewer.appendChild(conversationBlock(m.conv));
      for (const r of rows) r.tr.classList.toggle("selected", r.tr.dataset.msg === id);
    }
    viewer.hidden = false;
    fitAll(viewer);
    viewer.scrollIntoView({block: "start"});
  }

  // -- routing entries -------------------------------------------------------------------

  const participant = document.getElementById("participant");
  const note = document.getElementById("participant-note");
  const known = new Set(data.routing.participants);
  const options = document.getElementById("participants");
  const labels = data.routing.labels;
  const nameNote = document.getElementById("participant-name");
  for (const p of data.routing.participants) {
    options.appendChild(el("option", labels[p] ? {value: p, label: labels[p]} : {value: p}));
  }
  const changes = document.querySelector("#rt-changes tbody");

  function showParticipant(p) {
    if (!known.has(p)) {
      note.textContent = p ? `no routing entry for ${p} in this run` : "";
      return;
    }
    participant.value = p;
    nameNote.textContent = labels[p] || "";
    note.textContent = p === data.routing.first && data.routing.why ? `(shown first: ${data.routing.why})` : "";
    changes.replaceChildren();
    for (const c of data.routing.changes.filter((c) => c.p === p)) {
      const tr = el("tr", c.violating ? {class: "violating"} : c.refused ? {class: "refused"} : {});
      const mark = (c.violating ? "⚠ violation: " : "") + (c.refused ? "✗ " : "") + c.mark;
      for (const text of [`+${c.t}ms`, c.rt, mark, c.reason, c.origin, c.old, c.offered, c.held]) {
        tr.appendChild(el("td", {}, text));
      }
      changes.appendChild(tr);
    }
    if (views.timeline) views.timeline.signal("participant", p).runAsync();
  }
  participant.addEventListener("change", () => showParticipant(participant.value));
  if (data.routing.first) showParticipant(data.routing.first);
  else note.textContent = "no routing-table changes in this run";

  // -- plots -----------------------------------------------------------------------------

  const embedded = [];
  for (const target of document.querySelectorAll("[data-plot]")) {
    const name = target.dataset.plot;
    const spec = data.plots[name];
    if (!spec) { target.hidden = true; continue; }
    embedded.push(vegaEmbed(target, spec, {renderer: "svg", actions: false}).then((result) => {
      views[name] = result.view;
      if (name === "timeline" && participant.value) return result.view.signal("participant", participant.value).runAsync();
      return undefined;
    }));
  }
  Promise.all(embedded).then(() => { document.body.dataset.plots = "ready"; },
                             (err) => { document.body.dataset.plots = "failed"; console.error(err); });

  // -- links: #msg-<id>, #participant-<id>, #violation-<n>-slice --------------------------

  function route() {
    const hash = decodeURIComponent(location.hash.slice(1));
    if (hash.startsWith("msg-")) showMessage(hash.slice(4));
    else if (hash.startsWith("participant-")) {
      showParticipant(hash.slice(12));
      document.getElementById("routing").scrollIntoView({block: "start"});
    } else if (hash.endsWith("-slice")) {
      const slice = document.getElementById(hash);
      if (slice) { slice.open = true; slice.scrollIntoView({block: "start"}); }
    }
  }
  window.addEventListener("hashchange", route);
  route();
  document.body.dataset.ready = "true";
})();
