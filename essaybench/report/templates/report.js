// The essay browser of the run report (inlined; the page's CSP allows only this script, by
// its hash, and the scripts it creates: the chunk files beside the page, browser.py).
// The index (one row per essay) is JSON in #essay-index; an essay's texts come from its
// chunk, loaded with a <script src> (file:// pages may not fetch()). Every run text is
// put on the page with textContent: nothing from the run is ever parsed as HTML.
(function () {
  "use strict";
  // A chart is scaled to the column; a click (a tap) shows it at its own size, scrolling
  // inside its figure, and another click scales it back.
  Array.prototype.forEach.call(document.querySelectorAll("figure.chart"), function (f) {
    f.addEventListener("click", function () { f.classList.toggle("full"); });
  });
  var source = document.getElementById("essay-index");
  if (!source) { return; }
  var data = JSON.parse(source.textContent);
  var E = data.essays, P = data.prompts, PER_PAGE = data.per_page;
  var CHUNK_NAME = /^[0-9a-f]{16}\.js$/;
  var list = document.getElementById("essay-list");
  var count = document.getElementById("filter-count");
  var progress = document.getElementById("search-progress");
  var pageAt = document.getElementById("page-at");
  var prev = document.getElementById("page-prev"), next = document.getElementById("page-next");
  var search = document.getElementById("search"), sortBy = document.getElementById("sort");
  var selects = Array.prototype.slice.call(document.querySelectorAll("#filters select[data-key]"));
  var vocab = {model: data.models, genre: data.genres, set: data.sets, status: data.statuses,
               flag: data.flags};

  var byId = {}, mean = [], spread = [];
  E.forEach(function (r, i) {
    byId[r[0]] = i;
    var s = r[9].filter(function (x) { return x !== null; });
    mean.push(s.length ? s.reduce(function (a, b) { return a + b; }, 0) / s.length : null);
    spread.push(s.length > 1 ? Math.max.apply(null, s) - Math.min.apply(null, s) : null);
  });

  // ---- chunks ---------------------------------------------------------------------
  var chunks = {}, waiting = {};
  window.essaybenchChunk = function (name, d) { if (name in waiting) { chunks[name] = d; } };
  function loadChunk(c, done) { loadFile(data.chunks[c], done); }
  function loadFile(name, done) {  // an essay chunk or a pair chunk (pairs.py)
    if (!CHUNK_NAME.test(name)) { done(null); return; }
    if (chunks[name]) { done(chunks[name]); return; }
    if (waiting[name]) { waiting[name].push(done); return; }
    waiting[name] = [done];
    var s = document.createElement("script");
    function finish() {
      s.remove();
      var calls = waiting[name];
      delete waiting[name];
      calls.forEach(function (f) { f(chunks[name] || null); });
    }
    s.onload = finish;
    s.onerror = finish;
    s.src = data.folder + "/" + name;
    document.head.appendChild(s);
  }

  // ---- small DOM helpers (text only) -----------------------------------------------
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }
  function add(parent) {
    for (var k = 1; k < arguments.length; k++) {
      var c = arguments[k];
      if (c === null || c === undefined) { continue; }
      parent.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    }
    return parent;
  }
  function num(v, d) { return v === null || v === undefined ? "—" : v.toFixed(d === undefined ? 2 : d); }
  function pct(v) { return v === null || v === undefined ? "—" : Math.round(v * 100) + "%"; }
  function signed(v) { return (v >= 0 ? "+" : "") + v.toFixed(2); }

  // ---- filter, search, sort --------------------------------------------------------
  var hits = null, order = [], page = 0, searching = 0;
  function wanted() {
    var want = {};
    selects.forEach(function (s) {
      var v = s.value;
      want[s.dataset.key] = v === "" || v === "*" || v === "-" ? v : vocab[s.dataset.key].indexOf(v);
    });
    return want;
  }
  function keep(i, want) {
    var r = E[i], p = P[r[1]];
    if (hits && !hits[i]) { return false; }
    if (want.model !== "" && r[2] !== want.model) { return false; }
    if (want.genre !== "" && p[1] !== want.genre) { return false; }
    if (want.set !== "" && p[2] !== want.set) { return false; }
    if (want.status !== "" && r[4] !== want.status) { return false; }
    var f = want.flag;
    if (f === "*") { return r[5].length > 0; }
    if (f === "-") { return r[5].length === 0; }
    return f === "" || r[5].indexOf(f) >= 0;
  }
  function sortKey() {
    var s = sortBy.value;
    if (s === "score-desc") { return function (i) { return mean[i] === null ? null : -mean[i]; }; }
    if (s === "score-asc") { return function (i) { return mean[i]; }; }
    if (s.indexOf("judge-") === 0) {
      var j = Number(s.slice(6));
      return function (i) { return E[i][9][j] === null ? null : -E[i][9][j]; };
    }
    if (s === "length-desc") { return function (i) { return E[i][6] === null ? null : -E[i][6]; }; }
    if (s === "length-asc") { return function (i) { return E[i][6]; }; }
    if (s === "flags") { return function (i) { return -E[i][5].length; }; }
    if (s === "disagreement") { return function (i) { return spread[i] === null ? null : -spread[i]; }; }
    return null;
  }
  function apply(keepPage) {
    var want = wanted();
    order = [];
    for (var i = 0; i < E.length; i++) { if (keep(i, want)) { order.push(i); } }
    var key = sortKey();
    if (key) {
      var k = {};
      order.forEach(function (i) { k[i] = key(i); });
      order.sort(function (a, b) {  // missing values last, ties in prompt order
        var x = k[a], y = k[b];
        if (x === y) { return a - b; }
        if (x === null || x === undefined) { return 1; }
        if (y === null || y === undefined) { return -1; }
        return x - y;
      });
    }
    if (!keepPage) { page = 0; }
    count.textContent = order.length + " of " + E.length + " essays";
    render();
  }

  // ---- one essay -------------------------------------------------------------------
  function summary(i) {
    var r = E[i], p = P[r[1]], s = el("summary");
    add(s, el("code", "pid", p[0]), el("span", "genre", data.genres[p[1]]),
        el("span", "model", data.models[r[2]]), r[3] ? " #" + r[3] : null);
    var status = data.statuses[r[4]];
    add(s, el("span", "status status-" + (status === "ok" ? "ok" : "failed"), status));
    r[9].forEach(function (v, j) {
      if (v !== null) { add(s, el("span", "score", data.judges[j] + " " + num(v))); }
    });
    if (r[6] !== null) {
      var verdict = r[7] === null ? null : data.verdicts[r[7]];
      var chars = r[6] + " chars";
      if (verdict && ["compliant", "no_requirement", "off_language"].indexOf(verdict) < 0) {
        chars += " (" + verdict + " " + pct(r[8]) + ")";
      }
      add(s, el("span", "muted", chars));
    }
    r[5].forEach(function (f) { add(s, el("span", "flag", data.flags[f])); });
    if (spread[i] !== null) { add(s, el("span", "disagree", "Δ " + num(spread[i]))); }
    return s;
  }
  function judgment(j) {
    var box = el("div", "judgment"), head = el("h4", null, "Judge " + j.judge + ": " + j.status);
    if (j.weighted !== undefined) {
      add(head, " · weighted " + num(j.weighted) + " · w/o WT " + num(j.unweighted));
    }
    if (j.chosen) {
      add(head, " · ", el("span", "genre-chosen", "genre " + (j.genre || "not decided (genre call failed)")
          + ", the essay's choice as this judge saw it"));
    }
    add(box, head);
    if (j.flags) {
      var flags = el("p");
      j.flags.forEach(function (f) { add(flags, el("span", "flag", f), " "); });
      add(box, flags);
    }
    if (j.second_judge) {
      var said;
      if (j.second_score !== undefined) {
        said = num(j.second_score);
        if (j.weighted !== undefined) { said += " (" + signed(j.second_score - j.weighted) + " against the first)"; }
      } else {
        said = String(j.second_status) + (j.second_error ? ": " + j.second_error : "");
      }
      add(box, el("p", "second-opinion", "Second opinion (judge " + j.second_judge + "): " + said));
    }
    if (j.error) { add(box, el("p", "error", j.error)); }
    if (j.analysis) { var a = el("div", "text analysis", j.analysis); a.lang = "zh"; add(box, a); }
    if (j.traits) {
      var table = el("table", "subscores"), body = add(table, el("tbody")).firstChild;
      j.traits.forEach(function (t) {
        var td = el("td");
        t[1].forEach(function (q) { add(td, add(el("span", "q", q[0] + " "), el("b", null, q[1])), " "); });
        add(body, add(el("tr"), el("th", null, t[0]), td));
      });
      add(box, table);
    }
    return box;
  }
  function details(i, d) {
    var r = E[i], e = d.essays[i - d.first], p = d.prompts[e.prompt], out = document.createDocumentFragment();
    var head = add(el("h4", "prompt-head"), el("code", null, p.id), " " + p.genre);
    if (p.genre_zh) { add(head, " ", el("span", "zh", p.genre_zh)); }
    add(head, " · " + p.set + " · " + p.requirement);
    if (p.allowed) { add(head, " · the essay chooses: " + p.allowed); }
    var text = el("div", "text prompt-text", p.text);
    text.lang = "zh";
    add(out, head, text);
    if (p.constraints) {
      var cs = el("p", "constraints");
      p.constraints.forEach(function (c) {
        var words = el("span", null, c[1]);
        words.lang = "zh";
        add(cs, add(el("span", "constraint", c[0] + ": "), words), " ");
      });
      add(out, cs);
    }
    var facts = el("dl", "facts");
    function fact(name, value, cls) { add(facts, el("dt", null, name), el("dd", cls || null, value)); }
    fact("status", e.status + (e.finish ? " (finish: " + e.finish + ")" : ""));
    if (e.error) { fact("error", e.error, "error"); }
    var verdict = r[7] === null ? "—" : data.verdicts[r[7]].replace(/_/g, " ");
    fact("length", (r[6] === null ? "—" : r[6]) + " grid characters, "
         + (e.chinese === undefined ? "—" : e.chinese) + " Chinese; " + verdict
         + (r[8] ? " (" + pct(r[8]) + ")" : ""));
    fact("latency · cost", num(e.latency) + " s · " + num(e.cost, 6) + " USD");
    var link = el("a", "permalink", "#essay=" + r[0]);
    link.href = "#essay=" + r[0];
    add(facts, el("dt", null, "link"), add(el("dd"), link));
    add(out, facts);
    if (e.text !== undefined) {
      var t = el("div", "text essay-text", e.text);
      t.lang = "zh";
      add(out, t);
    } else {
      add(out, el("p", "empty", "No essay text."));
    }
    e.judgments.forEach(function (j) { add(out, judgment(j)); });
    return out;
  }
  function row(i) {
    var r = E[i], p = P[r[1]], box = el("details", "essay");
    box.dataset.id = r[0];
    box.dataset.model = data.models[r[2]];
    box.dataset.genre = data.genres[p[1]];
    box.dataset.set = data.sets[p[2]];
    box.dataset.status = data.statuses[r[4]];
    var body = el("div", "essay-body");
    add(box, summary(i), body);
    box.addEventListener("toggle", function () {
      if (!box.open || box.dataset.loaded) { return; }
      box.dataset.loaded = "loading";
      body.textContent = "loading…";
      loadChunk(p[3], function (d) {
        body.textContent = "";
        if (d) {
          add(body, details(i, d));
          box.dataset.loaded = "yes";
        } else {
          add(body, el("p", "error", "This essay's texts could not be read from "
              + data.folder + "/" + data.chunks[p[3]] + " beside the page."));
          delete box.dataset.loaded;
        }
      });
    });
    return box;
  }
  // One page of `ids` into `box` (a row each, made by `make`), the page number clamped to
  // the pages there are; returns the page shown. The essay list and the pairwise list page
  // this way.
  function paint(box, ids, per, at, make, label, back, forward) {
    var pages = Math.max(1, Math.ceil(ids.length / per));
    at = Math.min(Math.max(at, 0), pages - 1);
    var frag = document.createDocumentFragment();
    ids.slice(at * per, (at + 1) * per).forEach(function (i) { frag.appendChild(make(i)); });
    box.textContent = "";
    box.appendChild(frag);
    label.textContent = "page " + (at + 1) + " of " + pages;
    back.disabled = at === 0;
    forward.disabled = at >= pages - 1;
    return at;
  }
  function render() { page = paint(list, order, PER_PAGE, page, row, pageAt, prev, next); }

  // ---- search ----------------------------------------------------------------------
  var haystacks = {};
  function haystack(c, d) {
    if (!haystacks[c]) {
      haystacks[c] = d.essays.map(function (e, k) {
        var p = d.prompts[e.prompt], parts = [p.id, p.text, e.text, e.error,
                                              data.models[E[d.first + k][2]]];
        e.judgments.forEach(function (j) { parts.push(j.analysis, j.error, j.second_error); });
        return parts.filter(function (x) { return x; }).join("\n").toLowerCase();
      });
    }
    return haystacks[c];
  }
  function runSearch() {
    var term = search.value.trim().toLowerCase(), run = ++searching, n = data.chunks.length;
    if (!term) { hits = null; progress.textContent = ""; apply(); return; }
    hits = {};
    var found = 0;
    function step(c) {
      if (run !== searching) { return; }
      if (c >= n) {
        progress.textContent = "“" + search.value.trim() + "”: " + found + " essays (" + n + " of " + n + " files read)";
        apply();
        return;
      }
      progress.textContent = "searching… " + c + " of " + n + " files read, " + found + " found";
      loadChunk(c, function (d) {
        if (run !== searching) { return; }
        if (d) {
          haystack(c, d).forEach(function (h, k) {
            if (h.indexOf(term) >= 0) { hits[d.first + k] = true; found += 1; }
          });
        }
        if (c % 8 === 7) { apply(); }  // results appear as they are found
        step(c + 1);
      });
    }
    step(0);
  }

  // ---- permalink -------------------------------------------------------------------
  function openFromHash() {
    var m = /^#essay=([0-9a-f]{12})$/.exec(location.hash);
    if (!m) { return; }
    var i = byId[m[1]];
    if (i === undefined) { progress.textContent = "No essay " + m[1] + " in this report."; return; }
    selects.forEach(function (s) { s.value = ""; });
    if (hits) { search.value = ""; hits = null; searching += 1; progress.textContent = ""; }
    apply();
    page = Math.floor(order.indexOf(i) / PER_PAGE);
    render();
    var box = list.querySelector('details[data-id="' + m[1] + '"]');
    if (box) { box.open = true; box.scrollIntoView(); }
  }

  selects.forEach(function (s) { s.addEventListener("change", function () { apply(); }); });
  sortBy.addEventListener("change", function () { apply(); });
  var typing = null;
  search.addEventListener("input", function () { clearTimeout(typing); typing = setTimeout(runSearch, 300); });
  search.addEventListener("keydown", function (ev) {
    if (ev.key === "Enter") { ev.preventDefault(); clearTimeout(typing); runSearch(); }
  });
  prev.addEventListener("click", function () { page -= 1; render(); });
  next.addEventListener("click", function () { page += 1; render(); });
  window.addEventListener("hashchange", openFromHash);
  apply();
  openFromHash();
  pairView();
  document.getElementById("essays").dataset.ready = "yes";

  // ---- the pairwise view (pairs.py) --------------------------------------------------
  // Three integers per comparison in #pair-index (its essays and a packed code: judge,
  // status and each order's verdict); an opened one reads its two essays from the
  // essays' chunks and both orders' verdicts and analyses from its pair chunk.
  function pairView() {
    var src = document.getElementById("pair-index");
    if (!src) { return; }
    var X = JSON.parse(src.textContent), F = X.pairs, N = F.length / 3, NS = X.statuses.length;
    var EA = new Int32Array(N), EB = new Int32Array(N), PK = new Int32Array(N), CH = new Int32Array(N);
    var at = 0, c = 0;
    for (var q = 0; q < N; q++) {
      at += F[3 * q];
      EA[q] = at;
      EB[q] = at + F[3 * q + 1];
      PK[q] = F[3 * q + 2];
      while (c + 1 < X.chunk_first.length && X.chunk_first[c + 1] <= q) { c += 1; }
      CH[q] = c;
    }
    // r: the fields the view reads, decoded (verdicts: 0 model_a, 1 model_b, 2 tie, null)
    function R(k) {
      var code = PK[k], ab = (code >> 2) & 3, ba = code & 3, st = (code >> 4) % NS;
      var ok = X.statuses[st] === "ok";
      return {judge: Math.floor((code >> 4) / NS), status: st, a: EA[k], b: EB[k], chunk: CH[k],
              ab: ab === 3 ? null : ab, ba: ba === 3 ? null : ba,
              consistent: ok ? (ab === ba ? 1 : 0) : null,
              verdict: ok ? (ab === ba ? ab : 2) : null};
    }
    var plist = document.getElementById("pair-list"), pcount = document.getElementById("pair-count");
    var pat = document.getElementById("pair-at");
    var pprev = document.getElementById("pair-prev"), pnext = document.getElementById("pair-next");
    var only = document.getElementById("pair-inconsistent");
    var psel = Array.prototype.slice.call(document.querySelectorAll("#pair-filters select[data-key]"));
    var shown = [], ppage = 0;
    function model(r, side) { return data.models[E[side === 0 ? r.a : r.b][2]]; }
    function said(r, v) {  // a model verdict (0: model_a, 1: model_b, 2: tie) in words
      if (v === null) { return "no verdict"; }
      return v === 2 ? "tie" : model(r, v) + " better";
    }
    function keepPair(r, want) {
      if (only.checked && r.consistent !== 0) { return false; }
      if (want.pair && model(r, 0) + " vs " + model(r, 1) !== want.pair) { return false; }
      if (want.judge && X.judges[r.judge] !== want.judge) { return false; }
      if (want.status && X.statuses[r.status] !== want.status) { return false; }
      return true;
    }
    function applyPairs() {
      var want = {};
      psel.forEach(function (s) { want[s.dataset.key] = s.value; });
      shown = [];
      for (var k = 0; k < N; k++) { if (keepPair(R(k), want)) { shown.push(k); } }
      ppage = 0;
      pcount.textContent = shown.length + " of " + N + " comparisons";
      renderPairs();
    }
    function essayColumn(r, side, d) {
      var col = el("div", "pair-essay"), i = side === 0 ? r.a : r.b;
      var first = side === 0 ? "AB" : "BA";
      add(col, add(el("h4", null), el("span", "model", model(r, side)),
                   " · shown first in order " + first));
      var e = d ? d.essays[i - d.first] : null;
      if (!e) { add(col, el("p", "error", "This essay's text could not be read.")); return col; }
      var link = el("a", "permalink", "#essay=" + E[i][0]);
      link.href = "#essay=" + E[i][0];
      var facts = add(el("p", "muted"), "status " + e.status + " · ");
      E[i][9].forEach(function (v, j) {  // the essay's own scores, for comparison
        if (v !== null) { add(facts, el("span", "score", data.judges[j] + " " + num(v)), " "); }
      });
      add(col, add(facts, link));
      if (e.error) { add(col, el("p", "error", e.error)); }
      if (e.text !== undefined) {
        var t = el("div", "text essay-text", e.text);
        t.lang = "zh";
        add(col, t);
      }
      return col;
    }
    function orderBox(r, o, c) {
      var name = o === 0 ? "AB" : "BA", first = model(r, o), call = c[o === 0 ? "ab" : "ba"];
      var box = el("div", "pair-order pair-order-" + name.toLowerCase());
      var head = add(el("h4", null, "Order " + name + " (" + first + " first): "),
                     el("span", "verdict", said(r, o === 0 ? r.ab : r.ba)));
      if (call.status !== "ok") { add(head, " · " + call.status); }
      if (call.position) { add(head, el("span", "muted", " (said: " + (call.position === "tie" ? "tie" : call.position === "A" ? "first better" : "second better") + ")")); }
      add(box, head);
      if (call.error) { add(box, el("p", "error", call.error)); }
      if (call.analysis) { var a = el("div", "text analysis", call.analysis); a.lang = "zh"; add(box, a); }
      if (call.raw) { add(box, el("div", "text raw-reply", call.raw)); }
      return box;
    }
    function pairDetails(k, c, da, db) {
      var r = R(k), out = document.createDocumentFragment();
      if (da) {
        var e = da.essays[r.a - da.first], p = da.prompts[e.prompt];
        var head = add(el("h4", "prompt-head"), el("code", null, p.id), " " + p.genre + " · " + p.set);
        var text = el("div", "text prompt-text", p.text);
        text.lang = "zh";
        add(out, head, text);
      }
      if (c.error) { add(out, el("p", "error", c.error)); }
      add(out, add(el("div", "pair-essays"), essayColumn(r, 0, da), essayColumn(r, 1, db)));
      add(out, orderBox(r, 0, c), orderBox(r, 1, c));
      return out;
    }
    function pairRow(k) {
      var r = R(k), box = el("details", "pair"), body = el("div", "essay-body");
      box.dataset.pair = String(k);
      box.dataset.models = model(r, 0) + " vs " + model(r, 1);
      box.dataset.judge = X.judges[r.judge];
      box.dataset.status = X.statuses[r.status];
      box.dataset.consistent = r.consistent === null ? "" : String(r.consistent);
      var s = el("summary"), pr = P[E[r.a][1]];
      add(s, el("code", "pid", pr[0]), el("span", "genre", data.genres[pr[1]]));
      add(s, el("span", "model", model(r, 0)), " vs ", el("span", "model", model(r, 1)));
      if (X.judges.length > 1) { add(s, el("span", "muted", "judge " + X.judges[r.judge])); }
      var status = X.statuses[r.status];
      if (status !== "ok") {
        add(s, el("span", "status status-failed", status));
      } else {
        add(s, el("span", "score", "AB: " + said(r, r.ab)), el("span", "score", "BA: " + said(r, r.ba)),
            el("span", "verdict", "→ " + said(r, r.verdict)));
      }
      if (r.consistent === 0) { add(s, el("span", "flag", "position-inconsistent")); }
      add(box, s, body);
      box.addEventListener("toggle", function () {
        if (!box.open || box.dataset.loaded) { return; }
        box.dataset.loaded = "loading";
        body.textContent = "loading…";
        var got = {}, left = 3;
        function one(key) {
          return function (d) {
            got[key] = d;
            left -= 1;
            if (left) { return; }
            body.textContent = "";
            if (!got.c) {
              add(body, el("p", "error", "This comparison could not be read from " + data.folder
                  + "/" + X.chunks[r.chunk] + " beside the page."));
              delete box.dataset.loaded;
              return;
            }
            add(body, pairDetails(k, got.c.pairs[k - got.c.first], got.a, got.b));
            box.dataset.loaded = "yes";
          };
        }
        loadFile(X.chunks[r.chunk], one("c"));
        loadChunk(P[E[r.a][1]][3], one("a"));
        loadChunk(P[E[r.b][1]][3], one("b"));
      });
      return box;
    }
    function renderPairs() {
      ppage = paint(plist, shown, X.per_page, ppage, pairRow, pat, pprev, pnext);
    }
    psel.forEach(function (s) { s.addEventListener("change", applyPairs); });
    only.addEventListener("change", applyPairs);
    pprev.addEventListener("click", function () { ppage -= 1; renderPairs(); });
    pnext.addEventListener("click", function () { ppage += 1; renderPairs(); });
    applyPairs();
    document.getElementById("pairwise").dataset.ready = "yes";
  }
})();
