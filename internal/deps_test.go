// Package internal_test enforces the layout rules of docs/architecture.md: which packages may import
// which, and that every package documents itself.
package internal_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/loadproof/loadproof/internal/"

// forbidden lists, for each package, the internal packages its non-test files must not import.
var forbidden = map[string][]string{
	// Servers never import the load side: load always crosses a real socket.
	"linkkeysserver": {"linkkeysload", "keycastload", "capacity", "engine", "report", "cli", "launch"},
	"keycastserver":  {"linkkeysload", "keycastload", "capacity", "engine", "report", "cli", "launch"},
	"keycaststore":   {"linkkeysload", "keycastload", "capacity", "engine", "report", "cli", "keycastserver", "launch"},
	// Load drivers never import servers.
	// They reach the host rules through hostrule, never through capacity (which sits above them).
	"linkkeysload": {"linkkeysserver", "keycastserver", "capacity", "cli"},
	"keycastload":  {"linkkeysserver", "keycastserver", "capacity", "cli"},
	"capacity":     {"linkkeysserver", "keycastserver", "cli"},
	// Result models are pure data that reports read.
	"linkkeysresult": {"linkkeysserver", "keycastserver", "linkkeysload", "keycastload", "capacity", "engine", "report", "cli"},
	// Distributed runs are load-side; Kubernetes manifests render command lines only.
	"coord": {"linkkeysserver", "keycastserver", "keycaststore", "report", "capacity", "cli"},
	"kube":  {"linkkeysserver", "keycastserver", "linkkeysload", "keycastload", "capacity", "engine", "coord", "cli"},
	// The evidence bundle format sits below the code that writes bundles (capacity imports it) and
	// the code that reads them (report, cli): it imports neither, nor any runner. The recomputation
	// of checks stays in capacity and reaches evidence.Verify as a function the cli wires in.
	"evidence": {"linkkeys", "keycast", "linkkeysserver", "keycastserver", "keycaststore", "linkkeysload", "keycastload",
		"keycastresult", "linkkeysresult", "capacity", "engine", "report", "dashboard", "coord", "cli"},
	// The knee search runs no load itself: it drives the client commands as subprocesses (a Trialer)
	// and reads their result files, so it links no server, no load driver, no report and no cli.
	"search": {"linkkeysserver", "keycastserver", "keycaststore", "linkkeysload", "keycastload", "engine", "capacity", "report", "dashboard", "coord", "cli"},
	// Reports are drawn from result files alone.
	"report": {"linkkeysserver", "keycastserver", "linkkeysload", "keycastload", "capacity", "engine", "cli", "dashboard"},
	// The live dashboard serves the report's page; it runs no load and knows no protocol.
	"dashboard": {"linkkeys", "keycast", "linkkeysserver", "keycastserver", "linkkeysload", "keycastload", "capacity", "cli"},
	// The terminal status line draws engine intervals: like the dashboard, no protocol, no load, no server.
	"termstatus": {"linkkeys", "keycast", "linkkeysserver", "keycastserver", "linkkeysload", "keycastload", "capacity", "engine", "report", "cli"},
	// Flame graphs read profile files; the browser driver is for tests.
	"profiling": {"linkkeys", "keycast", "linkkeysserver", "keycastserver", "linkkeysload", "keycastload", "capacity", "engine", "report", "cli"},
	"browser":   {"linkkeys", "keycast", "linkkeysserver", "keycastserver", "linkkeysload", "keycastload", "capacity", "engine", "report", "cli"},
	// The multi-host test bed runs the real binaries in network namespaces: it links no server or
	// load code (tests only use it).
	"testbed": {"linkkeysserver", "keycastserver", "keycaststore", "linkkeysload", "keycastload", "linkkeysmain", "capacity", "engine", "coord", "report", "cli"},
	// Which targets may be loaded: a leaf every loading layer uses.
	"hostrule": {"linkkeys", "keycast", "linkkeysserver", "keycastserver", "linkkeysload", "keycastload", "engine", "result", "hist", "machine", "admit", "capacity", "coord", "report", "cli"},
	// The guard of the tool's own web servers (dashboard, pprof UI) sits below both and knows no
	// protocol, server, load or report.
	"localhttp": {"linkkeys", "keycast", "linkkeysserver", "keycastserver", "keycaststore", "linkkeysload", "keycastload", "keycastresult", "linkkeysresult",
		"result", "engine", "hist", "machine", "admit", "capacity", "report", "dashboard", "profiling", "coord", "kube", "procexec", "cli"},
	// The protocol-free core imports no protocol.
	"engine":  {"linkkeys", "keycast", "linkkeysserver", "keycastserver", "linkkeysload", "keycastload", "admit", "capacity", "report", "cli"},
	"envvar":  {"linkkeys", "keycast", "engine", "result", "linkkeysserver", "keycastserver", "linkkeysload", "keycastload", "admit", "capacity", "report", "cli"},
	"result":  {"linkkeys", "keycast", "engine", "linkkeysserver", "keycastserver", "linkkeysload", "keycastload", "admit", "capacity", "report", "cli"},
	"hist":    {"linkkeys", "keycast", "engine", "machine", "admit", "cli"},
	"machine": {"linkkeys", "keycast", "engine", "hist", "admit", "cli"},
	"admit":   {"linkkeys", "keycast", "linkkeysserver", "keycastserver", "linkkeysload", "keycastload", "engine", "cli"},
	// Protocol packages stay below servers and drivers.
	"linkkeys": {"linkkeysserver", "linkkeysload", "admit", "engine", "cli"},
	"keycast":  {"keycastserver", "keycastload", "capacity", "engine", "cli"},

	// The hand-written HTTP/1.1 and JSON scanning is shared by the Keycast server and the Keycast
	// load generator, so it sits below both and imports no protocol.
	"httpwire": {"linkkeys", "keycast", "linkkeysserver", "keycastserver", "keycaststore", "linkkeysload", "keycastload", "keycastresult", "linkkeysresult", "result", "engine", "hist", "machine", "admit", "capacity", "report", "procexec", "atomicfile", "cli"},

	// The launcher of reference servers (start, wait until ready, stop) sits below the load side that
	// starts them (smoke, capacity, profile, demo): it starts servers as processes and links none.
	"launch": {"linkkeys", "keycast", "linkkeysserver", "keycastserver", "keycaststore", "linkkeysmain", "linkkeysload", "keycastload",
		"linkkeysresult", "keycastresult", "result", "engine", "hist", "machine", "admit", "capacity", "report", "dashboard", "coord", "cli"},
	// Starting children sits below everything that starts them, servers and load alike.
	"procexec": {"linkkeys", "keycast", "linkkeysserver", "keycastserver", "linkkeysload", "keycastload", "engine", "hist", "machine", "admit", "capacity", "report", "cli"},
	// Serialised writes sit below everything and import nothing of ours.
	"syncio": {"linkkeys", "keycast", "linkkeysserver", "keycastserver", "linkkeysload", "keycastload", "engine", "hist", "machine", "admit", "capacity", "report", "procexec", "cli"},
	// Bounded reads of outside files sit below every reader and import nothing of ours.
	// Flag values of durations are a leaf the command lines use: they know nothing of runs.
	"durflag": {"linkkeys", "keycast", "linkkeysserver", "keycastserver", "keycaststore", "linkkeysload", "keycastload", "linkkeysresult", "keycastresult", "result", "engine", "hist", "machine", "admit", "capacity", "report", "coord", "cli"},
	// Comparisons read result envelopes only: no protocol, no load, no page.
	"compare": {"linkkeys", "keycast", "linkkeysserver", "keycastserver", "keycaststore", "linkkeysload", "keycastload", "linkkeysresult", "keycastresult", "engine", "capacity", "report", "dashboard", "coord", "cli"},
	// Remote write turns result intervals into Prometheus series: no protocol, no load, no page.
	"remotewrite": {"linkkeys", "keycast", "linkkeysserver", "keycastserver", "keycaststore", "linkkeysload", "keycastload", "linkkeysresult", "keycastresult", "engine", "capacity", "report", "dashboard", "coord", "cli"},
	"boundedfile": {"linkkeys", "keycast", "linkkeysserver", "keycastserver", "keycaststore", "linkkeysload", "keycastload", "linkkeysresult", "keycastresult", "result", "engine", "hist", "machine", "admit", "capacity", "report", "procexec", "atomicfile", "syncio", "cli"},
	"cmdenv":      {"linkkeys", "keycast", "linkkeysserver", "keycastserver", "linkkeysload", "keycastload", "engine", "hist", "machine", "admit", "capacity", "report", "procexec", "cli"},
	// The server command's wiring: the server side only, so cmd/linkkeys-server stays lean
	// (TestLeanServerLinks checks the whole link).
	"linkkeysmain": {"keycast", "keycastserver", "keycaststore", "linkkeysload", "keycastload", "linkkeysresult", "keycastresult",
		"engine", "result", "hist", "capacity", "report", "dashboard", "profiling", "coord", "kube", "cli", "launch"},
}

// leaves import nothing of ours: small helpers every package may use.
var leaves = []string{"textclip", "cost"}

// leanServerMustNotLink are packages cmd/linkkeys-server must not link, directly or not: the load
// side, the command tree and the large libraries only other commands need.
var leanServerMustNotLink = []string{
	module + "linkkeysload", module + "engine", module + "capacity", module + "coord", module + "kube",
	module + "report", module + "profiling", module + "cli", module + "keycastserver",
	"github.com/spf13/cobra", "github.com/nats-io/", "k8s.io/", "github.com/google/pprof", "runtime/pprof",
	"github.com/jackc/pgx", "github.com/vbauerster/mpb",
	// client_golang and the protobuf runtime: about 2 MiB of resident binary (prom.go says why).
	"github.com/prometheus/client_golang", "github.com/prometheus/client_model", "google.golang.org/protobuf",
}

// TestLeanServerLinks: the lean server binary links none of leanServerMustNotLink (go list -deps).
func TestLeanServerLinks(t *testing.T) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(goBin, "list", "-deps", "../cmd/linkkeys-server").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps ../cmd/linkkeys-server: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, bad := range leanServerMustNotLink {
			if dep == bad || strings.HasPrefix(dep, bad) && (strings.HasSuffix(bad, "/") || strings.HasPrefix(dep, bad+"/")) {
				t.Errorf("cmd/linkkeys-server links %s; the lean server must link the server side only", dep)
			}
		}
	}
}

type pkgInfo struct {
	imports map[string]bool
	doc     bool
	files   int
}

func scan(t *testing.T) map[string]*pkgInfo {
	t.Helper()
	pkgs := map[string]*pkgInfo{}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == "testdata" || strings.HasPrefix(name, ".") && path != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		if dir == "." {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		p := pkgs[dir]
		if p == nil {
			p = &pkgInfo{imports: map[string]bool{}}
			pkgs[dir] = p
		}
		p.files++
		if f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "" {
			p.doc = true
		}
		for _, imp := range f.Imports {
			ip, _ := strconv.Unquote(imp.Path.Value)
			if rest, ok := strings.CutPrefix(ip, module); ok {
				p.imports[rest] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// top returns the first path element: "keycastserver/store" belongs to "keycastserver".
func top(p string) string {
	first, _, _ := strings.Cut(p, "/")
	return first
}

func TestDependencyRules(t *testing.T) {
	pkgs := scan(t)
	dirs := make([]string, 0, len(pkgs))
	for d := range pkgs {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, dir := range dirs {
		for imp := range pkgs[dir].imports {
			for _, leaf := range leaves {
				if top(dir) == leaf && top(imp) != leaf {
					t.Errorf("%s imports internal/%s: %s is a leaf and imports nothing of ours", dir, imp, leaf)
				}
			}
			if top(imp) == "cli" && top(dir) != "cli" {
				t.Errorf("%s imports internal/cli: nothing may import the command tree", dir)
			}
			if top(imp) == "browser" && top(dir) != "browser" {
				t.Errorf("%s imports internal/browser: only tests drive a browser", dir)
			}
			if top(imp) == "testwait" && top(dir) != "testwait" {
				t.Errorf("%s imports internal/testwait: only _test.go files bound their waits with it", dir)
			}
			for _, bad := range forbidden[top(dir)] {
				if top(imp) == bad && top(dir) != bad {
					t.Errorf("%s imports internal/%s, which docs/architecture.md forbids", dir, imp)
				}
			}
		}
	}
}

func TestEveryPackageHasADocComment(t *testing.T) {
	for dir, p := range scan(t) {
		if !p.doc {
			t.Errorf("package %s has no package doc comment (add a doc.go)", dir)
		}
	}
}

// noContextValues are the packages that put nothing in a context.Context: what their callers need
// is passed explicitly. coord's runner (coord.Runner) reaches the client commands through the
// cli's wiring (the tree the cli builds for coordinate and worker), never as a context value.
var noContextValues = []string{"coord"}

func TestNoContextValues(t *testing.T) {
	for _, pkg := range noContextValues {
		files, err := filepath.Glob(filepath.Join(pkg, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "WithValue" {
					if id, ok := sel.X.(*ast.Ident); ok && id.Name == "context" {
						t.Errorf("%s calls context.WithValue: %s passes what its callers need explicitly (docs/architecture.md)", path, pkg)
					}
				}
				return true
			})
		}
	}
}

// TestOneDoorForFiles: the commands read the files a user gives them (results, bundles, search
// files) through report.Open alone; none tells a file's kind or picks its parser itself
// (docs/architecture.md). The seed-compatible `keycast-loadtest report` reads with
// keycastresult.Read, which is not listed: it is one format's reader, with upstream's messages.
func TestOneDoorForFiles(t *testing.T) {
	sniffers := []string{"report.Sniff(", "linkkeysresult.Read(", "keycastresult.Parse(", "evidence.Read(",
		"evidence.IsEvidence(", "search.ReadFile(", "search.IsSearch(", "search.Parse(", "boundedfile.Result"}
	files, err := filepath.Glob("cli/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no cli sources: %v", err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range sniffers {
			if strings.Contains(string(b), s) {
				t.Errorf("%s calls %s: read the files a user gives through report.Open", f, strings.TrimSuffix(s, "("))
			}
		}
	}
}
