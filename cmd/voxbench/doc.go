package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// runDoc is `voxbench doc`: it renders a run's --json results, the Go
// micro-benchmarks' output and a description of the machine into the
// marked sections of docs/performance.md (make bench calls it).
func runDoc(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("voxbench doc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	results := fs.String("results", "", "voxbench --json output (required)")
	gobench := fs.String("gobench", "", "output of go test -bench (optional)")
	out := fs.String("out", "docs/performance.md", "the document whose marked sections are rewritten")
	version := fs.String("version", "", "the voxpipe version measured (git describe)")
	command := fs.String("command", "make bench", "how the figures were made, for the document")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errCommandLine, err)
	}
	if *results == "" {
		return fmt.Errorf("%w: doc needs --results", errCommandLine)
	}
	data, err := os.ReadFile(*results)
	if err != nil {
		return err
	}
	var r report
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("%s: %w", *results, err)
	}
	doc, err := os.ReadFile(*out)
	if err != nil {
		return err
	}
	var tables bytes.Buffer
	writeMarkdown(&tables, r)
	sections := map[string]string{
		"machine":  machine(*version, *command, r),
		"voxbench": tables.String(),
	}
	if *gobench != "" {
		gb, err := os.ReadFile(*gobench)
		if err != nil {
			return err
		}
		sections["gobench"] = goBenchTable(gb)
	}
	for name, body := range sections {
		next, err := replaceSection(doc, name, body)
		if err != nil && name == "voxbench" {
			return fmt.Errorf("%s: %w", *out, err)
		}
		if err == nil {
			doc = next
		}
	}
	return os.WriteFile(*out, doc, 0o644) //nolint:gosec // the operator names the document to rewrite
}

// replaceSection swaps what lies between <!-- bench:NAME --> and
// <!-- /bench:NAME --> for body.
func replaceSection(doc []byte, name, body string) ([]byte, error) {
	open, end := []byte("<!-- bench:"+name+" -->"), []byte("<!-- /bench:"+name+" -->")
	i, j := bytes.Index(doc, open), bytes.Index(doc, end)
	if i < 0 || j < i {
		return nil, errors.New("no section " + string(open) + " … " + string(end))
	}
	var b bytes.Buffer
	b.Write(doc[:i+len(open)])
	b.WriteString("\n" + strings.TrimRight(body, "\n") + "\n")
	b.Write(doc[j:])
	return b.Bytes(), nil
}

// machine describes where and when the figures were taken.
func machine(version, command string, r report) string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	lo, hi := 0.0, 0.0
	for i, st := range r.Results {
		for _, l := range st.Load {
			if i == 0 && lo == 0 || l < lo {
				lo = l
			}
			hi = max(hi, l)
		}
	}
	return fmt.Sprintf("Measured %s with `%s` on %s, %d cores visible to Go (%s), voxpipe %s. "+
		"The 1-minute load average during the run was %.1f–%.1f (the machine is shared: read every figure beside it).",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), command, cpu, runtime.NumCPU(), runtime.Version(), version, lo, hi)
}

// goBenchTable turns `go test -bench -benchmem` output into a table.
func goBenchTable(out []byte) string {
	var b strings.Builder
	b.WriteString("| package | benchmark | ns/op | B/op | allocs/op |\n|---|---|---|---|---|\n")
	pkg := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	rows := 0
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "pkg:" {
			pkg = strings.TrimPrefix(f[1], "github.com/voxpipe/voxpipe/")
			continue
		}
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		vals := map[string]string{}
		for i := 2; i+1 < len(f); i += 2 {
			vals[f[i+1]] = f[i]
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", pkg, f[0], dash(vals["ns/op"]), dash(vals["B/op"]), dash(vals["allocs/op"]))
		rows++
	}
	if rows == 0 {
		return "(no benchmark results)"
	}
	return b.String()
}

func dash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}
