// Package e2e checks loadproof's HTML reports and live dashboard in a real browser: it makes result
// files from real runs (a Keycast run and a capacity profile against the reference server, a
// connection run over real sockets in the LinkKeys result shape), draws them with `report`, opens
// them in headless Chromium with the network cut off, and checks that every chart is drawn with the
// expected series and point counts, that nothing failed in the console, and writes screenshots
// (PNG) as test artifacts (go test -artifacts -outputdir DIR keeps them).
//
// Only tests live here; they need Debian's chromium. Outside CI a missing browser skips them; under
// CI=true it fails them.
package e2e
