// loadproof comparison page: draws the data in the "lp-data" script element (computed by
// `loadproof compare --format html` from result files). Per metric: the change of B against A,
// its confidence interval as a bar against zero, the gate's allowance, and the verdict.
// Everything from the files is set as text, never as markup.
(function () {
  'use strict';

  var model = JSON.parse(document.getElementById('lp-data').textContent);
  var app = document.getElementById('app');
  // The shared DOM helpers (assets/statpages.js, inlined before this script).
  var el = lpDOM.el, svg = lpDOM.svg, isNum = lpDOM.isNum;
  function value(v, unit) {
    if (!isNum(v)) return '—';
    if (unit === 'share') return (v * 100).toFixed(3) + '%';
    if (unit === 'ms') return v.toFixed(3) + ' ms';
    return v.toFixed(1) + (unit || '');
  }
  function change(v, abs) {
    if (!isNum(v)) return '—';
    return (v >= 0 ? '+' : '') + v.toFixed(2) + (abs ? ' pts' : '%');
  }

  // bar draws one metric's interval on its own scale, symmetric about zero: the interval as a
  // bar, the measured change as a dot, zero as a line, and the allowance as a dashed line with
  // the side it forbids shaded.
  function bar(m) {
    var W = 300, H = 34, pad = 8, mid = 14;
    var ext = 0;
    [m.change, m.low, m.high, m.allowance ? m.allowance.limit : null].forEach(function (v) {
      if (isNum(v)) ext = Math.max(ext, Math.abs(v));
    });
    ext = ext > 0 ? ext * 1.15 : 1;
    function x(v) { return pad + (v + ext) / (2 * ext) * (W - 2 * pad); }
    var s = svg('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, cls: 'ivbar', 'data-ext': ext });
    if (m.allowance && isNum(m.allowance.limit)) {
      var lx = x(m.allowance.limit);
      var x0 = m.allowance.op === '<' ? lx : pad, x1 = m.allowance.op === '<' ? W - pad : lx;
      s.appendChild(svg('rect', { cls: 'forbidden', x: x0, y: 2, width: Math.max(0, x1 - x0), height: mid + 8 }));
      s.appendChild(svg('line', { cls: 'allow', x1: lx, x2: lx, y1: 1, y2: mid + 11, 'data-x': lx }));
    }
    s.appendChild(svg('line', { cls: 'axis', x1: pad, x2: W - pad, y1: mid + 6, y2: mid + 6 }));
    var zx = x(0);
    s.appendChild(svg('line', { cls: 'zero', x1: zx, x2: zx, y1: 12, y2: mid + 10, 'data-x': zx }));
    if (isNum(m.low) && isNum(m.high)) {
      var bx = x(m.low), bw = Math.max(1, x(m.high) - x(m.low));
      var r = svg('rect', { cls: 'ci ' + verdictClass(m.verdict), x: bx, y: mid + 2, width: bw, height: 8, 'data-x0': bx, 'data-x1': bx + bw });
      r.appendChild(svg('title', null, 'interval ' + change(m.low, m.absolute) + ' to ' + change(m.high, m.absolute)));
      s.appendChild(r);
    }
    if (isNum(m.change)) s.appendChild(svg('circle', { cls: 'est', cx: x(m.change), cy: mid + 6, r: 3.5 }));
    s.appendChild(svg('text', { cls: 'tick', x: pad, y: H - 1 }, change(-ext, m.absolute)));
    s.appendChild(svg('text', { cls: 'tick', x: zx, y: 10, 'text-anchor': 'middle' }, '0'));
    s.appendChild(svg('text', { cls: 'tick', x: W - pad, y: H - 1, 'text-anchor': 'end' }, change(ext, m.absolute)));
    return s;
  }
  function verdictClass(v) { return v === 'better' ? 'better' : v === 'worse' ? 'worse' : v === 'inconclusive' ? 'inconclusive' : 'same'; }

  function refused() {
    app.appendChild(el('h1', { text: model.title }));
    app.appendChild(el('div', { cls: 'card gate gate-fail', id: 'cmp-refused' }, [
      el('div', { cls: 'verdict', text: 'Comparison refused' }),
      el('div', { id: 'cmp-refused-reason', text: model.refused })]));
    app.appendChild(el('div', { cls: 'sub', text: model.runs_a + ' file(s) A against ' + model.runs_b + ' file(s) B' +
      (model.command ? ' of ' + model.command : '') + '; nothing was compared.' }));
  }

  function render() {
    var pct = (model.confidence * 100).toFixed(0) + '%';
    app.appendChild(el('h1', { text: model.title }));
    var sub = model.runs_a + ' run(s) A against ' + model.runs_b + ' run(s) B' + (model.command ? ' of ' + model.command : '') +
      ', ' + pct + ' confidence, ' + model.iterations + ' bootstrap resamples over the runs and their seconds' +
      (model.seed ? ' (seed ' + model.seed + ')' : '');
    app.appendChild(el('div', { cls: 'sub', id: 'cmp-sub', text: sub }));

    var sum = el('div', { cls: 'card', id: 'cmp-summary' }, [
      el('span', { cls: 'worse', text: model.worse + ' worse' }), ' · ',
      el('span', { cls: 'better', text: model.better + ' better' }), ' · ',
      el('span', { cls: 'nt', text: model.no_change + ' no change' }),
      model.inconclusive ? ' · ' : null,
      model.inconclusive ? el('span', { cls: 'inconclusive', text: model.inconclusive + ' inconclusive' }) : null,
      ' at ' + pct + ' confidence (a verdict needs the whole interval on one side of zero)']);
    app.appendChild(sum);

    if (model.gate) {
      var g = model.gate;
      var box = el('div', { cls: 'card gate ' + (g.passed ? 'gate-pass' : 'gate-fail'), id: 'cmp-gate', 'data-passed': String(g.passed) }, [
        el('div', { cls: 'verdict', text: 'Gate ' + (g.passed ? 'PASSED' : 'FAILED') + ': ' + (g.gates || []).join(', ') })]);
      if (g.failed && g.failed.length) {
        box.appendChild(el('ul', null, g.failed.map(function (f) { return el('li', { text: f }); })));
      } else if (g.passed) {
        box.appendChild(el('div', { cls: 'sub', text: 'no gated metric is worse beyond its allowance at ' + pct + ' confidence' }));
      }
      app.appendChild(box);
    }
    (model.notes || []).forEach(function (n) { app.appendChild(el('div', { cls: 'card note', text: 'Note: ' + n })); });

    app.appendChild(el('h2', { text: 'Change of B against A, per metric' }));
    app.appendChild(el('div', { cls: 'sub', text: 'Each bar is the ' + pct + ' confidence interval of the change, on its own scale ' +
      'about zero (the grey line); the dot is the measured change; a dashed line is the gate\'s allowance, the shaded side ' +
      'the changes it forbids. Throughput is better higher; latency, error and refusal rates better lower.' }));
    var t = el('table', { id: 'cmp-metrics' });
    t.appendChild(el('tr', null, ['metric', 'A', 'B', 'change', pct + ' interval', 'interval against zero', 'verdict', 'why', 'allowance']
      .map(function (h) { return el('th', { text: h }); })));
    (model.metrics || []).forEach(function (m) {
      var iv = isNum(m.low) && isNum(m.high) ? '[' + change(m.low, m.absolute) + ', ' + change(m.high, m.absolute) + ']' : 'no interval';
      var tr = el('tr', { cls: 'row-' + verdictClass(m.verdict), 'data-metric': m.name, 'data-verdict': m.verdict }, [
        el('td', { text: m.label, title: m.name }),
        el('td', { cls: 'n', text: value(m.a, m.unit) }),
        el('td', { cls: 'n', text: value(m.b, m.unit) }),
        el('td', { cls: 'n change', text: change(m.change, m.absolute) }),
        el('td', { cls: 'n interval', text: iv }),
        el('td', { cls: 'barcell' }, [bar(m)]),
        el('td', { cls: 'verdict-cell ' + verdictClass(m.verdict), text: m.verdict }),
        el('td', { cls: 'why', text: m.why }),
        el('td', { cls: m.allowance && m.allowance.failed ? 'fail' : '', text: m.allowance ? m.allowance.text + (m.allowance.failed ? ' — FAILED' : ' — held') : '' })
      ]);
      t.appendChild(tr);
    });
    app.appendChild(t);

    var files = el('details', { id: 'cmp-files' }, [el('summary', { text: 'Files' }),
      el('h3', { text: 'A' }), el('ul', null, (model.files_a || []).map(function (f) { return el('li', null, [el('code', { text: f })]); })),
      el('h3', { text: 'B' }), el('ul', null, (model.files_b || []).map(function (f) { return el('li', null, [el('code', { text: f })]); }))]);
    app.appendChild(files);
  }

  try {
    if (model.refused) refused(); else render();
  } catch (e) {
    app.appendChild(el('div', { cls: 'err', text: 'The page could not be drawn: ' + (e && e.message || e) }));
    throw e;
  }
  document.body.setAttribute('data-rendered', '1');
})();
