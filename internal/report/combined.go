package report

import (
	"errors"
	"html"
	"strconv"
	"strings"
)

// Part is one report of a combined page.
type Part struct {
	// Name labels the part's tab.
	Name string
	// Page is the part's self-contained report page (Page or HTML).
	Page []byte
}

// Combined puts several reports in one self-contained file: a tab for each, each report its own
// whole page inside an iframe (srcdoc), so that every report keeps its charts, scripts and data
// apart. `loadproof demo` writes one for everything it ran.
func Combined(title string, parts []Part) ([]byte, error) {
	if len(parts) == 0 {
		return nil, errors.New("report: nothing to combine")
	}
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	b.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	b.WriteString("<title>" + html.EscapeString(title) + "</title>\n<style>\n")
	b.WriteString("body{margin:0;font-family:system-ui,sans-serif;background:#f6f7f9}" +
		"nav{position:sticky;top:0;z-index:1;background:#1d232a;padding:6px 12px}" +
		"nav b{color:#fff;margin-right:16px}" +
		"nav button{font-size:14px;margin-right:6px;padding:4px 12px;border:0;border-radius:4px;cursor:pointer;background:#3a4652;color:#fff}" +
		"nav button.on{background:#1f77b4}iframe{display:none;width:100%;border:0}iframe.on{display:block}\n")
	b.WriteString("</style>\n</head>\n<body>\n<nav><b>" + html.EscapeString(title) + "</b>")
	for i, p := range parts {
		b.WriteString("<button data-part=\"" + strconv.Itoa(i) + "\">" + html.EscapeString(p.Name) + "</button>")
	}
	b.WriteString("</nav>\n")
	for i, p := range parts {
		b.WriteString("<iframe id=\"part-" + strconv.Itoa(i) + "\" title=\"" + html.EscapeString(p.Name) + "\" srcdoc=\"")
		b.WriteString(html.EscapeString(string(p.Page)))
		b.WriteString("\"></iframe>\n")
	}
	// Show one part at a time; size each frame to its page once it has drawn.
	b.WriteString(`<script>
(function () {
  var frames = document.querySelectorAll('iframe'), buttons = document.querySelectorAll('nav button');
  function fit(f) { try { f.style.height = f.contentDocument.documentElement.scrollHeight + 'px'; } catch (e) {} }
  function show(i) {
    frames.forEach(function (f, j) { f.className = i === j ? 'on' : ''; });
    buttons.forEach(function (b, j) { b.className = i === j ? 'on' : ''; });
    fit(frames[i]);
    try { frames[i].contentWindow.dispatchEvent(new Event('resize')); } catch (e) {}
  }
  buttons.forEach(function (b, i) { b.addEventListener('click', function () { show(i); }); });
  frames.forEach(function (f) { f.addEventListener('load', function () { fit(f); }); });
  show(0);
})();
</script>
</body>
</html>
`)
	return []byte(b.String()), nil
}
