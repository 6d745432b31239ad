// loadproof report page: draws the data in the "lp-data" script element with uPlot. Everything the
// page shows comes from that element (computed by `loadproof report` from result files); on the
// live dashboard, interval rows arrive as server-sent events and are appended the same way.
(function () {
  'use strict';

  var PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f',
    '#bcbd22', '#17becf', '#393b79', '#ad494a', '#637939', '#8c6d31', '#843c39', '#7b4173'];
  // REFUSAL_CLASSES are the outcome classes of refusals by design (result.IsRefusal).
  var REFUSAL_CLASSES = ['refused', 'rate-limited', 'intentional'];
  var CLASS_COLORS = { success: '#2ca02c', network: '#7f7f7f', auth: '#9467bd', server: '#d62728',
    client: '#8c564b', rate_limited: '#ff7f0e', intentional: '#1f77b4', other: '#bcbd22' };

  var model = JSON.parse(document.getElementById('lp-data').textContent);
  var app = document.getElementById('app');
  var charts = {}; // id -> {u, key, el}
  var renders = 0;
  window.__lpCharts = [];

  // ---------- small helpers ----------
  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    if (attrs) {
      for (var k in attrs) {
        if (k === 'text') e.textContent = attrs[k];
        else if (k === 'cls') e.className = attrs[k];
        else e.setAttribute(k, attrs[k]);
      }
    }
    (kids || []).forEach(function (c) { if (c != null) e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c); });
    return e;
  }
  function isNum(v) { return typeof v === 'number' && isFinite(v); }
  function fmt(v, digits) {
    if (!isNum(v)) return '—';
    if (digits == null) digits = Math.abs(v) >= 100 ? 0 : Math.abs(v) >= 10 ? 1 : 2;
    return v.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: 0 });
  }
  function fmtInt(v) { return isNum(v) ? Math.round(v).toLocaleString('en-US') : '—'; }
  function fmtPct(v) { return isNum(v) ? fmt(v * 100, 2) + ' %' : '—'; }
  function si(v) {
    if (!isNum(v)) return '';
    var a = Math.abs(v);
    if (a >= 1e9) return +(v / 1e9).toFixed(2) + 'G';
    if (a >= 1e6) return +(v / 1e6).toFixed(2) + 'M';
    if (a >= 1e3) return +(v / 1e3).toFixed(2) + 'k';
    return +v.toFixed(3) + '';
  }
  function bytes(v) {
    if (!isNum(v)) return '';
    var a = Math.abs(v), u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], i = 0;
    while (a >= 1024 && i < u.length - 1) { a /= 1024; v /= 1024; i++; }
    return +v.toFixed(1) + ' ' + u[i];
  }
  function table(head, rows, numeric) {
    var t = el('table');
    var tr = el('tr');
    head.forEach(function (h) { tr.appendChild(el('th', { text: h })); });
    t.appendChild(tr);
    rows.forEach(function (r) {
      var row = el('tr');
      r.forEach(function (c, i) {
        var td;
        if (c instanceof Node) { td = el('td', null, [c]); } else { td = el('td', { text: c == null ? '' : String(c) }); }
        if (numeric && numeric[i]) td.className = 'n';
        row.appendChild(td);
      });
      t.appendChild(row);
    });
    return t;
  }
  function outcomeSpan(o) {
    return el('span', { cls: o === 'passed' ? 'pass' : o === 'failed' ? 'fail' : 'nt', text: o });
  }

  // ---------- charts ----------
  // MIN_CHART_POINTS: a series with fewer points is shown as a table, not a chart.
  var MIN_CHART_POINTS = 3;
  // MIN_FOLDED_PHASES: this many repeated phases or more, all passed on time, fold into one row.
  var MIN_FOLDED_PHASES = 3;
  function seriesColor(name, i) { return CLASS_COLORS[name] || PALETTE[i % PALETTE.length]; }

  // bands draws the capacity phases as shaded spans with their names and pass/fail, and the stop
  // point as a red line.
  function bandsPlugin() {
    var cap = model.capacity;
    if (!cap) return null;
    return {
      hooks: {
        drawClear: [function (u) {
          var ctx = u.ctx, top = u.bbox.top, h = u.bbox.height;
          ctx.save();
          cap.phases.forEach(function (p, i) {
            if (!isNum(p.start) || !isNum(p.end) || p.end <= p.start) return;
            var x0 = u.valToPos(p.start, 'x', true), x1 = u.valToPos(p.end, 'x', true);
            ctx.fillStyle = p.passed ? (i % 2 ? 'rgba(44,160,44,0.10)' : 'rgba(44,160,44,0.16)') : 'rgba(214,39,40,0.14)';
            ctx.fillRect(x0, top, x1 - x0, h);
            ctx.fillStyle = p.passed && !p.overran ? '#11772d' : '#b3261e';
            ctx.font = (11 * devicePixelRatio) + 'px system-ui, sans-serif';
            // The label only where it fits in its band (labels of short phases would run into
            // each other): the short name, else the phase's number.
            var room = x1 - x0 - 6 * devicePixelRatio;
            var label = (p.label || p.name) + (p.passed ? ' ✓' : ' ✗') + (p.overran ? ' OVERRAN' : '');
            if (ctx.measureText(label).width > room) label = String(i + 1);
            if (ctx.measureText(label).width <= room) ctx.fillText(label, x0 + 4 * devicePixelRatio, top + 12 * devicePixelRatio);
          });
          ctx.restore();
        }],
        draw: [function (u) {
          if (!isNum(cap.stop_at)) return;
          var ctx = u.ctx, x = u.valToPos(cap.stop_at, 'x', true);
          ctx.save();
          ctx.strokeStyle = '#b3261e';
          ctx.lineWidth = 2 * devicePixelRatio;
          ctx.setLineDash([6 * devicePixelRatio, 4 * devicePixelRatio]);
          ctx.beginPath(); ctx.moveTo(x, u.bbox.top); ctx.lineTo(x, u.bbox.top + u.bbox.height); ctx.stroke();
          ctx.fillStyle = '#b3261e';
          ctx.fillText('stop', x + 3 * devicePixelRatio, u.bbox.top + u.bbox.height - 4 * devicePixelRatio);
          ctx.restore();
        }]
      }
    };
  }

  // spec: {id, title, unit, lines: [{label, x, y, dash, color}], xlog, xfmt}
  function buildData(lines) {
    var same = lines.every(function (l) { return l.x === lines[0].x; });
    if (same) {
      return [lines[0].x].concat(lines.map(function (l) { return l.y; }));
    }
    return uPlot.join(lines.map(function (l) { return [l.x, l.y]; }));
  }

  function yFormatter(unit) {
    if (unit === 'bytes') return function (u, vals) { return vals.map(bytes); };
    if (unit === 'ratio') return function (u, vals) { return vals.map(function (v) { return +(v * 100).toFixed(2) + '%'; }); };
    return function (u, vals) { return vals.map(si); };
  }

  // WIDE_RANGE: values spanning this factor or more (and all above zero) are drawn on a log axis,
  // where a 20 µs median and a 2 s stall both show.
  var WIDE_RANGE = 100;
  function wideRange(ys) {
    var lo = Infinity, hi = -Infinity;
    for (var i = 0; i < ys.length; i++) {
      for (var j = 0; j < ys[i].length; j++) {
        var v = ys[i][j];
        if (v == null || !isNum(v)) continue;
        if (v <= 0) return false;
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
    }
    return hi / lo >= WIDE_RANGE;
  }

  function chartWidth(box) { return Math.max(320, (box.clientWidth || app.clientWidth || 1000) - 12); }

  function drawChart(parent, spec) {
    var box = charts[spec.id] && charts[spec.id].el;
    if (!box) {
      box = el('div', { cls: 'chart', id: 'chart-' + spec.id });
      parent.appendChild(box);
    }
    var lines = spec.lines.filter(function (l) { return l.x && l.x.length; });
    var info = { id: spec.id, title: spec.title, series: lines.map(function (l) { return l.label; }), points: 0, drawn: false };
    if (!lines.length) {
      box.textContent = '';
      box.appendChild(el('div', { cls: 'empty', text: spec.title + ': no data' }));
      charts[spec.id] = { el: box, key: '' };
      return info;
    }
    var data = buildData(lines);
    info.points = data[0].length;
    info.nonNull = data.slice(1).map(function (a) { return a.filter(function (v) { return v != null; }).length; });
    var small = info.points < MIN_CHART_POINTS && !spec.xlog;
    var ylog = !!spec.ylogWide && wideRange(data.slice(1));
    info.ylog = ylog;
    var key = info.series.join('\u0000') + (spec.xlog ? 'log' : '') + (small ? 'table' : '') + (ylog ? 'ylog' : '');
    var prev = charts[spec.id];
    if (small) {
      // Fewer points than make a line: a small table says as much without dots on an empty axis.
      if (prev && prev.u) prev.u.destroy();
      box.textContent = '';
      box.className = 'chart small';
      box.appendChild(el('div', { cls: 'ctitle', text: spec.title }));
      var fy = spec.unit === 'bytes' ? bytes : spec.unit === 'ratio' ? function (v) { return isNum(v) ? fmt(v * 100) + ' %' : '—'; } : fmt;
      var rows = data[0].map(function (x, i) {
        return [fmt(x, 3)].concat(data.slice(1).map(function (ys) { return ys[i] == null ? '—' : fy(ys[i]); }));
      });
      var tb = table([spec.xlabel || 'seconds since start'].concat(info.series.map(function (s) { return s + (spec.unit && spec.unit !== 'bytes' ? ' (' + spec.unit + ')' : ''); })), rows,
        [true].concat(info.series.map(function () { return true; })));
      tb.className = 'small-series';
      box.appendChild(tb);
      charts[spec.id] = { el: box, key: key };
      info.drawn = true;
      info.table = true;
      return info;
    }
    box.className = 'chart';
    if (prev && prev.u && prev.key === key) {
      prev.u.setData(data);
      info.drawn = true;
      return info;
    }
    if (prev && prev.u) prev.u.destroy();
    box.textContent = '';
    var series = [{ label: spec.xlabel || 's' }];
    lines.forEach(function (l, i) {
      series.push({ label: l.label, stroke: l.color || seriesColor(l.name || l.label, i), width: 1.5,
        dash: l.dash ? [6, 4] : undefined, spanGaps: false, points: { show: info.points < 120 } });
    });
    var opts = {
      title: spec.title,
      width: chartWidth(box),
      height: spec.height || 260,
      series: series,
      scales: { x: spec.xlog ? { time: false, distr: 3, log: 10 } : { time: false }, y: ylog ? { distr: 3, log: 10 } : {} },
      axes: [
        { label: spec.xlabel || 'seconds since start', values: spec.xfmt },
        { label: spec.unit + (ylog ? ' (log scale)' : ''), size: 70, values: yFormatter(spec.unit) }
      ],
      legend: { live: true },
      plugins: spec.bands === false ? [] : [bandsPlugin()].filter(Boolean)
    };
    var u = new uPlot(opts, data, box);
    charts[spec.id] = { el: box, key: key, u: u };
    info.drawn = true;
    return info;
  }

  // ---------- specs from the model ----------
  function runsLines(pick, opts) {
    // pick(run) -> [{label, name, y}] ; returns lines for every run (compare overlays them).
    var out = [];
    var multi = model.runs.length > 1;
    model.runs.forEach(function (r, ri) {
      pick(r).forEach(function (s, si2) {
        out.push({ label: (multi ? String.fromCharCode(65 + ri) + ' ' : '') + s.label, name: s.name || s.label,
          x: s.x || r.t, y: s.y, dash: ri > 0 || !!s.dash,
          color: multi ? (s.color || seriesColor(s.name || s.label, si2)) : s.color });
      });
    });
    return out;
  }

  function specs() {
    var out = [];
    var r0 = model.runs[0];
    var target = model.live && isNum(model.live.target_rate) && model.live.target_rate > 0 ? model.live.target_rate : 0;
    out.push({ id: 'throughput', title: 'Throughput' + (target ? ' (target ' + fmt(target) + ' /s dashed)' : ''), unit: 'ops/s',
      lines: runsLines(function (r) {
        var ls = [{ label: 'throughput', y: r.throughput, color: '#1f77b4' }];
        if (target) ls.push({ label: 'target', y: r.t.map(function () { return target; }), color: '#7f7f7f', dash: true });
        return ls;
      }) });
    var kinds = [];
    model.runs.forEach(function (r) { (r.latency || []).forEach(function (l) { if (kinds.indexOf(l.kind) < 0 && !sameAsKept(r, l)) kinds.push(l.kind); }); });
    // The order the final report has (its primary kind first, the rest by name), live as well.
    kinds.sort(function (a, b) { return kindRank(a) < kindRank(b) ? -1 : kindRank(a) > kindRank(b) ? 1 : 0; });
    var pc = [['p50', '#2ca02c'], ['p90', '#1f77b4'], ['p99', '#ff7f0e'], ['p999', '#d62728'], ['max', '#7f7f7f']];
    var alsoOf = {};
    model.runs.forEach(function (r) { (r.latency || []).forEach(function (l) { if (l.also && l.also.length) alsoOf[l.kind] = l.also; }); });
    kinds.forEach(function (kind) {
      var also = alsoOf[kind] ? ' = ' + alsoOf[kind].join(' = ') + ' (identical)' : '';
      out.push({ id: 'latency-' + kind, title: 'Latency percentiles over time (' + kind + also + ')', unit: 'ms', ylogWide: true,
        lines: runsLines(function (r) {
          var ls = (r.latency || []).filter(function (l) { return l.kind === kind; })[0];
          if (!ls) return [];
          return pc.map(function (p) { return { label: p[0] === 'p999' ? 'p99.9' : p[0], y: ls[p[0]], color: p[1] }; });
        }) });
    });
    out.push({ id: 'classes', title: 'Outcome classes over time', unit: 'ops/s',
      lines: runsLines(function (r) { return (r.classes || []).map(function (s) { return { label: s.name, name: s.name, y: s.values }; }); }) });
    if (model.runs.some(function (r) { return r.cause_series && r.cause_series.length; })) {
      out.push({ id: 'causes', title: 'Failures by cause (reasons, status codes) over time', unit: 'per second',
        lines: runsLines(function (r) { return (r.cause_series || []).map(function (s) { return { label: s.name, y: s.values }; }); }) });
    }
    if (model.runs.some(function (r) { return r.connections && r.connections.length; })) {
      out.push({ id: 'connections', title: 'Connections over time (running totals)', unit: 'connections',
        lines: runsLines(function (r) { return (r.connections || []).map(function (s) { return { label: s.name, y: s.values }; }); }) });
    }
    if (model.runs.some(function (r) { return r.counters && r.counters.length; })) {
      out.push({ id: 'counters', title: 'Driver counters over time', unit: 'per second',
        lines: runsLines(function (r) { return (r.counters || []).map(function (s) { return { label: s.name, y: s.values }; }); }) });
    }
    var groups = [];
    model.runs.forEach(function (r) {
      (r.server || []).forEach(function (g) {
        var k = g.group + '|' + g.unit;
        if (groups.indexOf(k) < 0) groups.push(k);
      });
    });
    var order = ['memory', 'connections', 'buffers', 'shedding', 'other'];
    groups.sort(function (a, b) {
      var ga = order.indexOf(a.split('|')[0]), gb = order.indexOf(b.split('|')[0]);
      return ga !== gb ? ga - gb : (a < b ? -1 : a > b ? 1 : 0);
    });
    groups = groups.filter(function (k) {
      var gu = k.split('|');
      return model.runs.some(function (r) {
        return (r.server || []).some(function (g) { return g.group === gu[0] && g.unit === gu[1] && shownSeries(g).length > 0; });
      });
    });
    groups.forEach(function (k) {
      var gu = k.split('|');
      out.push({ id: 'server-' + gu[0] + '-' + gu[1].replace(/\s+/g, '-'), title: 'Server samples: ' + gu[0] + ' (' + gu[1] + ')',
        unit: gu[1] === 'bytes' ? 'bytes' : gu[1],
        lines: runsLines(function (r) {
          var g = (r.server || []).filter(function (g) { return g.group === gu[0] && g.unit === gu[1]; })[0];
          return g ? shownSeries(g).map(function (s) { return { label: s.name, y: s.values }; }) : [];
        }) });
    });
    var dkinds = [];
    model.runs.forEach(function (r) { (r.distribution || []).forEach(function (d) { if (dkinds.indexOf(d.kind) < 0) dkinds.push(d.kind); }); });
    if (dkinds.length) {
      out.push({ id: 'distribution', title: 'Latency by percentile (HdrHistogram distribution)', unit: 'ms', xlog: true, bands: false,
        xlabel: 'percentile', height: 320,
        xfmt: function (u, vals) { return vals.map(function (v) { return v == null ? '' : pctLabel(1 - 1 / v); }); },
        lines: runsLines(function (r) {
          return (r.distribution || []).map(function (d, i) {
            return { label: d.kind + (d.also && d.also.length ? ' = ' + d.also.join(' = ') : ''), x: d.p.map(function (p) { return 1 / (1 - p); }), y: d.ms, color: PALETTE[i % PALETTE.length] };
          });
        }) });
    }
    return out;
  }

  // The rules the final report's model follows (htmlmodel.go), applied to the live data too, so
  // that the charts are the same live and final: a server series zero throughout is dropped, and
  // so is an "other" gauge that never moves; a latency kind identical to another is drawn once,
  // under the kind the headline would quote.
  function allZero(v) { return v.every(function (x) { return x == null || x === 0; }); }
  function flatValues(v) {
    var first = null;
    return v.every(function (x) { if (x == null) return true; if (first == null) first = x; return x === first; });
  }
  function shownSeries(g) {
    return g.series.filter(function (s) {
      return !allZero(s.values) && !(g.group === 'other' && g.unit !== 'per second' && flatValues(s.values));
    });
  }
  var SUCCESS_KINDS = ['latency', 'connect_handshake', 'request', 'resumed'];
  function kindRank(kind) { return kind === 'latency' ? '' : kind; }
  function successRank(kind) { var i = SUCCESS_KINDS.indexOf(kind); return i < 0 ? SUCCESS_KINDS.length : i; }
  function sameLatency(a, b) {
    var any = false;
    var eq = ['p50', 'p90', 'p99', 'p999', 'max'].every(function (p) {
      var x = a[p] || [], y = b[p] || [];
      if (x.length !== y.length) return false;
      for (var i = 0; i < x.length; i++) { if (x[i] !== y[i]) return false; if (x[i] != null) any = true; }
      return true;
    });
    return eq && any;
  }
  // sameAsKept: l is identical to another kind of r that ranks before it (and is drawn instead).
  function sameAsKept(r, l) {
    if (!(model.live && !model.live.ended)) return false; // the final model is deduplicated already
    return (r.latency || []).some(function (o) {
      if (o === l || !sameLatency(o, l)) return false;
      var ro = successRank(o.kind), rl = successRank(l.kind);
      return ro < rl || ro === rl && o.kind < l.kind;
    });
  }

  function pctLabel(p) {
    if (p <= 0) return '0%';
    var s = (p * 100).toPrecision(8).replace(/0+$/, '').replace(/\.$/, '');
    return s + '%';
  }

  // ---------- sections ----------
  // lastOf is a series' last value.
  function lastOf(v) { return v && v.length ? v[v.length - 1] : null; }

  function headlineFigures(h) {
    var r = model.runs[0];
    if (model.live && !model.live.ended && r && r.t && r.t.length) {
      // Live: the rates now (the last interval), not the means since the start.
      var ok = (r.classes || []).filter(function (s) { return s.name === 'success'; })[0];
      var now = [['Succeeded /s (now)', fmt(ok ? lastOf(ok.values) : null) + ' /s'],
        ['Operations /s (now)', fmt(lastOf(r.throughput)) + ' /s']];
      var ref = 0, fail = 0, anyRef = false;
      (r.classes || []).forEach(function (s) {
        var v = lastOf(s.values);
        if (!isNum(v) || s.name === 'success') return;
        if (REFUSAL_CLASSES.indexOf(s.name) >= 0) { ref += v; anyRef = true; } else fail += v;
      });
      if (anyRef || h.refused > 0) now.push(['Refused by design /s (now)', fmt(ref) + ' /s']);
      now.push(['Failures /s (now)', fmt(fail) + ' /s']);
      var lat = (r.latency || []).filter(function (l) { return l.kind === h.kind; })[0];
      if (lat) now.push(['p99 (now)', msText(lastOf(lat.p99))]);
      now.push(['Succeeded (so far)', fmtInt(h.succeeded)], ['Failures (so far)', fmtInt(h.failures)]);
      if (h.refused > 0) now.push(['Refused by design (so far)', fmtInt(h.refused)]);
      return now;
    }
    var figs = [
      ['Throughput (succeeded)', fmt(h.throughput) + ' /s'], ['Succeeded', fmtInt(h.succeeded)],
      ['Operations', fmtInt(h.operations) + (isNum(h.offered_rate) ? ' (' + fmt(h.offered_rate) + ' /s)' : '')],
      ['Success rate (not refused)', fmtPct(h.success_rate)], ['Failures', fmtInt(h.failures)]];
    if (h.refused > 0) {
      var by = Object.keys(h.refused_by || {}).sort().map(function (k) { return k + ' ' + fmtInt(h.refused_by[k]); }).join(', ');
      figs.push(['Refused by design', fmtInt(h.refused), by]);
    }
    return figs.concat([
      ['Duration', fmt(h.duration_s) + ' s'], ['p50', msText(h.p50_ms)], ['p90', msText(h.p90_ms)],
      ['p99', msText(h.p99_ms)], ['p99.9', msText(h.p999_ms)], ['max', msText(h.max_ms)]
    ]);
  }

  function headlineSection(root) {
    root.appendChild(el('h2', { text: 'Headline' }));
    if (model.mode === 'compare') {
      var rows = (model.compare || []).map(function (d) {
        var cls = '';
        if (isNum(d.change_pct) && d.change_pct !== 0) {
          var up = d.change_pct > 0;
          cls = (up === (d.better === 'higher')) ? 'better' : 'worse';
        }
        return [d.figure, fmt(d.a), fmt(d.b), el('span', { cls: cls, text: isNum(d.change_pct) ? (d.change_pct > 0 ? '+' : '') + fmt(d.change_pct, 1) + ' %' : '—' })];
      });
      root.appendChild(el('div', { cls: 'sub', text: 'A: ' + model.runs[0].label + '   B: ' + model.runs[1].label + ' (dashed in the charts)' }));
      root.appendChild(table(['Figure', 'A', 'B', 'Change (B − A) / A'], rows, [false, true, true, true]));
      return;
    }
    var h = model.runs[0].headline;
    var g = el('div', { cls: 'grid', id: 'headline' });
    headlineFigures(h).forEach(function (f) {
      g.appendChild(el('div', { cls: 'fig' }, [el('div', { cls: 'v', text: f[1] }), el('div', { cls: 'l', text: f[0] + (h.kind && (/^p\d/.test(f[0]) || f[0] === 'max') ? ' (' + h.kind + ')' : '') }),
        f[2] ? el('div', { cls: 'd', text: f[2] }) : null]));
    });
    var cv = model.runs[0].cost; // the cost tile (cost.go): only when the run was priced
    if (cv) g.appendChild(el('div', { cls: 'fig', id: 'cost' }, [el('div', { cls: 'v', text: cv.total }), el('div', { cls: 'l', text: cv.label })]));
    root.appendChild(g);
    if (h.stop) {
      var s = h.stop;
      root.appendChild(el('div', { cls: 'card fail', text: 'Stopped early: ' + s.reason + (s.metric ? ' (' + s.metric + ' ' + fmt(s.observed) + ' against limit ' + fmt(s.limit) + ')' : '') + ' after ' + fmt(s.elapsed_secs) + ' s' }));
    }
  }

  // capacityVerdict: the verdict first (a loopback rehearsal is never certifiable, whatever its
  // checks say), then the headline; the phases and checks come after it (capacityPhases).
  function capacityVerdict(root) {
    var c = model.capacity;
    if (!c) return;
    root.appendChild(el('h2', { text: 'Capacity verdict' }));
    var overran = c.phases.filter(function (p) { return p.overran; });
    var v = el('div', { cls: 'card verdict', id: 'verdict' }, [
      el('span', { cls: c.passed ? 'pass' : 'fail', text: c.passed ? 'PASSED' : 'FAILED' }), '  certification ready: ',
      c.rehearsal ? el('span', { cls: 'fail', text: 'rehearsal: not certifiable (loopback target)' })
        : el('span', { cls: c.certification_ready ? 'pass' : 'fail', text: c.certification_ready ? 'yes' : 'no' }),
      c.stopped_after_phase ? '  stopped after phase "' + c.stopped_after_phase + '" (' + (c.stop_reason || 'stop') + ')' : '',
      overran.length ? el('span', { cls: 'overran', text: '  OVERRAN: ' + overran.map(function (p) {
        return p.name + ' ran ' + fmt(p.elapsed_secs, 1) + ' s of ' + fmt(p.planned_secs, 1) + ' s planned'; }).join('; ') }) : ''
    ]);
    root.appendChild(v);
    root.appendChild(el('div', { cls: 'sub', text: (c.scope || '') + (c.target ? ' — target ' + c.target : '') + (c.generated_at ? ' — generated ' + c.generated_at : '') }));
    if (c.blockers && c.blockers.length) {
      var ul = el('ul');
      c.blockers.forEach(function (b) { ul.appendChild(el('li', { text: b })); });
      root.appendChild(el('details', null, [el('summary', { text: 'Why certification is not ready (' + c.blockers.length + ')' }), ul]));
    }
  }

  function capacityPhases(root) {
    var c = model.capacity;
    if (!c) return;
    root.appendChild(el('h3', { text: 'Phases' }));
    var phead = ['Phase', 'Kind', 'Result', 'Planned (s)', 'Ran (s)', 'Served', 'Served /s', 'Refused by design', 'Failures', 'p50', 'p99', 'Note'];
    var pnum = [false, false, false, true, true, true, true, true, true, true, true, false];
    function phaseRow(p) {
      var h = p.headline || {};
      var note = p.error || (p.live_stop ? 'live stop: ' + (p.live_stop.metric || p.live_stop.reason) : '') || (p.interrupted ? 'interrupted' : '') || (p.stop_breached ? 'stop condition breached' : '');
      var ran = el('span', { cls: p.overran ? 'overran' : '', text: fmt(p.elapsed_secs, 1) + (p.overran ? ' OVERRAN' : '') });
      return [p.name, p.kind, outcomeSpan(p.passed ? 'passed' : 'failed'), p.planned_secs ? fmt(p.planned_secs, 1) : '—', ran,
        fmtInt(h.succeeded), fmt(h.throughput), el('span', { cls: h.refused ? 'refused' : '', text: fmtInt(h.refused || 0) }), fmtInt(h.failures),
        msText(h.p50_ms), msText(h.p99_ms), note];
    }
    // Repeated phases (the same name but for a trailing number, the same kind: "step-1" …
    // "step-12") that all passed on time fold into one row; every phase is listed below.
    var rows = [], folded = 0;
    function stem(p) { return (p.label || p.name).replace(/[-_ .]?\d+$/, ''); }
    function foldable(p) { return p.passed && !p.overran && !p.error && stem(p) !== (p.label || p.name); }
    for (var i = 0; i < c.phases.length;) {
      var j = i + 1, st = stem(c.phases[i]);
      if (foldable(c.phases[i])) {
        while (j < c.phases.length && foldable(c.phases[j]) && stem(c.phases[j]) === st && c.phases[j].kind === c.phases[i].kind) j++;
      }
      var run = c.phases.slice(i, j);
      if (run.length >= MIN_FOLDED_PHASES) {
        var sum = function (f) { return run.reduce(function (a, p) { var v = f(p); return a + (isNum(v) ? v : 0); }, 0); };
        var served = sum(function (p) { return (p.headline || {}).succeeded; }), ranS = sum(function (p) { return p.elapsed_secs; });
        rows.push([run[0].name + ' … ' + run[run.length - 1].name + ' (' + run.length + ' phases)', run[0].kind, outcomeSpan('passed'),
          fmt(sum(function (p) { return p.planned_secs; }), 1), fmt(ranS, 1), fmtInt(served), ranS > 0 ? fmt(served / ranS) : '—',
          fmtInt(sum(function (p) { return (p.headline || {}).refused; })), fmtInt(sum(function (p) { return (p.headline || {}).failures; })), '',
          msText(Math.max.apply(null, run.map(function (p) { return isNum((p.headline || {}).p99_ms) ? p.headline.p99_ms : 0; }))) + ' (highest)',
          run.length + ' repeated phases folded']);
        folded += run.length;
      } else {
        run.forEach(function (p) { rows.push(phaseRow(p)); });
      }
      i = j;
    }
    var pt = table(phead, rows, pnum);
    pt.id = 'phases';
    root.appendChild(pt);
    if (folded) {
      var pa = table(phead, c.phases.map(phaseRow), pnum);
      pa.id = 'phases-all';
      root.appendChild(el('details', null, [el('summary', { text: 'Every phase (' + c.phases.length + ')' }), pa]));
    }
    root.appendChild(el('h3', { text: 'Checks' }));
    var all = [], open = [];
    c.phases.forEach(function (p) {
      (p.checks || []).forEach(function (ch) {
        var row = [p.name, ch.stop ? 'stop' : 'check', ch.metric, ch.comparison, fmt(ch.observed, 4), fmt(ch.limit, 4), outcomeSpan(ch.outcome)];
        all.push(row);
        if (ch.outcome !== 'passed') open.push(row);
      });
    });
    var head = ['Phase', 'Type', 'Metric', 'Comparison', 'Observed', 'Limit', 'Outcome'], numeric = [false, false, false, false, true, true, false];
    var passed = all.length - open.length;
    var failed = open.filter(function (r) { return r[6].textContent === 'failed'; }).length;
    root.appendChild(el('div', { cls: 'card', id: 'checks-folded' }, [
      el('span', { cls: failed ? 'fail' : 'pass', text: passed + ' of ' + all.length + ' checks passed' }),
      open.length ? '; ' + failed + ' failed, ' + (open.length - failed) + ' not tested (listed below)' : '']));
    if (open.length) {
      var t = table(head, open, numeric);
      t.id = 'checks';
      root.appendChild(t);
    }
    var ta = table(head, all, numeric);
    ta.id = 'checks-all';
    root.appendChild(el('details', null, [el('summary', { text: 'Every check (' + all.length + ')' }), ta]));
  }

  // msText writes a latency in the unit that suits it (µs, ms, s).
  function msText(ms) {
    if (!isNum(ms)) return '—';
    if (ms < 1) return fmt(ms * 1000) + ' µs';
    if (ms >= 1000) return fmt(ms / 1000) + ' s';
    return fmt(ms) + ' ms';
  }

  function detailsSection(root) {
    model.runs.forEach(function (r) {
      root.appendChild(el('h2', { text: 'Run' + (model.runs.length > 1 ? ' ' + r.label : '') + ': details' }));
      var rows = [['Harness', r.harness], ['Command', r.command], ['Target', r.target],
        ['Started', r.started_at || ''], ['Ended', r.ended_at || ''], ['Segments', (r.segments || []).join(', ') || 'whole run']];
      (r.extra || []).forEach(function (e) { rows.push(e); });
      root.appendChild(table(['', ''], rows));
      if (r.cost) { root.appendChild(el('h3', { text: 'Cost' })); var ct = table(['', ''], r.cost.rows); ct.id = 'cost-rows'; root.appendChild(ct); }
      var tot = (r.totals || []).map(function (t) { return [t[0], fmtInt(t[1])]; });
      if (tot.length) { root.appendChild(el('h3', { text: 'Outcome classes' })); root.appendChild(table(['Class', 'Operations'], tot, [false, true])); }
      var cau = (r.causes || []).map(function (t) { return [t[0], fmtInt(t[1])]; });
      if (cau.length) { root.appendChild(el('h3', { text: 'Failures by cause' })); root.appendChild(table(['Cause', 'Count'], cau, [false, true])); }
      var flags = Object.keys(r.flags || {}).sort().map(function (k) { return ['--' + k, r.flags[k]]; });
      if (flags.length) { root.appendChild(el('details', null, [el('summary', { text: 'Command line flags (' + flags.length + ')' }), table(['Flag', 'Value'], flags)])); }
      var ms = (r.machines || []).map(function (m, i) {
        return [String(i + 1), m.hostname || '', (m.os || '') + '/' + (m.arch || ''), m.cpu_model || '', fmtInt(m.cores), fmtInt(m.gomaxprocs),
          m.memory_bytes ? bytes(m.memory_bytes) : '', m.kernel || '', m.go_version || '', m.loadproof_version || ''];
      });
      if (ms.length) {
        root.appendChild(el('h3', { text: 'Machine record' + (ms.length > 1 ? 's (' + ms.length + ')' : '') }));
        root.appendChild(table(['#', 'Host', 'OS/arch', 'CPU', 'Cores', 'GOMAXPROCS', 'Memory', 'Kernel', 'Go', 'loadproof'], ms));
      }
    });
  }

  // ---------- render ----------
  var chartRoot = null;
  function layout() {
    app.textContent = '';
    charts = {};
    var title = el('h1', { text: model.title });
    if (model.live) {
      title.appendChild(el('span', { id: 'live-badge', cls: 'live' + (model.live.ended ? ' ended' : ''), text: model.live.ended ? 'run finished' : 'live' }));
    }
    app.appendChild(title);
    var r0 = model.runs[0] || {};
    app.appendChild(el('div', { cls: 'sub', text: [r0.harness, r0.command, r0.target].filter(Boolean).join(' · ') +
      (model.files && model.files.length ? ' — from ' + model.files.join(', ') : '') + ' — ' + model.mode }));
    if (model.live && model.live.ended) {
      var b = el('button', { cls: 'save', id: 'save', text: 'Save report' });
      b.addEventListener('click', save);
      title.appendChild(b);
    }
    if (model.live) app.appendChild(el('div', { cls: 'card', id: 'live-status' }));
    liveStatus();
    capacityVerdict(app);
    var hs = el('div', { id: 'headline-section' });
    app.appendChild(hs);
    headlineSection(hs);
    capacityPhases(app);
    app.appendChild(el('h2', { text: 'Over time' }));
    chartRoot = el('div', { id: 'charts' });
    app.appendChild(chartRoot);
    detailsSection(app);
  }

  function drawCharts() {
    var sp = specs();
    var infos = sp.map(function (s) { return drawChart(chartRoot, s); });
    // The page shows the charts in the specs' order, whenever each first got data; a chart no
    // longer specified (a latency kind found identical to another) goes.
    var ids = {};
    sp.forEach(function (s) { ids[s.id] = true; chartRoot.appendChild(charts[s.id].el); });
    Object.keys(charts).forEach(function (id) {
      if (ids[id]) return;
      if (charts[id].u) charts[id].u.destroy();
      if (charts[id].el.parentNode) charts[id].el.parentNode.removeChild(charts[id].el);
      delete charts[id];
    });
    window.__lpCharts = infos;
    renders++;
    document.body.setAttribute('data-rendered', String(renders));
  }

  function render() {
    try {
      layout();
      drawCharts();
    } catch (e) {
      window.__lpError = String(e && e.stack || e);
      app.appendChild(el('div', { cls: 'err', text: 'The report could not be drawn: ' + e }));
      throw e;
    }
  }

  window.addEventListener('resize', function () {
    for (var id in charts) {
      var c = charts[id];
      if (c.u) c.u.setSize({ width: chartWidth(c.el), height: c.u.height });
    }
  });

  // ---------- live ----------
  function pad(a, n) { while (a.length < n) a.push(null); return a; }
  function findOrAdd(list, name, n, make) {
    for (var i = 0; i < list.length; i++) {
      var x = list[i];
      if ((x.name || x.kind || (x.group + '|' + x.unit)) === name) return x;
    }
    var s = make ? make() : { name: name, values: [] };
    list.push(s);
    return s;
  }
  function appendMap(list, m, n) {
    m = m || {};
    Object.keys(m).sort().forEach(function (k) { findOrAdd(list, k, n); });
    list.forEach(function (s) { pad(s.values, n); s.values.push(k2v(m, s.name)); });
  }
  function k2v(m, k) { return Object.prototype.hasOwnProperty.call(m, k) ? m[k] : null; }

  function appendRow(r, row) {
    var n = r.t.length;
    r.t.push(row.t);
    r.throughput.push(row.thr);
    r.latency = r.latency || [];
    Object.keys(row.lat || {}).forEach(function (kind) {
      findOrAdd(r.latency, kind, n, function () { return { kind: kind, p50: [], p90: [], p99: [], p999: [], max: [] }; });
    });
    r.latency.forEach(function (ls) {
      var v = (row.lat || {})[ls.kind] || [null, null, null, null, null];
      ['p50', 'p90', 'p99', 'p999', 'max'].forEach(function (p, i) { pad(ls[p], n); ls[p].push(v[i]); });
    });
    appendMap(r.classes = r.classes || [], row.cls, n);
    appendMap(r.cause_series = r.cause_series || [], row.cau, n);
    appendMap(r.counters = r.counters || [], row.ctr, n);
    appendMap(r.connections = r.connections || [], row.con, n);
    r.server = r.server || [];
    var byGroup = {};
    Object.keys(row.srv || {}).forEach(function (key) {
      var p = key.split('|');
      var g = findOrAdd(r.server, p[0] + '|' + p[1], n, function () { return { name: p[0] + '|' + p[1], group: p[0], unit: p[1], series: [] }; });
      (byGroup[g.name] = byGroup[g.name] || {})[p.slice(2).join('|')] = row.srv[key];
    });
    r.server.forEach(function (g) {
      var m = byGroup[g.name] || {};
      Object.keys(m).sort().forEach(function (k) { findOrAdd(g.series, k, n); });
      g.series.forEach(function (s) { pad(s.values, n); s.values.push(k2v(m, s.name)); });
    });
  }

  // liveStatus shows the time elapsed against the planned length, and the target rate.
  function liveStatus() {
    var st = document.getElementById('live-status');
    if (!st || !model.live) return;
    var r = model.runs[0] || {}, lv = model.live;
    var el2 = r.t && r.t.length ? lastOf(r.t) : 0;
    if (lv.ended && r.headline && isNum(r.headline.duration_s)) el2 = r.headline.duration_s;
    var planned = isNum(lv.planned_secs) && lv.planned_secs > 0 ? lv.planned_secs : 0;
    var text = (lv.ended ? 'ran ' : 'elapsed ') + fmt(el2, 1) + ' s' + (planned ? ' of ' + fmt(planned, 1) + ' s planned (' + fmt(Math.min(100, 100 * el2 / planned), 0) + ' %)' : '');
    if (isNum(lv.target_rate) && lv.target_rate > 0) text += ' — target ' + fmt(lv.target_rate) + ' /s';
    st.textContent = text;
  }

  var pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(function () {
      pending = false;
      var hs = document.getElementById('headline-section');
      if (hs) { hs.textContent = ''; headlineSection(hs); }
      liveStatus();
      drawCharts();
    });
  }

  function startLive() {
    var es = new EventSource(model.live.events);
    es.addEventListener('row', function (ev) {
      var msg = JSON.parse(ev.data);
      var r = model.runs[msg.run || 0];
      if (!r) return;
      appendRow(r, msg.row);
      if (msg.headline) r.headline = msg.headline;
      schedule();
    });
    es.addEventListener('final', function (ev) {
      es.close();
      var final = JSON.parse(ev.data);
      final.live = { events: model.live.events, ended: true, planned_secs: model.live.planned_secs, target_rate: model.live.target_rate };
      model = final;
      render();
      document.body.setAttribute('data-final', '1');
    });
    es.onerror = function () {
      var b = document.getElementById('live-badge');
      if (b && !(model.live && model.live.ended)) b.textContent = 'live (reconnecting…)';
    };
  }

  // save writes the final report as the same self-contained file `loadproof report --format html`
  // writes: the page's own styles, scripts and the final data.
  function save() {
    var m = JSON.parse(JSON.stringify(model));
    delete m.live;
    var html = pageHTML(m);
    var a = el('a', { href: URL.createObjectURL(new Blob([html], { type: 'text/html' })), download: 'report.html' });
    document.body.appendChild(a);
    a.click();
    a.remove();
  }
  function esc(s) { return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;'); }
  function pageHTML(m) {
    function text(id) { return document.getElementById(id).textContent; }
    var data = JSON.stringify(m).replace(/</g, '\\u003c').replace(/>/g, '\\u003e').replace(/&/g, '\\u0026');
    var meta = document.querySelectorAll('meta');
    var head = '';
    meta.forEach(function (x) { head += x.outerHTML + '\n'; });
    return '<!DOCTYPE html>\n<html lang="en">\n<head>\n' + head + '<title>' + esc(m.title) + '</title>\n' +
      '<style id="lp-uplot-css">' + text('lp-uplot-css') + '<\/style>\n<style id="lp-css">' + text('lp-css') + '<\/style>\n' +
      '</head>\n<body>\n<div id="app"></div>\n<script id="lp-uplot">' + text('lp-uplot') + '<\/script>\n' +
      '<script id="lp-data" type="application/json">' + data + '<\/script>\n<script id="lp-app">' + text('lp-app') + '<\/script>\n</body>\n</html>\n';
  }
  window.__lpPageHTML = function () { var m = JSON.parse(JSON.stringify(model)); delete m.live; return pageHTML(m); };

  render();
  if (model.live && !model.live.ended) startLive();
})();
