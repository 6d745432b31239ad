// loadproof search page: draws the data in the "lp-data" script element (computed by
// `loadproof report` from a search file). The load-response curve: offered load (x, log scale)
// against p50 and p99 (left axis) and the error and shed shares (right axis), each trial a point,
// the knee and the bracket marked; then the confidence statement, what broke first and every
// trial. Everything from the file is set as text, never as markup.
(function () {
  'use strict';

  var model = JSON.parse(document.getElementById('lp-data').textContent);
  var app = document.getElementById('app');
  // The shared DOM helpers (assets/statpages.js, inlined before this script).
  var el = lpDOM.el, svg = lpDOM.svg, setAttrs = lpDOM.setAttrs, isNum = lpDOM.isNum;
  function fmtVal(v) {
    if (!isNum(v)) return '—';
    return v.toLocaleString('en-US', { maximumFractionDigits: 3 });
  }
  function fmtMs(v) { return isNum(v) ? +v.toFixed(3) + ' ms' : '—'; }
  function fmtShare(v) { return isNum(v) ? +(v * 100).toFixed(3) + '%' : '—'; }
  function si(v) {
    var a = Math.abs(v);
    if (a >= 1e9) return +(v / 1e9).toFixed(2) + 'G';
    if (a >= 1e6) return +(v / 1e6).toFixed(2) + 'M';
    if (a >= 1e3) return +(v / 1e3).toFixed(2) + 'k';
    return +v.toFixed(3) + '';
  }
  var unit = model.vary === 'rate' ? ' ops/s' : model.vary === 'count' ? ' connections' : model.vary === 'concurrency' ? ' clients' : '';

  // ---------- the headline: knee, bracket, confidence, what broke ----------
  function headline() {
    app.appendChild(el('h1', { text: model.title }));
    var sub = 'search file ' + model.file + ' · --vary ' + model.vary + ' from ' + fmtVal(model.from) + ' to ' + fmtVal(model.to) +
      ', growth ×' + fmtVal(model.growth) + ', resolution ' + fmtVal(model.resolution * 100) + '%, ' + model.trials_per_step +
      ' trial(s) a step · SLO ' + model.slo;
    app.appendChild(el('div', { cls: 'sub', id: 'search-sub', text: sub }));
    var knee;
    if (!isNum(model.knee)) {
      knee = el('div', { cls: 'verdict fail', id: 'knee', text: 'No knee: the SLO failed at the first value (' + model.vary + ' ' + fmtVal(model.from) + ')' });
    } else if (!isNum(model.first_fail)) {
      knee = el('div', { cls: 'verdict', id: 'knee' }, ['Knee: at least ', el('span', { id: 'knee-value', 'data-value': String(model.knee), text: fmtVal(model.knee) }),
        unit + ' — the ceiling (--to) passed; raise it to find the knee']);
    } else {
      knee = el('div', { cls: 'verdict', id: 'knee' }, ['Knee: ', el('span', { id: 'knee-value', cls: 'pass', 'data-value': String(model.knee), text: fmtVal(model.knee) }),
        unit + ' (' + model.vary + '), bracket: last pass ',
        el('span', { id: 'last-pass', 'data-value': String(model.last_pass), text: fmtVal(model.last_pass) }), ', first fail ',
        el('span', { id: 'first-fail', cls: 'fail', 'data-value': String(model.first_fail), text: fmtVal(model.first_fail) })]);
    }
    var card = el('div', { cls: 'card', id: 'search-headline' }, [knee]);
    card.appendChild(el('div', { cls: 'sub', id: 'knee-rule', text: 'Rule: ' + model.knee_rule }));
    card.appendChild(el('div', { id: 'confidence', text: 'Confidence: ' + model.confidence }));
    if (model.broke_first && model.broke_first.length) {
      card.appendChild(el('div', { id: 'broke-first' }, ['What broke first' + (isNum(model.first_fail) ? ' at ' + fmtVal(model.first_fail) : '') + ': ',
        el('strong', { cls: 'fail', text: model.broke_first.join(', ') })]));
    }
    var run = model.trial_count + ' trials in ' + model.step_count + ' steps' + (isNum(model.duration_s) ? ', ' + fmtVal(Math.round(model.duration_s)) + ' s' : '') +
      (model.started_at ? ', started ' + model.started_at : '') + '; stopped: ' + model.stopped;
    card.appendChild(el('div', { cls: 'sub', text: run }));
    if (model.aborted) card.appendChild(el('div', { cls: 'err', id: 'aborted', text: 'ABORTED: ' + model.aborted }));
    if (model.command) card.appendChild(el('div', { cls: 'sub' }, ['command: ', el('code', { text: model.command })]));
    app.appendChild(card);
  }

  // ---------- the load-response curve ----------
  // xTicks are the 1-2-5 ticks of the load axis, or the values tried when the range is too narrow
  // for three of those.
  function xTicks(lo, hi) {
    var t = logTicks(lo, hi);
    if (t.length >= 3) return t;
    var seen = {};
    (model.steps || []).forEach(function (s) { if (isNum(s.value) && s.value > 0) seen[s.value] = true; });
    return Object.keys(seen).map(Number).sort(function (a, b) { return a - b; });
  }
  function logTicks(lo, hi) {
    var out = [];
    for (var e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
      [1, 2, 5].forEach(function (m) {
        var v = m * Math.pow(10, e);
        if (v >= lo && v <= hi) out.push(v);
      });
    }
    return out;
  }
  function linTicks(hi, n) {
    var step = hi / n, mag = Math.pow(10, Math.floor(Math.log10(step))), nice = [1, 2, 2.5, 5, 10];
    for (var i = 0; i < nice.length; i++) { if (nice[i] * mag >= step) { step = nice[i] * mag; break; } }
    var out = [];
    for (var v = 0; v <= hi + step * 1e-9; v += step) out.push(+v.toPrecision(12));
    return out;
  }

  function curve() {
    var W = 1000, H = 440, L = 78, R = 78, T = 28, B = 52;
    var pts = model.points || [], steps = model.steps || [];
    var xs = steps.map(function (s) { return s.value; }).filter(isNum);
    [model.knee, model.first_fail].forEach(function (v) { if (isNum(v)) xs.push(v); });
    var box = el('div', { cls: 'chart', id: 'chart-curve' });
    app.appendChild(el('h2', { text: 'Load-response curve' }));
    app.appendChild(box);
    if (!xs.length) { box.appendChild(el('div', { cls: 'empty', text: 'no steps to draw' })); return; }
    var xlo = Math.min.apply(null, xs) / 1.3, xhi = Math.max.apply(null, xs) * 1.3;
    var lmax = 0, smax = 0;
    pts.forEach(function (p) {
      if (isNum(p.p99)) lmax = Math.max(lmax, p.p99);
      if (isNum(p.p50)) lmax = Math.max(lmax, p.p50);
      if (isNum(p.errors)) smax = Math.max(smax, p.errors);
      if (isNum(p.shed)) smax = Math.max(smax, p.shed);
    });
    var limits = (model.limits || []).filter(function (l) { return l.metric !== 'throughput' && isNum(l.limit); });
    limits.forEach(function (l) {
      if (l.metric === 'latency') lmax = Math.max(lmax, l.limit); else smax = Math.max(smax, l.limit);
    });
    lmax = lmax > 0 ? lmax * 1.1 : 1;
    smax = Math.min(1, Math.max(smax * 1.15, 0.01));
    function x(v) { return L + (Math.log10(v) - Math.log10(xlo)) / (Math.log10(xhi) - Math.log10(xlo)) * (W - L - R); }
    function yl(v) { return H - B - v / lmax * (H - T - B); }
    function ys(v) { return H - B - v / smax * (H - T - B); }
    var s = svg('svg', { id: 'curve', width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, 'data-xlo': xlo, 'data-xhi': xhi });
    // Bracket and knee under everything else.
    if (isNum(model.last_pass) && isNum(model.first_fail)) {
      s.appendChild(svg('rect', { cls: 'bracket', x: x(model.last_pass), y: T, width: Math.max(1, x(model.first_fail) - x(model.last_pass)), height: H - T - B,
        'data-from': model.last_pass, 'data-to': model.first_fail }));
    }
    // Axes and grid.
    xTicks(xlo, xhi).forEach(function (v) {
      s.appendChild(svg('line', { cls: 'grid', x1: x(v), x2: x(v), y1: T, y2: H - B }));
      s.appendChild(svg('text', { cls: 'tick', x: x(v), y: H - B + 16, 'text-anchor': 'middle' }, si(v)));
    });
    linTicks(lmax, 5).forEach(function (v) {
      if (v > lmax) return;
      s.appendChild(svg('line', { cls: 'grid', x1: L, x2: W - R, y1: yl(v), y2: yl(v) }));
      s.appendChild(svg('text', { cls: 'tick', x: L - 6, y: yl(v) + 4, 'text-anchor': 'end' }, si(v)));
    });
    linTicks(smax, 5).forEach(function (v) {
      if (v > smax) return;
      s.appendChild(svg('text', { cls: 'tick', x: W - R + 6, y: ys(v) + 4 }, +(v * 100).toPrecision(3) + '%'));
    });
    s.appendChild(svg('rect', { cls: 'frame', x: L, y: T, width: W - L - R, height: H - T - B }));
    s.appendChild(svg('text', { cls: 'axis-label', x: (L + W - R) / 2, y: H - 12, 'text-anchor': 'middle' }, model.x_label + ', log scale'));
    s.appendChild(svg('text', { cls: 'axis-label', x: 16, y: (T + H - B) / 2, 'text-anchor': 'middle', transform: 'rotate(-90 16 ' + (T + H - B) / 2 + ')' }, 'latency (ms): p50, p99'));
    s.appendChild(svg('text', { cls: 'axis-label', x: W - 14, y: (T + H - B) / 2, 'text-anchor': 'middle', transform: 'rotate(90 ' + (W - 14) + ' ' + (T + H - B) / 2 + ')' }, 'errors and shed (% of operations)'));
    // SLO limits (the throughput floor is drawn on the throughput chart).
    limits.forEach(function (l) {
      var y = l.metric === 'latency' ? yl(l.limit) : ys(l.limit);
      s.appendChild(svg('line', { cls: 'limit limit-' + l.metric, x1: L, x2: W - R, y1: y, y2: y, 'data-limit': l.limit }));
      s.appendChild(svg('text', { cls: 'limit-label', x: W - R - 4, y: y - 4, 'text-anchor': 'end' }, 'SLO ' + l.text));
    });
    // The curve: each step's median p50 and p99 over its trials, in order of load.
    var byValue = steps.slice().sort(function (a, b) { return a.value - b.value; });
    ['p50', 'p99'].forEach(function (k) {
      var line = byValue.filter(function (st) { return isNum(st[k]); }).map(function (st) { return x(st.value) + ',' + yl(st[k]); });
      if (line.length > 1) s.appendChild(svg('polyline', { cls: 'curve ' + k, points: line.join(' ') }));
    });
    // The knee and the first failure.
    if (isNum(model.knee)) {
      s.appendChild(svg('line', { cls: 'knee', id: 'knee-line', x1: x(model.knee), x2: x(model.knee), y1: T, y2: H - B, 'data-value': model.knee }));
      s.appendChild(svg('text', { cls: 'knee-label', x: x(model.knee) - 4, y: T + 14, 'text-anchor': 'end' }, 'knee ' + fmtVal(model.knee) + ' (highest value where every trial held the SLO)'));
    }
    if (isNum(model.first_fail)) {
      s.appendChild(svg('line', { cls: 'firstfail', id: 'firstfail-line', x1: x(model.first_fail), x2: x(model.first_fail), y1: T, y2: H - B, 'data-value': model.first_fail }));
      s.appendChild(svg('text', { cls: 'firstfail-label', x: x(model.first_fail) + 4, y: T + 14 }, 'first fail ' + fmtVal(model.first_fail)));
    }
    // Every trial: p50 and p99 as circles, errors as triangles, shed as squares; hollow when the
    // trial did not hold the SLO.
    pts.forEach(function (p) {
      if (!isNum(p.value)) return;
      var px = x(p.value), hold = p.held ? 'held' : 'broke';
      var tip = 'step ' + p.step + ' trial ' + p.trial + ' at ' + fmtVal(p.value) + unit + ': ' + (p.held ? 'held' : 'broke the SLO') +
        '; p50 ' + fmtMs(p.p50) + ', p99 ' + fmtMs(p.p99) + ', errors ' + fmtShare(p.errors) + ', shed ' + fmtShare(p.shed);
      function mark(node, cls, y) {
        setAttrs(node, { cls: 'pt ' + cls + ' ' + hold, 'data-step': p.step, 'data-trial': p.trial, 'data-value': p.value, 'data-y': y });
        node.appendChild(svg('title', null, tip));
        s.appendChild(node);
      }
      if (isNum(p.p50)) mark(svg('circle', { cx: px, cy: yl(p.p50), r: 4 }), 'p50', p.p50);
      if (isNum(p.p99)) mark(svg('circle', { cx: px, cy: yl(p.p99), r: 4 }), 'p99', p.p99);
      if (isNum(p.errors)) {
        var ey = ys(p.errors);
        mark(svg('path', { d: 'M' + px + ',' + (ey - 5) + ' l5,9 l-10,0 z' }), 'err', p.errors);
      }
      if (isNum(p.shed)) {
        var sy = ys(p.shed);
        mark(svg('rect', { x: px - 4, y: sy - 4, width: 8, height: 8 }), 'shed', p.shed);
      }
    });
    box.appendChild(s);
    var legend = el('div', { cls: 'legend' });
    [['p50', 'p50 latency (left axis)'], ['p99', 'p99 latency (left axis)'], ['err', 'errors (right axis)'], ['shed', 'shed by design (right axis)'],
      ['knee', 'knee'], ['bracket', 'bracket (last pass to first fail)']].forEach(function (k) {
      legend.appendChild(el('span', { cls: 'key key-' + k[0], text: k[1] }));
    });
    legend.appendChild(el('span', { cls: 'nt', text: 'each trial is a point; hollow: the trial broke the SLO; lines join each step\'s median' }));
    box.appendChild(legend);
    if (model.omitted) box.appendChild(el('div', { cls: 'sub', text: model.omitted + ' trials are not drawn or listed (the page shows ' + pts.length + '); the search file holds them all' }));
  }

  // ---------- achieved throughput against offered load ----------
  function throughputChart() {
    var W = 1000, H = 320, L = 78, R = 78, T = 24, B = 52;
    var pts = (model.points || []).filter(function (p) { return isNum(p.value) && isNum(p.throughput); });
    var steps = model.steps || [];
    app.appendChild(el('h2', { text: 'Achieved throughput' }));
    var box = el('div', { cls: 'chart', id: 'chart-throughput' });
    app.appendChild(box);
    if (!pts.length) { box.appendChild(el('div', { cls: 'empty', text: 'no trial measured its throughput' })); return; }
    var xs = steps.map(function (s) { return s.value; }).filter(isNum);
    var xlo = Math.min.apply(null, xs) / 1.3, xhi = Math.max.apply(null, xs) * 1.3;
    var ymax = 0;
    pts.forEach(function (p) { ymax = Math.max(ymax, p.throughput); });
    var lines = (model.limits || []).filter(function (l) { return l.metric === 'throughput' && isNum(l.limit); });
    lines.forEach(function (l) { if (!l.of_offered) ymax = Math.max(ymax, l.limit); });
    if (model.vary === 'rate') ymax = Math.max(ymax, Math.max.apply(null, xs));
    ymax = ymax > 0 ? ymax * 1.1 : 1;
    function x(v) { return L + (Math.log10(v) - Math.log10(xlo)) / (Math.log10(xhi) - Math.log10(xlo)) * (W - L - R); }
    function y(v) { return H - B - Math.min(v, ymax) / ymax * (H - T - B); }
    var s = svg('svg', { id: 'tput', width: W, height: H, viewBox: '0 0 ' + W + ' ' + H });
    xTicks(xlo, xhi).forEach(function (v) {
      s.appendChild(svg('line', { cls: 'grid', x1: x(v), x2: x(v), y1: T, y2: H - B }));
      s.appendChild(svg('text', { cls: 'tick', x: x(v), y: H - B + 16, 'text-anchor': 'middle' }, si(v)));
    });
    linTicks(ymax, 5).forEach(function (v) {
      if (v > ymax) return;
      s.appendChild(svg('line', { cls: 'grid', x1: L, x2: W - R, y1: y(v), y2: y(v) }));
      s.appendChild(svg('text', { cls: 'tick', x: L - 6, y: y(v) + 4, 'text-anchor': 'end' }, si(v)));
    });
    s.appendChild(svg('rect', { cls: 'frame', x: L, y: T, width: W - L - R, height: H - T - B }));
    s.appendChild(svg('text', { cls: 'axis-label', x: (L + W - R) / 2, y: H - 12, 'text-anchor': 'middle' }, model.x_label + ', log scale'));
    s.appendChild(svg('text', { cls: 'axis-label', x: 16, y: (T + H - B) / 2, 'text-anchor': 'middle', transform: 'rotate(-90 16 ' + (T + H - B) / 2 + ')' }, 'successes per second'));
    // What would be served if every offered request succeeded (open model only), and the SLO's floors.
    function along(f) {
      var out = [], n = 48;
      for (var i = 0; i <= n; i++) {
        var v = Math.pow(10, Math.log10(xlo) + i / n * (Math.log10(xhi) - Math.log10(xlo)));
        out.push(x(v) + ',' + y(f(v)));
      }
      return out.join(' ');
    }
    if (model.vary === 'rate') {
      s.appendChild(svg('polyline', { cls: 'offered', points: along(function (v) { return v; }) }));
      s.appendChild(svg('text', { cls: 'limit-label', x: x(xs[xs.length - 1]) - 6, y: y(Math.max.apply(null, xs)) - 6, 'text-anchor': 'end' }, 'offered'));
    }
    lines.forEach(function (l) {
      if (l.of_offered) {
        s.appendChild(svg('polyline', { cls: 'limit limit-throughput', points: along(function (v) { return v * l.limit; }), 'data-limit': l.limit }));
      } else {
        s.appendChild(svg('line', { cls: 'limit limit-throughput', x1: L, x2: W - R, y1: y(l.limit), y2: y(l.limit), 'data-limit': l.limit }));
      }
      s.appendChild(svg('text', { cls: 'limit-label', x: W - R - 4, y: (l.of_offered ? T + 28 : y(l.limit) - 4), 'text-anchor': 'end' }, 'SLO ' + l.text));
    });
    var line = steps.slice().sort(function (a, b) { return a.value - b.value; }).filter(function (st) { return isNum(st.throughput); })
      .map(function (st) { return x(st.value) + ',' + y(st.throughput); });
    if (line.length > 1) s.appendChild(svg('polyline', { cls: 'curve tp', points: line.join(' ') }));
    if (isNum(model.knee)) s.appendChild(svg('line', { cls: 'knee', x1: x(model.knee), x2: x(model.knee), y1: T, y2: H - B }));
    if (isNum(model.first_fail)) s.appendChild(svg('line', { cls: 'firstfail', x1: x(model.first_fail), x2: x(model.first_fail), y1: T, y2: H - B }));
    pts.forEach(function (p) {
      var c = svg('circle', { cls: 'pt tp ' + (p.held ? 'held' : 'broke'), cx: x(p.value), cy: y(p.throughput), r: 4, 'data-step': p.step, 'data-trial': p.trial, 'data-y': p.throughput });
      c.appendChild(svg('title', null, 'step ' + p.step + ' trial ' + p.trial + ' at ' + fmtVal(p.value) + unit + ': ' + fmtVal(p.throughput) + ' successes/s'));
      s.appendChild(c);
    });
    box.appendChild(s);
    var legend = el('div', { cls: 'legend' });
    legend.appendChild(el('span', { cls: 'key key-tp', text: 'achieved successes/s (each trial; line: step median)' }));
    if (model.vary === 'rate') legend.appendChild(el('span', { cls: 'key key-offered', text: 'offered rate (all served)' }));
    legend.appendChild(el('span', { cls: 'key key-knee', text: 'knee' }));
    box.appendChild(legend);
  }

  // ---------- every step and trial ----------
  function trials() {
    app.appendChild(el('h2', { text: 'Steps and trials' }));
    var t = el('table', { id: 'search-trials' });
    t.appendChild(el('tr', null, ['step', 'phase', model.vary, 'step verdict', 'trial', 'SLO', 'ops', 'ok', 'refused', 'successes/s', 'errors', 'shed', 'p50', 'p99', 'notes']
      .map(function (h) { return el('th', { text: h }); })));
    var steps = {};
    (model.steps || []).forEach(function (s) { steps[s.index] = s; });
    (model.points || []).forEach(function (p) {
      var st = steps[p.step] || {};
      var notes = [];
      if (p.broke && p.broke.length) notes.push('broke ' + p.broke.join(', '));
      if (p.run_failed) notes.push('the run succeeded at nothing (exit ' + p.exit_code + ')');
      if (p.generator && p.generator.length) notes.push('GENERATOR-LIMITED: ' + p.generator.join('; '));
      t.appendChild(el('tr', { 'data-step': p.step, 'data-trial': p.trial }, [
        el('td', { cls: 'n', text: String(p.step) }), el('td', { text: st.phase || '' }), el('td', { cls: 'n', text: fmtVal(p.value) }),
        el('td', { cls: st.passed ? 'pass' : 'fail', text: st.passed ? 'PASS' : 'FAIL (' + fmtVal((st.held || 0) * 100) + '% held)' }),
        el('td', { cls: 'n', text: String(p.trial) }), el('td', { cls: p.held ? 'pass' : 'fail', text: p.held ? 'held' : 'broke' }),
        el('td', { cls: 'n', text: fmtVal(p.ops) }), el('td', { cls: 'n', text: fmtVal(p.ok) }), el('td', { cls: 'n', text: fmtVal(p.refused) }),
        el('td', { cls: 'n', text: fmtVal(p.throughput) }),
        el('td', { cls: 'n', text: fmtShare(p.errors) }), el('td', { cls: 'n', text: fmtShare(p.shed) }),
        el('td', { cls: 'n', text: fmtMs(p.p50) }), el('td', { cls: 'n', text: fmtMs(p.p99) }), el('td', { text: notes.join('; ') })]));
    });
    app.appendChild(t);
  }

  try {
    headline();
    curve();
    throughputChart();
    trials();
  } catch (e) {
    app.appendChild(el('div', { cls: 'err', text: 'The page could not be drawn: ' + (e && e.message || e) }));
    throw e;
  }
  document.body.setAttribute('data-rendered', '1');
})();
