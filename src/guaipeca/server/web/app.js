// Guaipeca's built-in page: plain JavaScript, no framework, nothing loaded from elsewhere.
// Every call goes to this server's small JSON API (POST /api/tools/{tool} runs one MCP tool,
// PUT /api/upload sends a file's raw bytes) with the same Bearer token as /mcp.
// Text from the server is inserted with textContent, except Markdown, which POST /api/render
// turns into sanitised HTML (raw HTML escaped, images and links reduced to their text).
// Every view has its own address, so it can be linked to and the browser's Back and Forward
// buttons move between views: /?q=…&corpus=…&mode=… runs that search, /?doc=…&corpus=…&start=…&end=…
// opens a document at a hit's span, /?view=documents|upload|status opens a tab.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const TOKEN_KEY = "guaipeca.token";
  const state = { folders: null, doc: null, docsOffset: 0 };

  // -- talking to the server ---------------------------------------------------------------
  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  function headers(extra) {
    const h = Object.assign({}, extra || {});
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) h.Authorization = "Bearer " + token;
    return h;
  }

  async function send(method, url, body, contentType) {
    const response = await fetch(url, {
      method,
      headers: headers(contentType ? { "Content-Type": contentType } : {}),
      body,
    });
    if (response.status === 401) {
      showAuth();
      throw new ApiError(401, "this server needs a token");
    }
    const isJson = (response.headers.get("content-type") || "").includes("application/json");
    if (!response.ok) {
      const data = isJson ? await response.json() : {};
      throw new ApiError(response.status, data.error || "HTTP " + response.status);
    }
    return isJson ? response.json() : response.blob();
  }

  // An upload not done within upload.answer_seconds is answered 202 with a job: follow it
  // (GET /jobs/{id}) until it ends, then it is the upload's answer.
  async function followJob(out) {
    while (out && out.job && out.state === "running") {
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const job = await send("GET", "/jobs/" + encodeURIComponent(out.job));
      if (job.state === "done") return job.result;
      if (job.state === "failed") throw new ApiError(job.status, job.error);
    }
    return out;
  }

  const tool = (name, args) =>
    send("POST", "/api/tools/" + encodeURIComponent(name), JSON.stringify(args || {}), "application/json");

  // Markdown → sanitised HTML, one string per text; a span [start, end] comes back marked.
  async function render(texts, spans, snippet) {
    const out = await send("POST", "/api/render", JSON.stringify({ texts, spans, snippet: Boolean(snippet) }), "application/json");
    return out.html;
  }

  // Wrap every piece of text between the render's hit-start and hit-end markers in
  // <mark class="current"> (per text node, so the marks stay inside their blocks).
  function markSpan(root) {
    const start = root.querySelector(".hit-start");
    if (!start) return null;
    const end = root.querySelector(".hit-end");
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    const inside = [];
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (!(start.compareDocumentPosition(node) & Node.DOCUMENT_POSITION_FOLLOWING)) continue;
      if (end && !(end.compareDocumentPosition(node) & Node.DOCUMENT_POSITION_PRECEDING)) break;
      if (node.nodeValue.trim()) inside.push(node);
    }
    for (const node of inside) {
      const mark = el("mark", { class: "current" });
      node.replaceWith(mark);
      mark.append(node);
    }
    return root.querySelector(".current") || start;
  }

  // -- small helpers ---------------------------------------------------------------------
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value);
    }
    for (const child of children) if (child != null) node.append(child);
    return node;
  }

  function message(text, ok) {
    const box = $("message");
    box.textContent = text || "";
    box.classList.toggle("ok", Boolean(ok));
    box.hidden = !text;
  }

  function fail(error) {
    if (error instanceof ApiError && error.status === 401) return;
    message(error.message || String(error));
  }

  // The heading trail of a hit: the full trail when the server gives one, else its path.
  const trail = (hit) => hit.heading_trail || hit.heading_path || [];

  function pages(item) {
    if (item.page_start == null) return null;
    return item.page_end != null && item.page_end !== item.page_start
      ? "pages " + item.page_start + "–" + item.page_end
      : "page " + item.page_start;
  }

  const number = (n) => Number(n).toLocaleString("en");

  // -- auth ------------------------------------------------------------------------------
  function showAuth() {
    $("auth").hidden = false;
    $("token").focus();
  }

  $("auth-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
    $("token").value = "";
    $("auth").hidden = true;
    $("signout").hidden = false;
    message("");
    loadFolders().then(route).catch(fail);
  });

  $("signout").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    $("signout").hidden = true;
    showAuth();
  });

  // -- tabs ------------------------------------------------------------------------------
  function showView(name) {
    if (name !== "document") document.title = "Guaipeca";
    for (const view of document.querySelectorAll(".view")) view.hidden = view.id !== "view-" + name;
    const tab = name === "document" ? state.back || "search" : name;
    for (const button of document.querySelectorAll(".tabs button")) {
      button.setAttribute("aria-selected", String(button.dataset.tab === tab));
    }
  }

  for (const button of document.querySelectorAll(".tabs button")) {
    button.addEventListener("click", () => {
      message("");
      const name = button.dataset.tab;
      go(name === "search" ? state.lastSearch || {} : { view: name });
      openTab(name);
    });
  }

  function openTab(name) {
    showView(name);
    if (name === "status") loadStatus().catch(fail);
    if (name === "documents") loadDocuments(true).catch(fail);
  }

  // -- addresses: every view has one, and Back/Forward move between them -----------------------
  // The parameters of a search as the address gives them (only those set).
  const SEARCH_FIELDS = { q: "q", mode: "mode", corpus: "corpus", top_k: "top_k", section: "section", where: "where", ext: "extension" };

  function searchParams() {
    const params = {};
    for (const [key, id] of Object.entries(SEARCH_FIELDS)) {
      const value = $(id).value.trim();
      if (value && !(key === "top_k" && value === "10") && !(key === "mode" && value === "hybrid")) params[key] = value;
    }
    return params;
  }

  // A new history entry for `params` (none when the address is already that one).
  function go(params) {
    const url = "/" + (Object.keys(params).length ? "?" + new URLSearchParams(params) : "");
    if (url === location.pathname + location.search) return;
    history.pushState({ guaipeca: ((history.state && history.state.guaipeca) || 0) + 1 }, "", url);
  }

  // Show what the address names: a document, a tab, a search, or the empty search page.
  async function route() {
    const params = new URLSearchParams(location.search);
    message("");
    if (params.get("doc")) {
      const start = Number(params.get("start"));
      const end = Number(params.get("end"));
      const span = params.has("start") && params.has("end") && end > start ? { start, end } : null;
      await openDocument(params.get("doc"), params.get("corpus") || undefined, span, false);
      return;
    }
    const view = params.get("view");
    if (view && view !== "search" && $("view-" + view)) {
      openTab(view);
      return;
    }
    showView("search");
    for (const [key, id] of Object.entries(SEARCH_FIELDS)) {
      const value = params.get(key) || (key === "mode" ? "hybrid" : key === "top_k" ? "10" : "");
      const field = $(id);
      // A corpus the selector does not list still goes to the server, which says why.
      if (field.tagName === "SELECT" && value && ![...field.options].some((o) => o.value === value)) {
        field.append(el("option", { value, text: value }));
      }
      field.value = value;
    }
    if (params.get("q")) await search(false);
    else {
      $("results").replaceChildren();
      $("result-count").hidden = true;
    }
  }

  window.addEventListener("popstate", () => route().catch(fail));

  // Back from a document: the previous address when it is this page's, else the search.
  function leaveDocument() {
    if (history.state && history.state.guaipeca) history.back();
    else {
      go(state.back && state.back !== "search" ? { view: state.back } : state.lastSearch || {});
      route().catch(fail);
    }
  }

  // -- who is signed in -------------------------------------------------------------------
  async function loadMe() {
    const me = await send("GET", "/api/me");
    const who = me.identity ? "Signed in as " + (me.subject || me.identity) : "Not signed in";
    const rights = me.grants
      ? " · reads " + (me.read.join(", ") || "nothing") + "; writes " + (me.write.join(", ") || "nothing")
      : "";
    $("whoami").textContent = who + rights;
    $("whoami").hidden = false;
  }

  // -- corpora (selectors, upload targets) -------------------------------------------------
  async function loadFolders() {
    loadMe().catch(fail);
    const folders = await tool("list_folders");
    state.folders = folders;
    const names = folders.folders.map((f) => f.name);
    for (const id of ["corpus", "doc-corpus"]) {
      const select = $(id);
      select.replaceChildren(el("option", { value: "", text: "all" }));
      for (const name of names) select.append(el("option", { value: name, text: name }));
    }
    const uploads = folders.upload.corpora;
    $("upload-corpus").replaceChildren(...uploads.map((n) => el("option", { value: n, text: n })));
    $("upload-off").hidden = uploads.length > 0;
    for (const id of ["upload-corpus", "upload-file", "upload-subfolder", "upload-overwrite", "upload-button"]) {
      $(id).disabled = uploads.length === 0;
    }
    $("upload-limits").textContent = uploads.length
      ? "Up to " + number(folders.upload.max_file_size) + " bytes; types: " +
        folders.upload.allowed_extensions.join(" ") +
        (folders.upload.auto_index ? ". Indexed right away." : ". Indexed on the next run.")
      : "";
  }

  // -- search ----------------------------------------------------------------------------
  $("search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    search(true).catch(fail);
  });

  // Run the form's search; `push`: give it its own address (a search from the address
  // itself, or Back to it, does not).
  async function search(push) {
    message("");
    const args = { query: $("q").value.trim(), mode: $("mode").value, top_k: Number($("top_k").value) || 10 };
    if (!args.query) return;
    if ($("corpus").value) args.corpora = [$("corpus").value];
    if ($("section").value.trim()) args.section_filter = $("section").value.trim();
    let where = {};
    const raw = $("where").value.trim();
    if (raw) {
      try {
        where = JSON.parse(raw);
      } catch (error) {
        throw new Error("the metadata filter is not valid JSON: " + error.message);
      }
    }
    if ($("extension").value) where = Object.keys(where).length ? { $and: [where, { extension: $("extension").value }] } : { extension: $("extension").value };
    if (Object.keys(where).length) args.where = where;
    state.lastSearch = searchParams();
    if (push) go(state.lastSearch);
    // Only the latest search shows its results (Back may start one while another runs).
    const seq = (state.searchSeq = (state.searchSeq || 0) + 1);
    $("search-button").disabled = true;
    try {
      const out = await tool("search", args);
      await renderResults(out, seq);
    } finally {
      $("search-button").disabled = false;
    }
  }

  async function renderResults(out, seq) {
    // A snippet marks the query's terms **like this**: the render makes them <mark>s.
    const snippets = await render(out.hits.map((hit) => hit.snippet), null, true);
    if (seq !== state.searchSeq) return;
    const list = $("results");
    list.replaceChildren();
    $("result-count").hidden = false;
    // A sharded corpus with a shard down, partial results asked for: say which shards are missing.
    const missing = (out.missing_shards || []).length
      ? " — partial: " + out.missing_shards.join(", ") + " did not answer"
      : "";
    $("result-count").textContent =
      out.count + (out.count === 1 ? " result" : " results") + " (" + out.mode + ")" + missing;
    out.hits.forEach((hit, i) => {
      const heading = trail(hit).length ? trail(hit).join(" › ") : hit.doc_id;
      const snippet = el("div", { class: "snippet rendered" });
      snippet.innerHTML = snippets[i];
      const source = el("div", { class: "source" },
        el("span", { class: "where", text: hit.corpus + " / " + (hit.source_path || hit.doc_id) }),
        pages(hit) ? el("span", { class: "page", text: pages(hit) }) : null,
        el("span", { text: "chars " + hit.start + "–" + hit.end }),
        el("span", { text: "score " + hit.score.toFixed(4) }),
        hit.ocr ? el("span", { class: "ocr", title: "read with OCR from a scanned page or an image", text: "OCR" }) : null);
      list.append(el("li", { class: "hit" },
        el("div", { class: "path" }, el("span", { class: "rank", text: i + 1 + "." }), heading),
        source,
        snippet,
        el("button", { type: "button", class: "open", onclick: () => openDocument(hit.doc_id, hit.corpus, hit).catch(fail), text: "Open document" })));
    });
  }

  // -- document view ---------------------------------------------------------------------
  // `push` (default): the view gets its own address, with the hit's span.
  async function openDocument(docId, corpus, span, push) {
    message("");
    if (push !== false) {
      const params = { doc: docId };
      if (corpus) params.corpus = corpus;
      if (span) Object.assign(params, { start: String(span.start), end: String(span.end) });
      go(params);
    }
    const open = document.querySelector(".view:not([hidden])");
    if (open && open.id !== "view-document") state.back = open.id.slice("view-".length);
    const need = span ? span.end + 2000 : 0;
    const [doc, toc] = await Promise.all([
      tool("get_document", { doc_id: docId, corpus, max_chars: Math.min(1000000, Math.max(200000, need)) }),
      tool("get_toc", { doc_id: docId, corpus }),
    ]);
    state.doc = { doc, text: doc.text, span: span ? { start: span.start, end: span.end } : null };
    $("doc-title").textContent = doc.source_path || doc.doc_id;
    document.title = (doc.source_path || doc.doc_id) + " – Guaipeca";
    $("doc-meta").textContent = [doc.corpus, number(doc.chars) + " characters", doc.chunk_count + " chunks"].join(" · ");
    $("download").hidden = !doc.source_path;
    renderToc(toc);
    await renderText();
    showView("document");
    window.scrollTo(0, 0);
    scrollToCurrent();
  }

  function renderToc(toc) {
    const build = (nodes) => el("ul", {}, ...nodes.map((node) => el("li", {},
      el("button", { type: "button", text: node.title, onclick: () => jumpTo(node).catch(fail) }),
      node.children.length ? build(node.children) : null)));
    const root = $("toc");
    root.replaceChildren();
    if (!toc.structured || !toc.headings.length) {
      root.append(el("li", { class: "hint", text: "No headings in this document." }));
      return;
    }
    root.append(...build(toc.headings).childNodes);
  }

  async function renderText() {
    const { text, span } = state.doc;
    const article = $("doc-text");
    const marked = span && span.start < text.length ? [span.start, Math.min(span.end, text.length)] : null;
    const [html] = await render([text], [marked]);
    article.innerHTML = html;
    markSpan(article);
    const { doc } = state;
    $("doc-more").hidden = !(doc.doc.truncated && state.text.length < doc.doc.chars);
  }

  // The text scrolls inside its own panel (wide screens) or with the page (narrow ones).
  function scrollToCurrent() {
    const box = $("doc-text");
    const current = box.querySelector(".current");
    if (!current) box.scrollTop = 0;
    else if (box.scrollHeight > box.clientHeight) box.scrollTop = Math.max(0, current.offsetTop - box.clientHeight / 4);
    else current.scrollIntoView({ block: "center" });
  }

  async function jumpTo(node) {
    if (!node.chunk_id) return;
    const { chunks } = await tool("get_chunk", { chunk_ids: node.chunk_id });
    const chunk = chunks[0];
    state.doc.span = { start: chunk.start, end: chunk.end };
    if (chunk.end > state.text.length) await loadMore(chunk.end + 2000);
    await renderText();
    scrollToCurrent();
  }

  async function loadMore(until) {
    const { doc } = state.doc;
    const part = await tool("get_document", {
      doc_id: doc.doc_id, corpus: doc.corpus, offset: state.doc.text.length,
      max_chars: Math.min(1000000, Math.max(200000, (until || 0) - state.doc.text.length)),
    });
    state.doc.text += part.text;
    state.doc.doc = Object.assign({}, doc, { truncated: part.truncated });
  }
  Object.defineProperty(state, "text", { get: () => (state.doc ? state.doc.text : "") });

  $("doc-more").addEventListener("click", () => loadMore().then(renderText).catch(fail));
  $("back").addEventListener("click", leaveDocument);
  // Esc closes the document view (Enter searches: the query box is in a form).
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || $("view-document").hidden) return;
    event.preventDefault();
    leaveDocument();
  });
  $("download").addEventListener("click", async () => {
    try {
      const { doc } = state.doc;
      const path = doc.source_path.split("/").map(encodeURIComponent).join("/");
      const blob = await send("GET", "/download/" + encodeURIComponent(doc.corpus) + "/" + path);
      const link = el("a", { href: URL.createObjectURL(blob), download: doc.source_path.split("/").pop() });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(link.href), 10000);
    } catch (error) {
      fail(error);
    }
  });

  // -- document list ---------------------------------------------------------------------
  $("doc-corpus").addEventListener("change", () => loadDocuments(true).catch(fail));
  $("docs-more").addEventListener("click", () => loadDocuments(false).catch(fail));

  async function loadDocuments(fresh) {
    if (fresh) {
      state.docsOffset = 0;
      $("doc-list").replaceChildren();
    }
    const args = { limit: 50, offset: state.docsOffset };
    if ($("doc-corpus").value) args.corpus = $("doc-corpus").value;
    const out = await tool("list_documents", args);
    for (const d of out.documents) {
      $("doc-list").append(el("tr", {},
        el("td", {}, el("button", { type: "button", text: d.source_path || d.doc_id, onclick: () => openDocument(d.doc_id, d.corpus).catch(fail) })),
        el("td", { text: d.corpus }),
        el("td", { text: number(d.chunk_count) }),
        el("td", { text: number(d.chars) })));
    }
    state.docsOffset = out.next_offset || 0;
    $("docs-more").hidden = out.next_offset == null;
  }

  // -- upload ----------------------------------------------------------------------------
  $("upload-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    message("");
    const file = $("upload-file").files[0];
    if (!file) return;
    const query = new URLSearchParams({ corpus: $("upload-corpus").value, filename: file.name });
    if ($("upload-subfolder").value.trim()) query.set("subfolder", $("upload-subfolder").value.trim());
    if ($("upload-overwrite").checked) query.set("overwrite", "true");
    $("upload-button").disabled = true;
    try {
      const out = await followJob(await send("PUT", "/api/upload?" + query, file, "application/octet-stream"));
      const box = $("upload-result");
      const indexed = out.indexed
        ? "Indexed: corpus " + out.indexed.corpus + " now holds " + out.indexed.documents + " documents, " + out.indexed.chunks + " chunks."
        : "Not indexed yet (upload.auto_index is off).";
      box.replaceChildren(
        el("p", { class: "upload-ok", text: (out.replaced ? "Replaced " : "Uploaded ") + out.doc_id + " (" + number(out.bytes) + " bytes, " + out.format + ") into " + out.corpus + "." }),
        el("p", { text: indexed }),
        ...out.warnings.map((w) => el("p", { class: "hint", text: "Note: " + w })),
        el("button", { type: "button", text: "Open it", onclick: () => openDocument(out.doc_id, out.corpus).catch(fail) }));
      box.hidden = false;
      $("upload-form").reset();
    } catch (error) {
      fail(error);
    } finally {
      $("upload-button").disabled = false;
    }
  });

  // -- status ----------------------------------------------------------------------------
  async function loadStatus() {
    const s = await tool("status");
    const stat = (value, label) => el("div", {}, el("b", { text: value }), el("span", { text: label }));
    const rows = s.corpora.map((c) => el("tr", {},
      el("td", { text: c.searched === false ? c.name + " (not searched)" : c.name }),
      el("td", { text: c.topic }), el("td", { text: c.language }),
      el("td", { text: number(c.documents) }), el("td", { text: number(c.chunks) }),
      el("td", { text: c.upload_allowed ? "yes" : "no" })));
    const parts = [
      el("div", { class: "stats" },
        stat(number(s.documents), "documents"), stat(number(s.chunks), "chunks"),
        stat(s.model, "model (" + s.dimension + " dimensions)"), stat(s.version, "version")),
      el("table", { class: "list" },
        el("thead", {}, el("tr", {}, ...["Corpus", "Topic", "Language", "Documents", "Chunks", "Uploads"].map((h) => el("th", { text: h })))),
        el("tbody", {}, ...rows)),
      s.indexing ? el("p", { class: "hint", text: "Indexing " + s.indexing.corpus + " for " + s.indexing.seconds.toFixed(0) + " s…" }) : null,
      ...s.broken.map((b) => el("p", { class: "message", text: b.name + ": " + b.reason })),
      ...s.corpora.filter((c) => c.note).map((c) => el("p", { class: "hint", text: c.name + ": " + c.note })),
    ];
    $("status").replaceChildren(...parts.filter((part) => part != null));
  }

  // -- start -----------------------------------------------------------------------------
  if (sessionStorage.getItem(TOKEN_KEY)) $("signout").hidden = false;
  loadFolders().then(route).catch(fail);
})();
