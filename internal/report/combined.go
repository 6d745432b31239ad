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

// Combined puts several reports in one self-contained file: a summary tab first (one row per
// report: verdict, key figure, warnings, from each report's own data), then a tab for each, each
// report its own whole page inside an iframe (srcdoc), so that every report keeps its charts,
// scripts and data apart. Tabs are links: #tab=NAME opens one (NAME is the tab's name in lower
// case with dashes, "summary" the summary). `loadproof demo` writes one for everything it ran.
func Combined(title string, parts []Part) ([]byte, error) {
	if len(parts) == 0 {
		return nil, errors.New("report: nothing to combine")
	}
	taken := map[string]bool{"summary": true}
	rows := make([]SummaryRow, len(parts))
	for i, p := range parts {
		// A part whose data cannot be read still gets its tab; its summary row says why.
		m, err := PageModel(p.Page)
		rows[i] = Summarize(p.Name, m)
		if err != nil {
			rows[i].Warnings = append(rows[i].Warnings, err.Error())
		}
		rows[i].Tab = tabName(p.Name, taken)
	}
	esc := html.EscapeString
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	b.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	b.WriteString("<title>" + esc(title) + "</title>\n<style>\n")
	b.WriteString("body{margin:0;font-family:system-ui,sans-serif;background:#f6f7f9;color:#1d232a}" +
		"nav{position:sticky;top:0;z-index:1;background:#1d232a;padding:6px 12px}" +
		"nav b{color:#fff;margin-right:16px}" +
		"nav a{display:inline-block;font-size:14px;margin-right:6px;padding:4px 12px;border-radius:4px;background:#3a4652;color:#fff;text-decoration:none}" +
		"nav a.on{background:#1f77b4}iframe{display:none;width:100%;border:0}iframe.on{display:block}" +
		"#tab-summary{display:none;max-width:1280px;margin:0 auto;padding:16px 24px}#tab-summary.on{display:block}" +
		"table{border-collapse:collapse;font-size:14px;background:#fff}th,td{border:1px solid #dde2e8;padding:4px 10px;text-align:left;vertical-align:top}" +
		"th{background:#eef1f4}.ok{color:#11772d;font-weight:600}.bad{color:#b3261e;font-weight:600}td ul{margin:0;padding-left:18px}\n")
	b.WriteString("</style>\n</head>\n<body>\n<nav><b>" + esc(title) + "</b>")
	b.WriteString("<a href=\"#tab=summary\" data-tab=\"summary\">Summary</a>")
	for i, p := range parts {
		b.WriteString("<a href=\"#tab=" + rows[i].Tab + "\" data-tab=\"" + rows[i].Tab + "\">" + esc(p.Name) + "</a>")
	}
	b.WriteString("</nav>\n<section id=\"tab-summary\" data-tab=\"summary\">\n<h1>Summary</h1>\n")
	b.WriteString("<table id=\"summary\"><tr><th>Run</th><th>Verdict</th><th>Key figure</th><th>Warnings</th></tr>\n")
	for _, r := range rows {
		cls := "bad"
		if r.OK {
			cls = "ok"
		}
		b.WriteString("<tr><td><a href=\"#tab=" + r.Tab + "\">" + esc(r.Name) + "</a></td><td class=\"" + cls + "\">" + esc(r.Verdict) + "</td><td>" + esc(r.Key) + "</td><td>")
		if len(r.Warnings) > 0 {
			b.WriteString("<ul>")
			for _, w := range r.Warnings {
				b.WriteString("<li>" + esc(w) + "</li>")
			}
			b.WriteString("</ul>")
		}
		b.WriteString("</td></tr>\n")
	}
	b.WriteString("</table>\n</section>\n")
	for i, p := range parts {
		b.WriteString("<iframe id=\"part-" + strconv.Itoa(i) + "\" data-tab=\"" + rows[i].Tab + "\" title=\"" + esc(p.Name) + "\" srcdoc=\"")
		b.WriteString(esc(string(p.Page)))
		b.WriteString("\"></iframe>\n")
	}
	// Show one tab at a time, the one the address names (#tab=NAME), the summary otherwise; size
	// each frame to its page once it has drawn.
	b.WriteString(`<script>
(function () {
  var tabs = document.querySelectorAll('section[data-tab], iframe[data-tab]'), links = document.querySelectorAll('nav a');
  function fit(f) { try { f.style.height = f.contentDocument.documentElement.scrollHeight + 'px'; } catch (e) {} }
  function wanted() {
    var m = /(?:^#|&)tab=([^&]*)/.exec(location.hash);
    var name = m ? decodeURIComponent(m[1]) : 'summary';
    for (var i = 0; i < tabs.length; i++) if (tabs[i].getAttribute('data-tab') === name) return name;
    return 'summary';
  }
  function show() {
    var name = wanted();
    tabs.forEach(function (t) {
      var on = t.getAttribute('data-tab') === name;
      t.className = on ? 'on' : '';
      if (on && t.tagName === 'IFRAME') {
        fit(t);
        try { t.contentWindow.dispatchEvent(new Event('resize')); } catch (e) {}
      }
    });
    links.forEach(function (a) { a.className = a.getAttribute('data-tab') === name ? 'on' : ''; });
    document.body.setAttribute('data-tab', name);
  }
  tabs.forEach(function (f) { if (f.tagName === 'IFRAME') f.addEventListener('load', function () { fit(f); }); });
  window.addEventListener('hashchange', show);
  show();
})();
</script>
</body>
</html>
`)
	return []byte(b.String()), nil
}
