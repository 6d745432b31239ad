// loadproof comparison and search pages: the DOM helpers both pages draw with (inlined into each
// page before its own script, as the "lp-stat-dom" script element). Text from the files is set as
// text, never as markup: attrs.text becomes textContent, every other key an attribute.
var lpDOM = (function () {
  'use strict';

  var SVG = 'http://www.w3.org/2000/svg';

  function setAttrs(e, attrs) {
    if (!attrs) return;
    for (var k in attrs) {
      if (attrs[k] == null) continue;
      if (k === 'text') e.textContent = attrs[k];
      else if (k === 'cls') e.setAttribute('class', attrs[k]);
      else e.setAttribute(k, attrs[k]);
    }
  }
  // el makes an HTML element with attrs and children (strings become text nodes; null is skipped).
  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    setAttrs(e, attrs);
    (kids || []).forEach(function (c) { if (c != null) e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c); });
    return e;
  }
  // svg makes an SVG element with attrs and, when given, its text.
  function svg(tag, attrs, text) {
    var e = document.createElementNS(SVG, tag);
    setAttrs(e, attrs);
    if (text != null) e.textContent = text;
    return e;
  }
  function isNum(v) { return typeof v === 'number' && isFinite(v); }

  return { SVG: SVG, setAttrs: setAttrs, el: el, svg: svg, isNum: isNum };
})();
