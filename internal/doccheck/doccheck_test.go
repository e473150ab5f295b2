package doccheck

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite docs/configuration.md from configs/default.yaml")

const root = "../.."

// docs are the pages the checks cover: the README and every page of docs/.
func docs(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(root, "README.md"), filepath.Join(root, "CHANGELOG.md")}, pages...)
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConfigDoc(t *testing.T) {
	got, err := ConfigDoc(filepath.Join(root, "configs", "default.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "docs", "configuration.md")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
		t.Errorf("docs/configuration.md is not what configs/default.yaml generates (%v); run\n\tgo test ./internal/doccheck -run TestConfigDoc -update", err)
	}
}

// Every key of the YAML file is on the page, under its full name.
func TestConfigDocEveryKey(t *testing.T) {
	page := string(read(t, filepath.Join(root, "docs", "configuration.md")))
	keys := 0
	for _, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(l, "- `") {
			keys++
		}
	}
	if keys < 100 {
		t.Errorf("%d keys on docs/configuration.md, want every key of configs/default.yaml (over 100)", keys)
	}
	for _, want := range []string{"`server.addr`", "`pipeline.turn.threshold`", "`llm.engine.model`", "`tts.backend`"} {
		if !strings.Contains(page, want) {
			t.Errorf("docs/configuration.md lacks %s", want)
		}
	}
}

func TestLinks(t *testing.T) {
	for _, page := range docs(t) {
		src := read(t, page)
		prose, _ := Split(src)
		targets, lines := Links(prose)
		for i, target := range targets {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = filepath.Join(filepath.Dir(page), file)
			}
			rel, _ := filepath.Rel(root, page)
			st, err := os.Stat(dest)
			if err != nil {
				t.Errorf("%s:%d: link %q: %v", rel, lines[i], target, err)
				continue
			}
			if frag == "" {
				continue
			}
			if st.IsDir() || !strings.HasSuffix(dest, ".md") {
				t.Errorf("%s:%d: link %q: an anchor into a file that is not markdown", rel, lines[i], target)
				continue
			}
			if !Anchors(read(t, dest))[frag] {
				t.Errorf("%s:%d: link %q: no heading gives #%s", rel, lines[i], target, frag)
			}
		}
	}
}

func TestMakeTargetsNamed(t *testing.T) {
	targets := MakeTargets(read(t, filepath.Join(root, "Makefile")))
	for _, want := range []string{"run", "test", "help", "bench"} {
		if !targets[want] {
			t.Fatalf("MakeTargets found no %q target: the parser is wrong", want)
		}
	}
	// A target is named in inline code (`make bench`) or a code block;
	// "make" in prose is the English verb.
	for _, page := range docs(t) {
		rel, _ := filepath.Rel(root, page)
		prose, blocks := Split(read(t, page))
		check := func(line int, text string) {
			for _, name := range MakeUses(text) {
				if !targets[name] {
					t.Errorf("%s:%d: make %s: no such target in the Makefile", rel, line, name)
				}
			}
		}
		for i, l := range prose {
			for _, span := range codeRE.FindAllString(l, -1) {
				check(i+1, strings.Trim(span, "`"))
			}
		}
		for _, b := range blocks {
			for j, l := range b.Lines {
				check(b.Line+1+j, l)
			}
		}
	}
}

// Convention for the README's shell commands (every line of a ```sh block):
//   - the cheap ones (help, version, make help, making a WAV with sox) are run;
//   - `make X` must be a target of the Makefile;
//   - `bin/voxpipe SUB...` and `bin/voxclient ...` must name a subcommand
//     whose -h lists every --flag the line uses;
//   - anything needing what a test cannot have (a model of your own, a
//     remote server, API keys, a device) carries a "not run by tests"
//     comment saying what it needs, and is only checked as above when it is
//     a voxpipe command.
//
// Any other command fails the test: add it to one of the kinds.
func TestREADMECommands(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test builds the commands")
	}
	_, blocks := Split(read(t, filepath.Join(root, "README.md")))
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "../../cmd/voxpipe", "../../cmd/voxclient")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	work := t.TempDir()
	flagRE := regexp.MustCompile(`(?:^|\s)--([a-z][a-z0-9-]*)`)
	checked := 0
	for _, b := range blocks {
		if b.Lang != "sh" {
			continue
		}
		for j, raw := range b.Lines {
			line, note, _ := strings.Cut(raw, "#")
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			where := "README.md:" + itoa(b.Line+1+j)
			marked := strings.Contains(note, "not run by tests")
			fields := strings.Fields(line)
			checked++
			switch {
			case fields[0] == "make":
				targets := MakeTargets(read(t, filepath.Join(root, "Makefile")))
				for _, name := range fields[1:] {
					if !targets[name] {
						t.Errorf("%s: make %s: no such target", where, name)
					}
				}
				if len(fields) == 2 && fields[1] == "help" {
					run(t, where, root, "make", "help")
				}
			case fields[0] == "bin/voxpipe" || fields[0] == "bin/voxclient":
				prog := filepath.Join(bin, strings.TrimPrefix(fields[0], "bin/"))
				if len(fields) == 2 && (fields[1] == "help" || fields[1] == "version") {
					run(t, where, root, prog, fields[1])
					continue
				}
				var sub []string
				for _, f := range fields[1:] {
					if strings.HasPrefix(f, "-") {
						break
					}
					sub = append(sub, f)
				}
				if fields[0] == "bin/voxpipe" && len(sub) > 2 {
					sub = sub[:2] // llm quantize IN OUT: the rest are arguments
				}
				help := helpText(prog, append(sub, "-h")...)
				for _, m := range flagRE.FindAllStringSubmatch(line, -1) {
					if !strings.Contains(help, "-"+m[1]) {
						t.Errorf("%s: %s %s -h lists no -%s:\n%s", where, fields[0], strings.Join(sub, " "), m[1], help)
					}
				}
			case fields[0] == "sox" && !marked:
				if _, err := exec.LookPath("sox"); err != nil {
					t.Logf("%s: no sox here; not run", where)
					continue
				}
				in := fields[len(fields)-2]
				if _, err := os.Stat(in); err != nil {
					t.Logf("%s: %v; not run", where, err)
					continue
				}
				run(t, where, work, fields[0], fields[1:]...)
			case marked:
			default:
				t.Errorf("%s: %q is neither run by this test nor marked \"not run by tests\"", where, line)
			}
		}
	}
	if checked < 10 {
		t.Errorf("checked %d README commands; the code blocks were not found", checked)
	}
}

func run(t *testing.T, where, dir, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("%s: %s %s: %v\n%s", where, name, strings.Join(args, " "), err, out)
	}
}

// helpText is what a command prints for -h (on either stream, whatever its
// exit status: flag's help exits 0 or 2 by command).
func helpText(name string, args ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, _ := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out)
}
